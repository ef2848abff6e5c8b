"""The in-process lexical channel: BM25 (bm25s) over the analysed projection text.

Contract: ``docs/hybrid-search.md#lexical-channel``. One :class:`Bm25Index`
belongs to one :class:`~gateway.retrieval.index.IndexSnapshot` and is built
with it (copy-on-write: a new snapshot builds a new index from its rows'
terms). Terms come from :func:`gateway.retrieval.analyzer.analyze` over the
Lesson's ``whole`` projection text (title and the three facets), so the
channel sees exactly what the vectors see and nothing else (no evidence, no
relations, no people). What is held: per row, the analysed terms (a bag of
words, needed to rebuild the index); no original text.

Scoring: bm25s' Lucene BM25 (k1 = 1.5, b = 0.75). A query is analysed the
same way; terms not in the vocabulary are dropped; only rows with a score
above zero are hits. Costs a few milliseconds for thousands of Lessons.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

__all__ = ["Bm25Index", "BM25_PARAMS"]

#: bm25s parameters (part of the ranking version).
BM25_PARAMS = {"k1": 1.5, "b": 0.75, "method": "lucene"}


class Bm25Index:
    """BM25 over ``terms[i]`` for row ``i`` (rows align with the snapshot's ids).

    Args:
        terms: one tuple of analysed terms per row (may be empty).
    """

    __slots__ = ("terms", "_model", "_vocab")

    def __init__(self, terms: Sequence[tuple[str, ...]]):
        self.terms = tuple(terms)
        self._model = None
        self._vocab: dict[str, int] = {}
        if any(self.terms):
            import bm25s

            model = bm25s.BM25(**BM25_PARAMS)
            model.index([list(t) for t in self.terms], show_progress=False)
            self._model = model
            self._vocab = model.vocab_dict

    def __len__(self) -> int:
        return len(self.terms)

    def scores(self, query_terms: Iterable[str]) -> np.ndarray | None:
        """BM25 score of every row ``(n,)`` float32, or None when no query term is known."""
        known = [t for t in dict.fromkeys(query_terms) if t in self._vocab and t]
        if self._model is None or not known:
            return None
        return np.asarray(self._model.get_scores(known), dtype=np.float32)
