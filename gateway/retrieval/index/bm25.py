"""The in-process lexical channel: Lucene BM25 over the analysed projection text, per index segment.

Contract: ``docs/hybrid-search.md#lexical-channel``, ``docs/hybrid-search.md#segments``.
Terms come from :func:`gateway.retrieval.index.analyzer.analyze` over the Lesson's
``whole`` projection text (title and the three facets), so the channel sees
exactly what the vectors see and nothing else (no evidence, no relations, no
people). What is held: per row, the analysed terms (a bag of words) and, per
segment, their postings; no original text.

Scoring is bm25s' Lucene BM25 (k1 = 1.5, b = 0.75):
``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` and
``score = Σ_t idf(t) · tf / (tf + k1 · (1 - b + b · dl / avgdl))`` over the
distinct known query terms, where ``N``, ``df`` and ``avgdl`` are taken over
the LIVE rows of every segment at query time. Because the statistics are
global and each row's sum runs over the query terms in the same order in
float64, a segmented index scores every row exactly as one freshly built
over the same rows would (``docs/hybrid-search.md#segments``); against bm25s
itself (which stores float32 scores) values agree to float32 rounding.
Terms not present in any live row are dropped; only rows scoring above zero
are hits.

:class:`Bm25Postings` is immutable and built once per segment (cost
proportional to that segment's terms), so an index refresh never rebuilds
the lexical model of unchanged rows.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

__all__ = ["Bm25Postings", "BM25_PARAMS", "lucene_scores"]

#: BM25 parameters (part of the ranking version).
BM25_PARAMS = {"k1": 1.5, "b": 0.75, "method": "lucene"}


class Bm25Postings:
    """Postings of one segment: per term the rows containing it and their term frequencies.

    Args:
        terms: one tuple of analysed terms per row (may be empty).

    Attributes:
        terms: the rows' terms (kept to rebuild merged segments).
        doc_len: ``(n,)`` int64 number of terms per row.
    """

    __slots__ = ("terms", "doc_len", "_vocab", "_indptr", "_rows", "_tf")

    def __init__(self, terms: Sequence[tuple[str, ...]]):
        self.terms = tuple(terms)
        self.doc_len = np.fromiter((len(t) for t in self.terms), dtype=np.int64, count=len(self.terms))
        vocab: dict[str, int] = {}
        cols: list[int] = []
        rows: list[int] = []
        tfs: list[int] = []
        for row, row_terms in enumerate(self.terms):
            for term, count in Counter(row_terms).items():
                cols.append(vocab.setdefault(term, len(vocab)))
                rows.append(row)
                tfs.append(count)
        col = np.asarray(cols, dtype=np.int64)
        order = np.argsort(col, kind="stable")
        self._vocab = vocab
        self._indptr = np.concatenate(([0], np.cumsum(np.bincount(col, minlength=len(vocab))))).astype(np.int64)
        self._rows = np.asarray(rows, dtype=np.int64)[order]
        self._tf = np.asarray(tfs, dtype=np.float64)[order]
        for arr in (self.doc_len, self._indptr, self._rows, self._tf):
            arr.setflags(write=False)

    def __len__(self) -> int:
        return len(self.terms)

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """``(rows, tf)`` of ``term`` (physical rows of this segment, ascending), None when absent."""
        col = self._vocab.get(term)
        if col is None:
            return None
        a, b = self._indptr[col], self._indptr[col + 1]
        return self._rows[a:b], self._tf[a:b]

    def nbytes(self) -> int:
        """Bytes of the postings arrays (not the term strings)."""
        return sum(a.nbytes for a in (self.doc_len, self._indptr, self._rows, self._tf))


def lucene_scores(parts: Sequence[tuple[Bm25Postings, np.ndarray | None]],
                  query_terms: Iterable[str]) -> list[np.ndarray] | None:
    """BM25 of every physical row of each part, or None when no query term occurs in a live row.

    ``parts`` lists ``(postings, alive)`` per segment (``alive``: boolean row
    mask, None = every row live). Returns one float64 ``(len(postings),)``
    array per part; dead rows score 0. Module docstring: formula and exactness.
    """
    k1, b = BM25_PARAMS["k1"], BM25_PARAMS["b"]
    live_counts = [len(p) if alive is None else int(np.count_nonzero(alive)) for p, alive in parts]
    n_docs = sum(live_counts)
    if n_docs == 0:
        return None
    total_len = sum(int(p.doc_len.sum()) if alive is None else int(p.doc_len[alive].sum()) for p, alive in parts)
    avgdl = total_len / n_docs
    hits: list[tuple[int, list[tuple[np.ndarray, np.ndarray]]]] = []
    for term in dict.fromkeys(query_terms):
        if not term:
            continue
        per_part, df = [], 0
        for p, alive in parts:
            found = p.postings(term)
            if found is not None and alive is not None:
                keep = alive[found[0]]
                found = (found[0][keep], found[1][keep])
            per_part.append(found)
            df += 0 if found is None else len(found[0])
        if df:
            hits.append((df, per_part))
    if not hits or avgdl == 0:
        return None
    out = [np.zeros(len(p), dtype=np.float64) for p, _ in parts]
    for df, per_part in hits:
        idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        for index, found in enumerate(per_part):
            if found is None or not len(found[0]):
                continue
            rows, tf = found
            dl = parts[index][0].doc_len[rows]
            out[index][rows] += idf * tf / (tf + k1 * (1.0 - b + b * dl / avgdl))
    return out
