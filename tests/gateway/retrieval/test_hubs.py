"""k-occurrence off the query path (docs/hybrid-search.md#k-occurrence): same N_k, computed where snapshots are made.

Contract: docs/hybrid-search.md#k-occurrence, docs/hybrid-search.md#hubs.

* the chunked computation (:func:`gateway.retrieval.index.hubs.compute_neighbourhood`) gives exactly the
  values of the first implementation (kept below as :func:`first_implementation`, verbatim but for its
  module-level cache) on a random index with ties, zero vectors, ineligible rows and several chunks;
* ``prepare_snapshot`` fills a snapshot's own cache so the ranking of a Korean query computes nothing;
  a variant it did not prepare is computed once on first use, among a bounded few;
* nothing outside a snapshot keeps it alive.
"""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from gateway.config.profiles import INDEX_FACETS, RANKED_FACETS
from gateway.retrieval.hybrid.channels import decide_language, prepare_snapshot, semantic_votes
from gateway.retrieval.hybrid.cross_language import LanguagePlan, hubness, search_by_language
from gateway.retrieval.hybrid.fusion import RankingConfig
from gateway.retrieval.index import hubs
from gateway.retrieval.index.derived import MAX_LAZY, DerivedCache
from gateway.retrieval.index.records import IndexEntry, IndexRecord
from gateway.retrieval.index.snapshot import IndexSnapshot

DIMS = 24


