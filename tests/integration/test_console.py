"""The browser console (issue 17) in a real browser: Debian's chromium, headless, driven by
Playwright (``executable_path``; ``make browser`` installs chromium with apt when missing).

One secured service for the module with keys of two scopes: an admin and a reader of
``acme/web`` and a writer of ``globex/app``. The admin logs in, searches, opens a memory
(its score components), its history (events, supersession chain with head, what we
believed at T) and graph, approves a supersede proposal; the reader sees read-only pages;
the other scope's key sees nothing of acme. Every request the browser makes is recorded and
must go to the gateway (no CDN). Each page is saved at 1280x800 in build/screenshots/
(``AUTOMEM_SCREENSHOTS`` to write elsewhere).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from tests.conftest import LogCapture, RunningService, console_login, eventually, settings_for, start_service

REPO = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("AUTOMEM_SCREENSHOTS", REPO / "build" / "screenshots"))
TOKEN = "console-root-token"
#: The service's AUTOMEM_CONSOLE_SECRET (tests seal their own session cookies with it).
CONSOLE_SECRET = "console-test-secret-" + "x" * 20
SCOPE_A = "acme/web"
SCOPE_B = "globex/app"
VIEWPORT = {"width": 1280, "height": 800}

pytestmark = pytest.mark.asyncio(loop_scope="session")


@dataclass
class World:
    """The service, its keys and acme's memories."""

    service: RunningService
    admin_a: str
    reader_a: str
    writer_b: str
    old: str  # "billing uses Postgres", superseded by ``new``
    new: str
    old_recorded_at: str
    related: str  # new -RELATES_TO-> related
    proposal: str  # the review item: ``claim`` supersedes ``target``
    claim: str
    target: str
    scratch: str  # deleted by a test
    pending: str  # stored for review: rejected (tombstoned) and the tombstone lifted by a test


async def _store(http, content: str, **fields) -> dict:
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(nats_server, falkordb_server, tmp_path_factory) -> AsyncIterator[World]:
    settings = settings_for(nats_server, falkordb_server, tmp_path_factory.mktemp("console") / "data")
    running = await start_service(settings.model_copy(update={"api_token": TOKEN, "console_secret": CONSOLE_SECRET}))
    try:
        keys = running.ctx.keystore
        admin_a = (await keys.create("admin", ["acme/*"], SCOPE_A))[0]
        reader_a = (await keys.create("reader", ["acme/*"], SCOPE_A))[0]
        writer_b = (await keys.create("writer", ["globex/*"], SCOPE_B))[0]
        async with running.http(Authorization=f"Bearer {writer_b}") as http:
            await _store(http, "Globex keeps its billing ledger in Oracle", tags=["billing"])
        async with running.http(Authorization=f"Bearer {admin_a}") as http:
            old = await _store(http, "The billing service stores invoices in Postgres", tags=["billing", "db"],
                               type="Decision", importance=0.8)
            got = (await http.get(f"/memory/{old['memory_id']}")).json()["memory"]
            new = await _store(http, "The billing service moved its invoices to CockroachDB",
                               tags=["billing", "db"], type="Decision", importance=0.9,
                               supersedes_memory_id=old["memory_id"])
            related = await _store(http, "CockroachDB backups run nightly at 02:00", tags=["db", "ops"])
            r = await http.post("/associate", json={"memory1_id": new["memory_id"], "memory2_id": related["memory_id"],
                                                    "type": "RELATES_TO", "strength": 0.8})
            assert r.status_code == 201, r.text
            target = await _store(http, "Invoices are sent on the first day of the month", tags=["billing"])
            claim = await _store(http, "Invoices are sent on the fifth day of the month", tags=["billing"])
            scratch = await _store(http, "Scratch note: the staging VPN password rotates weekly", tags=["scratch"])
            pending = await _store(http, "The moon is made of cheese", tags=["scratch"], require_review=True)
            # The proposal enrichment makes for a contradiction (automem/enrich/links.py), made
            # here through the same statement so the test does not depend on the detector.
            await running.ctx.graph.review.propose_supersede(
                "console-proposal", claim["memory_id"], target["memory_id"], SCOPE_A,
                "contradiction found by enrichment: first vs fifth", datetime.now().timestamp())
            items = (await http.get("/v1/review-items", params={"kind": "supersede_proposal"})).json()["items"]
            proposal = next(i["id"] for i in items if i["memory_id"] == claim["memory_id"]
                            and i["target_id"] == target["memory_id"])

            async def searchable() -> bool:
                found = (await http.get("/recall", params={"query": "billing invoices database", "limit": 20})).json()
                return new["memory_id"] in [hit["id"] for hit in found["results"]]

            await eventually(searchable, timeout=120)
        yield World(running, admin_a, reader_a, writer_b, old["memory_id"], new["memory_id"], got["recorded_at"],
                    related["memory_id"], proposal, claim["memory_id"], target["memory_id"], scratch["memory_id"],
                    pending["memory_id"])
    finally:
        await running.runner.stop()


@dataclass
class Browsing:
    """A browser context and the URLs of every request it made."""

    context: BrowserContext
    urls: list[str] = field(default_factory=list)

    async def page(self) -> Page:
        page = await self.context.new_page()
        page.set_default_timeout(60_000)
        return page


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is not installed: run `make browser` (apt-get install chromium)"
    async with async_playwright() as p:
        launched = await p.chromium.launch(executable_path=chromium, headless=True)
        try:
            yield launched
        finally:
            await launched.close()


@pytest_asyncio.fixture(loop_scope="session")
async def browsing(browser: Browser, world: World) -> AsyncIterator[Browsing]:
    context = await browser.new_context(viewport=VIEWPORT, base_url=world.service.url)
    seen = Browsing(context)
    context.on("request", lambda request: seen.urls.append(request.url))
    expect.set_options(timeout=60_000)
    try:
        yield seen
    finally:
        await context.close()
    outside = [u for u in seen.urls if not (u.startswith((world.service.url + "/", "blob:" + world.service.url + "/", "data:")))]
    assert seen.urls and not outside, outside


async def _shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"))


async def _login(page: Page, key: str) -> None:
    await page.goto("/console/")
    await expect(page).to_have_url(re.compile(r"/console/login$"))
    await page.fill("input[name=api_key]", key)
    await page.click("button[type=submit]")
    await expect(page.get_by_test_id("who")).to_be_visible()


