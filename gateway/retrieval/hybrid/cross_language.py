"""Language-standardised semantic ranking over any index backend (``docs/hybrid-search.md#ranking``).

Multilingual models put any text in the query's language above a text in
another language on the same topic — a constant offset per language pair —
so in raw cosine a Korean question about an English post-mortem only ever
sees Korean Lessons. :func:`search_by_language` turns every row's cosine into
a z-score against its own language partition (Korean Lessons per
``SemanticIndex.hangul_rows()`` and the others), which removes the offset and
puts both languages on one scale, each Lesson with one rank.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from gateway.retrieval.index.backend import SemanticIndex
from gateway.retrieval.index.records import SemanticHit

__all__ = ["search_by_language"]


def search_by_language(index: SemanticIndex, facet: str, query: np.ndarray, k: int, *,
                       allowed: np.ndarray | None = None, exclude: Iterable[str] = (),
                       min_score: float | None = None, eligible: np.ndarray | None = None) -> list[SemanticHit]:
    """Top-``k`` rows of ``facet`` by cosine standardised within each Lesson language.

    ``query`` is ``(dims,)``; ``allowed``/``exclude`` as in ``SemanticIndex.search``. Every
    ``eligible`` row (boolean ``(n,)``; None: every row) of a partition counts for its mean and
    standard deviation (request filters do not change them).
    ``min_score`` still applies to the raw cosine; a hit's ``score`` is its z-score. Ranks
    1..k, order (z desc, id asc).
    """
    if len(index) == 0 or k <= 0:
        return []
    cosine = np.asarray(index.scores(facet, query), dtype=np.float64)
    korean = np.asarray(index.hangul_rows(), dtype=bool)
    counted = np.ones(len(cosine), dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    z = np.zeros(len(cosine), dtype=np.float64)
    for rows in (korean, ~korean):
        stats = rows & counted
        if stats.any():
            part = cosine[stats]
            z[rows] = (cosine[rows] - part.mean()) / max(float(part.std()), 1e-6)
    if min_score is not None:
        z = np.where(cosine >= min_score, z, -np.inf)
    return index.top(z, k, allowed=allowed, exclude=exclude)
