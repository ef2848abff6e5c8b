"""Benchmark: the pgvector backend (exact and HNSW) beside the in-process exact index (docs/hybrid-search.md#benchmarks).

One synthetic corpus of ``--lessons`` Lessons × the four index facets × ``--dims``
dims (clustered unit vectors: 200 Gaussian topics, so HNSW sees embedding-like
structure rather than uniform noise) is loaded into

* the in-process :class:`~gateway.retrieval.index.IndexSnapshot` (float32), and
* one generation of the shared store in a throw-away PostgreSQL 18 + pgvector
  cluster (:mod:`sync.devstack.postgres`; ``halfvec`` columns, written through
  :meth:`PgStore.write` in fenced batches of 5,000 — the leader's own path),
  then an HNSW index (m=16, ef_construction=64) on the ``whole`` facet only
  (building all four would take four times as long on this machine).

For ``--queries`` queries (perturbed corpus rows, as real queries sit near
Lessons) on the ``whole`` facet, top 20, it prints per engine: query p50 / p95
(ms), recall@20 against the exact top 20 of the same engine family (HNSW
against pgvector exact; pgvector exact against the float32 in-process index),
build time and memory (in-process: snapshot bytes) or disk (PostgreSQL: table
+ indexes). All timings come from one process run; queries run round-robin.

Usage: ``nice python bench/bench_pgvector.py [--lessons 100000] [--dims 384] [--queries 200]``.
A script that prints a table, not a test.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gateway.config.profiles import INDEX_FACETS  # noqa: E402
from gateway.retrieval.index import IndexEntry, IndexRecord, IndexSnapshot  # noqa: E402
from gateway.retrieval.pgvector.store import PgStore  # noqa: E402
from sync.devstack.postgres import PgCluster  # noqa: E402
from sync.devstack.wikiserver import free_port  # noqa: E402

TOP_K = 20
BATCH = 5000


def corpus(n: int, dims: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per facet an ``(n, dims)`` float32 matrix of unit rows around 200 random topic centres."""
    out = {}
    for facet in INDEX_FACETS:
        centres = rng.standard_normal((200, dims), dtype=np.float32)
        rows = centres[rng.integers(0, 200, n)] + 0.9 * rng.standard_normal((n, dims), dtype=np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        out[facet] = rows
    return out


def entries(vectors: dict[str, np.ndarray], lo: int, hi: int) -> list[IndexEntry]:
    out = []
    for i in range(lo, hi):
        record = IndexRecord(lesson_id=f"lesson-{i:07d}", revision_id=i + 1, retrieval_hash=f"sha256:{i:064x}",
                             metadata_hash=f"sha256:{i:064x}", created_at=1_700_000_000, updated_at=1_700_000_000,
                             confidence="medium", record_origin="lab", review_state="Draft")
        out.append(IndexEntry(record, {f: vectors[f][i] for f in INDEX_FACETS}, ()))
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ef-search", type=int, default=100)
    args = parser.parse_args()
    n, dims = args.lessons, args.dims
    rng = np.random.default_rng(42)
    vectors = corpus(n, dims, rng)
    picks = rng.integers(0, n, args.queries)
    queries = vectors["whole"][picks] + 0.5 * rng.standard_normal((args.queries, dims), dtype=np.float32) / np.sqrt(dims)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    t0 = time.perf_counter()
    local = IndexSnapshot.from_entries("gen-bench", dims, entries(vectors, 0, n))
    build_local = time.perf_counter() - t0

    root = Path(tempfile.mkdtemp(prefix="s3rm-pgbench-"))
    root.chmod(0o711)
    cluster = PgCluster(root / "data", free_port())
    try:
        cluster.init()
        store = PgStore(cluster.dsn(), max_size=2, timeout=600)
        gen = "gen-bench"
        store.register(gen, dims)
        token = store.acquire(gen, "bench", 3600)
        t0 = time.perf_counter()
        for lo in range(0, n, BATCH):
            store.write(gen, "bench", token, entries(vectors, lo, min(n, lo + BATCH)))
        build_pg = time.perf_counter() - t0
        with store.pool.connection() as conn:
            conn.execute(f"VACUUM ANALYZE {store.generation(gen).table}")
        disk_exact = store.table_bytes(gen)
        t0 = time.perf_counter()
        info = store.generation(gen)
        with store.pool.connection() as conn:
            conn.execute("SET maintenance_work_mem = '1GB'")
            conn.execute(f"CREATE INDEX {info.table}_whole_hnsw ON {info.table} USING hnsw (whole halfvec_ip_ops) "
                         "WITH (m = 16, ef_construction = 64)")
            conn.execute("UPDATE s3rm_generation SET hnsw = true WHERE name = %s", (gen,))
        build_hnsw = time.perf_counter() - t0
        disk_hnsw = store.table_bytes(gen)

        times = {"in-process exact": [], "pgvector exact": [], "pgvector HNSW": []}
        recall_exact, recall_hnsw = [], []
        for q in queries:
            t = time.perf_counter()
            mine = [h.lesson_id for h in local.search("whole", q, TOP_K)]
            times["in-process exact"].append(time.perf_counter() - t)
            t = time.perf_counter()
            exact = [i for i, _ in store.search(gen, "whole", q, TOP_K)]
            times["pgvector exact"].append(time.perf_counter() - t)
            t = time.perf_counter()
            approx = [i for i, _ in store.search(gen, "whole", q, TOP_K, approximate=True, ef_search=args.ef_search)]
            times["pgvector HNSW"].append(time.perf_counter() - t)
            recall_exact.append(len(set(exact) & set(mine)) / TOP_K)
            recall_hnsw.append(len(set(approx) & set(exact)) / TOP_K)
        store.close()
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)

    mb = 1024 * 1024
    print(f"{n} Lessons × {len(INDEX_FACETS)} facets × {dims} dims, {args.queries} queries on 'whole', top {TOP_K}, "
          f"HNSW m=16 ef_construction=64 ef_search={args.ef_search}")
    header = f"{'engine':<18} {'p50 ms':>8} {'p95 ms':>8} {'recall@20':>10} {'build s':>9} {'memory/disk MB':>15}"
    print(header)
    print("-" * len(header))
    rows = [("in-process exact", 1.0, build_local, local.nbytes() / mb, "RAM float32"),
            ("pgvector exact", statistics.mean(recall_exact), build_pg, disk_exact / mb, "disk halfvec"),
            ("pgvector HNSW", statistics.mean(recall_hnsw), build_pg + build_hnsw, disk_hnsw / mb, "disk +index")]
    for name, recall, build, size, what in rows:
        ts = times[name]
        print(f"{name:<18} {1000 * pct(ts, 0.5):>8.1f} {1000 * pct(ts, 0.95):>8.1f} {recall:>10.3f} {build:>9.1f} "
              f"{size:>10.0f} ({what})")
    base = pct(times["in-process exact"], 0.5)
    print(f"ratio p50 vs in-process: pgvector exact {pct(times['pgvector exact'], 0.5) / base:.1f}x, "
          f"HNSW {pct(times['pgvector HNSW'], 0.5) / base:.1f}x; recall: pgvector exact vs float32 in-process "
          f"(halfvec rounding), HNSW vs pgvector exact; HNSW build {build_hnsw:.1f} s (whole facet only)")


if __name__ == "__main__":
    main()
