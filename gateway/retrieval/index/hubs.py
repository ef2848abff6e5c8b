"""Per-language z-scores, the k-occurrence ``N_k`` of every Lesson and the query language's centroid.

Contract: docs/hybrid-search.md#k-occurrence, docs/hybrid-search.md#hubs.

``N_k`` and the centroid depend on the snapshot alone (its vectors, its Korean
rows, the ``eligible`` content-quality mask) and on the ranking's constants
(facet, ``k``, centring), never on a query. They live in the snapshot's own
:class:`~gateway.retrieval.index.derived.DerivedCache` (``SemanticIndex.derived``):
the refresher computes the shipped ranking's entries in its worker before it
swaps a new snapshot in (``gateway.retrieval.hybrid.channels.prepare_snapshot``),
so a request only reads them; any other variant is computed on first use and
bounded there.

:func:`compute_neighbourhood` scores the m pseudo-queries in row blocks of at most
:data:`PRODUCT_BYTES` (one product below that) and z-scores and ranks them
:data:`CHUNK_ROWS` rows at a time in one reused buffer, never scattering a
whole matrix through a boolean index (the first implementation held five
``(m, n)`` arrays at its peak). Every arithmetic step is the one the first
implementation made on the same operands, so ``N_k`` is bit-identical to it and
the ``ls`` density equal (tests/gateway/retrieval/test_hubs.py) while the product is
one; the BLAS may round a row block's cosines differently in the last bit, so above
:data:`PRODUCT_BYTES` a near-tie at the k-th place can resolve otherwise
(docs/hybrid-search.md#k-occurrence-cost).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from gateway.retrieval.index.backend import SemanticIndex

__all__ = ["CHUNK_ROWS", "PRODUCT_BYTES", "centroid", "compute_neighbourhood", "neighbourhood", "neighbourhood_key",
           "partition_z"]

#: Pseudo-queries z-scored and ranked at once: 64 × 5,000 Lessons × 8 B ≈ 2.6 MB per working array.
CHUNK_ROWS = 64
#: Largest ``(m, n)`` float64 cosine matrix made in one product (32 MiB: 2,000 × 2,000); above, row blocks.
PRODUCT_BYTES = 32 * 2 ** 20


def partition_z(scores: np.ndarray, korean: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """``scores`` ``(..., n)`` z-scored along the last axis within the Korean rows and within the others, each
    with the mean and standard deviation of its ``counted`` rows (a partition without any stays 0)."""
    z = np.zeros(scores.shape, dtype=np.float64)
    for rows in (korean, ~korean):
        stats = rows & counted
        if stats.any():
            mean, std = _stats(scores[..., stats])
            z[..., rows] = (scores[..., rows] - mean) / std
    return z


def _stats(part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation (floored at 1e-6) of ``part`` ``(..., p)`` along its last axis, kept as ``(..., 1)``."""
    return part.mean(axis=-1, keepdims=True), np.maximum(part.std(axis=-1, keepdims=True), 1e-6)


def _mask_key(mask: np.ndarray | None) -> bytes | None:
    return None if mask is None else np.asarray(mask, dtype=bool).tobytes()


def centroid(index: "SemanticIndex", facet: str, rows: np.ndarray, *, pin: bool = False) -> np.ndarray:
    """Mean ``(dims,)`` ``facet`` vector of ``rows`` (boolean ``(n,)``, at least one set), kept in the
    snapshot's cache like :func:`neighbourhood` (the query language's centroid of ``hub_centering``,
    docs/hybrid-search.md#hubs)."""
    rows = np.asarray(rows, dtype=bool)
    return index.derived(("centroid", facet, rows.tobytes()),
                         lambda: np.asarray(index.columns(facet))[:, rows].mean(axis=1), pin=pin)


def neighbourhood_key(facet: str, k: int, eligible: np.ndarray | None, korean_query: bool, centering: float,
                      with_density: bool) -> tuple:
    """The snapshot-cache key of one :func:`neighbourhood` variant."""
    return ("neighbourhood", facet, int(k), _mask_key(eligible), bool(korean_query), float(centering),
            bool(with_density))