async def test_admin_searches_opens_a_memory_its_history_and_graph_and_approves_a_proposal(
        world: World, browsing: Browsing) -> None:
    page = await browsing.page()
    await page.goto("/console/login")
    await _shot(page, "login")
    await _login(page, world.admin_a)
    await expect(page.get_by_test_id("who")).to_contain_text("admin")
    await expect(page.get_by_label("scope")).to_have_value(SCOPE_A)

    # Search: the table holds acme's memories only, the current one first.
    await page.fill("input[name=q]", "billing invoices database")
    await page.click(".filters button[type=submit]")
    table = page.get_by_test_id("memories")
    await expect(table).to_contain_text("moved its invoices to CockroachDB")
    await expect(table).not_to_contain_text("Oracle")
    await expect(page).to_have_url(re.compile(r"/console/\?q=billing(\+|%20)invoices"))
    await _shot(page, "memories")

    # Another scope of the key's: empty; a scope outside its patterns: refused, naming it.
    await page.get_by_label("scope").fill("acme/other")
    await page.get_by_role("button", name="switch").click()
    await expect(page.get_by_label("scope")).to_have_value("acme/other")
    await expect(page.get_by_test_id("row-count")).to_contain_text("0 memories")
    await page.get_by_label("scope").fill(SCOPE_B)
    await page.get_by_role("button", name="switch").click()
    await expect(page.get_by_test_id("error")).to_contain_text(SCOPE_B)
    await page.goto("/console/")
    await expect(page.get_by_label("scope")).to_have_value("acme/other")
    await page.get_by_label("scope").fill(SCOPE_A)
    await page.get_by_role("button", name="switch").click()
    await expect(page.get_by_label("scope")).to_have_value(SCOPE_A)

    # Filters: by tag alone (the by-tag listing), and state "superseded" shows the old one.
    await page.goto("/console/?tags=db&state=superseded")
    await expect(table).to_contain_text("stores invoices in Postgres")
    await expect(table).not_to_contain_text("CockroachDB backups")

    # The memory page, reached from the search: content, state, version, score components.
    await page.goto("/console/?q=billing+invoices+database")
    await table.get_by_role("link", name="The billing service moved its invoices to CockroachDB").click()
    await expect(page.get_by_test_id("content")).to_have_text("The billing service moved its invoices to CockroachDB")
    facts = page.get_by_test_id("facts")
    await expect(facts).to_contain_text("active")
    await expect(facts).to_contain_text("Decision")
    await expect(page.get_by_test_id("score")).to_contain_text("Final score")
    await _shot(page, "memory")

    # History of the superseded memory: events, the chain old -> new with its head, and
    # what we believed just after the old one was recorded.
    await page.goto(f"/console/memories/{world.old}/history")
    chain = page.get_by_test_id("chain")
    await expect(chain.locator("li")).to_have_count(2)
    await expect(chain.locator("li.head")).to_contain_text("moved its invoices to CockroachDB")
    await expect(chain.locator("li").first).to_contain_text("superseded")
    events = page.get_by_test_id("events")
    await expect(events).to_contain_text("created")
    await expect(events).to_contain_text("superseded")
    await expect(events.locator("td.after").first).to_be_visible()
    when = datetime.fromisoformat(world.old_recorded_at) + timedelta(milliseconds=1)
    await page.fill("input[name=known_at]", when.isoformat())
    await page.get_by_role("button", name="Show").click()
    believed = page.get_by_test_id("believed")
    await expect(believed).to_contain_text("stores invoices in Postgres")
    await expect(believed).to_contain_text("active")
    await _shot(page, "history")

    # The graph: cytoscape draws the neighbourhood (the supersession edge, the relation).
    await page.goto(f"/console/memories/{world.new}/graph")
    await expect(page.locator("#graph[data-ready]")).to_be_attached()
    assert int(await page.locator("#graph").get_attribute("data-ready")) >= 3
    await expect(page.locator("#graph canvas").first).to_be_attached()
    edges = page.get_by_test_id("graph-edges")
    await expect(edges).to_contain_text("INVALIDATED_BY")
    await expect(edges).to_contain_text("RELATES_TO")
    await _shot(page, "graph")

    # The review queue: the proposal with its evidence; approve it with a reason.
    await page.goto("/console/review")
    item = page.locator(f"[data-item='{world.proposal}']")
    await expect(item).to_contain_text("first vs fifth")
    await expect(item).to_contain_text("Invoices are sent on the first day of the month")
    await _shot(page, "review")
    await item.locator("input[name=reason]").fill("the fifth is the new policy")
    await item.get_by_role("button", name="Approve").click()
    await expect(page.get_by_test_id("flash")).to_contain_text("approved")
    await expect(page.locator(f"[data-item='{world.proposal}']")).to_have_count(0)
    async with world.service.http(Authorization=f"Bearer {world.admin_a}") as http:
        old = (await http.get(f"/memory/{world.target}")).json()["memory"]
    assert old["state"] == "SUPERSEDED" and old["current_id"] == world.claim

    # Operations: health, sync, enrichment lag, consolidation history; admin actions.
    await page.goto("/console/ops")
    await expect(page.get_by_test_id("health")).to_contain_text("connected")
    await expect(page.get_by_test_id("enrichment")).to_contain_text("Queue depth")
    await expect(page.get_by_test_id("actions").get_by_role("button", name="Run consolidation (dry run)")).to_be_visible()
    await _shot(page, "ops")
    await page.get_by_role("button", name="Run consolidation (dry run)").click()
    await expect(page.get_by_test_id("result")).to_contain_text('"dry_run": true')


async def test_admin_rejects_a_pending_memory_lifts_its_tombstone_and_deletes_a_memory(
        world: World, browsing: Browsing) -> None:
    page = await browsing.page()
    await _login(page, world.admin_a)
    await page.goto("/console/review")
    item = page.locator(f"[data-item='{world.pending}']")
    await expect(item).to_contain_text("Memory under review")
    await expect(item).to_contain_text("The moon is made of cheese")
    await item.locator("input[name=reason]").fill("not a fact")
    await item.get_by_role("button", name="Reject").click()
    await expect(page.get_by_test_id("flash")).to_contain_text("rejected")
    row = page.get_by_test_id("tombstones").locator("tr", has_text=world.pending)
    await expect(row).to_contain_text("not a fact")
    await row.get_by_role("button", name="Lift").click()
    await expect(page.get_by_test_id("flash")).to_contain_text("lifted")
    await expect(page.get_by_test_id("tombstones")).not_to_contain_text(world.pending)
    async with world.service.http(Authorization=f"Bearer {world.admin_a}") as http:
        found = (await http.get("/v1/tombstones", params={"include_lifted": "true"})).json()["tombstones"]
    assert [t["lifted"] for t in found if t["memory_id"] == world.pending] == [True]

    # A writer's action: delete a memory; its history stays readable.
    await page.goto(f"/console/memories/{world.scratch}")
    await page.fill("input[name=reason]", "a password does not belong here")
    await page.get_by_role("button", name="Delete").click()
    await expect(page.get_by_test_id("events")).to_contain_text("deleted")
    await expect(page.get_by_test_id("events")).to_contain_text("a password does not belong here")
    response = await page.goto(f"/console/memories/{world.scratch}")
    assert response is not None and response.status == 404


async def test_a_reader_sees_read_only_pages_and_a_post_without_the_csrf_token_is_refused(
        world: World, browsing: Browsing) -> None:
    page = await browsing.page()
    await _login(page, world.reader_a)
    await expect(page.get_by_test_id("who")).to_contain_text("reader")
    # A filter the service cannot read answers with an error naming the field.
    await page.fill("input[name=start]", "not a date")
    await page.click(".filters button[type=submit]")
    await expect(page.locator("#rows").get_by_test_id("error")).to_contain_text("start")
    await page.goto(f"/console/memories/{world.new}")
    await expect(page.get_by_test_id("content")).to_contain_text("CockroachDB")
    await expect(page.get_by_role("button", name="Delete")).to_have_count(0)
    await page.goto("/console/review")
    await expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    await expect(page.get_by_test_id("tombstones")).to_contain_text("Admin only")
    await page.goto("/console/ops")
    await expect(page.get_by_test_id("actions")).to_contain_text("read-only")
    # The session cookie alone does not make a POST: the form's CSRF token must match.
    r = await page.request.post(f"/console/memories/{world.new}/delete", form={"reason": "forged"})
    assert r.status == 403 and "csrf_token" in await r.text()


async def test_logout_leaves_no_memory_page_in_the_tabs_session_storage(world: World, browsing: Browsing) -> None:
    """htmx kept snapshots of the memories page (its table: memory content) in the tab's
    sessionStorage (``htmx-history-cache``) for its Back button, still there after logout. The
    console keeps no history cache (Back reloads the page from the gateway) and logout answers
    ``Clear-Site-Data: "cache", "storage"``."""
    page = await browsing.page()
    await _login(page, world.reader_a)
    await expect(page.locator("#rows")).to_contain_text("CockroachDB")
    for query in ("billing invoices database", "CockroachDB backups"):
        await page.fill("input[name=q]", query)
        await page.click(".filters button[type=submit]")
        await expect(page).to_have_url(re.compile(r"/console/\?q=" + query.split()[0]))
        await expect(page.locator("#rows")).to_contain_text("CockroachDB")
    # No snapshot is kept while logged in either (a tab left open, a logout that never comes).
    assert await page.evaluate("sessionStorage.getItem('htmx-history-cache')") is None
    # Back still shows the whole earlier page (reloaded, not a fragment swapped into the body).
    await page.go_back()
    await expect(page).to_have_url(re.compile(r"q=billing"))
    await expect(page.locator(".filters")).to_be_visible()
    await expect(page.locator("#rows")).to_contain_text("CockroachDB")
    async with page.expect_response(lambda r: r.url.endswith("/console/logout")) as answered:
        await page.click("button:has-text('Log out')")
    logout = await answered.value
    await expect(page).to_have_url(re.compile(r"/console/login$"))
    stored = await page.evaluate("JSON.stringify(Object.entries(sessionStorage))")
    assert "CockroachDB" not in stored and "htmx-history-cache" not in stored, stored[:300]
    assert logout.status == 303 and (await logout.all_headers()).get("clear-site-data") == '"cache", "storage"'