def first_implementation(index, facet, k, eligible, korean_query, centering, with_density):
    """``cross_language._neighbourhood`` as it was before N_k moved into the snapshot (commit 3fdf484), without
    its module cache: the reference every new value must equal bit for bit."""
    def partition_z(scores, korean, counted):
        z = np.zeros(scores.shape, dtype=np.float64)
        for rows in (korean, ~korean):
            stats = rows & counted
            if stats.any():
                part = scores[..., stats]
                std = np.maximum(part.std(axis=-1, keepdims=True), 1e-6)
                z[..., rows] = (scores[..., rows] - part.mean(axis=-1, keepdims=True)) / std
        return z

    n = len(index)
    korean = np.asarray(index.hangul_rows(), dtype=bool)
    counted = np.ones(n, dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    own = (korean if korean_query else ~korean) & counted
    counts, density = np.zeros(n, dtype=np.float64), np.zeros(n, dtype=np.float64)
    if own.any() and k > 0:
        columns = np.asarray(index.columns(facet), dtype=np.float64)
        queries = columns[:, own]
        if centering:
            queries = queries - centering * columns[:, own].mean(axis=1, keepdims=True)
        z = partition_z(queries.T @ columns, korean, counted)  # (m, n)
        z[:, ~counted] = -np.inf
        z[np.arange(queries.shape[1]), np.flatnonzero(own)] = -np.inf
        depth = min(k, int(counted.sum()) - 1)
        if depth > 0:
            best = np.argpartition(-z, depth - 1, axis=1)[:, :depth]
            np.add.at(counts, best.ravel(), 1.0)
        reach = min(k, queries.shape[1] - 1)
        if with_density and reach > 0:
            top = -np.partition(-z, reach - 1, axis=0)[:reach]
            density = np.where(np.isfinite(top), top, 0.0).mean(axis=0)
    counts[~counted], density[~counted] = 0.0, 0.0
    return counts, density


def random_index(n: int, korean: int, seed: int, quality: np.ndarray | None = None) -> IndexSnapshot:
    """``n`` Lessons, the first ``korean`` of them Korean (a shared offset), with exact duplicates (ties) and
    all-zero vectors (empty facets, quarantined Lessons) mixed in; ``quality`` per row (default 1)."""
    rng = np.random.default_rng(seed)
    offset = rng.standard_normal(DIMS)
    entries = []
    for i in range(n):
        vectors = {}
        for facet in INDEX_FACETS:
            v = rng.standard_normal(DIMS) + (1.5 * offset if i < korean else 0.0)
            if i % 11 == 5:
                v = np.zeros(DIMS)                      # an empty facet scores 0 everywhere
            vectors[facet] = (v / (np.linalg.norm(v) or 1.0)).astype(np.float32)
        if i % 13 == 7 and entries:                     # an exact duplicate of the previous Lesson
            vectors = dict(entries[-1].vectors)
        record = IndexRecord(f"l{i:04d}", 1, "sha256:" + "00" * 32, "sha256:" + "11" * 32, 0, 0, "high", "lab",
                             "Draft")
        terms = ("한국어", "학습") if i < korean else ("gpu", "memory")
        entries.append(IndexEntry(record, vectors, terms, 1.0 if quality is None else float(quality[i])))
    return IndexSnapshot.from_entries("g", DIMS, entries)


@pytest.mark.parametrize("chunk_rows", [1, 2, 7, 64, 10_000])
def test_chunked_n_k_and_density_equal_the_first_implementation_bit_for_bit(chunk_rows):
    rng = np.random.default_rng(41)
    snap = random_index(300, 120, seed=7)
    eligible = rng.random(len(snap)) > 0.15
    for facet in ("whole", "mechanism"):
        for mask in (None, eligible):
            for korean_query, centering, k in ((True, 0.5, 10), (True, 0.0, 3), (False, 0.5, 10), (True, 0.5, 400)):
                new = hubs.compute_neighbourhood(snap, facet, k, mask, korean_query, centering, with_density=True,
                                                 chunk_rows=chunk_rows)
                old = first_implementation(snap, facet, k, mask, korean_query, centering, True)
                assert np.array_equal(new[0], old[0]), (facet, mask is None, korean_query, centering, k)
                assert np.array_equal(new[1], old[1]), (facet, mask is None, korean_query, centering, k)
                alone = hubs.compute_neighbourhood(snap, facet, k, mask, korean_query, centering, with_density=False,
                                                   chunk_rows=chunk_rows)
                assert np.array_equal(alone[0], old[0]) and not alone[1].any()


def test_row_blocks_of_a_large_product_give_the_values_of_the_whole_product():
    """Above ``PRODUCT_BYTES`` the cosines come from row blocks (here forced at 2,500 Lessons, 384 dims, the sizes
    where the budget applies): OpenBLAS rounds them as the whole product on this machine, so N_k stays identical."""
    rng = np.random.default_rng(17)
    n, korean, dims = 2500, 1000, 384
    offset = rng.standard_normal((dims, 1))
    columns = {}
    for facet in INDEX_FACETS:
        m = rng.standard_normal((dims, n)) + np.where(np.arange(n) < korean, 1.5, 0.0) * offset
        m[:, 7::97] = 0.0                                 # empty facets: ties at cosine 0
        m[:, 11::89] = m[:, 10::89][:, :m[:, 11::89].shape[1]]   # exact duplicates: ties
        norms = np.linalg.norm(m, axis=0)
        columns[facet] = (m / np.where(norms > 0, norms, 1.0)).astype(np.float32)
    terms = [("한국어", "학습") if i < korean else ("gpu", "memory") for i in range(n)]
    zeros = np.zeros(n, np.int64)
    snap = IndexSnapshot("g", dims, [f"l{i:05d}" for i in range(n)], columns, zeros, np.zeros((n, 32), np.uint8),
                         np.zeros((n, 32), np.uint8), zeros, zeros, np.zeros((n, 3), np.uint8), np.zeros(n, np.uint8),
                         terms=terms)
    eligible = rng.random(n) > 0.1
    old = first_implementation(snap, "whole", 10, eligible, True, 0.5, False)[0]
    blocks = hubs.compute_neighbourhood(snap, "whole", 10, eligible, True, 0.5, with_density=False,
                                        product_bytes=4 * 2 ** 20)
    assert np.array_equal(blocks[0], old)


def test_segmented_and_compacted_snapshots_give_the_values_of_a_fresh_build():
    base = random_index(200, 80, seed=3)
    grown = base.apply([IndexEntry(IndexRecord("l9999", 1, "sha256:" + "22" * 32, "sha256:" + "33" * 32, 0, 0,
                                               "high", "lab", "Draft"),
                                   {f: np.eye(DIMS, dtype=np.float32)[3] for f in INDEX_FACETS}, ("한국어",))],
                       deletes=["l0002", "l0100"])
    assert grown.segment_count == 2
    ranking = RankingConfig()
    prepare_snapshot(ranking)(grown)
    compact = grown.compacted()
    assert set(compact._derived.keys()) == set(grown._derived.keys())   # taken over, not recomputed
    for facet in RANKED_FACETS:
        old = first_implementation(grown, facet, ranking.hub_k, None, True, ranking.hub_centering, False)[0]
        assert np.array_equal(hubs.neighbourhood(compact, facet, ranking.hub_k, None, True, ranking.hub_centering,
                                                 with_density=False)[0], old)


def counting(monkeypatch) -> list[tuple]:
    """Every call of the uncached N_k computation from now on, as ``(facet, k, korean_query, centering)``."""
    seen: list[tuple] = []
    real = hubs.compute_neighbourhood

    def counted(index, facet, k, eligible, korean_query, centering, **kwargs):
        seen.append((facet, k, korean_query, centering))
        return real(index, facet, k, eligible, korean_query, centering, **kwargs)

    monkeypatch.setattr(hubs, "compute_neighbourhood", counted)
    return seen


def korean_search(snap: IndexSnapshot, ranking: RankingConfig, query: np.ndarray) -> None:
    """What a Hangul query's semantic channels do with a snapshot (decide_language, then one channel per facet)."""
    vectors = {f: query for f in INDEX_FACETS}
    cfg, plan = decide_language(snap, "메모리 부족으로 학습이 죽음", vectors, [], None, ranking)
    assert plan.hub_demotion == ranking.hub_demotion and plan.korean_query
    for facet in RANKED_FACETS:
        semantic_votes(snap, facet, query, 30, None, 0.0, plan, cfg.semantic_quality_floor)


def test_a_prepared_snapshot_serves_korean_queries_without_computing_n_k_or_reading_columns(monkeypatch):
    quality = np.where(np.arange(250) % 17 == 3, 0.1, 1.0)   # some rows below the semantic quality floor
    snap = random_index(250, 100, seed=11, quality=quality)
    ranking = RankingConfig()
    seen = counting(monkeypatch)
    prepare_snapshot(ranking)(snap)
    assert sorted(seen) == sorted((f, ranking.hub_k, True, ranking.hub_centering) for f in RANKED_FACETS)
    seen.clear()
    reads: list[str] = []
    columns = IndexSnapshot.columns
    monkeypatch.setattr(IndexSnapshot, "columns", lambda self, facet: reads.append(facet) or columns(self, facet))
    query = random_index(1, 1, seed=99).vector("whole", "l0000")
    korean_search(snap, ranking, query)
    assert seen == [] and reads == []                  # N_k and the centroids come from the snapshot's cache
    assert len(snap._derived) == 2 * len(RANKED_FACETS)


def test_an_unprepared_variant_is_computed_once_and_the_first_use_entries_stay_bounded(monkeypatch):
    snap = random_index(120, 50, seed=5)
    ranking = RankingConfig()
    prepare_snapshot(ranking)(snap)
    seen = counting(monkeypatch)
    plan = LanguagePlan(True, True, centering=ranking.hub_centering, hub_k=5, hub_demotion=1.0, hub_form="nk")
    first = hubness(snap, "whole", None, plan)
    assert np.array_equal(hubness(snap, "whole", None, plan), first) and len(seen) == 1
    for k in range(1, MAX_LAZY + 4):                   # more variants than the cache keeps
        hubness(snap, "situation", None, LanguagePlan(True, True, hub_k=k, hub_demotion=1.0))
    assert len(snap._derived) == 2 * len(RANKED_FACETS) + MAX_LAZY   # the prepared entries stay pinned
    seen.clear()
    korean_search(snap, ranking, snap.vector("whole", "l0003"))
    assert seen == []


def test_the_derived_cache_pins_keeps_a_bounded_few_and_computes_a_missing_key_once():
    cache = DerivedCache(limit=2)
    built: list[str] = []

    def build(name):
        return lambda: built.append(name) or name

    assert cache.get("a", build("a"), pin=True) == "a"
    for key in ("b", "c", "d"):
        cache.get(key, build(key))
    assert cache.get("b", build("b2")) == "b2"          # dropped (oldest first), computed again
    assert cache.get("a", build("a2")) == "a" and cache.keys()[0] == "a"
    assert built == ["a", "b", "c", "d", "b2"] and len(cache) == 3


def test_no_module_keeps_a_snapshot_alive_after_its_hub_scores_were_read():
    snap = random_index(80, 30, seed=2)
    plan = LanguagePlan(True, True, centering=0.5, hub_k=5, hub_demotion=2.0, hub_form="log")
    search_by_language(snap, "whole", snap.vector("whole", "l0001"), 5, plan=plan)
    assert hubness(snap, "whole", None, plan).any()
    gone = weakref.ref(snap)
    del snap
    gc.collect()
    assert gone() is None
