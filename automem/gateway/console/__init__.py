"""The browser console at ``/console`` (issue 17): server-rendered pages over the same use
cases as the REST routes (automem/gateway/usecases.py), with the same keys and scopes.

Pages (all ``include_in_schema=False``: they are HTML, not API):

* ``GET /console/login``, ``POST /console/login`` (form ``api_key``, optional ``scope``,
  ``csrf_token``),
  ``POST /console/logout``.
* ``GET /console/`` — memories: query, tags, type, state and time-range filters over
  RecallService.SearchMemories (a query, a time range or no filter) or ListMemoriesByTag
  (tags alone).
* ``GET /console/memories/{id}`` — content, metadata, validity window, state, version,
  entities; the score components when reached from a search (``?q=``).
* ``GET /console/memories/{id}/history`` — audit events with before/after diffs, the
  supersession chain with its head, and ``?known_at=`` ("what did we believe at T").
* ``GET /console/memories/{id}/graph`` — the neighbourhood (ListGraphNeighbors) drawn with
  the vendored cytoscape.js (static/NOTICE.md).
* ``GET /console/review`` — pending memories and supersede proposals with their evidence;
  approve / reject with a reason and tombstone lifting (admin; the review service decides).
  An approval that leaves memories current next to the approved one (its supersede proposal
  was rejected) lands on a page naming them; approved items list them (``conflicts_with``).
* ``GET /console/ops`` — health, sync status, enrichment lag, consolidation history; admin
  actions (consolidation dry run, sync repair).

Session: HttpOnly, SameSite=Strict cookies on ``/console`` hold the key sealed with Fernet
(encrypted and authenticated with ``AUTOMEM_CONSOLE_SECRET``, stamped with the login time and
a random session id: session_cookie.py; the browser never holds the key itself) and the
scope asked for at login; every page calls the services with them as the REST routes do
(automem/gateway/deps.py ``Caller``), so a key sees exactly what the API shows it. POST
actions, login among them, carry a CSRF token (double submit: a random token in a cookie and in the form,
compared in constant time). Error answers of the services become an error page with the
HTTP status of the REST routes (automem/common/errors.py).
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import json
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import grpc
from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from automem.common.errors import HTTP_STATUS, AutomemError
from automem.gateway import presenters, usecases
from automem.gateway.console.session_cookie import EndedSessions, Opened, SessionCodec
from automem.gateway.deps import Caller
from automem.gateway.errors import GatewayError
from automem.v1 import memory_pb2, recall_service_pb2

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=str(HERE / "templates"))


def read_state(memory: dict[str, Any]) -> str:
    """The state a current read gives ``memory`` (a memory's JSON as the history read shows
    it, with ``state`` and ``is_current``): a SUPERSEDED memory that is current (its
    replacement's window begins later) is the fact in force and reads ACTIVE, as recall and
    get return it (automem/common/state.py ``as_current``); any other its stored state. The
    console labels memories by it (the template filter ``read_state``); it showed such a fact
    "superseded", unlike every read."""
    state = str(memory.get("state") or "")
    return "ACTIVE" if state == "SUPERSEDED" and memory.get("is_current") else state


templates.env.filters["read_state"] = read_state
router = APIRouter(prefix="/console", include_in_schema=False)

#: Cookie names: the sealed key (session_cookie.py), the requested scope, the CSRF token.
#: (``automem_console_key`` held the raw key; a browser still sending it is asked to log in.)
SESSION_COOKIE = "automem_console_session"
SCOPE_COOKIE = "automem_console_scope"
CSRF_COOKIE = "automem_console_csrf"
#: Seconds a console session lasts from login (the cookies' Max-Age; an older sealed key is
#: refused whatever the browser keeps).
SESSION_SECONDS = 8 * 3600
#: Entries (logged-out session ids, per-key bounds) one gateway process holds at most
#: (session_cookie.py EndedSessions: each until its sessions would have expired; when full,
#: ids fold into bounds that end more sessions, never fewer).
MAX_ENDED_SESSIONS = 10_000
#: Memories read per page of the memories table (the recall service's own limit also applies).
TABLE_LIMIT = 50
#: Memories read at most for one page of the table when ``type`` / ``state`` narrow it.
SCAN_LIMIT = 1000
#: Deepest ``offset`` the table pages a ranking to.
MAX_OFFSET = 10_000
#: Events per page of a memory's history (ReviewService.ListMemoryEvents' default).
HISTORY_PAGE = 100
#: Review items (and tombstones) per page of the review queue.
REVIEW_PAGE = 50
#: Memories an approval's redirect names at most as left current next to the approved one
#: (``?current=``; ApproveReviewItemResponse.conflicts: one per rejected supersede proposal).
MAX_CONFLICTS_SHOWN = 20
#: Longest key the login form takes: gRPC metadata is capped at 16 KiB, and a longer key
#: came back as the channel's 429 "metadata size exceeds hard limit" (break-it review).
MAX_KEY_LENGTH = 1024
#: Headers of every console page: the pages show what agents stored (untrusted text), so
#: nothing may run or frame them but the console's own files (scripts come from
#: /console/static only; the graph's data is a JSON block, not a script).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
                               "frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
#: Hops followed each way along a supersession chain at most.
CHAIN_HOPS = 20
#: Memory fields left out of an event's before/after diff (they change on every write).
DIFF_IGNORED = frozenset({"version", "etag", "updated_at", "last_accessed", "recorded_at", "id", "memory_id",
                          "content_hash"})
#: The fields an event that creates a memory shows (its "after" holds every field).
CREATED_SHOWN = ("content", "type", "tags", "importance", "state", "t_valid", "t_invalid", "scope")
#: The state filter's choices: read options and the states a row may have ("" = any).
STATE_FILTERS = {
    "current": ("current", False, False, ""),
    "all": ("history", True, True, ""),
    "pending": ("history", False, True, "PENDING_REVIEW"),
    "superseded": ("history", False, False, "SUPERSEDED"),
    "archived": ("history", True, False, "ARCHIVED"),
}
_PRINTABLE = re.compile(r"[\x21-\x7e]+")


@dataclass
class Session:
    """One console request's caller: the key's services view and what WhoAmI said of it."""

    call: Caller
    principal: str
    role: str
    scope: str
    csrf: str
    #: The key's writes wait for review (WhoAmI): it may store, not delete.
    require_review: bool = False

    @property
    def can_write(self) -> bool:
        return self.role in ("writer", "admin")

    @property
    def can_delete(self) -> bool:
        """A writer whose writes do not wait for review (the service refuses the others' deletes, 403)."""
        return self.can_write and not self.require_review

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


class LoginRequired(Exception):
    """No console session, or its key is no longer valid: the page answers a redirect."""


def _metadata(key: str, scope: str) -> list[tuple[str, str]]:
    md = [("authorization", f"Bearer {key}")]
    return md + ([("x-automem-scope", scope)] if scope else [])


async def _who(request: Request, key: str, scope: str) -> recall_service_pb2.WhoAmIResponse:
    """RecallService.WhoAmI for ``key`` in ``scope``. GatewayError 401/403 from the service."""
    call = Caller(request.app.state.client, _metadata(key, scope))
    return await call(call.client.recall.WhoAmI, recall_service_pb2.WhoAmIRequest())


def open_session(app: FastAPI, sealed: str) -> Opened | None:
    """The session cookie value ``sealed`` opened with ``app``'s codec (session_cookie.py);
    None for no live session: empty, altered, sealed with another secret, expired, or logged
    out in this process."""
    state = getattr(app, "state", None)
    codec, ended = getattr(state, "console_codec", None), getattr(state, "console_ended", None)
    if codec is None or ended is None:
        return None
    opened = codec.open(sealed)
    if opened is None or ended.ended(opened):
        return None
    return opened


def _opened(request: Request) -> Opened | None:
    """The request's live console session (:func:`open_session` of its session cookie)."""
    return open_session(request.app, request.cookies.get(SESSION_COOKIE, ""))


def session_key(request: Request) -> str:
    """The API key of the request's live console session ("" without one: see _opened)."""
    opened = _opened(request)
    return opened.key if opened else ""


async def session(request: Request) -> Session:
    """The request's :class:`Session` from its cookies. LoginRequired when there is no live
    session or the service refuses its key (401, or 403 for a scope the key may no longer use)."""
    key = session_key(request)
    scope = request.cookies.get(SCOPE_COOKIE, "")
    if not key or not _PRINTABLE.fullmatch(key) or (scope and not _PRINTABLE.fullmatch(scope)):
        raise LoginRequired
    try:
        who = await _who(request, key, scope)
    except GatewayError as exc:
        if exc.status in (401, 403):
            raise LoginRequired from None
        raise
    call = Caller(request.app.state.client, _metadata(key, scope))
    return Session(call, who.principal, who.role, who.scope, request.cookies.get(CSRF_COOKIE, ""),
                   who.require_review)


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """The template ``name`` with ``context`` (plus ``request``), answered with ``status_code``
    and :data:`SECURITY_HEADERS`."""
    return templates.TemplateResponse(request, name, context, status_code=status_code, headers=SECURITY_HEADERS)


def page(handler: Callable[..., Awaitable[Response]]) -> Callable[..., Awaitable[Response]]:
    """A console page: the login page for a missing or refused key, the error page (with the
    REST status) for a service error or untranslatable input."""

    @functools.wraps(handler)
    async def wrapped(request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            return await handler(request, *args, **kwargs)
        except LoginRequired:
            if request.headers.get("hx-request") == "true":
                # htmx follows a redirect inside its request and swapped the whole login page
                # into the table; HX-Redirect has the browser load it instead.
                return Response(status_code=200, headers={"HX-Redirect": "/console/login"})
            return RedirectResponse("/console/login", status_code=303)
        except GatewayError as exc:
            return _error(request, exc.status, exc.message)
        except AutomemError as exc:
            return _error(request, HTTP_STATUS.get(exc.code, 500), exc.message)

    return wrapped


def _error(request: Request, status: int, message: str) -> HTMLResponse:
    """The error page, or its fragment for an htmx request (swapped into the page)."""
    name = "_error.html" if request.headers.get("hx-request") == "true" else "error.html"
    return render(request, name, status, status=status, message=message)


@contextlib.contextmanager
def _token_named(name: str) -> Any:
    """Within it, a refused page token (GatewayError 400 naming ``page_token``: the service's
    name) is named ``name``, the console page's query parameter that carried it (``after``,
    ``tombstones_after``): the page has no ``page_token``."""
    try:
        yield
    except GatewayError as exc:
        if exc.status == 400 and exc.message.startswith("page_token"):
            raise GatewayError(400, name + exc.message.removeprefix("page_token"), code=exc.code) from None
        raise


def is_console(request: Request) -> bool:
    """True for a request to the console (``/console`` and below)."""
    path = request.url.path
    return path == "/console" or path.startswith("/console/")


def error_answer(request: Request, status: int, message: str) -> Response:
    """The console's answer to an error the app met before a page ran (an unknown path, a
    parameter FastAPI could not read): the error page with ``status`` for a browser with a
    session cookie, the login page otherwise."""
    if not session_key(request):
        return RedirectResponse("/console/login", status_code=303)
    return _error(request, status, message)


def check_csrf(request: Request, sent: str) -> None:
    """GatewayError 403 unless the form's ``csrf_token`` equals the session's CSRF cookie."""
    expected = request.cookies.get(CSRF_COOKIE, "")
    if not expected or not hmac.compare_digest(expected.encode(), (sent or "").encode()):
        raise GatewayError(403, "csrf_token: missing or does not match this session; reload the page")


def _set_cookie(response: Response, request: Request, name: str, value: str) -> None:
    response.set_cookie(name, value, max_age=SESSION_SECONDS, path="/console", httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


# --- login -------------------------------------------------------------------------------


def _login_page(request: Request, status: int = 200, *, error: str | None = None, scope: str = "") -> Response:
    """The login form with a CSRF token: the session's CSRF cookie, or a new one set here."""
    token = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
    response = render(request, "login.html", status, error=error, scope=scope, csrf_token=token)
    _set_cookie(response, request, CSRF_COOKIE, token)
    return response


@router.get("/login")
async def login_form(request: Request) -> Response:
    """The login form."""
    return _login_page(request)


@router.post("/login")
async def login(request: Request, api_key: str = Form(""), scope: str = Form(""),
                csrf_token: str = Form("")) -> Response:
    """Check the key (and the scope asked for) with the service; on success set the session
    cookies (a new CSRF token among them) and go to the memories table, else the form again
    with the service's answer (401 or 403). The form's ``csrf_token`` must match the CSRF
    cookie the form was served with (403 otherwise): without it another site could post
    its own key to this form and swap the user's session for the attacker's (login CSRF);
    a cross-site post carries no SameSite=Strict cookie. A login ends the session the
    browser's old session cookie carried, if any (in this process, as a logout does): the
    new cookie replaces it, and a copy of the old one stayed good until it expired."""
    api_key, scope = api_key.strip(), scope.strip()
    try:
        check_csrf(request, csrf_token)
    except GatewayError as exc:
        return _login_page(request, exc.status, error=exc.message, scope=scope)
    if not api_key or not _PRINTABLE.fullmatch(api_key):
        return _login_page(request, 400, error="api_key: required, printable ASCII without spaces", scope=scope)
    if len(api_key) > MAX_KEY_LENGTH:
        return _login_page(request, 400, error=f"api_key: at most {MAX_KEY_LENGTH} characters", scope=scope)
    if scope and not _PRINTABLE.fullmatch(scope):
        return _login_page(request, 400, error="scope: printable ASCII without spaces", scope=scope)
    try:
        await _who(request, api_key, scope)
    except GatewayError as exc:
        return _login_page(request, exc.status, error=exc.message, scope=scope)
    if (old := _opened(request)) is not None:
        request.app.state.console_ended.end(old)
    response = RedirectResponse("/console/", status_code=303)
    _set_cookie(response, request, SESSION_COOKIE, request.app.state.console_codec.seal(api_key))
    _set_cookie(response, request, SCOPE_COOKIE, scope)
    _set_cookie(response, request, CSRF_COOKIE, secrets.token_urlsafe(32))
    return response


@router.post("/scope")
@page
async def switch_scope(request: Request, scope: str = Form(""), csrf_token: str = Form("")) -> Response:
    """Act on another scope the key may use ("" = its default scope): the service checks it
    (403 naming the scope otherwise) before the cookie changes."""
    await session(request)
    check_csrf(request, csrf_token)
    scope = scope.strip()
    if scope and not _PRINTABLE.fullmatch(scope):
        raise GatewayError(400, "scope: printable ASCII without spaces")
    await _who(request, session_key(request), scope)
    response = RedirectResponse("/console/", status_code=303)
    _set_cookie(response, request, SCOPE_COOKIE, scope)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session in this gateway process (its cookie, a copy too, is refused here from
    now on; another replica accepts a copy until it expires: session_cookie.py) and drop the
    session cookies (no CSRF check: a forged logout only logs out); ``Clear-Site-Data`` has
    the browser drop its cache and storage of this origin."""
    if (opened := _opened(request)) is not None:
        request.app.state.console_ended.end(opened)
    # The browser drops what it kept of this origin's pages: its HTTP cache and its storage
    # (sessionStorage held htmx's page snapshots before the console turned that cache off).
    response = RedirectResponse("/console/login", status_code=303, headers={"Clear-Site-Data": '"cache", "storage"'})
    for name in (SESSION_COOKIE, SCOPE_COOKIE, CSRF_COOKIE):
        # The attributes login set (_set_cookie): a deletion that differs is kept apart by
        # some cookie jars (curl's kept the key and scope cookies after logout).
        response.delete_cookie(name, path="/console", httponly=True, samesite="strict",
                               secure=request.url.scheme == "https")
    return response


# --- memories ----------------------------------------------------------------------------


@router.get("")
async def root() -> Response:
    """``/console`` -> ``/console/`` (the app does not redirect slashes by itself)."""
    return RedirectResponse("/console/", status_code=307)


def _split(raw: str) -> list[str]:
    return [t.strip() for t in raw.split(",") if t.strip()]


@router.get("/")
@page
async def memories(request: Request, q: str = "", tags: str = "", type: str = "", state: str = "current",
                   start: str = "", end: str = "", after: str = "", offset: str = "") -> Response:
    """The memories table. A query, a time range or no filter: ranked recall; tags alone:
    the by-tag listing, newest first. ``type`` and ``state`` narrow the rows: pages of
    :data:`TABLE_LIMIT` are read until that many rows match or :data:`SCAN_LIMIT` memories
    were read, and a "next" link (``after``: the listing's cursor; ``offset``: the
    ranking's) goes on from there. Before, only the first 50 were read and filtered: a
    type present further down showed "Nothing in this scope matches", with no next page."""
    s = await session(request)
    if state not in STATE_FILTERS:
        raise GatewayError(400, f"state: one of {', '.join(STATE_FILTERS)}")
    if type.strip() and type.strip().lower() not in {t.lower() for t in presenters.TYPE_COLORS}:
        # An unknown type matched nothing after reading SCAN_LIMIT memories.
        raise GatewayError(400, f"type: one of {', '.join(sorted(presenters.TYPE_COLORS))}")
    if offset and not (offset.isascii() and offset.isdigit() and int(offset) <= MAX_OFFSET):
        raise GatewayError(400, f"offset: a whole number from 0 to {MAX_OFFSET}")
    mode, archived, pending, wanted = STATE_FILTERS[state]
    read = usecases.read_options(state_mode=mode, include_archived=archived, include_pending=pending)
    tag_list = _split(tags)

    def shown(memory: Any) -> bool:
        return (not type.strip() or (memory["type"] or "").lower() == type.strip().lower()) and (
            not wanted or memory["state"] == wanted)

    rows: list[dict[str, Any]] = []
    scanned, more = 0, ""
    if tag_list and not (q.strip() or start.strip() or end.strip()):
        token = after
        while True:
            with _token_named("after"):
                listed = await usecases.list_by_tag(s.call, tag_list, read=read, limit=TABLE_LIMIT, page_token=token)
            scanned += len(listed.memories)
            rows += [{"memory": j, "score": None} for j in map(presenters.memory_json, listed.memories) if shown(j)]
            token = listed.next_page_token
            if not token or len(rows) >= TABLE_LIMIT or scanned >= SCAN_LIMIT:
                break
        more = urlencode({"q": q, "tags": tags, "type": type, "state": state, "after": token}) if token else ""
    else:
        at = int(offset or 0)
        while True:
            found = await _search(s.call, q.strip(), read=read, tags=tag_list, start=start, end=end,
                                  limit=TABLE_LIMIT, offset=at)
            scanned += len(found.results)
            at += len(found.results)
            rows += [{"memory": j, "score": r.final_score or r.score, "match_type": r.match_type}
                     for r, j in ((r, presenters.memory_json(r.memory)) for r in found.results) if shown(j)]
            if not found.has_more or not found.results or len(rows) >= TABLE_LIMIT or scanned >= SCAN_LIMIT \
                    or at >= MAX_OFFSET:
                break
        more = urlencode({"q": q, "tags": tags, "type": type, "state": state, "start": start, "end": end,
                          "offset": at}) if found.has_more and found.results and at < MAX_OFFSET else ""
    context = {"s": s, "rows": rows, "q": q, "tags": tags, "type": type, "state": state, "start": start,
               "end": end, "states": list(STATE_FILTERS), "types": sorted(presenters.TYPE_COLORS),
               "more": more, "scanned": scanned}
    if request.headers.get("hx-request") == "true":
        return render(request, "_memory_rows.html", **context)
    return render(request, "memories.html", **context)


async def _search(call: Caller, q: str, **kwargs: Any) -> recall_service_pb2.SearchMemoriesResponse:
    """usecases.search of the console's search text ``q`` (``kwargs`` as that function's).
    GatewayError as the service answers, an error about its ``query`` naming ``q``, the
    console's parameter (a NUL character or an over-long search said "query: ...")."""
    try:
        return await usecases.search(call, query=q, **kwargs)
    except GatewayError as exc:
        if not exc.message.startswith("query: "):
            raise
        raise GatewayError(exc.status, "q: " + exc.message.removeprefix("query: "), code=exc.code,
                           **exc.extra) from None


def _history_read(known_at: str = "") -> recall_service_pb2.ReadOptions:
    return usecases.read_options(known_at=known_at or None, state_mode="history", include_archived=True,
                                 include_pending=True)


async def _history_get(call: Caller, memory_id: str, known_at: str = "") -> recall_service_pb2.GetMemoryResponse:
    """The memory by the history read (:func:`_history_read` at ``known_at``). GatewayError
    404 for a DELETED one too, which that read returns with its state until a purge: the
    console shows a deleted memory by its history page alone (as its last event left it)."""
    got = await usecases.get_memory(call, memory_id, _history_read(known_at))
    if got.memory.state == memory_pb2.MEMORY_STATE_DELETED:
        raise GatewayError(404, f"memory {memory_id} not found", code=grpc.StatusCode.NOT_FOUND)
    return got


async def _got(call: Caller, memory_id: str) -> dict[str, Any]:
    """The memory as the history read shows it (every state the key may see), with the head
    of its supersession chain as ``current_id`` when it is superseded: the history read names
    none, so a superseded memory linked only to its direct replacement, itself superseded."""
    got = presenters.got_memory_json(await _history_get(call, memory_id))
    if got["state"] == "SUPERSEDED" and not got.get("current_id"):
        try:
            head = await usecases.get_memory(call, memory_id, usecases.read_options(), touch=False)
        except GatewayError as exc:
            if exc.status != 404:
                raise
        else:
            got["current_id"] = head.current_id or None
    return got


async def _last_change(call: Caller, memory_id: str, events: Any) -> Any:
    """The newest event holding the memory (``after`` or ``before``) from the page ``events`` of its
    history on: the later pages are read to the end (at most 1000 events each). A deleted
    memory is gone from every read, so its history page shows it as this event left it;
    reading the first page only showed it active when it had more than a page of events."""
    last = None
    for _ in range(1000):
        last = next((e for e in reversed(events.events) if e.HasField("after") or e.HasField("before")), last)
        if not events.next_page_token:
            break
        events = await usecases.history(call, memory_id, page_size=1000, page_token=events.next_page_token)
    return last


@router.get("/memories/{memory_id}")
@page
async def memory(request: Request, memory_id: str, q: str = "") -> Response:
    """One memory; with ``q`` (the search it was reached from) its score components."""
    s = await session(request)
    got = await _got(s.call, memory_id)
    scored = None
    if q.strip():
        # As deep as a recall reads (a row reached from a later page of the table was "not
        # among the top results" when only the first 50 were read).
        found = await _search(s.call, q.strip(), read=usecases.read_options(),
                              limit=request.app.state.settings.recall_max_limit)
        hit = next((r for r in found.results if r.memory.id == memory_id), None)
        scored = presenters.scored_json(hit) if hit is not None else {}
    return render(request, "memory.html", s=s, m=got, q=q, scored=scored, tab="memory",
                  searched=request.app.state.settings.recall_max_limit,
                  metadata=json.dumps(got["metadata"], indent=2, ensure_ascii=False, sort_keys=True))


@router.post("/memories/{memory_id}/delete")
@page
async def delete(request: Request, memory_id: str, reason: str = Form(""), csrf_token: str = Form("")) -> Response:
    """Delete the memory (writer; IngestService.DeleteMemory: state DELETED, gone from every
    read, its events kept) and show its history."""
    s = await session(request)
    check_csrf(request, csrf_token)
    await usecases.delete_memory(s.call, memory_id, reason=reason.strip())
    return RedirectResponse(f"/console/memories/{memory_id}/history", status_code=303)


def shown(value: Any) -> str | None:
    """A diff value as text: a list as its items comma-separated (``a, b``; "" when empty),
    a dict (and a dict or list inside a list) as JSON, None as None, anything else ``str``
    — never a Python repr such as ``['a', 'b']``."""
    if value is None:
        return None
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, (list, tuple)):
        return ", ".join((shown(v) or "") if isinstance(v, (dict, list, tuple)) else str(v) for v in value)
    return str(value)


def _diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """(field, before, after) of the fields an event changed, by :func:`presenters.memory_json`
    name; the values as text (:func:`shown`)."""
    if before is None and after is not None:
        return [(n, None, shown(after.get(n))) for n in CREATED_SHOWN if after.get(n) not in (None, [], {})]
    before, after = before or {}, after or {}
    names = sorted((set(before) | set(after)) - DIFF_IGNORED)
    return [(n, shown(before.get(n)), shown(after.get(n))) for n in names if before.get(n) != after.get(n)]


def _event_row(event: Any) -> dict[str, Any]:
    body = presenters.event_json(event)
    before = presenters.memory_json(event.before) if event.HasField("before") else None
    after = presenters.memory_json(event.after) if event.HasField("after") else None
    return {"type": body.get("type", "").removeprefix("EVENT_TYPE_").lower().replace("_", " "),
            "actor": event.actor, "time": body.get("event_time"), "version": event.version,
            "reason": event.reason, "diff": _diff(before, after),
            "relation": presenters.relation_json(event.relation) if event.HasField("relation") else None}


#: Relation types that link a replaced memory to its replacement (old -> new).
SUPERSEDING = ("INVALIDATED_BY", "EVOLVED_INTO")


async def _chain(call: Caller, start: dict[str, Any]) -> list[dict[str, Any]]:
    """The supersession chain through ``start``, oldest first: predecessors through the
    INVALIDATED_BY / EVOLVED_INTO edges that end at a memory, successors through
    ``superseded_by``; at most :data:`CHAIN_HOPS` each way."""
    chain = [start]
    current = start
    for _ in range(CHAIN_HOPS):
        nxt = current.get("superseded_by")
        if not nxt or any(m["id"] == nxt for m in chain):
            break
        try:
            current = presenters.got_memory_json(await _history_get(call, nxt))
        except GatewayError:
            break
        chain.append(current)
    first = start["id"]
    for _ in range(CHAIN_HOPS):
        try:
            found = presenters.neighbors_json(await usecases.graph_neighbors(
                call, first, depth=1, include_semantic=False, semantic_limit=1,
                read=usecases.read_options(state_mode="history")), 0.0)
        except GatewayError as exc:
            if exc.status != 404:
                raise
            break
        nodes = {n["id"]: n for n in found["graph_neighbors"]}
        older = [nodes[e["source"]] for e in found["edges"]
                 if e["type"] in SUPERSEDING and e["target"] == first and e["source"] in nodes]
        if not older or any(m["id"] == older[0]["id"] for m in chain):
            break
        chain.insert(0, older[0])
        first = older[0]["id"]
    return chain


@router.get("/memories/{memory_id}/history")
@page
async def history(request: Request, memory_id: str, known_at: str = "", after: str = "") -> Response:
    """Audit events (oldest first, with before/after diffs) in pages of :data:`HISTORY_PAGE`
    (``after``: the next page's token; a link leads on), the supersession chain and its head
    (the memory of the chain that is current, if any), and with ``known_at`` the memory as the
    service knew it then (404 when it did not)."""
    s = await session(request)
    with _token_named("after"):
        events = await usecases.history(s.call, memory_id, page_size=HISTORY_PAGE, page_token=after)
    try:
        got = await _got(s.call, memory_id)
    except GatewayError as exc:
        # A deleted (or purged) memory is gone from every read; its audit events are not.
        last = await _last_change(s.call, memory_id, events) if exc.status == 404 else None
        if last is None:
            raise
        got = presenters.memory_json(last.after if last.HasField("after") else last.before,
                                     is_current=False, current_id=None)
    believed, believed_error = None, None
    if known_at.strip():
        try:
            believed = presenters.got_memory_json(await _history_get(s.call, memory_id, known_at.strip()))
        except GatewayError as exc:
            if exc.status != 404:
                raise
            believed_error = f"not known at {known_at.strip()}"
    chain = await _chain(s.call, got)
    # The head is the chain's current memory: the last one unless that one is not current
    # (an expired, deleted or rejected one was labelled "current head"), and an earlier one
    # when the later ones are not valid yet (a fact replaced from a later date is in force
    # until then: the chain had no head, or labelled the replacement-to-be).
    head = got.get("current_id") or next((c["id"] for c in reversed(chain) if c.get("is_current")), None)
    later = urlencode({"known_at": known_at, "after": events.next_page_token}) if events.next_page_token else ""
    return render(request, "history.html", s=s, m=got, tab="history", events=[_event_row(e) for e in events.events],
                  truncated=events.truncated, chain=chain, head=head, known_at=known_at, believed=believed,
                  believed_error=believed_error, later=later, paged=bool(after))


@router.get("/memories/{memory_id}/graph")
@page
async def graph(request: Request, memory_id: str, depth: int = 2) -> Response:
    """The memory's neighbourhood: typed edges, the entities each memory mentions, semantic
    neighbours, superseded memories drawn as such."""
    s = await session(request)
    if not 1 <= depth <= 3:
        raise GatewayError(400, "depth: must be between 1 and 3")
    answer = await _history_get(s.call, memory_id)
    got = presenters.got_memory_json(answer)
    if answer.memory.state == memory_pb2.MEMORY_STATE_REJECTED:
        # The graph walks never pass through a rejected memory (automem/common/state.py), so
        # its neighbourhood is itself: the tab said "not found" where the others showed it.
        data = {"center": presenters.graph_node_json(recall_service_pb2.GraphNode(memory=answer.memory)),
                "graph_neighbors": [], "semantic_neighbors": [], "edges": []}
    else:
        found = await usecases.graph_neighbors(s.call, memory_id, depth=depth, include_semantic=True,
                                               semantic_limit=5, read=usecases.read_options(state_mode="history"))
        data = presenters.neighbors_json(found, 0.0)
    nodes: dict[str, dict[str, Any]] = {}
    for role, items in (("center", [data["center"]]), ("graph", data["graph_neighbors"]),
                        ("semantic", data["semantic_neighbors"])):
        for n in items:
            nodes.setdefault(n["id"], {"id": n["id"], "label": _short(n["content"]), "type": n["type"] or "Memory",
                                       "color": n["color"], "state": n["state"], "style": n["style"],
                                       "role": role, "similarity": n.get("similarity")})
    edges = [{"id": e["id"], "source": e["source"], "target": e["target"], "type": e["type"], "color": e["color"]}
             for e in data["edges"] if e["source"] in nodes and e["target"] in nodes]
    for n in [data["center"], *data["graph_neighbors"]]:
        for entity in n.get("entities", []):
            eid = f"entity:{entity['tag'] or entity['name']}"
            nodes.setdefault(eid, {"id": eid, "label": entity["name"], "type": "entity", "role": "entity",
                                   "color": "#F59E0B", "state": "", "style": "entity", "kind": entity["kind"]})
            edges.append({"id": f"{n['id']}-MENTIONS-{eid}", "source": n["id"], "target": eid, "type": "MENTIONS",
                          "color": "#F59E0B"})
    for n in data["semantic_neighbors"]:
        edges.append({"id": f"{memory_id}-SIMILAR-{n['id']}", "source": memory_id, "target": n["id"],
                      "type": f"semantic {n.get('similarity', 0):.2f}", "color": "#CBD5E1", "semantic": True})
    return render(request, "graph.html", s=s, m=got, tab="graph", nodes=list(nodes.values()), edges=edges,
                  depth=depth, graph_json=script_json({"nodes": list(nodes.values()), "edges": edges}))


def script_json(value: Any) -> str:
    """``value`` as JSON safe inside an HTML ``<script>`` element: ``<``, ``>`` and ``&``
    escaped as ``\\u003c`` etc., so memory content cannot close the element."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _short(text: str, size: int = 48) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


# --- review queue ------------------------------------------------------------------------


@router.get("/review")
@page
async def review(request: Request, status: str = "pending", after: str = "", tombstones_after: str = "") -> Response:
    """Pending memories and supersede proposals with their evidence; tombstones (admin). Each
    in pages of :data:`REVIEW_PAGE` (``after`` / ``tombstones_after``: the next page's
    token, with a link to it): the queue stopped at 50 and said "50 pending items". After an
    approval that left conflicts (``?done=approved&approved=<id>&current=<id>...``, ids only)
    the page says which memories are both current (:func:`_approval_conflict`)."""
    s = await session(request)
    with _token_named("after"):
        items = await usecases.review_items(s.call, status=status, kind="", page_size=REVIEW_PAGE, page_token=after)
    more_items = urlencode({"status": status, "after": items.next_page_token}) if items.next_page_token else ""
    tombstones, tombstone_error, more_tombstones = [], None, ""
    try:
        with _token_named("tombstones_after"):
            found = await usecases.tombstones(s.call, include_lifted=False, page_size=REVIEW_PAGE,
                                              page_token=tombstones_after)
        tombstones = [presenters.tombstone_json(t) for t in found.tombstones]
        if found.next_page_token:
            more_tombstones = urlencode({"status": status, "tombstones_after": found.next_page_token})
    except GatewayError as exc:
        if exc.status != 403:
            raise
        tombstone_error = exc.message
    flash = _flash(request)
    conflict = await _approval_conflict(s.call, request) if flash == "approved" else None
    return render(request, "review.html", s=s, items=[presenters.review_item_json(i) for i in items.items],
                  status=status, tombstones=tombstones, tombstone_error=tombstone_error, flash=flash,
                  conflict=conflict, more_items=more_items, more_tombstones=more_tombstones,
                  paged=bool(after or tombstones_after))


def _flash(request: Request) -> str | None:
    """The outcome word of the action that redirected here (``?done=``), when it is one."""
    done = request.query_params.get("done")
    return done if done in ("approved", "rejected", "lifted") else None


async def _current_memory(call: Caller, memory_id: str) -> dict[str, Any] | None:
    """The memory ``memory_id`` (:func:`presenters.memory_json`) when a current read returns
    it as current; None when it is not current, not found in the scope, or not an id (400)."""
    try:
        got = await usecases.get_memory(call, memory_id, usecases.read_options(), touch=False)
    except GatewayError as exc:
        if exc.status in (400, 404):
            return None
        raise
    if got.memory.id != memory_id or not got.is_current or got.memory.state != memory_pb2.MEMORY_STATE_ACTIVE:
        return None
    return presenters.memory_json(got.memory)


async def _approval_conflict(call: Caller, request: Request) -> dict[str, Any] | None:
    """What the review page says after an approval that left conflicts: ``{"approved": memory,
    "current": [memory, ...]}`` from the redirect's ids (``approved``, ``current``, at most
    :data:`MAX_CONFLICTS_SHOWN`), each re-read from the service and kept only while current:
    no text travels in the URL, and a crafted link can at most name memories the key reads
    as current (it cannot be checked that a rejected proposal joined them: the service has
    no read of one review item). None without ids, or when the approved memory or every
    named one is no longer current."""
    approved_id = request.query_params.get("approved", "")
    current_ids = list(dict.fromkeys(request.query_params.getlist("current")))[:MAX_CONFLICTS_SHOWN]
    if not approved_id or not current_ids:
        return None
    approved = await _current_memory(call, approved_id)
    if approved is None:
        return None
    current = [m for i in current_ids if i != approved_id and (m := await _current_memory(call, i)) is not None]
    return {"approved": approved, "current": current} if current else None


@router.post("/review/{item_id}/{decision}")
@page
async def decide(request: Request, item_id: str, decision: str, reason: str = Form(""),
                 csrf_token: str = Form("")) -> Response:
    """Approve or reject a review item (admin; a rejection needs a reason: the service says so).
    An approval that left memories current next to the approved one (its supersede proposal
    was rejected: ApproveReviewItemResponse.conflicts) redirects with their ids, and the
    review page names them; it redirected with ``done=approved`` alone and the console
    reviewer never saw the warning."""
    s = await session(request)
    check_csrf(request, csrf_token)
    if decision == "approve":
        decided = await usecases.approve(s.call, item_id, reason.strip())
        if decided.conflicts:
            query = urlencode({"done": "approved", "approved": decided.memory.id or decided.item.memory_id,
                               "current": [c.memory_id for c in decided.conflicts][:MAX_CONFLICTS_SHOWN]}, doseq=True)
            return RedirectResponse(f"/console/review?{query}", status_code=303)
    elif decision == "reject":
        await usecases.reject(s.call, item_id, reason.strip())
    else:
        raise GatewayError(404, f"decision: approve or reject, not {decision!r}")
    return RedirectResponse(f"/console/review?done={decision.removesuffix('e')}ed", status_code=303)


@router.post("/tombstones/{tombstone_id}/lift")
@page
async def lift(request: Request, tombstone_id: str, csrf_token: str = Form("")) -> Response:
    """Lift a tombstone (admin)."""
    s = await session(request)
    check_csrf(request, csrf_token)
    await usecases.lift(s.call, tombstone_id)
    return RedirectResponse("/console/review?done=lifted", status_code=303)


# --- operations --------------------------------------------------------------------------


@router.get("/ops")
@page
async def ops(request: Request) -> Response:
    """Health and sync status of the service (its counts are the whole service's, as
    ``/health`` gives them), enrichment lag and the consolidation history. A service that
    does not answer is shown as such; the others as they are (the page failed whole with the
    enrichment process down)."""
    s = await session(request)
    health = await usecases.health(request.app.state.client, with_sync=True)
    stores = presenters.stores_json(health.stats) if health.stats is not None else None
    enrichment = consolidation = None
    enrichment_error = consolidation_error = None
    try:
        enrichment = presenters.enrichment_json(await usecases.enrichment_status(s.call),
                                                await usecases.reembed_status(s.call))
    except GatewayError as exc:
        enrichment_error = _unreachable(exc)
    try:
        consolidation = presenters.consolidation_status_json(await usecases.consolidation_status(s.call))
    except GatewayError as exc:
        consolidation_error = _unreachable(exc)
    sync = None
    if health.sync is not None:
        sync = {"status": health.sync.sync_status}
    readiness = await usecases.readiness(request.app.state.client)
    return render(request, "ops.html", s=s, stores=stores, stores_error=health.stats_error, enrichment=enrichment,
                  consolidation=consolidation, sync=sync, readiness=readiness, result=None,
                  enrichment_error=enrichment_error, consolidation_error=consolidation_error)


def _unreachable(exc: GatewayError) -> str:
    """What the operations page says of a service that did not answer: the status for a 503
    or a timeout (its message names internal addresses), the service's message otherwise;
    re-raises a refusal (401/403), which is the page's answer."""
    if exc.status in (401, 403):
        raise exc
    return "not answering (503)" if exc.status in (503, 504) else exc.message


@router.post("/ops/{action}")
@page
async def ops_action(request: Request, action: str, csrf_token: str = Form("")) -> Response:
    """Admin actions: ``consolidate`` (a dry run of the decay task) or ``sync`` (check and
    repair graph/vector drift); the service refuses other roles (403)."""
    s = await session(request)
    check_csrf(request, csrf_token)
    if action == "consolidate":
        result = presenters.consolidation_json(await usecases.consolidate(s.call, "decay", True))
    elif action == "sync":
        result = presenters.sync_json(await usecases.check_sync(s.call, repair=True))
    else:
        raise GatewayError(404, f"action: consolidate or sync, not {action!r}")
    return render(request, "action.html", s=s, action=action, result=json.dumps(result, indent=2))


def mount(app: FastAPI) -> None:
    """Add the console's pages and its static files (``/console/static``) to ``app``, with its
    session codec (``AUTOMEM_CONSOLE_SECRET`` of ``app.state.settings``, or a random secret
    of this process when empty) and its logged-out sessions. ValueError naming
    AUTOMEM_CONSOLE_SECRET when it is shorter than 32 characters."""
    secret = app.state.settings.console_secret or secrets.token_urlsafe(48)
    app.state.console_codec = SessionCodec(secret, SESSION_SECONDS)
    app.state.console_ended = EndedSessions(MAX_ENDED_SESSIONS, SESSION_SECONDS)
    app.include_router(router)
    app.mount("/console/static", StaticFiles(directory=str(HERE / "static")), name="console-static")


__all__ = ["mount", "router"]
