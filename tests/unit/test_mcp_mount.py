"""``/mcp`` is built on its first request (automem/gateway/mcp_mount.py): a gateway that serves
only REST never imports the MCP SDK; concurrent first requests share one build, and the
session manager stops with the app's lifespan."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import asyncio, json, sys
    import httpx
    from automem.common.client import AutomemClient
    from automem.common.settings import Settings
    from automem.gateway.app import create_app

    def sdk_loaded():
        return sorted(m for m in sys.modules if m == "mcp" or m.startswith("mcp."))

    async def main():
        app = create_app(Settings(), AutomemClient("127.0.0.1:9"))
        report = {"after_build": sdk_loaded()}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "test", "version": "1"}}}
        headers = {"Accept": "application/json, text/event-stream"}
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8001") as http:
                report["before_mcp"] = sdk_loaded()
                answers = await asyncio.gather(*(http.post(path, json=init, headers=headers)
                                                 for path in ("/mcp", "/mcp/", "/mcp")))
                report["status"] = [r.status_code for r in answers]
                report["server"] = [r.json()["result"]["serverInfo"]["name"] for r in answers]
            endpoint = app.state.mcp_endpoint
            report["runner_done_in_lifespan"] = endpoint._runner.done()
        report["runner_done_after"] = endpoint._runner.done()
        report["after_mcp"] = bool(sdk_loaded())
        print(json.dumps(report))

    asyncio.run(main())
''')


def test_the_mcp_sdk_is_imported_on_the_first_mcp_request_only() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["after_build"] == [] and report["before_mcp"] == []
    assert report["status"] == [200, 200, 200] and report["server"] == ["automem"] * 3
    assert report["after_mcp"] is True
    assert report["runner_done_in_lifespan"] is False and report["runner_done_after"] is True
