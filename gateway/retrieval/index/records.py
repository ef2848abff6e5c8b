"""Plain records of the semantic index: a row's record, an entry to upsert, a hit, a filter mask.

Shared by every :class:`~gateway.retrieval.index.backend.SemanticIndex` implementation
(the in-process :mod:`gateway.retrieval.index.snapshot` and :mod:`gateway.retrieval.pgvector`)
and by the refresher that feeds them. Fields are described in
docs/retrieval.md#index-records. No Lesson text is held here.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Mapping

import numpy as np

__all__ = ["IndexEntry", "IndexRecord", "SemanticHit", "FilterMask", "epoch_seconds"]


def epoch_seconds(timestamp: str) -> int:
    """UTC ISO-8601 ``YYYY-MM-DDTHH:MM:SSZ`` → integer epoch seconds (0 when unparsable)."""
    try:
        return int(datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp())
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class IndexRecord:
    """One row's record (ids, revision, hashes, times, filter scalars; no text)."""

    lesson_id: str
    revision_id: int
    retrieval_hash: str
    metadata_hash: str
    created_at: int
    updated_at: int
    confidence: str
    record_origin: str
    review_state: str
    truncated_mask: int = 0


@dataclass(frozen=True)
class IndexEntry:
    """A record, its facet vectors (each ``(dims,)`` float32, L2-normalised or all zero), lexical terms and
    content quality in [0, 1] (:func:`gateway.retrieval.quality.lesson_quality`; 1.0 when not computed)."""

    record: IndexRecord
    vectors: Mapping[str, np.ndarray]
    terms: tuple[str, ...] = ()
    quality: float = 1.0


@dataclass(frozen=True)
class SemanticHit:
    """A semantic candidate: Lesson id, 1-based rank in its facet channel, cosine score."""

    lesson_id: str
    rank: int
    score: float


@dataclass(frozen=True)
class FilterMask:
    """Pre-filter on indexed scalars (an optimisation; final filters use fresh MediaWiki data).

    Empty tuples mean "any". Times are epoch seconds; ``updated_before`` is exclusive.
    """

    confidence: tuple[str, ...] = ()
    record_origin: tuple[str, ...] = ()
    review_state: tuple[str, ...] = ()
    updated_after: int | None = None
    updated_before: int | None = None

    @property
    def is_empty(self) -> bool:
        """True when the mask keeps every row."""
        return not (self.confidence or self.record_origin or self.review_state
                    or self.updated_after is not None or self.updated_before is not None)
