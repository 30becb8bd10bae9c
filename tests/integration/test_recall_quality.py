"""Issue 18 ranking signals through the REST API on the real components: the author of a
transcript-style memory, the time bucket of the top hits, time-stating memories for "when"
questions (automem/recall/understanding.py)."""

from __future__ import annotations

from tests.integration.test_recall import _embedded, _store


async def test_query_naming_a_speaker_ranks_that_speakers_turn_first(service) -> None:
    async with service.http() as http:
        bob = await _store(http, "Bob: I have been painting sunsets with watercolors lately")
        alice = await _store(http, "Alice: I have been painting portraits lately")
        await _embedded(service, 2)
        r = await http.get("/recall", params={"query": "What has Alice been painting lately?", "limit": 2})
        results = r.json()["results"]
        assert [h["id"] for h in results] == [alice, bob]
        assert results[0]["score_components"]["author"] > 0
        assert "author" not in results[1]["score_components"]


async def test_turns_of_the_top_hits_day_gain_the_session_component(service) -> None:
    async with service.http() as http:
        day1 = "2024-03-04T10:00:00Z"
        hit = await _store(http, "We chose Postgres for the billing service", timestamp=day1)
        same = await _store(http, "The schema review is on Friday", timestamp=day1)
        other = await _store(http, "The schema review of the search service moved", timestamp="2024-06-01T10:00:00Z")
        await _embedded(service, 3)
        r = await http.get("/recall", params={"query": "Postgres billing schema review", "limit": 3})
        comps = {h["id"]: h["score_components"] for h in r.json()["results"]}
        assert comps[hit]["session"] > 0 and comps[same]["session"] > 0
        assert comps[same]["session"] > comps[other].get("session", 0.0)


async def test_when_question_favours_the_memory_that_states_a_time(service) -> None:
    async with service.http() as http:
        dated = await _store(http, "We migrated the search cluster last weekend")
        await _store(http, "We migrated the search cluster to new hardware")
        await _embedded(service, 2)
        r = await http.get("/recall", params={"query": "When did we migrate the search cluster?", "limit": 2})
        results = r.json()["results"]
        assert results[0]["id"] == dated and results[0]["score_components"]["temporal"] > 0
        r = await http.get("/recall", params={"query": "Where did we migrate the search cluster?", "limit": 2})
        assert all("temporal" not in h["score_components"] for h in r.json()["results"])


async def test_stop_word_only_and_one_letter_queries_fall_back_to_the_vector_arm(service) -> None:
    async with service.http() as http:
        mid = await _store(http, "The deploy checklist lives in the wiki")
        await _embedded(service, 1)
        for q in ("the of and", "a", "when"):
            r = await http.get("/recall", params={"query": q, "limit": 5})
            assert r.status_code == 200, r.text
            assert [h["id"] for h in r.json()["results"]] == [mid]


async def test_author_requery_finds_the_named_speakers_turn_that_does_not_say_the_name(own_service) -> None:
    """The turns of a speaker all carry the name, so the name matches all of them; without it the
    query's other words find the right one. With the re-query off, the arms score the full query."""
    async with own_service.http() as http:
        target = await _store(http, "Melanie: pottery and swimming keep me calm on busy weeks")
        for i in range(6):
            await _store(http, f"Melanie: Melanie here again, Melanie says hi number {i}")
        await _store(http, "Caroline: swimming is fun")
        await _embedded(own_service, 8)
        r = await http.get("/recall", params={"query": "What keeps Melanie calm, pottery?", "limit": 3})
        results = r.json()["results"]
        assert results[0]["id"] == target
        assert results[0]["score_components"]["author"] > 0
        on = {h["id"]: h["score_components"] for h in results}
        own_service.settings.search_author_requery = "off"  # the settings object recall reads
        r = await http.get("/recall", params={"query": "What keeps Melanie calm, pottery?", "limit": 3})
        off = {h["id"]: h["score_components"] for h in r.json()["results"]}
        # the arms scored the query with the name (off) and without it (on): other scores
        assert on != off


async def test_lexical_feedback_reaches_a_memory_through_a_top_hits_words(own_service) -> None:
    """The target shares no word with the question, only a name with the best hit: with lexical
    feedback on, the hit's words join the lexical search and the target gains a keyword score;
    with it off the target has none. The best hits stay on top either way."""
    async with own_service.http() as http:
        # the target first: a memory's lexical vector holds its PRECEDED_BY neighbour's words too
        target = await _store(http, "Comet chased the ball along the river all morning")
        for text in ("The quarterly report is due on Monday", "We repainted the kitchen walls",
                     "The train was late again today"):
            await _store(http, text)
        hit = await _store(http, "Dana: I adopted a dog named Comet last spring")
        await _embedded(own_service, 5)
        own_service.settings.search_feedback_weight = 0.0  # the settings object recall reads
        params = {"query": "Which dog did Dana adopt?", "limit": 5}
        r = await http.get("/recall", params=params)
        off = {h["id"]: h["score_components"] for h in r.json()["results"]}
        assert r.json()["results"][0]["id"] == hit
        assert "keyword" not in off[target]
        own_service.settings.search_feedback_weight = 0.1
        r = await http.get("/recall", params=params)
        results = r.json()["results"]
        on = {h["id"]: h["score_components"] for h in results}
        assert results[0]["id"] == hit
        assert on[target]["keyword"] > 0
