#!/usr/bin/env python3
"""Benchmark: the first Korean query after a write, k-occurrence computed lazily (before) or by the refresher (now).

Not a test. For each ``--sizes`` value (default 484, 2,000 and 5,000 Lessons, of
which ``--korean`` are Korean: 88 as on the bench wiki, then 700 and 2,000) it
builds one synthetic :class:`~gateway.retrieval.index.snapshot.IndexSnapshot`
(384 dims, random unit vectors, the Korean ones sharing a language offset as a
multilingual model gives them) and then, ``--repeats`` times, round-robin:

* **write**: ``apply()`` of one new Korean Lesson — what every MCP write does to the
  index (a new snapshot of two segments);
* **before**: the first Korean query on it with ``cross_language.py`` as it was at
  git commit :data:`LAZY_COMMIT` (loaded from git into this process): the semantic
  channels of an ``rrf_v10`` Hangul query, i.e. per ranked facet
  ``search_by_language`` with the shipped plan (centring 0.5, ``log`` hub
  correction, k 10, content-quality floor), which computes the centroid and ``N_k``
  on first use and keeps them in its module cache;
* **now**: the refresher's work on the same new snapshot (``prepare_snapshot`` of the
  shipped ranking: centroid and ``N_k`` of the four ranked facets into the
  snapshot's own cache, in the worker, before it serves), then the same first
  Korean query with the current code.

It prints per size the query latency (median and p95 in ms) of both, the worker's
preparation time, the peak memory one facet's ``N_k`` computation allocates
(tracemalloc; numpy's arrays included) for both implementations, and whether the
two ``N_k`` agree exactly. BLAS runs single-threaded (``OPENBLAS_NUM_THREADS=1``)
as in bench/bench_index.py. Timings on a shared machine are noisy: compare the
columns of one run.

Usage: ``nice env PYTHONPATH=. python bench/bench_hub_refresh.py [--sizes 484 2000 5000] [--korean 88 700 2000]
[--repeats 7]``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
import types
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, not an editable install elsewhere
from gateway.config.profiles import INDEX_FACETS, RANKED_FACETS  # noqa: E402
from gateway.retrieval.hybrid import cross_language  # noqa: E402
from gateway.retrieval.hybrid.channels import prepare_snapshot, quality_allowed  # noqa: E402
from gateway.retrieval.hybrid.fusion import RankingConfig  # noqa: E402
from gateway.retrieval.index import hubs  # noqa: E402
from gateway.retrieval.index.records import IndexEntry, IndexRecord  # noqa: E402
from gateway.retrieval.index.snapshot import IndexSnapshot  # noqa: E402

#: The last commit whose cross_language.py computed N_k on the first Hangul query (module-level cache).
LAZY_COMMIT = "3fdf484"
REPO = Path(__file__).resolve().parents[1]
DIMS = 384
KOREAN_TERMS = ("학습", "메모리", "부족", "장애")


def lazy_module() -> types.ModuleType:
    """``gateway/retrieval/hybrid/cross_language.py`` of :data:`LAZY_COMMIT`, loaded from git as a module."""
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{LAZY_COMMIT}:gateway/retrieval/hybrid/cross_language.py"],
                            check=True, capture_output=True, text=True).stdout
    module = types.ModuleType("lazy_cross_language")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, "lazy_cross_language", "exec"), module.__dict__)
    return module


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=0, keepdims=True)).astype(np.float32)


def build(n: int, korean: int, rng: np.random.Generator) -> tuple[IndexSnapshot, np.ndarray]:
    """A snapshot of ``n`` synthetic Lessons (the first ``korean`` Korean), and the Korean offset vector."""
    offset = rng.standard_normal(DIMS)
    offset /= np.linalg.norm(offset)
    columns = {}
    for facet in INDEX_FACETS:
        m = rng.standard_normal((DIMS, n)) * 0.05 + 1.0 / np.sqrt(DIMS)
        m[:, :korean] += 0.1 * offset[:, None]
        columns[facet] = unit(m)
    terms = [KOREAN_TERMS if i < korean else ("gpu", "memory", "outage") for i in range(n)]
    digests = rng.integers(0, 256, size=(n, 32), dtype=np.uint8)
    snap = IndexSnapshot("gen-bench", DIMS, [f"lesson-{i:06d}" for i in range(n)], columns,
                         revision=np.arange(n, dtype=np.int64), rhash=digests, mhash=digests.copy(),
                         created=np.zeros(n, np.int64), updated=np.zeros(n, np.int64),
                         scalars=np.zeros((n, 3), np.uint8), truncated=np.zeros(n, np.uint8), terms=terms)
    return snap, offset


def korean_vector(offset: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A ``(dims,)`` unit vector near the Korean Lessons (a new Lesson's facets, or a query)."""
    v = rng.standard_normal(DIMS) * 0.05 + 1.0 / np.sqrt(DIMS) + 0.1 * offset
    return (v / np.linalg.norm(v)).astype(np.float32)


