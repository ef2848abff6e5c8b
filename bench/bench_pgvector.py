"""Benchmark: the pgvector backend (exact and HNSW) beside the in-process exact index (docs/hybrid-search.md#benchmarks).

One synthetic corpus of ``--lessons`` Lessons × the project's four index
facets (situation, approach, mechanism and the whole-Lesson vector; the
retrieval design names three facets, the index keeps the fourth for analogies)
× ``--dims`` dims: clustered unit vectors, 200 Gaussian topics per facet, so
HNSW sees embedding-like structure rather than uniform noise. It is loaded into

* the in-process :class:`~gateway.retrieval.index.snapshot.IndexSnapshot` (float32,
  built from columns: one facet matrix is generated at a time, so the process
  holds the snapshot plus one matrix), and
* one generation of the shared store in a throw-away PostgreSQL 18 + pgvector
  cluster (:mod:`s3rm.devstack.postgres`: shared_buffers 128 MB, fsync off;
  ``halfvec`` vectors written through :meth:`PgStore.write` in fenced batches
  of 5,000 — the leader's own path) in vector layout ``--layout`` (2, the
  default: one table per facet, vectors stored PLAIN inside the heap row; 1:
  the four vectors as columns of one row, which TOAST moves out of line at
  1024 dims — docs/hybrid-search.md#pgvector-layout), then an HNSW index
  (m=16, ef_construction=64) on the ``whole`` facet only (all four would take
  four times as long), built with ``maintenance_work_mem = --hnsw-memory``
  (default 2GB: the graph must fit it, else the build slows down many times)
  and ``max_parallel_maintenance_workers = --hnsw-workers`` (default 1: a
  leader and one worker on this 2-core machine).

For ``--queries`` queries (perturbed corpus rows, as real queries sit near
Lessons) on the ``whole`` facet, top 20, it prints per engine query p50 / p95
(ms, round-robin between engines so machine noise hits all alike), recall@20
(HNSW against pgvector exact; pgvector exact against the float32 in-process
index, which differs only by halfvec rounding), build time (vector generation
excluded), and memory / disk:
the in-process snapshot's bytes and the process's RSS growth while building
it; per PostgreSQL relation its heap, TOAST and index bytes
(``pg_relation_size`` / ``pg_table_size`` / ``pg_indexes_size``), the HNSW
index alone, the whole data directory on disk, and the PSS of the server
processes after the queries.

Size run on this machine (2 cores shared with other helpers' runs, everything
under ``nice -n 19``; 24 GiB RAM shared, a budget of about 10 GiB for this
bench): 400,000 Lessons × 4 × 1024 (``--lessons 400000``). The bound is memory
before time: the in-process float32 index is 16 KiB per Lesson (1M = 16 GiB,
500k = 7.8 GiB plus one 2 GiB facet matrix while it is built), and 400k leaves
room for the HNSW build's ``maintenance_work_mem``. Time, extrapolated from
100k at load ≈ 8 (load 80 s, HNSW on one facet 149 s): 1M would take about
15 min to load and 30–40 min for the one HNSW index — roughly an hour for the
PostgreSQL side alone, four HNSW indexes several hours.

Usage: ``nice -n 19 python bench/bench_pgvector.py [--lessons 100000] [--dims 1024] [--queries 100]
[--layout 2] [--hnsw-memory 2GB] [--hnsw-workers 1]``. A script that prints a table, not a test.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gateway.config.profiles import INDEX_FACETS  # noqa: E402
from gateway.retrieval.index.records import IndexEntry, IndexRecord  # noqa: E402
from gateway.retrieval.index.snapshot import IndexSnapshot  # noqa: E402
from gateway.retrieval.pgvector.store import PgStore  # noqa: E402
from s3rm.devstack.postgres import PgCluster  # noqa: E402
from s3rm.devstack.wikiserver import free_port  # noqa: E402

TOP_K = 20
BATCH = 5000
TOPICS = 200
MB = 1024 * 1024


class Corpus:
    """Deterministic facet vectors: ``rows(facet, lo, hi)`` is the same float32 ``(hi - lo, dims)`` block every call.

    ``seconds`` accumulates the time spent generating, which build times exclude.
    """

    def __init__(self, n: int, dims: int, seed: int = 42):
        self.n, self.dims, self.seed = n, dims, seed
        self.seconds = 0.0
        rng = np.random.default_rng(seed)
        self.centres = {f: rng.standard_normal((TOPICS, dims), dtype=np.float32) for f in INDEX_FACETS}

    def rows(self, facet: str, lo: int, hi: int) -> np.ndarray:
        t0 = time.perf_counter()
        out = np.empty((hi - lo, self.dims), dtype=np.float32)
        for start in range(lo - lo % BATCH, hi, BATCH):  # generated per aligned batch → slicing is stable
            rng = np.random.default_rng((self.seed, INDEX_FACETS.index(facet), start))
            block = self.centres[facet][rng.integers(0, TOPICS, BATCH)]
            block += 0.9 * rng.standard_normal((BATCH, self.dims), dtype=np.float32)
            block /= np.linalg.norm(block, axis=1, keepdims=True)
            a, b = max(lo, start), min(hi, start + BATCH)
            out[a - lo:b - lo] = block[a - start:b - start]
        self.seconds += time.perf_counter() - t0
        return out


class LazyColumns(Mapping):
    """``{facet: (dims, n) float32}`` generated on access, so the snapshot's copy is the only one kept."""

    def __init__(self, corpus: Corpus):
        self.corpus = corpus

    def __getitem__(self, facet: str) -> np.ndarray:
        out = np.empty((self.corpus.dims, self.corpus.n), dtype=np.float32)
        for lo in range(0, self.corpus.n, BATCH):
            hi = min(self.corpus.n, lo + BATCH)
            out[:, lo:hi] = self.corpus.rows(facet, lo, hi).T
        return out

    def __iter__(self) -> Iterator[str]:
        return iter(INDEX_FACETS)

    def __len__(self) -> int:
        return len(INDEX_FACETS)