async def test_a_key_of_another_scope_sees_nothing_of_acme(world: World, browsing: Browsing) -> None:
    page = await browsing.page()
    await _login(page, world.writer_b)
    await expect(page.get_by_label("scope")).to_have_value(SCOPE_B)
    await page.goto("/console/?q=billing+invoices+database")
    table = page.get_by_test_id("memories")
    await expect(table).to_contain_text("Oracle")
    await expect(table).not_to_contain_text("Postgres")
    await expect(table).not_to_contain_text("CockroachDB")
    await _shot(page, "other-scope")
    for path in (f"/console/memories/{world.new}", f"/console/memories/{world.old}/history",
                 f"/console/memories/{world.new}/graph"):
        response = await page.goto(path)
        assert response is not None and response.status == 404, path
        await expect(page.get_by_test_id("error")).to_be_visible()
        await expect(page.locator("body")).not_to_contain_text("CockroachDB")
    await page.goto("/console/review")
    await expect(page.get_by_test_id("review-items")).not_to_contain_text("Invoices")


async def test_a_wrong_key_gets_the_login_form_again_and_no_session(world: World, browsing: Browsing) -> None:
    page = await browsing.page()
    await page.goto("/console/login")
    await page.fill("input[name=api_key]", "not-a-key")
    await page.click("button[type=submit]")
    await expect(page.locator("p.error")).to_be_visible()
    assert not [c for c in await browsing.context.cookies() if c["name"] == "automem_console_session"]
    response = await page.goto("/console/ops")
    assert response is not None and page.url.endswith("/console/login")


async def test_another_site_cannot_log_the_browser_in_with_its_own_key(world: World, browsing: Browsing) -> None:
    """Login CSRF: a page on another site posting its own key to ``/console/login`` replaced
    the user's session with the attacker's (the user then acted in the attacker's scope).
    The login form carries a CSRF token tied to a SameSite=Strict cookie now, which a
    cross-site post cannot send; a post without the token changes nothing."""
    import httpx

    page = await browsing.page()
    await _login(page, world.admin_a)
    before = [c["value"] for c in await browsing.context.cookies() if c["name"] == "automem_console_session"]
    assert len(before) == 1, before
    attacker = await browsing.page()
    await attacker.set_content(
        f'<form id="f" method="post" action="{world.service.url}/console/login">'
        f'<input name="api_key" value="{world.reader_a}"><input name="scope" value="{SCOPE_A}"></form>')
    async with attacker.expect_navigation():
        await attacker.evaluate("document.getElementById('f').submit()")
    after = [c["value"] for c in await browsing.context.cookies() if c["name"] == "automem_console_session"]
    assert after == before
    await page.goto("/console/")  # still the admin's session
    await expect(page.get_by_test_id("who")).to_contain_text("admin")
    assert "csrf_token: missing" in await attacker.content()
    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
        r = await http.post("/console/login", data={"api_key": world.reader_a})
        assert r.status_code == 403 and "automem_console_session" not in r.headers.get("set-cookie", ""), r.text
        r = await http.post("/console/login", data={"api_key": world.reader_a, "csrf_token": "forged"})
        assert r.status_code == 403, r.text
        assert (await console_login(http, world.reader_a)).status_code == 303


async def test_type_and_state_filters_read_past_the_first_page_and_the_table_pages_on(world: World) -> None:
    """The table read the first 50 memories and then filtered them by type and state: a
    Decision older than 50 newer memories under the tag showed "Nothing in this scope
    matches", and no page followed the first 50. Pages are read until rows match now, and a
    next link goes on."""
    import html
    import re

    import httpx

    async with world.service.http(Authorization=f"Bearer {world.admin_a}") as rest:
        await _store(rest, "Paging probe: we decided to page the console table", tags=["pgprobe"], type="Decision")
        r = await rest.post("/memory/batch", json={"memories": [
            {"content": f"Paging probe: filler note number {i}", "tags": ["pgprobe"], "type": "Context"}
            for i in range(70)]})
        assert r.status_code == 201, r.text
    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
        assert (await console_login(http, world.admin_a, SCOPE_A)).status_code == 303
        page = await http.get("/console/", params={"tags": "pgprobe", "type": "Decision"})
        assert page.status_code == 200 and "we decided to page the console table" in page.text, page.text
        assert 'data-testid="more"' not in page.text
        seen, url = 0, "/console/?tags=pgprobe"
        for _ in range(3):
            page = await http.get(url)
            assert page.status_code == 200, page.text
            seen += page.text.count("Paging probe: ")
            link = re.search(r'data-testid="more" href="([^"]+)"', page.text)
            if not link:
                break
            url = html.unescape(link[1])
        assert seen == 71 and not link, seen
        r = await http.get("/console/", params={"q": "paging probe", "offset": "-1"})
        assert r.status_code == 400 and "offset" in r.text, r.text


async def test_console_errors_are_console_pages_and_a_rejected_memory_has_its_graph_tab(world: World) -> None:
    """An unknown console path or a parameter FastAPI could not read answered JSON 401
    "missing or invalid API key" to a logged-in user (the key is in a cookie, the check read
    headers only); the Graph tab of a rejected memory said "not found" while its other tabs
    showed it."""
    import httpx

    async with world.service.http(Authorization=f"Bearer {world.admin_a}") as rest:
        mid = (await _store(rest, "Rejection probe: the office dog is a cat", require_review=True))["memory_id"]
        r = await rest.post(f"/v1/review-items/{mid}:reject", json={"reason": "not a dog"})
        assert r.status_code == 200, r.text
    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
        r = await http.get("/console/nonexistent")
        assert r.status_code == 303 and r.headers["location"] == "/console/login", r.text
        assert (await console_login(http, world.admin_a, SCOPE_A)).status_code == 303
        for path, status, words in ((f"/console/memories/{world.new}/graph?depth=abc", 400, "depth"),
                                    ("/console/nonexistent", 404, "Not Found"), ("/console/review/", 404, "Not Found"),
                                    ("/console/static/nonexist.js", 404, "Not Found")):
            r = await http.get(path)
            assert r.status_code == status and r.headers["content-type"].startswith("text/html"), (path, r.text)
            assert words in r.text and "API key" not in r.text, (path, r.text)
        for tab in ("", "/history", "/graph"):
            r = await http.get(f"/console/memories/{mid}{tab}")
            assert r.status_code == 200 and "the office dog is a cat" in r.text, (tab, r.status_code, r.text[:300])