def write(snap: IndexSnapshot, number: int, offset: np.ndarray, rng: np.random.Generator) -> IndexSnapshot:
    """The snapshot after one new Korean Lesson (what the refresher applies after an MCP write)."""
    digest = "sha256:" + f"{number:064x}"
    record = IndexRecord(f"written-{number:04d}", 1, digest, digest, 0, 0, "high", "lab", "Draft")
    entry = IndexEntry(record, {f: korean_vector(offset, rng) for f in INDEX_FACETS}, KOREAN_TERMS)
    return snap.apply([entry])


def first_query(module: types.ModuleType, snap: IndexSnapshot, query: np.ndarray, ranking: RankingConfig) -> None:
    """The standardised semantic channels of one Hangul query under ``ranking`` (search_pipeline's loop)."""
    plan = module.LanguagePlan(standardized=True, korean_query=True, centering=ranking.hub_centering,
                               hub_k=ranking.hub_k, hub_demotion=ranking.hub_demotion, hub_form=ranking.hub_form)
    eligible = quality_allowed(snap, None, ranking.semantic_quality_floor)
    for facet in RANKED_FACETS:
        module.search_by_language(snap, facet, query, ranking.channel_caps[f"semantic:{facet}"], eligible=eligible,
                                  plan=plan)


def peak_mb(fn) -> float:
    """Peak MB traced while ``fn()`` runs."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def run(n: int, korean: int, repeats: int, lazy: types.ModuleType, rng: np.random.Generator) -> dict:
    ranking = RankingConfig()
    prepare = prepare_snapshot(ranking)
    snap, offset = build(n, korean, rng)
    before, now, worker = [], [], []
    for number in range(repeats):
        query = korean_vector(offset, rng)
        lazy_snap = write(snap, 2 * number, offset, rng)
        t0 = time.perf_counter()
        first_query(lazy, lazy_snap, query, ranking)
        before.append((time.perf_counter() - t0) * 1000)
        new_snap = write(snap, 2 * number + 1, offset, rng)
        t0 = time.perf_counter()
        prepare(new_snap)                                   # the refresher's worker, before the swap
        worker.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        first_query(cross_language, new_snap, query, ranking)
        now.append((time.perf_counter() - t0) * 1000)
    lazy._HUB_CACHE.clear()
    probe = write(snap, 10_000, offset, rng)
    eligible = quality_allowed(probe, None, ranking.semantic_quality_floor)
    args = (probe, "whole", ranking.hub_k, eligible, True, ranking.hub_centering)
    old_nk = lazy.k_occurrence(*args)
    new_nk = hubs.compute_neighbourhood(*args, with_density=False)[0]
    lazy._HUB_CACHE.clear()
    old_mb = peak_mb(lambda: lazy.k_occurrence(*args))
    lazy._HUB_CACHE.clear()
    new_mb = peak_mb(lambda: hubs.compute_neighbourhood(*args, with_density=False))
    return {"n": n, "korean": korean, "before": before, "now": now, "worker": worker, "old_mb": old_mb,
            "new_mb": new_mb, "same": bool(np.array_equal(old_nk, new_nk))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[484, 2000, 5000])
    parser.add_argument("--korean", type=int, nargs="+", default=[88, 700, 2000])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if len(args.korean) != len(args.sizes):
        parser.error("--korean needs one value per --sizes value")
    lazy = lazy_module()
    rng = np.random.default_rng(args.seed)
    print(f"first Korean query after a write ({args.repeats} writes per size, round-robin; ms; {DIMS} dims, "
          f"BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}; before = cross_language.py of {LAZY_COMMIT})")
    print(f"{'Lessons':>8} {'Korean':>7} {'before med':>11} {'before p95':>11} {'now med':>9} {'now p95':>9} "
          f"{'worker med':>11} {'N_k MB before':>14} {'N_k MB now':>11} {'same N_k':>9}")
    for n, korean in zip(args.sizes, args.korean):
        r = run(n, korean, args.repeats, lazy, rng)
        print(f"{r['n']:>8} {r['korean']:>7} {statistics.median(r['before']):>11.1f} {p95(r['before']):>11.1f} "
              f"{statistics.median(r['now']):>9.1f} {p95(r['now']):>9.1f} {statistics.median(r['worker']):>11.1f} "
              f"{r['old_mb']:>14.1f} {r['new_mb']:>11.1f} {'yes' if r['same'] else 'NO':>9}", flush=True)


if __name__ == "__main__":
    main()