def neighbourhood(index: "SemanticIndex", facet: str, k: int, eligible: np.ndarray | None, korean_query: bool,
                  centering: float, *, with_density: bool, pin: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """:func:`compute_neighbourhood` kept in the snapshot's cache (``pin``: for the snapshot's life — the
    refresher's precomputation; otherwise among the bounded first-use entries)."""
    key = neighbourhood_key(facet, k, eligible, korean_query, centering, with_density)
    return index.derived(key, lambda: compute_neighbourhood(index, facet, k, eligible, korean_query, centering,
                                                            with_density=with_density), pin=pin)


def _bounds(m: int, size: int) -> list[int]:
    """Bounds of balanced blocks of ``size`` (at least 2) to ``2·size - 1`` rows over ``m`` rows (one block
    when ``m < 2·size``): never a one-row block while ``m > 1`` — numpy gathers a one-row block's columns
    into another memory order than a taller block's and sums its mean in another order."""
    blocks = max(1, m // max(2, size))
    return [m * i // blocks for i in range(blocks + 1)]


def compute_neighbourhood(index: "SemanticIndex", facet: str, k: int, eligible: np.ndarray | None,
                          korean_query: bool, centering: float, *, with_density: bool,
                          chunk_rows: int = CHUNK_ROWS,
                          product_bytes: int = PRODUCT_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """``(N_k, density)``, both float64 ``(n,)``, uncached.

    ``N_k``: for every row, how many pseudo-queries hold it among their ``k`` best, where the pseudo-queries
    are the ``eligible`` Lessons of the query's language (their own ``facet`` vector, centred like a query
    by ``centering``) scored exactly as a query of that language is (:func:`partition_z` over the eligible
    rows), the pseudo-query itself left out. ``density`` (only with ``with_density``, else 0): per row the
    mean z of the ``k`` pseudo-queries scoring it highest. Ineligible rows get 0 in both.

    The ``(m, n)`` cosines of the ``m`` pseudo-queries are one matrix product while they fit
    ``product_bytes`` (and always with ``with_density``: its per-row top needs every pseudo-query), else
    products of row blocks of at most that size (docs/hybrid-search.md#k-occurrence-cost: why small
    products stay whole). They are z-scored and ranked ``chunk_rows`` to ``2·chunk_rows - 1``
    pseudo-queries at a time in one reused buffer; the density's z overwrites the cosines it came from.
    """
    n = len(index)
    korean = np.asarray(index.hangul_rows(), dtype=bool)
    counted = np.ones(n, dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    own = (korean if korean_query else ~korean) & counted
    counts, density = np.zeros(n, dtype=np.float64), np.zeros(n, dtype=np.float64)
    if not own.any() or k <= 0:
        return counts, density
    columns = np.asarray(index.columns(facet), dtype=np.float64)
    queries = columns[:, own]
    if centering:
        queries = queries - centering * columns[:, own].mean(axis=1, keepdims=True)
    m = queries.shape[1]
    own_rows = np.flatnonzero(own)
    depth = min(k, int(counted.sum()) - 1)
    reach = min(k, m - 1) if with_density else 0
    partitions = [(rows[None, :], stats) for rows in (korean, ~korean)
                  if len(stats := np.flatnonzero(rows & counted))]
    outside = None if counted.all() else ~counted[None, :]
    whole = queries.T @ columns if reach > 0 or m * n * 8 <= product_bytes else None    # (m, n)
    products = _bounds(m, m if whole is not None else max(2 * chunk_rows, product_bytes // (16 * n)))
    buffer = np.empty((min(m, 2 * max(2, chunk_rows)), n), dtype=np.float64)
    for pa, pb in zip(products[:-1], products[1:]):
        scores = whole[pa:pb] if whole is not None else queries[:, pa:pb].T @ columns
        chunks = _bounds(pb - pa, chunk_rows)
        for a, b in zip(chunks[:-1], chunks[1:]):
            block, neg = scores[a:b], buffer[:b - a]                   # neg: -z, built in place
            for rows, stats in partitions:
                mean, std = _stats(block[:, stats])
                np.subtract(mean, block, out=neg, where=rows)          # -(s - mean), exactly
                np.divide(neg, std, out=neg, where=rows)
            if outside is not None:
                np.copyto(neg, np.inf, where=outside)
            neg[np.arange(b - a), own_rows[pa + a:pa + b]] = np.inf
            if depth > 0:
                best = np.argpartition(neg, depth - 1, axis=1)[:, :depth]
                counts += np.bincount(best.ravel(), minlength=n)
            if reach > 0:
                np.negative(neg, out=block)                            # z replaces the cosines it came from
    if reach > 0:
        top = -np.partition(-whole, reach - 1, axis=0)[:reach]       # (reach, n): each row's best pseudo-queries
        density = np.where(np.isfinite(top), top, 0.0).mean(axis=0)
    counts[~counted], density[~counted] = 0.0, 0.0
    return counts, density
