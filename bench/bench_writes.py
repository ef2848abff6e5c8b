#!/usr/bin/env python3
"""Write capacity of the development stack: concurrent MCP creates through gunicorn against a real wiki.

Not a CI test (docs/operations.md#write-capacity). Loopback only; every
request has a timeout and every phase a bounded number of calls.

    python bench/bench_writes.py                    # throwaway test wiki, ~2 minutes
    python bench/bench_writes.py --wiki-dir .dev/wiki

Phases, each printed as one table:

1. **burst** — ``--agents`` (16) agents send one ``create_lesson_draft`` each
   for distinct Lessons at the same moment, once with the former admission
   limits (16 threads, write class 1 slot + 1 queue place, 5 s wait: the
   baseline) and once with the current defaults (48 threads, 3 slots + 15
   queue places, 30 s wait), each in its own gateway run in this process;
   prints created / 429 / 503 / other counts, the wall time and the
   p50/p95 latency per run and the ratio of created calls.
2. **capacity** — closed-loop writers (``--levels``, default 1,4,8) each create
   Lessons until ``--per-level`` creates are done (current defaults); prints
   creates/s, p50/p95 latency and the speed-up against one writer.

The wiki client's retries of the SQLite single-writer lock are counted from
the gateway log (``retrying`` lines naming a database error).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout, not whatever an editable install points at
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from load import Run, _classify  # noqa: E402  (the same result bookkeeping as bench/load.py)
from support.services import Gateway, call_tool  # noqa: E402
from support.write_harness import BURST_TOKEN as TOKEN  # noqa: E402
from support.write_harness import burst_create_args as create_args  # noqa: E402
from support.write_harness import token_gateway_env as gateway_env  # noqa: E402

from s3rm.devstack import devwiki  # noqa: E402

BASELINE = {"S3RM_ADMISSION_WRITE_CONCURRENCY": "1", "S3RM_ADMISSION_WRITE_QUEUE": "1",
            "S3RM_ADMISSION_WRITE_TIMEOUT_SECONDS": "5", "S3RM_ADMISSION_READ_CONCURRENCY": "8",
            "S3RM_ADMISSION_READ_QUEUE": "5"}
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def _create(url: str, run: Run, tag: str) -> None:
    lesson_id = f"bw-{tag}-{uuid.uuid4().hex[:10]}"
    t0 = time.perf_counter()
    try:
        outcome = _classify(call_tool(url, "create_lesson_draft", create_args(lesson_id, f"op-{lesson_id}"),
                                      headers=HEADERS, timeout=120))
    except Exception as exc:  # noqa: BLE001 - a bench reports every failure kind
        outcome = f"exc_{type(exc).__name__}"
    run.add(time.perf_counter() - t0, outcome)


def burst(url: str, agents: int, tag: str) -> Run:
    """``agents`` creates released together by a barrier."""
    run, barrier = Run(), threading.Barrier(agents)

    def one(_: int) -> None:
        barrier.wait(30)
        _create(url, run, tag)

    started = time.monotonic()
    with ThreadPoolExecutor(agents) as pool:
        list(pool.map(one, range(agents)))
    run.seconds = time.monotonic() - started
    return run


def closed_loop(url: str, writers: int, total: int) -> Run:
    """``writers`` threads creating until ``total`` creates are done."""
    run, left, lock = Run(), [total], threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            _create(url, run, f"c{writers}")

    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    run.seconds = time.monotonic() - started
    return run


def _lock_retries(gw: Gateway) -> int:
    return sum(1 for line in gw.log_text().splitlines() if "retrying" in line and "DB" in line)


def _ms(run: Run, q: float) -> str:
    return f"{run.pct(q) * 1000:8.0f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--wiki-dir", help="a running installed dev wiki (default: a throwaway test wiki)")
    p.add_argument("--agents", type=int, default=16, help="agents in the burst (default 16)")
    p.add_argument("--levels", default="1,4,8", help="closed-loop writer counts (default 1,4,8)")
    p.add_argument("--per-level", type=int, default=24, help="creates per capacity level (default 24)")
    args = p.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    if not 1 <= args.agents <= 64 or not levels or max(levels) > 32 or not 1 <= args.per_level <= 500:
        p.error("bounded phases: --agents 1..64, --levels up to 32, --per-level 1..500")
    tmp = None
    if args.wiki_dir:
        wiki = devwiki.wiki_from_state(Path(args.wiki_dir))
    else:
        tmp = tempfile.TemporaryDirectory(prefix="s3rm-bench-writes-")
        print("starting a throwaway test wiki ...", flush=True)
        wiki = devwiki.start_test_wiki(Path(tmp.name) / "wiki")
    try:
        env = gateway_env(wiki)
        print(f"\n== 1. burst: {args.agents} agents, one create each, distinct Lessons ==")
        print(f"{'run':<34} {'created':>7} {'429':>5} {'503':>5} {'other':>5} {'wall s':>7} "
              f"{'p50 ms':>8} {'p95 ms':>8} {'lock retries':>12}")
        results = {}
        for name, extra, threads in (("baseline (1+1 slots, 16 thr)", BASELINE, 16),
                                     ("current defaults (3+15, 48 thr)", {}, None)):
            with Gateway({**env, **extra}, threads=threads or 48) as gw:
                call_tool(gw.url, "get_lesson", {"id": "warm-up"})  # log in first
                run = burst(gw.url, args.agents, "b")
                retries = _lock_retries(gw)
            oc = run.outcomes
            other = run.total - oc["ok"] - oc["http_429"] - oc["http_503"]
            results[name] = run
            print(f"{name:<34} {oc['ok']:7d} {oc['http_429']:5d} {oc['http_503']:5d} {other:5d} "
                  f"{run.seconds:7.1f} {_ms(run, 0.5)} {_ms(run, 0.95)} {retries:12d}", flush=True)
        base, cur = results.values()
        print(f"created, current / baseline: {cur.outcomes['ok']} / {base.outcomes['ok']} = "
              f"{cur.outcomes['ok'] / max(1, base.outcomes['ok']):.1f}x")

        print(f"\n== 2. capacity: closed-loop writers, {args.per_level} creates per level (current defaults) ==")
        print(f"{'writers':>7} {'creates':>7} {'errors':>6} {'creates/s':>9} {'p50 ms':>8} {'p95 ms':>8} "
              f"{'vs 1 writer':>11}")
        with Gateway(env, threads=48) as gw:
            call_tool(gw.url, "get_lesson", {"id": "warm-up"})
            first = None
            for level in levels:
                run = closed_loop(gw.url, level, args.per_level)
                rate = run.total / run.seconds if run.seconds else 0.0
                first = first or rate
                print(f"{level:7d} {run.total:7d} {run.errors:6d} {rate:9.2f} {_ms(run, 0.5)} {_ms(run, 0.95)} "
                      f"{rate / first:10.2f}x", flush=True)
            print(f"SQLite lock retries by the wiki client during the capacity runs: {_lock_retries(gw)}")
    finally:
        if tmp is not None:
            devwiki.down(Path(tmp.name) / "wiki", quiet=True)
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
