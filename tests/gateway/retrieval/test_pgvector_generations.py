"""Generation lifecycle on the shared store: a serving gateway's results change only at the alias flip.

A :class:`RetrievalService` on the pgvector backend (its refresher follows the
store; this test holds both generations' leases, playing the builder, so the
service only serves) answers from generation 1; a ready generation 2 with other
vectors changes nothing until ``s3rm index cutover``; ``rollback`` flips back;
``retire`` refuses the rollback target and drops a spare generation.
"""
from __future__ import annotations

import secrets
import time

import numpy as np
import pytest

from gateway.retrieval import pgvector as backend
from gateway.retrieval.hybrid.service import RetrievalService
from gateway.retrieval.index.snapshot import IndexSnapshot
from gateway.retrieval.pgvector.store import PgStore
from support.memory import InMemoryRepository
from support.embedding import dead_url, settings_for
from support.pgvector import random_entries
from s3rm.cli import main

DIMS = 384


def _top(snap, query, k=5) -> list[str]:
    return [h.lesson_id for h in snap.search("whole", query, k)]


def _until(predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.fixture
def lifecycle(pg_cluster):
    dsn = pg_cluster.create_database(f"s3rm_gen_{secrets.token_hex(4)}")
    store = PgStore(dsn)
    settings = settings_for(dead_url(), index_backend="pgvector", pg_dsn=dsn, pg_lease_seconds=60.0,
                            pg_poll_seconds=0.1, follow_seconds=0.0)
    service = RetrievalService(settings, InMemoryRepository(),
                               refresher_factory=backend.refresher_factory(settings, store))
    yield dsn, store, service
    service.stop()
    store.close()


def test_results_change_only_at_cutover_and_rollback(lifecycle, capsys):
    dsn, store, service = lifecycle
    g1 = service.own_generation
    g2, g3 = f"{g1}.v2", f"{g1}.spare"
    one, two = random_entries(40, seed=1, dims=DIMS), random_entries(40, seed=2, dims=DIMS)
    for gen, entries in ((g1, one), (g2, two), (g3, two)):
        store.register(gen, DIMS)
        token = store.acquire(gen, "builder", 600.0)  # the builder holds each lease: the service only serves
        store.write(gen, "builder", token, entries)
    store.mark_ready(g1)
    assert store.cutover(g1) == (None, g1)
    store.mark_ready(g3)

    service.start()
    _until(lambda: service.refresher.current() is not None and len(service.refresher.current()) == 40)
    query = two[3].vectors["whole"]
    want1 = _top(IndexSnapshot.from_entries(g1, DIMS, one), query)
    want2 = _top(IndexSnapshot.from_entries(g2, DIMS, two), query)
    assert want1 != want2 and want2[0] == "L-0003"
    assert service.generation == g1 and _top(service.refresher.current(), query)[0] == want1[0]

    store.mark_ready(g2)  # ready, not active: nothing changes
    for _ in range(5):
        time.sleep(0.15)
        assert service.generation == g1
        assert _top(service.refresher.current(), query)[0] == want1[0]
    assert not service.refresher.is_leader

    assert main(["index", "--dsn", dsn, "cutover", g2]) == 0
    _until(lambda: service.generation == g2)
    snap = service.refresher.current()
    assert _top(snap, query)[0] == "L-0003" and len(set(_top(snap, query)) & set(want2)) >= 4

    assert main(["index", "--dsn", dsn, "rollback"]) == 0
    _until(lambda: service.generation == g1)
    assert _top(service.refresher.current(), query)[0] == want1[0]
    assert store.alias()[:2] == (g1, g2)

    capsys.readouterr()
    assert main(["index", "--dsn", dsn, "retire", g2]) == 1  # the rollback target
    assert "rollback target" in capsys.readouterr().err
    assert main(["index", "--dsn", dsn, "retire", g3]) == 0
    assert main(["index", "--dsn", dsn, "cutover", g3]) == 1
    assert main(["index", "--dsn", dsn, "list"]) == 0
    listing = capsys.readouterr().out
    assert f"alias active={g1} previous={g2}" in listing
    assert f"{g3}\tretired" in listing and f"{g2}\tprevious" in listing and "lessons=40" in listing
    assert np.isfinite(store.table_bytes(g1))
    keys = store.cursor_keys()
    assert main(["index", "--dsn", dsn, "rotate-cursor-key"]) == 0
    assert set(store.cursor_keys()) == set(keys) | {max(keys) + 1}
