"""A hybrid search reads its page's incoming corrections beside the ranking (docs/tools.md#standing).

:class:`gateway.tools.read_items.IncomingAhead` over the in-memory repository, alone and through
the dispatcher with a real :class:`RetrievalService` (deterministic in-process vectors): the page's
``standing`` is the one a read after the ranking gives, and the page sends no read of its own.
"""
from __future__ import annotations

import threading

import pytest

from gateway.domain.codec import serialize_page
from gateway.retrieval.hybrid.service import RetrievalService
from gateway.tools import read_items
from gateway.tools.read_items import CORRECTIONS, IncomingAhead
from support.schema_dirs import SCHEMA
from support.memory import InMemoryRepository
from support.embedding import PickyProvider, settings_for
from support.lessons import lesson, relation
from support.read_harness import Harness

WAIT = 60


class Counting(InMemoryRepository):
    """The in-memory repository, remembering the targets of every incoming-relations read."""

    def __init__(self):
        super().__init__()
        self.reads: list[list[str]] = []
        self.threads: list[str] = []
        self.fail = False
        self.gate: threading.Event | None = None

    def find_incoming_edges(self, lesson_ids, relations, *, limit=500):
        self.reads.append(list(lesson_ids))
        self.threads.append(threading.current_thread().name)
        if self.gate is not None:
            assert self.gate.wait(WAIT)
        if self.fail:
            raise RuntimeError("wiki down")
        return super().find_incoming_edges(lesson_ids, relations, limit=limit)


@pytest.fixture
def repo() -> Counting:
    """A superseded by B, C contradicted by D, E and F clean; all about the same words."""
    r = Counting()
    pages = {"a": [], "b": [relation("b", "supersedes", "a")], "c": [],
             "d": [relation("d", "contradicts", "c")], "e": [], "f": []}
    for lesson_id, relations in pages.items():
        r.put_page(lesson_id, serialize_page(lesson(lesson_id, title=f"cache warmup note {lesson_id}",
                                                    relations=relations), SCHEMA))
    return r


EXPECTED = {"a": {"superseded_by": ["b"]}, "c": {"contradicted_by": ["d"]}}


def test_a_covering_read_is_handed_over_and_nothing_else_is_read(repo):
    ahead = IncomingAhead(repo)
    ahead(["a", "b", "c", "d", "e", "f"])()
    incoming = ahead.covering(["c", "a"])
    assert repo.reads == [list("abcdef")]
    assert {i: [(e.source, e.relation) for e in edges] for i, edges in incoming.items() if edges} == {
        "a": [("b", "supersedes")], "c": [("d", "contradicts")]}
    assert ahead.covering([]) is None  # an empty page reads nothing anyway


def test_no_read_is_handed_over_when_it_cannot_stand_for_the_page(repo):
    never = IncomingAhead(repo)
    assert never.covering(["a"]) is None
    assert never(["a"]) is None  # claimed after the page asked: nothing to send
    assert repo.reads == []

    partly = IncomingAhead(repo)
    partly(["a", "b"])()
    assert partly.covering(["a", "c"]) is None  # c was not read ahead

    repo.fail = True
    failed = IncomingAhead(repo)
    failed(["a"])()
    assert failed.covering(["a"]) is None

    repo.fail = False
    cut = IncomingAhead(repo)
    repo.find_incoming_edges = lambda ids, relations, limit=500: ({i: [] for i in ids}, True)
    cut(["a"])()
    assert cut.covering(["a"]) is None  # more linking pages than its limit


def test_a_claimed_read_that_never_runs_does_not_hold_the_page(repo, monkeypatch):
    """A read claimed but never run (the service's pool stopped before it started) lets the page read itself."""
    monkeypatch.setattr(read_items, "AHEAD_WAIT_SECONDS", 0.01)
    ahead = IncomingAhead(repo)
    assert ahead(["a", "c"]) is not None  # claimed; the job is dropped, as a cancelled pool future would be
    assert ahead.covering(["a"]) is None
    assert repo.reads == []


def test_the_page_waits_for_a_read_still_running(repo):
    repo.gate = threading.Event()
    ahead = IncomingAhead(repo)
    worker = threading.Thread(target=ahead(["a", "c"]))
    worker.start()
    got: list = []
    reader = threading.Thread(target=lambda: got.append(ahead.covering(["a"])))
    for _ in range(int(WAIT / 0.01)):  # the read has started and is held at the gate
        if repo.reads:
            break
        worker.join(0.01)
    reader.start()
    for _ in range(int(WAIT / 0.01)):  # the page has asked for it
        if ahead._closed:
            break
        reader.join(0.01)
    repo.gate.set()
    reader.join(WAIT)
    worker.join(WAIT)
    assert [(e.source, e.relation) for e in got[0]["a"]] == [("b", "supersedes")]


@pytest.fixture
def hybrid(repo):
    service = RetrievalService(settings_for("http://127.0.0.1:9/v1/embeddings", follow_seconds=0.0), repo,
                               provider=PickyProvider())
    service.start()
    assert service.refresher.wait_idle(WAIT)
    h = Harness(repo)
    h.dispatcher.retrieval = service
    yield h
    service.stop()


def test_hybrid_page_standing_comes_from_the_read_sent_beside_the_ranking(hybrid, repo):
    legacy = hybrid.call("search_lessons", query="cache warmup", limit=10, retrieval_mode="legacy")
    repo.reads.clear()
    repo.threads.clear()
    out = hybrid.call("search_lessons", query="cache warmup", limit=10, retrieval_mode="hybrid_v1")
    assert out["effective_mode"] == "hybrid_v1"
    assert {r["id"]: r.get("standing") for r in out["results"]} == {r["id"]: r.get("standing")
                                                                  for r in legacy["results"]}
    assert {r["id"]: r.get("standing") for r in out["results"]} == {i: EXPECTED.get(i) for i in "abcdef"}
    assert len(repo.reads) == 1 and {r["id"] for r in out["results"]} <= set(repo.reads[0])
    assert repo.threads[0].startswith("s3rm-full-text")  # sent beside the full-text search, not after it


def test_exclude_superseded_reads_once_without_a_read_beside(hybrid, repo):
    out = hybrid.call("search_lessons", query="cache warmup", limit=10, retrieval_mode="hybrid_v1",
                      exclude_superseded=True)
    assert "a" not in {r["id"] for r in out["results"]}
    assert len(repo.reads) == 1