def lesson_id(i: int) -> str:
    return f"lesson-{i:07d}"


def snapshot(corpus: Corpus) -> IndexSnapshot:
    """The in-process index over the corpus (records: confidence/origin/review codes 0 = low/lab/Draft)."""
    n = corpus.n
    idx = np.arange(n, dtype=np.int64)
    digests = np.zeros((n, 32), dtype=np.uint8)
    digests[:, 24:] = idx.astype(">u8").view(np.uint8).reshape(n, 8)
    return IndexSnapshot("gen-bench", corpus.dims, [lesson_id(i) for i in range(n)], LazyColumns(corpus),
                         revision=idx + 1, rhash=digests, mhash=digests.copy(),
                         created=np.full(n, 1_700_000_000, np.int64), updated=np.full(n, 1_700_000_000, np.int64),
                         scalars=np.zeros((n, 3), np.uint8), truncated=np.zeros(n, np.uint8))


def entries(corpus: Corpus, lo: int, hi: int) -> list[IndexEntry]:
    blocks = {f: corpus.rows(f, lo, hi) for f in INDEX_FACETS}
    out = []
    for j, i in enumerate(range(lo, hi)):
        record = IndexRecord(lesson_id=lesson_id(i), revision_id=i + 1, retrieval_hash=f"sha256:{i:064x}",
                             metadata_hash=f"sha256:{i:064x}", created_at=1_700_000_000, updated_at=1_700_000_000,
                             confidence="low", record_origin="lab", review_state="Draft")
        out.append(IndexEntry(record, {f: blocks[f][j] for f in INDEX_FACETS}, ()))
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def rss_bytes(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def server_pss_bytes(data_dir: Path) -> int:
    """Sum of the proportional set size of the postmaster and its children (shared buffers counted once)."""
    root = int((data_dir / "postmaster.pid").read_text().split()[0])
    pids = [root]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == root:
                        pids.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
                total += next(int(line.split()[1]) * 1024 for line in fh if line.startswith("Pss:"))
        except (OSError, StopIteration):
            continue
    return total


def dir_bytes(path: Path) -> int:
    """Allocated bytes under ``path`` (``du``: sparse and recycled files as stored); taken after the server stopped."""
    done = subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True)
    return int(done.stdout.split()[0]) if done.stdout.strip() else -1