async def test_a_console_query_string_that_is_not_utf8_answers_the_console_error_page(world: World) -> None:
    """A console URL whose query holds percent-encoded bytes that are not UTF-8 (``?q=%ff``)
    was answered with the REST JSON error. It is the console's HTML error page, 400, naming
    the parameter, for a logged-in browser, and the login page without a session (as for any
    parameter the console cannot read); a REST route keeps its JSON 400."""
    import httpx

    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
        r = await http.get("/console/?q=%ff")
        assert r.status_code == 303 and r.headers["location"] == "/console/login", (r.status_code, r.text)
        assert (await console_login(http, world.admin_a, SCOPE_A)).status_code == 303
        for path in ("/console/?q=%ff", f"/console/memories/{world.new}/history?known_at=%ff%fe",
                     "/console/review?status=%c3"):
            r = await http.get(path)
            assert r.status_code == 400 and r.headers["content-type"].startswith("text/html"), (path, r.text)
            assert "not UTF-8" in r.text and 'data-testid="error"' in r.text, (path, r.text)
    async with world.service.http(Authorization=f"Bearer {world.admin_a}") as rest:
        r = await rest.get("/recall?query=%ff")
        assert r.status_code == 400 and r.headers["content-type"].startswith("application/json"), r.text
        assert "query" in r.json()["error"] and "not UTF-8" in r.json()["error"], r.text


async def test_docs_load_swagger_ui_from_the_gateway(world: World, browsing: Browsing) -> None:
    page = await browsing.page()
    await page.goto("/docs")
    await expect(page.locator(".swagger-ui .info .title")).to_contain_text("automem")
    await expect(page.locator(".opblock").first).to_be_visible()
    await _shot(page, "docs")


async def test_login_cookies_are_http_only_and_same_site_strict(world: World, browsing: Browsing) -> None:
    page = await browsing.page()
    await _login(page, world.reader_a)
    cookies = {c["name"]: c for c in await browsing.context.cookies()}
    for name in ("automem_console_session", "automem_console_csrf"):
        assert cookies[name]["httpOnly"] and cookies[name]["sameSite"] == "Strict", cookies[name]
        assert cookies[name]["path"] == "/console"


def _set_cookies(response) -> dict[str, dict[str, str]]:
    """The response's Set-Cookie lines by cookie name: their attributes, names lowercased
    (the value under ``""``; a flag such as HttpOnly maps to "")."""
    found: dict[str, dict[str, str]] = {}
    for line in response.headers.get_list("set-cookie"):
        first, *attributes = [part.strip() for part in line.split(";")]
        name, _, value = first.partition("=")
        found[name] = {"": value} | {k.lower(): v for k, _, v in (a.partition("=") for a in attributes)}
    return found


async def test_logout_deletes_each_login_cookie_with_the_attributes_login_set(world: World) -> None:
    """Logout deleted the session cookies with SameSite=lax and no HttpOnly, unlike login's
    (HttpOnly, SameSite=strict): curl's cookie jar kept the key and scope cookies after
    logout. Each deletion now carries login's attributes and expires the cookie."""
    import httpx

    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
        login = await console_login(http, world.reader_a, SCOPE_A)
        assert login.status_code == 303, login.text
        logout = await http.post("/console/logout")
        assert logout.status_code == 303
    set_at_login, deleted = _set_cookies(login), _set_cookies(logout)
    assert set(set_at_login) == {"automem_console_session", "automem_console_scope", "automem_console_csrf"}
    for name, attributes in set_at_login.items():
        assert name in deleted, (name, logout.headers.get_list("set-cookie"))
        gone = deleted[name]
        assert gone.get("max-age") == "0" or (
            "expires" in gone and parsedate_to_datetime(gone["expires"]) <= datetime.now(UTC)), gone
        assert "httponly" in attributes and attributes["samesite"].lower() == "strict", attributes
        for attribute in ("path", "httponly", "samesite", "secure", "domain"):
            assert gone.get(attribute, "").lower() == attributes.get(attribute, "").lower() and (
                (attribute in gone) == (attribute in attributes)), (name, attribute, gone, attributes)


def _seal(key: str, session_id: str, at: int, secret: str = CONSOLE_SECRET) -> str:
    """A session cookie value sealed as a gateway with ``secret`` seals one at Unix time ``at``."""
    from cryptography.fernet import Fernet

    from automem.gateway.console.session_cookie import fernet_key

    payload = json.dumps({"k": key, "sid": session_id}).encode()
    return Fernet(fernet_key(secret)).encrypt_at_time(payload, at).decode()


async def test_the_session_cookie_holds_no_key_and_a_logged_out_cookie_is_refused(world: World) -> None:
    """The login cookie held the raw API key: a copy of it (a proxy log, a shared profile)
    was the key itself, for REST and gRPC, and logging out left that copy working. It holds
    the key sealed with Fernet now (automem/gateway/console/session_cookie.py); the console
    works with it, and after logout this gateway refuses the same cookie."""
    import time
    from urllib.parse import quote

    import httpx

    secret_part = world.admin_a.split("_", 2)[2]
    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
        login = await console_login(http, world.admin_a, SCOPE_A)
        assert login.status_code == 303, login.text
        lines = login.headers.get_list("set-cookie")
        assert lines and not [line for line in lines if secret_part in line or quote(secret_part) in line], lines
        sealed = _set_cookies(login)["automem_console_session"][""]
        assert secret_part not in sealed
        page = await http.get(f"/console/memories/{world.new}")
        assert page.status_code == 200 and "CockroachDB" in page.text, page.text
        assert world.admin_a not in page.text
        # The sealed cookie is no API key: REST refuses it.
        rest = await http.get(f"/memory/{world.new}", headers={"Authorization": f"Bearer {sealed}"})
        assert rest.status_code == 401, rest.text
        copied = {"Cookie": f"automem_console_session={sealed}; automem_console_scope={SCOPE_A}"}
        async with httpx.AsyncClient(base_url=world.service.url, timeout=30, headers=copied) as other:
            assert (await other.get(f"/console/memories/{world.new}")).status_code == 200
            assert (await http.post("/console/logout")).status_code == 303
            for path in (f"/console/memories/{world.new}", "/console/", "/console/?q=%ff", "/console/nowhere"):
                r = await other.get(path)
                assert r.status_code == 303 and r.headers["location"] == "/console/login", (path, r.text)
        again = await http.get(f"/console/memories/{world.new}")
        assert again.status_code == 303 and again.headers["location"] == "/console/login"
        # Another session of the same key is not ended by that logout.
        fresh = _seal(world.admin_a, "another-session", int(time.time()))
        r = await http.get(f"/console/memories/{world.new}", headers={
            "Cookie": f"automem_console_session={fresh}; automem_console_scope={SCOPE_A}"})
        assert r.status_code == 200 and "CockroachDB" in r.text, r.text


async def test_a_logged_out_cookie_stays_refused_however_many_sessions_are_ended_after_it(world: World) -> None:
    """The gateway remembered 10,000 logged-out sessions and dropped the one expiring first
    when full: a user who logged out 10,000 more times revived a stolen copy of the first
    session's cookie until its 8 h end. Ended sessions now stay ended until they expire
    (session_cookie.py EndedSessions), and a later login of the same key still works. (A
    gateway app of this service's settings and gRPC client, its set made to hold 50 so that
    filling it takes 50 logouts, not 10,000.)"""
    import time

    import httpx

    from automem.gateway.app import create_app
    from automem.gateway.console import SESSION_SECONDS
    from automem.gateway.console.session_cookie import EndedSessions

    capacity = 50
    key = (await world.service.ctx.keystore.create("reader", ["acme/*"], SCOPE_A))[0]
    now = int(time.time())

    def cookie(sealed: str) -> dict[str, str]:
        return {"Cookie": f"automem_console_session={sealed}; automem_console_scope={SCOPE_A}"}

    client = world.service.client()
    try:
        gateway = create_app(world.service.settings.model_copy(update={"console_secret": CONSOLE_SECRET}), client)
        gateway.state.console_ended = EndedSessions(capacity, SESSION_SECONDS)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway), base_url="http://gateway",
                                     timeout=30) as http:
            page = f"/console/memories/{world.new}"
            stolen = _seal(key, "stolen-session", now - 120)
            assert (await http.get(page, headers=cookie(stolen))).status_code == 200
            assert (await http.post("/console/logout", headers=cookie(stolen))).status_code == 303
            assert (await http.get(page, headers=cookie(stolen))).status_code == 303
            for i in range(capacity + 1):
                r = await http.post("/console/logout", headers=cookie(_seal(key, f"again-{i}", now - 60)))
                assert r.status_code == 303, r.text
            assert len(gateway.state.console_ended) <= capacity
            for sealed in (stolen, _seal(key, "again-0", now - 60)):
                r = await http.get(page, headers=cookie(sealed))
                assert r.status_code == 303 and r.headers["location"] == "/console/login", (r.status_code, r.text[:300])
            assert (await console_login(http, key, SCOPE_A)).status_code == 303
            assert (await http.get(page)).status_code == 200
    finally:
        await client.close()


