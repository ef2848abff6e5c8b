"""Content similarity between Lessons for the home page's graph (never a stored relation).

When few ``{{Lesson relation}}`` records are stored (an imported corpus has
none), the graph would be a cloud of unconnected dots. The gateway therefore
adds, next to the stored ``edges``, a separate list ``similar`` of the nearest
neighbours of every Lesson by the words they share (TF-IDF cosine over the
title, context and interpretation; :data:`BASIS`). The home page draws these
dashed and grey and labels them as "similar content (estimated)": they are a
reading aid, never presented as relations (docs/read-path.md#graph-similarity).

Contract: :func:`nearest_neighbours` is pure and deterministic (ties broken by
id). Terms come from :func:`gateway.retrieval.legacy.lexical.features` (words, Korean
stems and Hangul n-grams). A term in more than :data:`MAX_DF_SHARE` of the
Lessons says nothing about a pair and is dropped; so is a term in a single
Lesson. Cost: one inverted index, candidates only through shared terms, so
about O(n · t · p) for n Lessons, t terms each and p postings per term
(bounded by the share above).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache

from gateway.retrieval.legacy.lexical import features

__all__ = ["BASIS", "DEFAULT_K", "DEFAULT_MIN_SCORE", "MAX_DF_SHARE", "nearest_neighbours"]

#: Name of the method, sent with each pair so the page can say how it was estimated.
BASIS = "lexical-tfidf-v1"
#: Neighbours kept per Lesson.
DEFAULT_K = 2
#: Lowest cosine (0–1) for a pair to be kept.
DEFAULT_MIN_SCORE = 0.12
#: Terms found in more than this share of the Lessons are ignored.
MAX_DF_SHARE = 0.25


@lru_cache(maxsize=8192)
def _features(text: str) -> frozenset[str]:
    return frozenset(features(text))


def _vectors(texts: Mapping[str, str]) -> dict[str, dict[str, float]]:
    bags = {lesson_id: _features(text) for lesson_id, text in texts.items()}
    df: dict[str, int] = {}
    for bag in bags.values():
        for term in bag:
            df[term] = df.get(term, 0) + 1
    n = max(1, len(bags))
    limit = max(2, int(n * MAX_DF_SHARE))
    out: dict[str, dict[str, float]] = {}
    for lesson_id, bag in bags.items():
        weights = {t: math.log(n / df[t]) + 1.0 for t in bag if 2 <= df[t] <= limit}
        norm = math.sqrt(sum(w * w for w in weights.values()))
        out[lesson_id] = {t: w / norm for t, w in weights.items()} if norm else {}
    return out


def nearest_neighbours(texts: Mapping[str, str], *, k: int = DEFAULT_K, min_score: float = DEFAULT_MIN_SCORE,
                       max_pairs: int = 10000) -> list[tuple[str, str, float]]:
    """Undirected nearest-neighbour pairs ``(a, b, score)`` with ``a < b``, score rounded to 3 places.

    ``texts`` maps Lesson id → its text. Each Lesson contributes its ``k``
    best partners with cosine ≥ ``min_score``; a pair chosen by both ends
    appears once. Sorted by score descending, then ids; at most ``max_pairs``.
    Raises nothing for any input (empty texts give no pairs).
    """
    vectors = _vectors(texts)
    postings: dict[str, list[str]] = {}
    for lesson_id in sorted(vectors):
        for term in vectors[lesson_id]:
            postings.setdefault(term, []).append(lesson_id)
    pairs: dict[tuple[str, str], float] = {}
    for lesson_id in sorted(vectors):
        mine = vectors[lesson_id]
        scores: dict[str, float] = {}
        for term, weight in mine.items():
            for other in postings[term]:
                if other != lesson_id:
                    scores[other] = scores.get(other, 0.0) + weight * vectors[other][term]
        best = sorted(((s, o) for o, s in scores.items() if s >= min_score), key=lambda x: (-x[0], x[1]))[:k]
        for score, other in best:
            key = (lesson_id, other) if lesson_id < other else (other, lesson_id)
            pairs[key] = round(min(1.0, score), 3)
    ranked = sorted(pairs.items(), key=lambda item: (-item[1], item[0]))
    return [(a, b, s) for (a, b), s in ranked[:max_pairs]]