def relation_rows(store: PgStore, gen: str) -> list[tuple[str, int, int, int]]:
    """Per relation of the generation: (name, heap bytes, TOAST + maps bytes, index bytes)."""
    info = store.generation(gen)
    out = []
    with store.pool.connection() as conn:
        for rel in info.relations():
            heap, table, indexes = conn.execute("SELECT pg_relation_size(%s), pg_table_size(%s), "
                                                "pg_indexes_size(%s)", (rel, rel, rel)).fetchone()
            out.append((rel, int(heap), int(table) - int(heap), int(indexes)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=1024)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--ef-search", type=int, default=100)
    parser.add_argument("--layout", type=int, choices=(1, 2), default=2)
    parser.add_argument("--hnsw-memory", default="2GB", help="maintenance_work_mem of the HNSW build")
    parser.add_argument("--hnsw-workers", type=int, default=1, help="max_parallel_maintenance_workers")
    args = parser.parse_args()
    n, dims = args.lessons, args.dims
    corpus = Corpus(n, dims)
    rng = np.random.default_rng(7)
    picks = rng.integers(0, n, args.queries)
    queries = np.stack([corpus.rows("whole", int(i), int(i) + 1)[0] for i in picks])
    queries += 0.5 * rng.standard_normal((args.queries, dims), dtype=np.float32) / np.sqrt(dims)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    rss0 = rss_bytes()
    t0, g0 = time.perf_counter(), corpus.seconds
    local = snapshot(corpus)
    build_local = time.perf_counter() - t0 - (corpus.seconds - g0)
    rss_local = rss_bytes() - rss0
    print(f"in-process build {build_local:.1f} s, RSS +{rss_local / MB:.0f} MB", flush=True)

    root = Path(tempfile.mkdtemp(prefix="s3rm-pgbench-"))
    root.chmod(0o711)
    cluster = PgCluster(root / "data", free_port())
    try:
        cluster.init()
        store = PgStore(cluster.dsn(), max_size=2, timeout=600)
        gen = "gen-bench"
        info = store.register(gen, dims, layout=args.layout)
        token = store.acquire(gen, "bench", 7 * 24 * 3600)
        t0, g0 = time.perf_counter(), corpus.seconds
        for lo in range(0, n, BATCH):
            store.write(gen, "bench", token, entries(corpus, lo, min(n, lo + BATCH)))
            if lo and lo % (20 * BATCH) == 0:
                print(f"  pgvector load {lo} rows {time.perf_counter() - t0:.0f} s", flush=True)
        with store.pool.connection() as conn:
            for rel in info.relations():
                conn.execute(f"VACUUM ANALYZE {rel}")
        build_pg = time.perf_counter() - t0 - (corpus.seconds - g0)
        print(f"pgvector load + VACUUM ANALYZE {build_pg:.1f} s", flush=True)
        rels_exact = relation_rows(store, gen)
        t0 = time.perf_counter()
        store.build_hnsw(gen, facets=("whole",), maintenance_work_mem=args.hnsw_memory,
                         parallel_workers=args.hnsw_workers)
        build_hnsw = time.perf_counter() - t0
        print(f"HNSW build (whole) {build_hnsw:.1f} s", flush=True)
        with store.pool.connection() as conn:
            hnsw_bytes = int(conn.execute("SELECT pg_relation_size(%s)", (f"{info.table}_whole_hnsw",)).fetchone()[0])
        disk_exact = sum(h + t + i for _, h, t, i in rels_exact)
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
        try:
            pss = server_pss_bytes(cluster.data_dir)
        except (OSError, ValueError):
            pss = -1
        with store.pool.connection() as conn:
            conn.execute("CHECKPOINT")
        store.close()
    finally:
        cluster.stop()
        data_dir = dir_bytes(cluster.data_dir)
        shutil.rmtree(root, ignore_errors=True)

    print()
    print(f"{n} Lessons × {len(INDEX_FACETS)} facets × {dims} dims, vector layout {args.layout}, {args.queries} "
          f"queries on 'whole', top {TOP_K}; HNSW m=16 ef_construction=64 ef_search={args.ef_search}, "
          f"maintenance_work_mem={args.hnsw_memory} max_parallel_maintenance_workers={args.hnsw_workers}")
    header = f"{'engine':<18} {'p50 ms':>8} {'p95 ms':>8} {'recall@20':>10} {'build s':>9}  memory / disk MB"
    print(header)
    print("-" * (len(header) + 20))
    rows = [("in-process exact", 1.0, build_local,
             f"{local.nbytes() / MB:.0f} snapshot, RSS +{rss_local / MB:.0f} (float32, RAM)"),
            ("pgvector exact", statistics.mean(recall_exact), build_pg, f"{disk_exact / MB:.0f} tables (halfvec, disk)"),
            ("pgvector HNSW", statistics.mean(recall_hnsw), build_pg + build_hnsw,
             f"{disk_hnsw / MB:.0f} tables + HNSW (index {hnsw_bytes / MB:.0f}; build {build_hnsw:.0f} s)")]
    for name, recall, build, size in rows:
        ts = times[name]
        print(f"{name:<18} {1000 * pct(ts, 0.5):>8.1f} {1000 * pct(ts, 0.95):>8.1f} {recall:>10.3f} {build:>9.1f}  "
              f"{size}")
    base = pct(times["in-process exact"], 0.5)
    print(f"ratio p50 vs in-process: pgvector exact {pct(times['pgvector exact'], 0.5) / base:.2f}x, "
          f"HNSW {pct(times['pgvector HNSW'], 0.5) / base:.2f}x")
    print()
    print(f"{'relation (before HNSW)':<32} {'heap MB':>9} {'TOAST MB':>9} {'index MB':>9}")
    for rel, heap, toast, idx in rels_exact:
        print(f"{rel:<32} {heap / MB:>9.1f} {toast / MB:>9.1f} {idx / MB:>9.1f}")
    print(f"PostgreSQL data directory {data_dir / MB:.0f} MB on disk after shutdown (incl. WAL); server PSS after the "
          f"queries {pss / MB:.0f} MB (shared_buffers 128MB)")


if __name__ == "__main__":
    main()