async def test_logging_in_again_ends_the_session_the_browsers_old_cookie_carried(world: World) -> None:
    """A second login in the same browser replaced the session cookie but left the first
    session alive: a copy of the old cookie kept working until its 8 h end. The login now
    ends the session the request's old cookie carried."""
    import httpx

    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
        first = await console_login(http, world.reader_a, SCOPE_A)
        assert first.status_code == 303, first.text
        old = _set_cookies(first)["automem_console_session"][""]
        second = await console_login(http, world.reader_a, SCOPE_A)
        assert second.status_code == 303, second.text
        new = _set_cookies(second)["automem_console_session"][""]
        assert new != old
        page = f"/console/memories/{world.new}"
        r = await http.get(page)
        assert r.status_code == 200 and "CockroachDB" in r.text, r.text[:300]
    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as copy:
        r = await copy.get(page, headers={"Cookie": f"automem_console_session={old}; automem_console_scope={SCOPE_A}"})
        assert r.status_code == 303 and r.headers["location"] == "/console/login", (r.status_code, r.text[:300])
        r = await copy.get(page, headers={"Cookie": f"automem_console_session={new}; automem_console_scope={SCOPE_A}"})
        assert r.status_code == 200, r.text[:300]


async def test_the_search_pages_errors_name_its_parameter_q(world: World) -> None:
    """The memories page's search (``q``) and a memory's score components (``?q=``) are sent
    to the service as ``query``: a NUL character or a search longer than the service takes
    came back as "query: ...", a parameter the console does not have. They name ``q``."""
    from urllib.parse import quote

    from automem.recall.servicer import query_max_length

    longest = query_max_length(world.service.settings)
    async with _console(world, world.admin_a) as http:
        for q, words in (("billing\x00invoices", "q: contains a NUL character"),
                         ("x" * (longest + 1), f"q: at most {longest} characters")):
            for path in (f"/console/?q={quote(q)}", f"/console/memories/{world.new}?q={quote(q)}"):
                r = await http.get(path)
                assert r.status_code == 400 and r.headers["content-type"].startswith("text/html"), (path[:60], r.text)
                error = re.search(r'data-testid="error">(.*?)</p>', r.text, re.DOTALL)
                assert error and words in error[1] and "query" not in error[1], (path[:60], r.text[-1500:])


async def test_a_tampered_or_expired_session_cookie_gets_the_login_page(world: World) -> None:
    """A session cookie that was altered, sealed with another secret, or sealed longer ago
    than a session lasts (8 h) sends the browser to the login page, whatever Max-Age the
    browser kept; one sealed with the service's secret inside the 8 h shows the page."""
    import time

    import httpx

    from automem.gateway.console import SESSION_SECONDS

    now = int(time.time())
    fresh = _seal(world.admin_a, "fresh-session", now - 60)
    tampered = fresh[:50] + ("B" if fresh[50] == "A" else "A") + fresh[51:]
    cookies = {  # name: (cookie value, the memory page's status when live; 0: the login page)
        "fresh": (fresh, 200),
        "tampered": (tampered, 0),
        "expired": (_seal(world.admin_a, "old-session", now - SESSION_SECONDS - 60), 0),
        "another secret": (_seal(world.admin_a, "foreign", now, "another-secret-" + "y" * 30), 0),
        "the raw key": (world.admin_a, 0),
    }
    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
        for name, (value, live) in cookies.items():
            # The error page of a bad query string (400) is for a live session only.
            for path, status in ((f"/console/memories/{world.new}", live), ("/console/?q=%ff", live and 400)):
                r = await http.get(path, headers={
                    "Cookie": f"automem_console_session={value}; automem_console_scope={SCOPE_A}"})
                assert r.status_code == (status or 303), (name, path, r.status_code, r.text[:300])
                if not status:
                    assert r.headers["location"] == "/console/login", (name, path)
        legacy = await http.get(f"/console/memories/{world.new}",
                                headers={"Cookie": f"automem_console_key={world.admin_a}"})
        assert legacy.status_code == 303 and legacy.headers["location"] == "/console/login"


async def test_gateways_sharing_the_console_secret_accept_each_others_session_cookies(world: World) -> None:
    """Gateway replicas behind one address: a session cookie one seals opens on another built
    with the same AUTOMEM_CONSOLE_SECRET (the browser's next request may reach either); a
    gateway with another secret sends it to the login page."""
    import httpx

    from automem.gateway.app import create_app

    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
        login = await console_login(http, world.reader_a, SCOPE_A)
        assert login.status_code == 303, login.text
        sealed = _set_cookies(login)["automem_console_session"][""]
    cookie = {"Cookie": f"automem_console_session={sealed}; automem_console_scope={SCOPE_A}"}
    client = world.service.client()
    try:
        for secret, status in ((CONSOLE_SECRET, 200), ("a-different-secret-" + "z" * 20, 303)):
            replica = create_app(world.service.settings.model_copy(update={"console_secret": secret}), client)
            transport = httpx.ASGITransport(app=replica)
            async with httpx.AsyncClient(transport=transport, base_url="http://replica", timeout=30) as other:
                r = await other.get(f"/console/memories/{world.new}", headers=cookie)
                assert r.status_code == status, (secret, r.status_code, r.text[:300])
                if status == 200:
                    assert "CockroachDB" in r.text
                else:
                    assert r.headers["location"] == "/console/login"
    finally:
        await client.close()


async def test_console_pages_and_memory_answers_carry_cache_control_no_store(world: World) -> None:
    """After a logout the browser's Back button showed a memory page from its cache: every
    console page and htmx fragment, and the REST answers that hold memories, carry
    ``Cache-Control: no-store`` (automem/gateway/app.py ``NoStore``); the console's static
    files stay cacheable."""
    import httpx

    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
        login_form = await http.get("/console/login")
        login = await console_login(http, world.reader_a)
        assert login.status_code == 303 and login.headers["location"] == "/console/", login.text
        answers = {
            "login form": login_form,
            "login": login,
            "memories": await http.get("/console/", params={"q": "billing invoices database"}),
            "rows fragment": await http.get("/console/", params={"q": "billing invoices database"},
                                            headers={"HX-Request": "true"}),
            "memory": await http.get(f"/console/memories/{world.new}"),
            "history": await http.get(f"/console/memories/{world.new}/history"),
            "graph": await http.get(f"/console/memories/{world.new}/graph"),
            "error page": await http.get("/console/memories/no-such-memory"),
            "REST memory": await http.get(f"/memory/{world.new}", headers={"Authorization": f"Bearer {world.reader_a}"}),
            "REST recall": await http.get("/recall", params={"query": "billing invoices"},
                                          headers={"Authorization": f"Bearer {world.reader_a}"}),
        }
        assert "CockroachDB" in answers["memory"].text and "CockroachDB" in answers["rows fragment"].text
        assert answers["error page"].status_code == 404
        assert answers["REST memory"].status_code == 200 and answers["REST recall"].status_code == 200
        for name, answer in answers.items():
            assert answer.headers.get("cache-control") == "no-store", (name, answer.status_code, answer.headers)
        static = await http.get("/console/static/console.css")
        assert static.status_code == 200 and "no-store" not in static.headers.get("cache-control", "")
        logout = await http.post("/console/logout")
        assert logout.status_code == 303 and logout.headers.get("cache-control") == "no-store"
        after = await http.get(f"/console/memories/{world.new}")
        assert after.status_code == 303 and after.headers["location"] == "/console/login"


