"""The narrow index interface hybrid search uses, whichever backend holds the vectors.

Contract: docs/hybrid-search.md#pgvector-backend, docs/hybrid-search.md#index.

:class:`SemanticIndex` is what :class:`gateway.retrieval.hybrid.service.RetrievalService`,
the duplicate check and the refresher call on a snapshot. Two implementations:
:class:`gateway.retrieval.index.snapshot.IndexSnapshot` (in process, the single-host
default) and :class:`gateway.retrieval.pgvector.snapshot.PgSnapshot` (vectors
in PostgreSQL + pgvector, records and BM25 in a local mirror). Both are
immutable; ``apply`` returns a new one. Row masks are boolean ``(n,)`` arrays
in the order of ``ids``.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, Protocol, Sequence, runtime_checkable

import numpy as np

from gateway.retrieval.index.records import FilterMask, IndexEntry, IndexRecord, SemanticHit

__all__ = ["SemanticIndex"]


@runtime_checkable
class SemanticIndex(Protocol):
    """One generation's index (see the module docstring). ``generation``: its name; ``dims``: vector size."""

    generation: str
    dims: int

    def __len__(self) -> int: ...

    def __contains__(self, lesson_id: object) -> bool: ...

    @property
    def ids(self) -> tuple[str, ...]: ...

    @property
    def truncated_count(self) -> int: ...

    def record(self, lesson_id: str) -> IndexRecord | None: ...

    def retrieval_hash(self, lesson_id: str) -> str | None: ...

    def allowed_rows(self, mask: FilterMask | None) -> np.ndarray | None: ...

    def hangul_rows(self) -> np.ndarray: ...

    def quality_rows(self) -> np.ndarray: ...

    def quality(self, lesson_id: str) -> float | None: ...

    def terms(self, lesson_id: str) -> tuple[str, ...]: ...

    def lexical_search(self, query_terms: Sequence[str], k: int, *, allowed: np.ndarray | None = None,
                       exclude: Iterable[str] = ()) -> list[SemanticHit]: ...

    def search(self, facet: str, query: np.ndarray, k: int, *, allowed: np.ndarray | None = None,
               exclude: Iterable[str] = (), min_score: float | None = None) -> list[SemanticHit]: ...

    def vector(self, facet: str, lesson_id: str) -> np.ndarray | None: ...

    def vectors(self, facet: str, lesson_ids: Sequence[str]) -> dict[str, np.ndarray]: ...

    def columns(self, facet: str) -> np.ndarray: ...

    def scores(self, facet: str, query: np.ndarray) -> np.ndarray: ...

    def derived(self, key: Hashable, build: Callable[[], Any], *, pin: bool = False) -> Any: ...

    def top(self, scores: np.ndarray, k: int, *, allowed: np.ndarray | None = None, exclude: Iterable[str] = (),
            min_score: float | None = None) -> list[SemanticHit]: ...

    def needs_compaction(self) -> bool: ...

    def compacted(self) -> "SemanticIndex": ...

    def apply(self, upserts: Sequence[IndexEntry] = (), deletes: Iterable[str] = (),
              metadata_updates: Sequence[IndexRecord] = ()) -> "SemanticIndex": ...
