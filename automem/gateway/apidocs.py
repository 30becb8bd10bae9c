"""``/docs`` (Swagger UI) served with local assets (issue 17, item 6).

FastAPI's own page loads Swagger UI from a CDN and stays blank offline; this one loads the
dist files that the ``fastapi-offline`` package ships (requirements.txt), mounted at
``/docs-static``. The page needs no key, as before; ``/openapi.json`` is unchanged. Swagger
UI's validator badge (a request to an outside validator) is turned off.

No ``/redoc``: ReDoc's standalone build (also in that package) always loads Redocly's logo
from their CDN in its sidebar credits (tests/integration/test_console.py caught it), so the
browser would make an outside request.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

#: The Swagger UI / ReDoc dist files of the fastapi-offline package.
ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"
PREFIX = "/docs-static"


def mount(app: FastAPI) -> None:
    """Add ``GET /docs`` (HTML, left out of the OpenAPI schema) and its assets under
    :data:`PREFIX` to ``app``, which must be built with ``docs_url=None`` and ``redoc_url=None``."""
    app.mount(PREFIX, StaticFiles(directory=str(ASSETS)), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} – Swagger UI",
            swagger_js_url=f"{PREFIX}/swagger-ui-bundle.js", swagger_css_url=f"{PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{PREFIX}/favicon.png", swagger_ui_parameters={"validatorUrl": None})
