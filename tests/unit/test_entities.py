"""Entities, LLM reply validation/repair, extractive summaries, the contradiction rule,
decay and scheduler intervals (no servers)."""

from __future__ import annotations

import pytest

from automem.common.errors import InvalidArgument
from automem.common.settings import Settings
from automem.common.text import extractive_summary
from automem.consolidate.scheduler import intervals
from automem.consolidate.tasks import relevance
from automem.enrich.entities import EntityExtractor, entity_tag, normalise, slug
from automem.enrich.links import _changed_values_only, contradiction_signal
from automem.enrich.llm import Classification, Contradiction, MalformedReply, parse_reply


def test_normalise_slug_and_tag() -> None:
    assert normalise("The Acme Corp.'s") == "acme corp"
    assert normalise("  New   York ") == "new york"
    assert slug("acme corp") == "acme-corp"
    assert entity_tag("org", "acme corp") == "entity:org:acme-corp"


def test_extractor_is_ner_only_batched_and_finds_kinds() -> None:
    extractor = EntityExtractor()
    found = extractor.extract_sync(["Alice Johnson moved to Berlin and joined Google.",
                                    "We use Postgres and Redis.", "nothing to see here"])
    assert extractor._load().pipe_names == ["ner"]
    tags = [{e.tag for e in ents} for ents in found]
    assert {"entity:place:berlin", "entity:org:google"} <= tags[0]
    assert {"entity:tool:postgres", "entity:tool:redis"} <= tags[1]
    assert tags[2] == set()
    assert all(len(ents) == len({e.tag for e in ents}) for ents in found)  # de-duplicated


async def test_extractor_in_a_worker_process_finds_the_same_entities_and_restarts_a_dead_worker() -> None:
    import os
    import signal
    from concurrent.futures.process import BrokenProcessPool

    texts = ["Alice Johnson moved to Berlin and joined Google.", "We use Postgres and Redis.",
             "Caroline went to the LGBTQ support group in Paris on Monday with Melanie.", "nothing to see here"]
    in_thread = EntityExtractor().extract_sync(texts)
    extractor = EntityExtractor(process=True)
    try:
        in_process = await extractor.extract(texts)
        assert in_process == in_thread and any(in_process)
        pids = list(extractor._pool._processes)
        assert pids and os.getpid() not in pids  # ran in another process
        os.kill(pids[0], signal.SIGKILL)
        with pytest.raises(BrokenProcessPool):
            await extractor.extract(texts)
        assert await extractor.extract(texts) == in_thread  # a new worker took over
    finally:
        await extractor.close()
    assert extractor._pool is None


