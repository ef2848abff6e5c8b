"""The semantic state of one refresher, what one refresh did, and a projection's index record.

:class:`SemanticState` is the mutable state the
:class:`~gateway.retrieval.indexing.refresher.IndexRefresher` keeps under its lock and
turns into the ``semantic_status`` value; :class:`RefreshOutcome` counts one
refresh; :func:`record_of` is a projection's index row record.

Status (docs/retrieval.md#semantic-status), computed by :meth:`SemanticState.status`:

* ``disabled`` — provider disabled;
* ``unavailable`` — profile mismatch, or no snapshot and the last build failed;
* ``building`` — no snapshot yet (legacy answers meanwhile);
* ``degraded`` — a snapshot serves but the last refresh failed (failed ids
  unresolved), or a Lesson's embedding failed and it is not quarantined yet
  (docs/hybrid-search.md#quarantine);
* ``stale`` — a snapshot serves but known changes are pending (queued, or
  being embedded by the running refresh), a stale hash
  was seen since the last success, or the last full reconcile is older than
  ``S3RM_SEMANTIC_MAX_LAG_SECONDS``;
* ``ready`` — otherwise.

Quarantined Lessons (docs/hybrid-search.md#quarantine) do not change the
status; their count is reported beside it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from gateway.config.profiles import WHOLE
from gateway.domain.repository import ChangePosition
from gateway.retrieval.index.analyzer import analyze
from gateway.retrieval.index.records import IndexEntry, IndexRecord, epoch_seconds
from gateway.retrieval.index.snapshot import IndexSnapshot
from gateway.retrieval.indexing.projection import ProjectionDocument

__all__ = ["SemanticState", "RefreshOutcome", "index_entry", "record_of"]


def record_of(doc: ProjectionDocument) -> IndexRecord:
    """The index record of a projection: ids, revision, hashes, times, filter scalars.

    Contract: docs/retrieval.md#index-records.
    """
    meta = doc.metadata
    return IndexRecord(lesson_id=doc.lesson_id, revision_id=doc.revision_id, retrieval_hash=doc.retrieval_hash,
                       metadata_hash=meta.metadata_hash, created_at=epoch_seconds(meta.created_at),
                       updated_at=epoch_seconds(meta.updated_at), confidence=meta.confidence,
                       record_origin=meta.record_origin, review_state=meta.review_state,
                       truncated_mask=doc.truncated_mask)


def index_entry(doc: ProjectionDocument, vectors: Mapping[str, np.ndarray]) -> IndexEntry:
    """The index entry of a projection: its record, ``vectors`` (facet → ``(dims,)``), the analysed terms
    of its ``whole`` text and its content quality (``doc.quality``, docs/hybrid-search.md#content-quality)."""
    return IndexEntry(record_of(doc), vectors, tuple(analyze(doc.text(WHOLE))), doc.quality)


@dataclass
class RefreshOutcome:
    """What one refresh did (counts only)."""

    kind: str
    examined: int = 0
    embedded: int = 0
    metadata_only: int = 0
    removed: int = 0
    failed_lessons: int = 0
    quarantined: int = 0
    swapped: bool = False
    error: str | None = None
    seconds: float = 0.0


@dataclass
class SemanticState:
    """Mutable semantic state, guarded by the refresher's lock. Times are ``clock()`` seconds."""

    enabled: bool
    snapshot: IndexSnapshot | None = None
    profile_verified: bool = False
    profile_mismatch: bool = False
    last_error: str | None = None
    failed_ids: frozenset[str] = frozenset()
    pending_ids: set[str] = field(default_factory=set)
    #: ids the running refresh took (after its diff: those it embeds) until its snapshot swaps in
    inflight_ids: set[str] = field(default_factory=set)
    full_pending: bool = False
    running: str | None = None
    last_reconcile_at: float | None = None
    last_reconcile_started: float | None = None
    last_attempt_at: float | None = None
    stale_seen: bool = False
    canonical_count: int | None = None
    missing_ids: set[str] = field(default_factory=set)
    stale_ids: set[str] = field(default_factory=set)
    orphans_removed: int = 0
    builds: int = 0
    failures: int = 0
    last_outcome: RefreshOutcome | None = None
    #: lesson id → (stream position of the delete/move, revision indexed then; 0 when none)
    tombstones: dict[str, tuple[ChangePosition, int]] = field(default_factory=dict)
    follow_error: str | None = None
    follow_lag_seconds: float | None = None
    last_poll_at: float | None = None
    #: lesson id → refreshes in a row in which its embedding failed while the provider worked
    strikes: dict[str, int] = field(default_factory=dict)
    #: Lessons whose last embedding attempt failed while the provider was busy (a timeout, no connection, HTTP
    #: 429/502/503/504): retried like a struck Lesson, never quarantined for it (docs/hybrid-search.md#quarantine)
    busy_ids: set[str] = field(default_factory=set)
    #: clock time at which the worker retries :meth:`failed_lessons` by itself (None: nothing to retry)
    lessons_retry_at: float | None = None
    #: lesson id → retrieval_hash it was quarantined at (indexed with zero vectors: full text only)
    quarantined: dict[str, str] = field(default_factory=dict)
    #: quarantined ids an operator asked to embed again (next refresh of them ignores the equal hash)
    retry_ids: set[str] = field(default_factory=set)
    #: UTC time of the newest wiki change the index has applied (docs/hybrid-search.md#freshness)
    applied_as_of: str | None = None
    #: wall-clock epoch at which the last successful build or follower poll began: every change
    #: made before it is in the index
    caught_up_wall: float | None = None

    def note_applied(self, newest_change: str | None, began_wall: float) -> None:
        """Record a successful build or poll that began at ``began_wall`` and applied changes up to
        ``newest_change`` (ISO UTC; None when it saw no change row)."""
        if newest_change and (self.applied_as_of is None or newest_change > self.applied_as_of):
            self.applied_as_of = newest_change
        if self.caught_up_wall is None or began_wall > self.caught_up_wall:
            self.caught_up_wall = began_wall

    def failed_lessons(self) -> set[str]:
        """Ids of the Lessons whose embedding failed in their last attempt and that are not quarantined."""
        return {i for i in (*self.strikes, *self.busy_ids) if i not in self.quarantined}

    def lesson_failures(self) -> int:
        """How many :meth:`failed_lessons` there are."""
        return len(self.failed_lessons())

    def status(self, now: float, max_lag: float) -> str:
        """The semantic_status value (module docstring, docs/retrieval.md#semantic-status)."""
        if not self.enabled:
            return "disabled"
        if self.profile_mismatch:
            return "unavailable"
        if self.snapshot is None:
            return "unavailable" if self.last_error else "building"
        if self.last_error or self.lesson_failures():
            return "degraded"
        lagging = self.last_reconcile_at is None or now - self.last_reconcile_at > max_lag
        if self.pending_ids or self.inflight_ids or self.stale_seen or lagging:
            return "stale"
        return "ready"
