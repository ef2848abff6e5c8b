"""Fusion of the hybrid lists of several phrasings of one question (docs/retrieval.md#phrasings).

Pure: hand-made :class:`HybridList` values through
:func:`gateway.retrieval.hybrid.phrasings.fuse_phrasings`; the pipeline and the tool
run it end to end in tests/gateway/retrieval/test_hybrid.py.
"""
from __future__ import annotations

import pytest

from gateway.domain.model import LessonSnapshot
from gateway.retrieval.hybrid.phrasings import fuse_phrasings
from gateway.retrieval.hybrid.results import HybridList, HybridResult
from support.lessons import lesson


def _list(*items: tuple[str, float, int], partial: bool = False, scanned: int = 10) -> HybridList:
    results = tuple(HybridResult(LessonSnapshot(i, 1, "2026-01-01T00:00:00Z", lesson(i), ""), score, "hybrid",
                                 ("bm25",), tier=tier) for i, score, tier in items)
    return HybridList(results, "hybrid_v1", "rrf_v8", "ready", "g1", partial, scanned, 50)


def ids(fused: HybridList) -> list[str]:
    return [r.snapshot.id for r in fused.results]


def test_each_lesson_takes_its_best_rank_with_no_bonus_for_agreement_and_the_query_breaks_ties():
    query = _list(("hub", 1.0, 0), ("b", 0.9, 0), ("c", 0.5, 0))
    other = _list(("answer", 1.0, 0), ("hub", 0.8, 0), ("y", 0.7, 0))
    fused = fuse_phrasings([query, other])
    # hub: best rank 1 (the query's list) = answer: rank 1 (the other list) > b, hub again not counted > c = y
    assert ids(fused) == ["hub", "answer", "b", "c", "y"]
    assert [r.score for r in fused.results] == [1.0, 1.0, 0.9, 0.5, 0.7]  # the best score over the phrasings


def test_a_tier_from_any_phrasing_keeps_its_lesson_first_and_the_counts_add_up():
    query = _list(("a", 1.0, 0), ("b", 0.9, 0), scanned=12)
    other = _list(("exact-id", 1.0, 1), ("a", 0.4, 0), partial=True, scanned=30)
    fused = fuse_phrasings([query, other])
    assert ids(fused)[0] == "exact-id" and fused.results[0].tier == 1
    assert (fused.partial, fused.scanned, fused.scan_limit) == (True, 42, 100)
    assert (fused.effective_mode, fused.ranking_version, fused.generation) == ("hybrid_v1", "rrf_v8", "g1")


def test_one_list_is_itself_and_no_list_is_an_error():
    only = _list(("a", 1.0, 0), ("b", 0.5, 0))
    assert ids(fuse_phrasings([only])) == ["a", "b"]
    with pytest.raises(ValueError):
        fuse_phrasings([])