async def test_console_access_lines_name_the_sessions_key_as_its_rest_requests_do(world: World) -> None:
    """A console page's access line named the principal ``anonymous``: the console sends its
    key in a session cookie, not in ``Authorization``. It names the key (``key:<id>``) and the
    session's scope, as a REST request with that key does, and never the key itself."""
    import httpx

    capture, access = LogCapture(), logging.getLogger("automem.access")
    old_level = access.level
    access.setLevel(logging.INFO)
    access.addHandler(capture)
    try:
        async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
            login = await console_login(http, world.admin_a, SCOPE_A)
            assert login.status_code == 303 and login.headers["location"] == "/console/", login.text
            assert (await http.get(f"/console/memories/{world.new}")).status_code == 200
            assert (await http.get(f"/memory/{world.new}",
                                   headers={"Authorization": f"Bearer {world.admin_a}"})).status_code == 200

        def line(route: str) -> list[logging.LogRecord]:
            return [r for r in capture.records if getattr(r, "kind", "") == "http" and r.route == route]

        async def logged() -> bool:  # the gateway writes its line once the response is sent
            return bool(line("/console/memories/{memory_id}") and line("/memory/{memory_id}"))

        await eventually(logged)
    finally:
        access.removeHandler(capture)
        access.setLevel(old_level)
    key_id = world.admin_a.split("_")[1]
    page, rest = line("/console/memories/{memory_id}")[-1], line("/memory/{memory_id}")[-1]
    assert (page.principal, page.scope) == (f"key:{key_id}", SCOPE_A), vars(page)
    assert rest.principal == page.principal
    assert not [r for r in capture.records if world.admin_a in str(vars(r))]


def _no_horizontal_overflow() -> str:
    return "document.documentElement.scrollWidth <= window.innerWidth"


async def test_a_memory_of_one_long_unbroken_string_does_not_widen_the_page(world: World, browsing: Browsing) -> None:
    """Content, a tag and a metadata value of one long string without a space (a URL, a hash)
    overflowed the console's tables and cards horizontally: every page of it fits the window."""
    content, tag = "Q" * 500, "t" * 200
    async with world.service.http(Authorization=f"Bearer {world.admin_a}") as http:
        stored = await _store(http, content, tags=[tag], metadata={"blob": "m" * 400})
        r = await http.patch(f"/memory/{stored['memory_id']}", json={"content": "R" * 500})
        assert r.status_code == 200, r.text
    memory_id = stored["memory_id"]
    page = await browsing.page()
    await _login(page, world.admin_a)
    for path in (f"/console/?tags={tag}&state=all", f"/console/memories/{memory_id}",
                 f"/console/memories/{memory_id}/history", f"/console/memories/{memory_id}/graph"):
        await page.goto(path)
        await expect(page.get_by_test_id("content").or_(page.get_by_test_id("memories"))).to_contain_text("RRRR")
        assert await page.evaluate(_no_horizontal_overflow()), (
            path, await page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]"))
    await _shot(page, "long-string")


def _text_lines() -> str:
    """JS: the number of lines the text of element ``e`` takes (distinct tops of its text's
    line boxes)."""
    return """e => { const range = document.createRange(); range.selectNodeContents(e);
        return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size; }"""


async def test_a_long_unbroken_tag_does_not_squeeze_the_type_and_state_columns(world: World, browsing: Browsing) -> None:
    """Break-it review: one long tag without a space (a 90-character URL) squeezed the
    memories table's short columns until "Decision" wrapped as "Decisio n" and the state
    badge as "activ e": every cell could break anywhere, so the table's automatic layout
    shrank them below their words. The type and the badge keep one line now; the tag still
    wraps inside its own cell and the page does not widen."""
    tag = "https://docs.example.com/" + "a" * 65
    assert len(tag) == 90
    async with world.service.http(Authorization=f"Bearer {world.admin_a}") as http:
        await _store(http, "The deploy checklist lives in the ops wiki, linked from the runbook index page",
                     tags=[tag], type="Decision")
    page = await browsing.page()
    await _login(page, world.admin_a)
    await page.goto(f"/console/?tags={quote(tag, safe='')}&state=all")
    table = page.get_by_test_id("memories")
    await expect(table.locator("tbody tr")).to_have_count(1)
    row = table.locator("tbody tr").first
    for cell, text in ((row.locator("span.type"), "Decision"), (row.locator("span.badge"), "active")):
        await expect(cell).to_have_text(text)
        assert await cell.evaluate(_text_lines()) == 1, (text, await cell.evaluate(
            "e => [e.getBoundingClientRect().width, e.scrollWidth, e.getBoundingClientRect().height]"))
        assert await cell.evaluate("e => e.getBoundingClientRect().width + 0.5 >= e.scrollWidth"), text
    assert await row.locator("span.tag").evaluate(_text_lines()) > 1  # the URL wraps in its own cell
    assert await page.evaluate(_no_horizontal_overflow()), await page.evaluate(
        "[document.documentElement.scrollWidth, window.innerWidth]")
    await _shot(page, "long-tag")


async def test_history_shows_a_tags_change_as_comma_separated_text_not_a_python_list(
        world: World, browsing: Browsing) -> None:
    """The history's diff showed a tags change as ``['alpha', 'beta']`` (a Python repr): lists
    are comma-separated text, dicts (the metadata) JSON."""
    async with world.service.http(Authorization=f"Bearer {world.admin_a}") as http:
        stored = await _store(http, "The release train leaves every second Tuesday", tags=["alpha", "beta"],
                              metadata={"team": "release"})
        r = await http.patch(f"/memory/{stored['memory_id']}",
                             json={"tags": ["alpha", "beta", "gamma"], "metadata": {"owner": "ops"}})
        assert r.status_code == 200, r.text
    page = await browsing.page()
    await _login(page, world.admin_a)
    await page.goto(f"/console/memories/{stored['memory_id']}/history")
    events = page.get_by_test_id("events")
    changed = (events.locator("table.diff tr")
               .filter(has=page.locator("td.before", has_text=re.compile(r"^alpha, beta$")))
               .filter(has=page.locator("td.after", has_text=re.compile(r"^alpha, beta, gamma$"))))
    await expect(changed).to_have_count(1)
    await expect(changed.locator("td").first).to_have_text("tags")
    text = await events.inner_text()
    assert "['" not in text and "{'" not in text, text
    assert '"owner": "ops"' in text, text


@contextlib.asynccontextmanager
async def _console(world: World, key: str, scope: str = SCOPE_A) -> AsyncIterator[Any]:
    """An httpx client logged into the console with ``key`` in ``scope``."""
    import httpx

    async with httpx.AsyncClient(base_url=world.service.url, timeout=60) as http:
        assert (await console_login(http, key, scope)).status_code == 303
        yield http


async def test_a_long_history_pages_on_and_a_deleted_memory_reads_as_its_last_event_left_it(world: World) -> None:
    """Break-it review: the history page read the first 100 events only, so the later ones
    (the deletion among them) were never shown, and a deleted memory with more events read
    "active · current head", with Memory and Graph tabs that answered 404. The page now
    links to the later events, a deleted memory shows its last state and no head, and its
    tabs are History alone."""
    async with world.service.http(Authorization=f"Bearer {world.admin_a}") as rest:
        mid = (await _store(rest, "The long-lived runbook for the payments pager"))["memory_id"]
        for i in range(101):
            r = await rest.patch(f"/memory/{mid}", json={"add_tags": [f"rev{i}"]})
            assert r.status_code == 200, r.text
        assert (await rest.delete(f"/memory/{mid}")).status_code == 200
    async with _console(world, world.admin_a) as http:
        first = await http.get(f"/console/memories/{mid}/history")
        assert first.status_code == 200, first.text
        chain = re.search(r'data-testid="chain">(.*?)</ol>', first.text, re.DOTALL)[1]
        assert "state-deleted" in chain and "current head" not in chain and "state-active" not in chain, chain
        assert f'href="/console/memories/{mid}"' not in first.text and f"/console/memories/{mid}/graph" not in first.text
        later = re.search(r'href="(/console/memories/[^"]+/history\?[^"]+)" rel="next"', first.text)
        assert later, first.text[-2000:]
        rest_page = await http.get(later[1].replace("&amp;", "&"))
        assert rest_page.status_code == 200, rest_page.text
        events = re.search(r'data-testid="events">(.*?)</ol>', rest_page.text, re.DOTALL)[1]
        assert "memory deleted" in events and "rev100" in events, events[-1500:]
        assert 'rel="next"' not in rest_page.text and "First events" in rest_page.text


