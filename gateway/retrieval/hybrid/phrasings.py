"""One hybrid list from the hybrid lists of several phrasings of one question (docs/retrieval.md#phrasings).

``search_lessons`` accepts other phrasings of its query (``also_phrased_as``,
typically the question in the other language). Each phrasing is ranked by the
whole ``hybrid_v1`` pipeline on its own — its channels fused by the ranking's
own rule (:mod:`gateway.retrieval.hybrid.fusion`, unchanged) — and
:func:`fuse_phrasings` combines the resulting lists by reciprocal-rank fusion
across phrasings: a Lesson's fused value is ``Σ 1 / (PHRASING_RRF_K + rank)``
over the lists that hold it. Order: fusion tier first (an exact-identifier or
stored-relation hit in any phrasing keeps its tier), then the fused value,
then the query's list before the other phrasings' (the query first), then the
place in that list, then the id. A Lesson's ``score`` is its best service
score over the phrasings (so ``min_score``, applied within each phrasing, holds
for every Lesson of the fused list), its votes those of the phrasing that
ranked it best (what ``explain`` shows).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from gateway.retrieval.hybrid.results import HybridList, HybridResult

__all__ = ["PHRASING_RRF_K", "fuse_phrasings"]

#: The RRF constant across phrasings (the usual 60: a first rank in one list is worth a little more
#: than a tenth rank in two).
PHRASING_RRF_K = 60


def fuse_phrasings(lists: Sequence[HybridList], k: int = PHRASING_RRF_K) -> HybridList:
    """The fused list of the per-phrasing ``lists`` (the query's first; module doc).

    Mode, ranking version, status and generation are the first list's; ``scanned`` and
    ``scan_limit`` add up; ``partial`` when any list was. ``ValueError`` for no list.
    """
    if not lists:
        raise ValueError("fuse_phrasings needs at least one list")
    fused: dict[str, float] = {}
    first_seen: dict[str, tuple[int, int]] = {}
    best: dict[str, HybridResult] = {}
    best_rank: dict[str, int] = {}
    tier: dict[str, int] = {}
    score: dict[str, float] = {}
    for number, ranked in enumerate(lists):
        for rank, item in enumerate(ranked.results, 1):
            lesson_id = item.snapshot.id
            fused[lesson_id] = fused.get(lesson_id, 0.0) + 1.0 / (k + rank)
            first_seen.setdefault(lesson_id, (number, rank))
            tier[lesson_id] = max(tier.get(lesson_id, item.tier), item.tier)
            score[lesson_id] = max(score.get(lesson_id, item.score), item.score)
            if rank < best_rank.get(lesson_id, rank + 1):
                best_rank[lesson_id] = rank
                best[lesson_id] = item
    order = sorted(fused, key=lambda i: (-tier[i], -fused[i], first_seen[i], i))
    results = tuple(dataclasses.replace(best[i], score=score[i], tier=tier[i]) for i in order)
    return dataclasses.replace(lists[0], results=results, partial=any(r.partial for r in lists),
                               scanned=sum(r.scanned for r in lists), scan_limit=sum(r.scan_limit for r in lists))
