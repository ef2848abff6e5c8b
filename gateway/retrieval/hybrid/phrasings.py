"""One hybrid list from the hybrid lists of several phrasings of one question (docs/retrieval.md#phrasings).

``search_lessons`` accepts other phrasings of its query (``also_phrased_as``,
typically the question in the other language). Each phrasing is ranked by the
whole ``hybrid_v1`` pipeline on its own — its channels fused by the ranking's
own rule (:mod:`gateway.retrieval.hybrid.fusion`, unchanged) — and
:func:`fuse_phrasings` merges the resulting lists by best rank: each Lesson
takes the best rank any phrasing gave it, with no bonus for being in several
lists. Agreement is what hubs have — a Lesson near every question is high in
every phrasing's list — so summing reciprocal ranks (RRF) lifted exactly them
above the answer the better phrasing ranked first (measured on the
development set's tuning half: RRF 0.900 recall@5, best rank 1.000,
docs/hybrid-search.md#phrasings-quality). Order: fusion tier first (an
exact-identifier or stored-relation hit in any phrasing keeps its tier), then
the best rank, then the query's list before the other phrasings' (the query
first), then the id. A Lesson's ``score`` is its best service score over the
phrasings (so ``min_score``, applied within each phrasing, holds for every
Lesson of the merged list), its votes those of the phrasing that ranked it
best (what ``explain`` shows).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from gateway.retrieval.hybrid.results import HybridList, HybridResult

__all__ = ["fuse_phrasings"]


def fuse_phrasings(lists: Sequence[HybridList]) -> HybridList:
    """The merged list of the per-phrasing ``lists`` (the query's first; module doc).

    Mode, ranking version, status and generation are the first list's; ``scanned`` and
    ``scan_limit`` add up; ``partial`` when any list was. ``ValueError`` for no list.
    """
    if not lists:
        raise ValueError("fuse_phrasings needs at least one list")
    best: dict[str, tuple[int, int]] = {}
    item_of: dict[str, HybridResult] = {}
    tier: dict[str, int] = {}
    score: dict[str, float] = {}
    for number, ranked in enumerate(lists):
        for rank, item in enumerate(ranked.results, 1):
            lesson_id = item.snapshot.id
            tier[lesson_id] = max(tier.get(lesson_id, item.tier), item.tier)
            score[lesson_id] = max(score.get(lesson_id, item.score), item.score)
            if lesson_id not in best or (rank, number) < best[lesson_id]:
                best[lesson_id] = (rank, number)
                item_of[lesson_id] = item
    order = sorted(best, key=lambda i: (-tier[i], best[i], i))
    results = tuple(dataclasses.replace(item_of[i], score=score[i], tier=tier[i]) for i in order)
    return dataclasses.replace(lists[0], results=results, partial=any(r.partial for r in lists),
                               scanned=sum(r.scanned for r in lists), scan_limit=sum(r.scan_limit for r in lists))