def test_ner_worker_process_exits_when_its_parent_is_killed(tmp_path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    script = tmp_path / "parent.py"
    script.write_text(
        "import asyncio, os, signal\n"
        "from automem.enrich.entities import EntityExtractor\n"
        "async def main():\n"
        "    e = EntityExtractor(process=True)\n"
        "    await e.warm()\n"
        "    open(os.environ['PID_FILE'], 'w').write(str(next(iter(e._pool._processes))))\n"
        "    busy = asyncio.create_task(e.extract(['Alice moved to Berlin with Bob.'] * 3000))\n"
        "    await asyncio.sleep(1.0)  # the worker is in the middle of a call\n"
        "    os.kill(os.getpid(), signal.SIGKILL)  # no shutdown of the pool\n"
        "if __name__ == '__main__':\n"
        "    asyncio.run(main())\n")
    pid_file = tmp_path / "worker.pid"
    # no pipes to the child: an orphaned worker would hold them open
    subprocess.run([sys.executable, str(script)], check=False, timeout=600, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env={**os.environ, "PID_FILE": str(pid_file)})
    worker = int(pid_file.read_text())
    deadline = time.monotonic() + 60  # a bound on the wait, not a timed assert
    try:
        while psutil.pid_exists(worker) and psutil.Process(worker).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, f"NER worker {worker} outlived its parent"
            time.sleep(0.2)
    finally:
        if psutil.pid_exists(worker):
            os.kill(worker, signal.SIGKILL)


def test_parse_reply_validates_repairs_or_rejects() -> None:
    ok = parse_reply('{"type": "Decision", "confidence": 0.8}', Classification)
    assert ok.type == "Decision" and ok.confidence == 0.8
    repaired = parse_reply('Here:\n```json\n{"type": "preference", "confidence": 1.7, "summary": "s"}\n```',
                           Classification)
    assert repaired.type == "Preference" and repaired.confidence == 1.0 and repaired.summary == "s"
    assert parse_reply('{"contradicts": "yes", "reason": "r"}', Contradiction).contradicts is True
    for bad in ("no json at all", '{type: Decision', '{"type": "Nonsense", "confidence": 0.5}', "[1, 2]"):
        with pytest.raises(MalformedReply):
            parse_reply(bad, Classification)


def test_extractive_summary_fits_and_keeps_order() -> None:
    text = ("Kubernetes migration starts in May. " + "Filler sentence about nothing much. " * 20
            + "The Kubernetes migration ends in June.")
    summary = extractive_summary(text, 120)
    assert len(summary) <= 120 and summary.startswith("Kubernetes migration starts in May.")
    assert extractive_summary("short", 100) == "short"


@pytest.mark.parametrize(("new", "old", "expect"), [
    ("The billing service uses Postgres 16.", "The billing service uses Postgres 14.", True),
    ("We do not deploy on Fridays.", "We deploy on Fridays.", True),
    ("Alice's favourite colour is green.", "Alice's favourite colour is blue.", True),
    ("The billing service uses Postgres 14.", "The billing service uses Postgres 14 in production too.", False),
    # a corrected value of the same subject is proposed ...
    ("The API timeout is 60 s.", "The API timeout is 30 s.", True),
    ("The API timeout is 60s.", "The API timeout is 30s.", True),
    ("Alice moved to Berlin in 2021.", "Alice moved to Berlin in 2019.", True),
    ("The monthly budget is 8000 euros.", "The monthly budget is 5000 euros.", True),
    ("Ticket 1234 is not closed.", "Ticket 1234 is closed.", True),
    # a changed version or a name mixing letters and digits is a corrected value ...
    ("We use Node v20 for the backend.", "We use Node v18 for the backend.", True),
    ("The backend runs Python 3.12.1.", "The backend runs Python 3.11.4.", True),
    ("The CI runner image is ubuntu-24.04.", "The CI runner image is ubuntu-22.04.", True),
    ("Docker image tag is v2.", "Docker image tag is latest.", True),
    ("Standup is at 10:00am every day.", "Standup is at 9:30am every day.", True),
    ("Release 1.4.3 runs in production.", "Release 1.4.2 runs in production.", True),
    # ... as is a changed statement about one identified thing ...
    ("build 4f3a9c: tests failed", "build 4f3a9c: tests passed", True),
    # ... but two things told apart by an identifier (hash, ticket key or number) are not
    ("deploy build 4f3a9c finished", "deploy build 7b21e0 finished", False),
    ("ticket 1234 closed", "ticket 5678 closed", False),
    ("Build #5512 failed on the staging cluster.", "Build #5511 failed on the staging cluster.", False),
    ("INC-1234 resolved by restarting the cache.", "INC-5678 resolved by restarting the cache.", False),
    ("Request 550e8400-e29b-41d4-a716-446655440000 timed out after 30 s.",
     "Request 6fa459ea-ee8a-3ca4-894e-db77e160355e timed out after 30 s.", False),
    ("deploy build 7b21e0 did not finish", "deploy build 4f3a9c finished", False),
    # Limits of token shapes (links.py contradiction_signal): a host name reads as a value
    ("Server db-02 runs Postgres 16 in Frankfurt.", "Server db-01 runs Postgres 14 in Frankfurt.", True),
])
def test_contradiction_rule(new: str, old: str, expect: bool) -> None:
    assert (contradiction_signal(new, old) is not None) is expect

@pytest.mark.parametrize(("new", "old", "expect"), [
    # a number of four or more digits after a noun is a value when it ends its clause, is
    # followed by a unit or a qualifier, follows a currency sign or is a year ...
    ("Staging server port 9090.", "Staging server port 8080.", True),
    ("Staging server port 9090 since Monday.", "Staging server port 8080.", True),
    ("Marketing budget 8000 USD per quarter.", "Marketing budget 5000 USD per quarter.", True),
    ("budget 8000 USD", "budget 5000 USD", True),
    ("Indexer heap size 8192 MB.", "Indexer heap size 4096 MB.", True),
    ("Context window 16384 tokens.", "Context window 8192 tokens.", True),
    ("Team plan price $1500 a year.", "Team plan price $1200 a year.", True),
    ("Target launch year 2027 for the mobile app.", "Target launch year 2026 for the mobile app.", True),
    # ... and a label when followed by what is said of the thing it names
    ("ticket 5678 closed", "ticket 1234 closed", False),
    ("Ticket 5678 is blocked by the outage.", "Ticket 1234 is blocked by the outage.", False),
    ("Build 20240612 failed on staging.", "Build 20240611 failed on staging.", False),
    ("Merged PR 4522 into main.", "Merged PR 4521 into main.", False),
    ("Order 88217 shipped to Berlin.", "Order 88213 shipped to Berlin.", False),
    # one slot with two values in the same frame
    ("We use gpt-4o for classification.", "We use gpt-4 for classification.", True),
    ("We use Memcached for session caching.", "We use Redis for session caching.", True),
    ("The frontend is built with Svelte.", "The frontend is built with React.", True),
    ("Deploys happen on Thursdays.", "Deploys happen on Tuesdays.", True),
    ("The CI pipeline runs on GitLab CI.", "The CI pipeline runs on GitHub Actions.", True),
    ("Preferred editor: Neovim.", "Preferred editor: VS Code.", True),
    ("Alice is vegetarian.", "Alice is vegan.", True),
    # not: a two-token frame without a copula, an addition, a changed subject, one value
    # spelled twice, two identified things
    ("Alice likes biscuits.", "Alice likes tea.", False),
    ("Alice also likes biscuits.", "Alice likes tea.", False),
    ("We use Redis and Memcached for caching.", "We use Redis for caching.", False),
    ("Bob's birthday is March 3.", "Alice's birthday is March 3.", False),
    ("The API timeout is 30 seconds.", "The API timeout is 30 s.", False),
    ("Standup is at 9:30 am.", "Standup is at 9:30am.", False),
    ("deploy build 7b21e0 finished", "deploy build 4f3a9c finished", False),
    ("INC-5678 resolved by restarting the cache.", "INC-1234 resolved by restarting the cache.", False),
    # two things named before the number, each with its value, both current (break-it round M)
    ("The production Redis runs on port 6380.", "The staging Redis runs on port 6379.", False),
    ("The Postgres replica listens on port 5433.", "The Postgres primary listens on port 5432.", False),
    ("The billing service listens on port 9090.", "The auth service listens on port 8443.", False),
    # a word added on one side before the number is not another thing
    ("The API timeout is now 60 seconds.", "The API timeout is 30 seconds.", True),
    ("The staging Redis now runs on port 6380.", "The staging Redis runs on port 6379.", True),
    # the word right before the number names the value, not another thing
    ("The billing service uses MySQL 8 as its database.", "The billing service uses Postgres 14 as its database.",
     True),
])
def test_contradiction_rule_values_and_slots(new: str, old: str, expect: bool) -> None:
    """The misses of the number-as-label rule (ports, sizes, prices, years after a noun) and of
    one changed value token (a model name) in the same frame, and the pairs kept apart."""
    assert (contradiction_signal(new, old) is not None) is expect


@pytest.mark.parametrize(("new", "names_new", "old", "names_old", "expect"), [
    # the changed value is the entity, on one side or both (kinds may differ)
    ("The user's favourite language is Rust", [], "The user's favourite language is Python", ["python"], True),
    ("The user's manager is Eli", ["eli"], "The user's manager is Dana", ["dana"], True),
    ("Rust is the user's favourite language", [], "Python is the user's favourite language", ["python"], True),
    ("The user's manager is Eli Jones", ["eli jones"], "The user's manager is Dana", ["dana"], True),
    # recognised on one side only, its text on both
    ("The nightly backup job runs at 03:30 UTC", [], "The nightly backup job runs at 02:00 UTC", ["utc"], True),
    # a changed subject, or entities changed all over: different things
    ("The Paris team standup is on Monday", ["paris"], "The Berlin team standup is on Monday", ["berlin"], False),
    ("Bob owns the search service", ["bob"], "Alice owns the billing service", ["alice"], False),
    ("The production Postgres runs on port 6380", ["postgres"], "The staging Redis runs on port 6379", ["redis"],
     False),
    ("We use MySQL for billing", ["mysql"], "We use Postgres for billing", ["postgres"], True),
    ("Our office in Munich closes at 18:00", ["munich"], "Our office in Berlin closes at 18:00", ["berlin"], False),
    ("Berlin team standup is at 10", ["berlin"], "Standup is at 10", [], False),
])
def test_unshared_entities_that_are_the_changed_value(new: str, names_new: list[str], old: str,
                                                      names_old: list[str], expect: bool) -> None:
    assert _changed_values_only(new, names_new, old, names_old) is expect



def test_relevance_formula() -> None:
    assert relevance(0.0, 0.0) == 1.0
    assert relevance(0.0, 30.0) == pytest.approx(0.5)  # half-life 30 days
    assert relevance(1.0, 10_000.0) == pytest.approx(0.5)  # the importance floor
    assert relevance(0.2, 60.0) == pytest.approx(0.1 + 0.9 * 0.25)


def test_scheduler_intervals_from_settings() -> None:
    every = intervals(Settings())
    assert every == {"decay": 86400.0, "creative": 604800.0, "cluster": 2592000.0, "sync": 3600.0}
    assert "forget" not in every  # off by default
    on = intervals(Settings(forget_enabled=True, consolidation_forget_interval_seconds=60, sync_check_interval_seconds=0))
    assert on["forget"] == 60.0 and "sync" not in on


def test_every_kind_enrichment_writes_is_a_category_the_api_accepts() -> None:
    """``category`` filters and merges accept the kinds of automem/graph/entities.py
    ``ENTITY_KINDS``; enrichment must write no other (a filter by it would be refused)."""
    from automem.enrich.entities import KINDS
    from automem.graph.entities import ENTITY_KINDS, entity_category

    assert {*KINDS.values(), "tool"} == ENTITY_KINDS
    assert entity_category(" Person ") == "person" and entity_category("") == ""
    with pytest.raises(InvalidArgument) as raised:
        entity_category("bogus")
    assert raised.value.field == "category" and "person" in str(raised.value)