async def test_memories_that_are_not_current_are_never_labelled_current(world: World) -> None:
    """Break-it review: an expired memory read "active" on its page and "current head" in its
    chain; a memory awaiting review was drawn as a current fact in the graph (the history read
    the console uses called it current); a memory superseded twice linked only to its direct
    replacement. Now: a "not current" badge and no head; the graph node of a pending memory is
    not current; the page of the first memory of a chain links to the chain's head."""
    async with world.service.http(Authorization=f"Bearer {world.admin_a}") as rest:
        expired = (await _store(rest, "The old on-call rota ran until 2021", t_valid="2020-01-01T00:00:00Z",
                                t_invalid="2021-01-01T00:00:00Z"))["memory_id"]
        pending = (await _store(rest, "Proposed: move standups to 10:00", require_review=True))["memory_id"]
        first = (await _store(rest, "The staging cluster runs Kubernetes 1.27"))["memory_id"]
        second = (await _store(rest, "The staging cluster runs Kubernetes 1.28",
                               supersedes_memory_id=first))["memory_id"]
        third = (await _store(rest, "The staging cluster runs Kubernetes 1.29",
                              supersedes_memory_id=second))["memory_id"]
        node = (await rest.get(f"/graph/neighbors/{pending}", params={"state_mode": "history"})).json()["center"]
        assert node["state"] == "PENDING_REVIEW" and node["is_current"] is False, node
        assert node["style"] == "not_current", node
    async with _console(world, world.admin_a) as http:
        page = await http.get(f"/console/memories/{expired}")
        assert page.status_code == 200 and 'data-testid="not-current"' in page.text, page.text
        history = await http.get(f"/console/memories/{expired}/history")
        chain = re.search(r'data-testid="chain">(.*?)</ol>', history.text, re.DOTALL)[1]
        assert "current head" not in chain and "not current" in chain, chain
        graph = await http.get(f"/console/memories/{pending}/graph")
        data = json.loads(re.search(r'id="graph-data">(.*?)</script>', graph.text, re.DOTALL)[1])
        assert [n["style"] for n in data["nodes"] if n["id"] == pending] == ["not_current"], data["nodes"]
        page = await http.get(f"/console/memories/{first}")
        assert f'current: <a href="/console/memories/{third}">' in page.text, page.text
        history = await http.get(f"/console/memories/{third}/history")
        head = re.search(r'<li class="head[^"]*">\s*<a href="/console/memories/([^/]+)/history"', history.text)
        assert head and head[1] == third, history.text


def _chain_items(text: str) -> dict[str, str]:
    """The chain of a history page: each memory's id -> its ``<li>`` (class and badges)."""
    chain = re.search(r'data-testid="chain">(.*?)</ol>', text, re.DOTALL)[1]
    return {m[2]: m[0] for m in re.finditer(r'<li class="([^"]*)">\s*<a href="/console/memories/([^/]+)/history".*?</li>',
                                             chain, re.DOTALL)}


async def test_a_fact_replaced_from_a_later_date_is_the_chains_current_head_until_then(world: World) -> None:
    """A supersede whose replacement is valid from three days on leaves the old fact in force
    until then: recall and get return it, ACTIVE and current. The console's chain labelled it
    "superseded" and had no current head (the history read it uses called it not current), and
    its graph drew it superseded. It now reads as every read does: active, the current head,
    replaced from the replacement's start; the replacement is not current yet."""
    start = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    async with world.service.http(Authorization=f"Bearer {world.admin_a}") as rest:
        old = (await _store(rest, "The support desk opens at 08:00"))["memory_id"]
        new = (await _store(rest, "The support desk opens at 09:00", supersedes_memory_id=old,
                            t_valid=start))["memory_id"]
        got = (await rest.get(f"/memory/{old}")).json()["memory"]
        assert (got["state"], got["is_current"]) == ("ACTIVE", True), got
        got = (await rest.get(f"/memory/{new}")).json()["memory"]
        assert got["is_current"] is False, got
        # The history read keeps the stored state and calls current what the current read does.
        got = (await rest.get(f"/memory/{old}", params={"state_mode": "history"})).json()["memory"]
        assert (got["state"], got["is_current"]) == ("SUPERSEDED", True), got
    async with _console(world, world.admin_a) as http:
        for page in (old, new):
            items = _chain_items((await http.get(f"/console/memories/{page}/history")).text)
            assert list(items) == [old, new], items
            assert "head" in items[old].split('"')[1] and "current head" in items[old], items[old]
            assert "state-active" in items[old] and "superseded" not in items[old], items[old]
            assert f"replaced from {start[:19]}" in items[old], items[old]
            assert "current head" not in items[new] and "not current" in items[new], items[new]
        facts = re.search(r'data-testid="facts">(.*?)</dl>', (await http.get(f"/console/memories/{old}")).text,
                          re.DOTALL)[1]
        assert "state-active" in facts and "state-superseded" not in facts, facts
        graph = await http.get(f"/console/memories/{old}/graph")
        data = json.loads(re.search(r'id="graph-data">(.*?)</script>', graph.text, re.DOTALL)[1])
        styles = {n["id"]: n["style"] for n in data["nodes"] if n["id"] in (old, new)}
        assert styles == {old: "current", new: "not_current"}, styles


async def test_the_review_queue_pages_past_its_first_fifty_items(world: World) -> None:
    """Break-it review: the review queue read one page of 50 and said "50 pending items" with
    57 waiting. It now links to the next page, which holds the rest."""
    scope = "acme/review-paging"
    async with world.service.http(Authorization=f"Bearer {world.admin_a}", **{"X-Automem-Scope": scope}) as rest:
        ids = set()
        for i in range(53):
            ids.add((await _store(rest, f"Queued proposal number {i} for the paging check",
                                  require_review=True))["memory_id"])
    async with _console(world, world.admin_a, scope) as http:
        seen: set[str] = set()
        url = "/console/review"
        for _ in range(3):
            page = await http.get(url)
            assert page.status_code == 200, page.text
            seen |= set(re.findall(r'href="/console/memories/([0-9a-f-]{36})"', page.text)) & ids
            more = re.search(r'href="(/console/review\?[^"]+)" rel="next" data-testid="more-items"', page.text)
            if not more:
                break
            assert "on this page" in page.text
            url = more[1].replace("&amp;", "&")
        assert seen == ids, len(seen)


async def test_approving_a_replacement_whose_supersede_was_rejected_says_both_are_current(
        world: World, browsing: Browsing) -> None:
    """Break-it review: approving a pending replacement after its supersede proposal was
    rejected leaves both facts current; REST says so (``conflicts``, ``warning``,
    ``conflicts_with``) but the console redirected with ``done=approved`` alone and listed
    decided items without ``conflicts_with``. The page the reviewer lands on now names both
    memories as current with links (content escaped); an approved item lists the memory left
    current; the redirect carries ids only, and a crafted link naming a memory that is not
    current shows nothing."""
    scope = "acme/review-conflict"
    reviewed = (await world.service.ctx.keystore.create("writer", ["acme/*"], scope, require_review=True))[0]
    async with world.service.http(Authorization=f"Bearer {world.admin_a}", **{"X-Automem-Scope": scope}) as rest, \
            world.service.http(Authorization=f"Bearer {reviewed}", **{"X-Automem-Scope": scope}) as other:
        fact = (await _store(rest, "The on-call rotation changes every <em>Monday</em>"))["memory_id"]
        r = await other.post(f"/v1/memories/{fact}:supersede", json={"content": "The on-call rotation changes every Friday"})
        assert r.status_code == 201 and r.json()["state"] == "PENDING_REVIEW", r.text
        new = r.json()["memory_id"]
        items = (await rest.get("/v1/review-items")).json()["items"]
        proposal = next(i["id"] for i in items if i["kind"] == "supersede_proposal" and i["memory_id"] == new)
        r = await rest.post(f"/v1/review-items/{proposal}:reject", json={"reason": "Monday is still right"})
        assert r.status_code == 200, r.text

    page = await browsing.page()
    await _login(page, world.admin_a)
    await page.get_by_label("scope").fill(scope)
    await page.get_by_role("button", name="switch").click()
    await expect(page.get_by_label("scope")).to_have_value(scope)
    await page.goto("/console/review")
    item = page.locator(f"[data-item='{new}']")
    await item.locator("input[name=reason]").fill("the Friday fact is true too")
    await item.get_by_role("button", name="Approve").click()
    await expect(page.get_by_test_id("flash")).to_contain_text("approved")
    conflict = page.get_by_test_id("conflict")
    await expect(conflict).to_contain_text("Both current now")
    await expect(conflict).to_contain_text("The on-call rotation changes every <em>Monday</em>")
    await expect(conflict).to_contain_text("The on-call rotation changes every Friday")
    await expect(conflict.locator("em")).to_have_count(0)
    await expect(conflict.locator(f"a[href='/console/memories/{new}']")).to_have_count(1)
    await expect(conflict.locator(f"a[href='/console/memories/{fact}']")).to_have_count(1)
    assert "Monday" not in page.url and "Friday" not in page.url, page.url
    await _shot(page, "review-conflict")

    # The decided item names the memory left current, linked.
    await page.goto("/console/review?status=approved")
    decided = page.locator(f"[data-item='{new}']").get_by_test_id("conflicts-with")
    await expect(decided.locator(f"a[href='/console/memories/{fact}']")).to_have_count(1)

    # A crafted link: ids the service does not read as current name nothing.
    for query in (f"approved={new}&current=00000000-0000-0000-0000-000000000000",
                  f"approved={proposal}&current={fact}", f"approved={new}&current=%3Cem%3Ex"):
        await page.goto(f"/console/review?done=approved&{query}")
        await expect(page.get_by_test_id("flash")).to_contain_text("approved")
        await expect(page.get_by_test_id("conflict")).to_have_count(0)


async def test_console_answers_guard_the_session_and_the_page(world: World) -> None:
    """Break-it review: an htmx search after the session ended swapped the whole login page
    into the table (it now gets HX-Redirect); a 100,000-character key came back as a 429
    about gRPC metadata (now 400 naming api_key); an unknown ``type`` read 1,000 memories to
    say nothing matched (now 400 listing the types); pages that show untrusted text carried
    no Content-Security-Policy, X-Frame-Options or nosniff."""
    import httpx

    async with httpx.AsyncClient(base_url=world.service.url, timeout=60) as http:
        r = await http.get("/console/", params={"q": "billing"}, headers={"HX-Request": "true"})
        assert r.status_code == 200 and r.headers.get("hx-redirect") == "/console/login" and not r.text, r.text
        r = await console_login(http, "k" * 100_000)
        assert r.status_code == 400 and "api_key: at most" in r.text, r.text[:500]
    async with _console(world, world.reader_a) as http:
        r = await http.get("/console/", params={"type": "bogus"})
        assert r.status_code == 400 and "type: one of" in r.text and "Decision" in r.text, r.text[:500]
        assert (await http.get("/console/", params={"type": "decision"})).status_code == 200
        for path in ("/console/", f"/console/memories/{world.new}", f"/console/memories/{world.new}/graph",
                     "/console/review", "/console/ops", "/console/login"):
            r = await http.get(path)
            assert r.status_code == 200, (path, r.text[:300])
            assert "script-src 'self'" in r.headers["content-security-policy"], path
            assert "frame-ancestors 'none'" in r.headers["content-security-policy"], path
            assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff", path


async def test_session_cookies_are_secure_only_behind_a_proxy_the_gateway_believes(
        nats_server, falkordb_server, tmp_path) -> None:
    """A TLS proxy's ``X-Forwarded-Proto: https`` makes the console's cookies ``Secure`` when
    the proxy's address is in AUTOMEM_FORWARDED_ALLOW_IPS (uvicorn's ``forwarded_allow_ips``),
    and not when it is not: behind a proxy on another host they went out without it."""
    import httpx

    for allowed, secure in (("127.0.0.1", True), ("192.0.2.7", False)):
        settings = settings_for(nats_server, falkordb_server, tmp_path / allowed / "data")
        running = await start_service(settings.model_copy(update={"forwarded_allow_ips": allowed}))
        try:
            async with httpx.AsyncClient(base_url=running.url, timeout=30,
                                         headers={"X-Forwarded-Proto": "https"}) as http:
                r = await http.get("/console/login")
                cookie = r.headers["set-cookie"]
                assert ("; secure" in cookie.lower()) is secure, (allowed, cookie)
        finally:
            await running.runner.stop()


async def test_the_operations_page_shows_a_service_that_does_not_answer(
        world: World, nats_server, falkordb_server, tmp_path) -> None:
    """Break-it review: with the enrichment process down, /console/ops failed whole with a 503
    naming an internal address. A gateway whose enrichment service does not answer (its
    address leads nowhere; the other services are the world's) shows the page: health and
    consolidation as they are, enrichment "not answering"."""
    import httpx

    backend = world.service.grpc
    settings = settings_for(nats_server, falkordb_server, tmp_path / "data")
    gateway = await start_service(settings.model_copy(update={
        "ingest_addr": backend, "recall_addr": backend, "consolidate_addr": backend, "enrich_addr": "127.0.0.1:1"}),
        targets=["gateway"])
    try:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as http:
            assert (await console_login(http, world.admin_a, SCOPE_A)).status_code == 303
            r = await http.get("/console/ops")
            assert r.status_code == 200, r.text[:500]
            assert 'data-testid="enrichment-error"' in r.text and "not answering" in r.text, r.text
            assert "127.0.0.1:1" not in r.text
            assert 'data-testid="consolidation-error"' not in r.text and 'data-testid="health"' in r.text
    finally:
        await gateway.runner.stop()


async def test_a_key_whose_writes_wait_for_review_is_offered_no_delete(world: World) -> None:
    """Break-it review: the memory page showed Delete to a writer whose writes wait for review,
    and the service then refused it (403). WhoAmI now says ``require_review`` and the page
    offers Delete only to writers who may delete."""
    from automem.common.client import AutomemClient
    from automem.v1 import recall_service_pb2

    reviewed = (await world.service.ctx.keystore.create("writer", ["acme/*"], SCOPE_A, require_review=True))[0]
    async with AutomemClient.connect(world.service.grpc) as client:
        for key, waits in ((reviewed, True), (world.admin_a, False)):
            who = await client.recall.WhoAmI(recall_service_pb2.WhoAmIRequest(),
                                             metadata=[("authorization", f"Bearer {key}")])
            assert who.require_review is waits, who
    form = f'action="/console/memories/{world.related}/delete"'
    async with _console(world, reviewed) as http:
        page = await http.get(f"/console/memories/{world.related}")
        assert page.status_code == 200 and form not in page.text, page.text
    async with _console(world, world.admin_a) as http:
        assert form in (await http.get(f"/console/memories/{world.related}")).text
