"""The ONE background worker that builds and refreshes the semantic index, and the semantic status.

Contract: docs/retrieval.md#index-lifecycle, docs/retrieval.md#semantic-status,
docs/retrieval.md#revalidation, docs/retrieval.md#generation,
docs/tools.md#dirty-hint, docs/retrieval.md#one-process.

One :class:`IndexRefresher` per process (gunicorn runs one worker process
with threads, docs/retrieval.md#one-process) owns one daemon thread. It is woken by:

* **prewarm** — :meth:`start` queues a full build at process start;
* **dirty hints** — :meth:`hint_dirty` after an MCP create or core revise
  (and :meth:`queue_reembed` / :meth:`queue_cleanup` from hybrid revalidation:
  a stale hash or a missing page); the worker re-reads just those Lessons;
* **due reconcile** — :meth:`maybe_reconcile`, called by every hybrid
  request, queues a full reconcile once ``S3RM_SEMANTIC_RECONCILE_SECONDS``
  passed since the last one (the repair path);
* **a failed first build** — while no snapshot serves and the last build
  failed (not a profile mismatch), the worker builds again by itself
  :data:`FAILURE_RETRY_SECONDS` after that attempt (finished batches are in
  the vector memo and cache, so it resumes);
* **failed Lessons** — while a snapshot serves and some Lessons failed to
  embed in their last attempt (not quarantined), the worker refreshes just
  those :data:`FAILURE_RETRY_SECONDS` after the refresh that left them failed
  (docs/hybrid-search.md#quarantine), so an unqueried gateway gets past ``degraded``;
* **the recent-changes follower** (docs/hybrid-search.md#follower) — when
  idle, every ``S3RM_SEMANTIC_FOLLOW_SECONDS`` the worker polls
  :class:`~gateway.retrieval.indexing.follower.ChangeFollower` and applies the batch
  as a ``follow`` refresh of just those ids (how browser and API edits made
  outside MCP, deletes, moves and undeletes are found within seconds); the
  checkpoint is committed after the swap; a gap queues a full rebuild whose
  start-time stream head becomes the checkpoint. Deletes and moves leave
  tombstones (docs/hybrid-search.md#tombstones) that hybrid results are
  checked against at answer time, so an in-flight search on an older
  snapshot does not return them either.

None of these calls blocks or waits; no request ever waits for a refresh.

A refresh reads fresh snapshots (full scan in batches of 50, or the dirty
ids), projects them with the generation's :class:`ProjectionBuilder`, and
diffs against the current snapshot: a new or changed ``retrieval_hash`` is
re-embedded; an equal hash with another revision or metadata only updates the
record (no embedding); an indexed id that no longer exists is removed. An
unchanged reconcile makes zero embedding calls. When the provider is down
(open circuit, full queue, a failed probe), nothing is swapped
(docs/retrieval.md#index-lifecycle): the old snapshot keeps serving and the
status becomes ``degraded`` (``unavailable`` without one). When only some
Lessons fail while the provider embeds other texts, the rest is swapped in
and those Lessons count a strike; after ``S3RM_SEMANTIC_QUARANTINE_AFTER``
strikes a Lesson is quarantined (docs/hybrid-search.md#quarantine): indexed
with zero vectors, so only full text finds it, and counted in ``/readyz``
until an edit changes its ``retrieval_hash`` or :meth:`retry_quarantined`.
Before the first activation (and after any failure) the provider is probed
against the pinned profile; a mismatch blocks activation (docs/retrieval.md#generation).

Status (docs/retrieval.md#semantic-status) is computed by
:meth:`gateway.retrieval.indexing.semantic_state.SemanticState.status`.

Logs and metrics carry counts, durations, generation and error codes only.
"""
from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

import numpy as np

from gateway.core.errors import ToolError
from gateway.domain.repository import LessonRepository, RepositoryError, SNAPSHOT_BATCH
from gateway.domain.repository import ChangePosition
from gateway.domain.timestamps import format_ts
from gateway.retrieval.embedding.errors import (CircuitOpen, EmbeddingDisabled, EmbeddingError, EmbeddingSaturated,
                                               ProviderProfileMismatch)
from gateway.retrieval.embedding.client import EmbeddingProvider
from gateway.retrieval.indexing.follower import ChangeFollower, FollowBatch
from gateway.retrieval.index.records import epoch_seconds
from gateway.retrieval.index.snapshot import IndexSnapshot
from gateway.retrieval.indexing.progress import BuildProgress
from gateway.retrieval.index.analyzer import analyzer
from gateway.config.profiles import INDEX_FACETS
from gateway.retrieval.indexing.projection import ProjectionBuilder, ProjectionDocument
from gateway.retrieval.indexing.semantic_state import RefreshOutcome, SemanticState, index_entry, record_of
from gateway.config.retrieval import RetrievalSettings

__all__ = ["IndexRefresher"]

log = logging.getLogger("s3rm.semantic")

#: Upper bound of scan batches in one full reconcile (50 × 20,000 = one million Lessons).
MAX_SCAN_BATCHES = 20000
#: After a failed refresh, the next hybrid request may start a reconcile after this many seconds.
FAILURE_RETRY_SECONDS = 30.0
#: Tombstones kept at most (oldest dropped first; a full reconcile also clears those it covers).
MAX_TOMBSTONES = 100_000
#: Errors that say the provider itself cannot embed now: never a single Lesson's fault.
PROVIDER_DOWN = (CircuitOpen, EmbeddingSaturated, EmbeddingDisabled, ProviderProfileMismatch)


class IndexRefresher:
    """Owns the current :class:`IndexSnapshot` of one generation and the single worker thread.

    Args:
        repository: the Lesson repository (reads only).
        provider: the embedding provider (shared admission gate with queries).
        builder: projection builder of this generation.
        generation: generation id (:func:`gateway.config.profiles.generation_id`).
        settings: reconcile interval and max lag.
        clock: monotonic seconds (injectable).
        metrics: optional ``gateway.ops.metrics.Metrics``.
        follower: optional :class:`ChangeFollower` polled every ``settings.follow_seconds`` when idle.
        wall: wall-clock epoch seconds (follower lag).
        prepare: optional hook run in this worker on every snapshot before it serves (the ranking's
            query-independent arrays into the snapshot's own cache,
            :func:`gateway.retrieval.hybrid.channels.prepare_snapshot`; docs/hybrid-search.md#k-occurrence).
    """

    def __init__(self, repository: LessonRepository, provider: EmbeddingProvider, builder: ProjectionBuilder,
                 generation: str, settings: RetrievalSettings, *, clock: Callable[[], float] = time.monotonic,
                 metrics: Any = None, follower: ChangeFollower | None = None,
                 wall: Callable[[], float] = time.time, prepare: Callable[[Any], None] | None = None):
        self.repository = repository
        self.prepare = prepare
        self.provider = provider
        self.builder = builder
        self.generation = generation
        self.settings = settings
        self.clock = clock
        self.metrics = metrics
        self.follower = follower if settings.follow_seconds > 0 else None
        self.wall = wall
        self.dims = provider.profile.dims
        self._cond = threading.Condition()
        self._state = SemanticState(enabled=provider.enabled)
        self._thread: threading.Thread | None = None
        self._stop = False
        self._idle = threading.Event()
        self._idle.set()
        self._next_follow = 0.0
        self._progress = BuildProgress(clock)  # indexed / total / eta_seconds in health()

    # ------------------------------------------------------------ control
    def start(self) -> bool:
        """Start the worker once and queue the prewarm build; False when disabled or already started."""
        with self._cond:
            if not self._state.enabled or self._thread is not None:
                return False
            self._state.full_pending = True
            self._idle.clear()
            self._thread = threading.Thread(target=self._run, name="s3rm-semantic-refresher", daemon=True)
            self._thread.start()
            return True

    def adopt(self, snapshot: IndexSnapshot) -> None:
        """Serve ``snapshot`` (same generation and dims) until the next refresh replaces it.

        For a warm start from a snapshot built elsewhere in this process (tests,
        benchmarks); the next full reconcile still checks every Lesson against
        MediaWiki. Raises ValueError for another generation or dimension.
        """
        if snapshot.generation != self.generation or snapshot.dims != self.dims:
            raise ValueError("snapshot belongs to another generation")
        self._prepared(snapshot)
        with self._cond:
            self._state.snapshot = snapshot

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the worker to stop after its current step and wait up to ``timeout`` seconds."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def hint_dirty(self, lesson_id: str) -> None:
        """Queue one Lesson for refresh after an MCP create or core revise (docs/tools.md#dirty-hint). Never raises."""
        try:
            self._queue([lesson_id])
        except Exception:  # pragma: no cover - a hint must never fail a write
            log.exception("dirty hint failed")

    def queue_reembed(self, lesson_ids: Iterable[str]) -> None:
        """Revalidation saw stale hashes: refresh these, ``stale`` until done (docs/retrieval.md#revalidation)."""
        ids = list(lesson_ids)
        if ids:
            with self._cond:
                self._state.stale_seen = True
                self._state.stale_ids.update(ids)
            self._queue(ids)

    def queue_cleanup(self, lesson_ids: Iterable[str]) -> None:
        """Revalidation found these pages missing: drop their vectors next refresh (docs/retrieval.md#revalidation)."""
        ids = list(lesson_ids)
        if ids:
            with self._cond:
                self._state.missing_ids.update(ids)
            self._queue(ids)

    def queue_metadata(self, lesson_ids: Iterable[str]) -> None:
        """Metadata-only changes: refresh filter scalars without re-embedding (docs/retrieval.md#revalidation)."""
        self._queue(list(lesson_ids))

    def is_tombstoned(self, lesson_id: str, revision_id: int) -> bool:
        """True when ``lesson_id`` was deleted or moved away and ``revision_id`` is not newer than what it had.

        Hybrid results are checked with this at answer time
        (docs/hybrid-search.md#tombstones): a page read back at its old
        revision (an undelete the follower has not applied yet, a lagging
        read) stays hidden; a page created again (a newer revision) does not.
        """
        with self._cond:
            tomb = self._state.tombstones.get(lesson_id)
        return tomb is not None and revision_id <= tomb[1]

    def tombstones(self) -> dict[str, ChangePosition]:
        """Current tombstones: Lesson id → stream position of its delete or move (a copy)."""
        with self._cond:
            return {i: t[0] for i, t in self._state.tombstones.items()}

    def shadow_target(self) -> Any:
        """The running shadow comparison (:class:`gateway.retrieval.hybrid.shadow.ShadowTarget`), None here: the
        in-process index has one generation (docs/operations.md#shadow-queries)."""
        return None

    def retry_quarantined(self) -> int:
        """Embed every quarantined Lesson once more at its next refresh (docs/hybrid-search.md#quarantine).

        Returns how many were queued. A Lesson that fails again goes back to quarantine at once.
        """
        with self._cond:
            ids = set(self._state.quarantined)
            self._state.retry_ids |= ids
        self._queue(sorted(ids))
        return len(ids)

    def quarantined_count(self) -> int:
        """Lessons in quarantine (docs/hybrid-search.md#quarantine); never their ids or text."""
        with self._cond:
            return len(self._state.quarantined)

    def maybe_reconcile(self) -> bool:
        """Queue a full reconcile when the interval has passed since the last one started; never blocks."""
        with self._cond:
            st = self._state
            if not st.enabled or self._thread is None or st.full_pending or st.running == "full":
                return False
            last = st.last_reconcile_started
            interval = self.settings.reconcile_seconds
            if st.last_error or st.lesson_failures():  # degraded/unavailable: retry sooner, still bounded
                interval = min(interval, FAILURE_RETRY_SECONDS)
            if last is not None and self.clock() - last < interval:
                return False
            st.full_pending = True
            self._idle.clear()
            self._cond.notify_all()
            return True

    def request_reconcile(self) -> None:
        """Queue a full reconcile now (admin/bench use; requests use :meth:`maybe_reconcile`)."""
        with self._cond:
            if self._state.enabled:
                self._state.full_pending = True
                self._idle.clear()
                self._cond.notify_all()

    def _queue(self, ids: list[str]) -> None:
        with self._cond:
            if not self._state.enabled or not ids:
                return
            self._state.pending_ids.update(ids)
            self._idle.clear()
            self._cond.notify_all()

    # ------------------------------------------------------------ reading
    def current(self) -> IndexSnapshot | None:
        """The active snapshot (immutable; None before the first successful build)."""
        return self._state.snapshot

    def status(self) -> str:
        """Current semantic_status (docs/retrieval.md#semantic-status)."""
        with self._cond:
            return self._state.status(self.clock(), self.settings.max_lag_seconds)

    @property
    def last_outcome(self) -> RefreshOutcome | None:
        """What the most recent refresh did (counts only), None before the first."""
        return self._state.last_outcome

    def health(self) -> dict[str, Any]:
        """Counts and states for ``/readyz`` (no configuration values, no content)."""
        with self._cond:
            st = self._state
            now = self.clock()
            snap = st.snapshot
            jailed = sum(1 for i in st.quarantined if snap is not None and i in snap)
            out: dict[str, Any] = {
                "status": st.status(now, self.settings.max_lag_seconds),
                "indexed": len(snap) - jailed if snap is not None else 0,
                "lessons": st.canonical_count,
                "pending": self._pending(st),
                "failed": len(st.failed_ids | st.failed_lessons()),
                "quarantined": len(st.quarantined),
                "missing": len(st.missing_ids),
                "stale_hashes": len(st.stale_ids),
                "orphans": st.orphans_removed,
                "truncated": snap.truncated_count if snap is not None else 0,
                "refreshing": st.running is not None,
                "last_reconcile_age_seconds": None if st.last_reconcile_at is None
                else round(now - st.last_reconcile_at, 1),
                "error": st.last_error,
                "tombstones": len(st.tombstones),
            }
            out.update(self.freshness())
            out.update(self._progress.fields(len(snap) if snap is not None else 0, jailed, st.canonical_count))
            if self.follower is not None:
                position = self.follower.position
                out["recent_changes_lag_seconds"] = st.follow_lag_seconds
                out["last_poll_age_seconds"] = None if st.last_poll_at is None else round(now - st.last_poll_at, 1)
                out["follow"] = {"checkpoint": position.timestamp if position else None,
                                 "checkpoint_rcid": position.rcid if position else None,
                                 "lag_seconds": st.follow_lag_seconds, "error": st.follow_error}
        stats = self.provider.stats()
        out["breaker"] = stats.get("breaker")
        if "document_breaker" in stats:  # a second server for Lesson texts (docs/hybrid-search.md#document-server)
            out["document_breaker"] = stats["document_breaker"]
        out["queue"] = {k: stats[k] for k in ("in_use", "waiting", "rejected") if k in stats}
        return out

    def _pending(self, st: SemanticState) -> int:
        """Lessons with known changes not yet searchable at their new text: queued ones, and those of the
        running refresh not embedded yet (caller holds the lock; docs/hybrid-search.md#build-progress)."""
        remaining = self._progress.remaining()
        running = len(st.inflight_ids) if remaining is None else remaining
        return len(st.pending_ids - st.inflight_ids) + running

    def freshness(self) -> dict[str, Any]:
        """``index_as_of`` (newest applied change, UTC) and ``index_lag_seconds`` (seconds since the last
        successful build or poll began); empty before the first (docs/hybrid-search.md#freshness)."""
        with self._cond:
            st = self._state
            if st.caught_up_wall is None:
                return {}
            out: dict[str, Any] = {"index_lag_seconds": round(max(0.0, self.wall() - st.caught_up_wall), 1)}
            if st.applied_as_of:
                out["index_as_of"] = st.applied_as_of
            return out

    def wait_idle(self, timeout: float) -> bool:
        """Block until no refresh is queued or running (tests and benchmarks only; requests never call it)."""
        return self._idle.wait(timeout)

    # ------------------------------------------------------------- worker
    def request_follow(self) -> None:
        """Poll the recent-changes follower now instead of at its next interval (admin/test use); a
        :meth:`wait_idle` after it returns once that poll has run (not before the worker has woken)."""
        with self._cond:
            self._next_follow = 0.0
            if self.follower is not None and self._state.snapshot is not None:
                self._idle.clear()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop and not self._state.full_pending and not self._state.pending_ids:
                    due = self.follower is not None and self._state.snapshot is not None
                    if due and self.clock() >= self._next_follow:
                        break
                    retry_at = self._build_retry_at()
                    if retry_at is not None and self.clock() >= retry_at:
                        self._state.full_pending = True  # a failed first build is tried again unasked
                        break
                    lesson_retry_at = self._lesson_retry_at()
                    if lesson_retry_at is not None and self.clock() >= lesson_retry_at:
                        self._state.pending_ids.update(self._state.failed_lessons())  # so are failed Lessons
                        self._state.lessons_retry_at = self.clock() + FAILURE_RETRY_SECONDS  # also if it fails
                        break
                    self._idle.set()
                    waits = ([self._next_follow] if due else []) + \
                        [t for t in (retry_at, lesson_retry_at) if t is not None]
                    self._cond.wait(max(0.0, min(waits) - self.clock()) if waits else None)
                if self._stop:
                    self._idle.set()
                    return
                st = self._state
                if st.full_pending or st.snapshot is None:
                    kind, ids = "full", set(st.pending_ids)
                    st.full_pending = False
                    st.last_reconcile_started = self.clock()
                elif st.pending_ids:
                    kind, ids = "dirty", set(st.pending_ids)
                else:
                    kind, ids = "follow", set()
                st.pending_ids.clear()
                st.running = kind
                st.last_attempt_at = self.clock()
            if kind == "follow":
                with self._cond:
                    self._next_follow = self.clock() + self.settings.follow_seconds
                self._follow()
                with self._cond:
                    self._state.running = None
                continue
            try:
                outcome = self._refresh(kind, ids)
            except Exception as exc:  # defensive: the worker must survive anything
                log.exception("semantic refresh crashed")
                outcome = self._fail(RefreshOutcome(kind), exc, ids)
            with self._cond:
                self._state.running = None
                self._state.last_outcome = outcome
            self._observe(outcome)

    def _build_retry_at(self) -> float | None:
        """When no snapshot serves because the last build failed (not a profile mismatch): the clock time
        at which the worker builds again by itself, :data:`FAILURE_RETRY_SECONDS` after that attempt.

        Without it a first build that failed (an embedding server still loading or timing out under
        load) waited for a hybrid request to call :meth:`maybe_reconcile`, and ``s3rm stack up
        --wait-semantic`` or a restarted gateway nobody queries stayed ``unavailable``. Caller holds
        the lock."""
        st = self._state
        if st.snapshot is not None or not st.last_error or st.profile_mismatch or st.last_attempt_at is None:
            return None
        return st.last_attempt_at + FAILURE_RETRY_SECONDS

    def _lesson_retry_at(self) -> float | None:
        """While a snapshot serves and some Lessons failed to embed in their last attempt (a busy provider or a
        strike, not quarantined): the clock time at which the worker refreshes just those Lessons by itself,
        :data:`FAILURE_RETRY_SECONDS` after the refresh that left them failed ended (docs/hybrid-search.md#quarantine).

        Hybrid requests retry them sooner through :meth:`maybe_reconcile`; without this, a gateway nobody
        queries (``s3rm stack up --wait-semantic`` reads only ``/readyz``) stayed ``degraded``. Caller holds
        the lock."""
        st = self._state
        if st.snapshot is None or st.lessons_retry_at is None or not st.failed_lessons():
            return None
        return st.lessons_retry_at

    def _refresh(self, kind: str, ids: set[str]) -> RefreshOutcome:
        started = self.clock()
        outcome = RefreshOutcome(kind)
        needed: set[str] = set(ids)
        began_wall = self.wall()
        head = self._stream_head() if kind == "full" else None
        with self._cond:
            force = set(self._state.retry_ids)
            self._state.inflight_ids = set(ids)
        try:
            if self._state.snapshot is None:
                analyzer()  # load Kiwi before the first snapshot serves: no request ever waits for it
            if not self._state.profile_verified:
                self.provider.probe()
                with self._cond:
                    self._state.profile_verified = True
            fresh = self._scan_all() if kind == "full" else self.repository.get_snapshots(sorted(ids))
            base = self._state.snapshot or IndexSnapshot.empty(self.generation, self.dims)
            docs = {lesson_id: self.builder.build_snapshot(snap) for lesson_id, snap in fresh.items()}
            upserts, metadata = self._diff(base, docs, force)
            needed |= {doc.lesson_id for doc in upserts}
            removed = [i for i in base.ids if i not in fresh] if kind == "full" else \
                sorted(i for i in ids if i not in fresh and i in base)
            with self._cond:
                self._state.inflight_ids = {doc.lesson_id for doc in upserts}
            new = sum(1 for doc in upserts if doc.lesson_id not in base)
            with self._progress.tracking(self.provider, len(docs), upserts, new=new, full=kind == "full"):
                vectors, failures = self._embed(upserts)
        except (EmbeddingError, RepositoryError, ToolError) as exc:
            return self._fail(outcome, exc, needed)
        busy = {i for i, error in failures.items() if not error.blames_text}
        with self._cond:
            strikes = {i: self._state.strikes.get(i, 0) + 1 for i in failures if i not in busy}
        jailed = {i for i, n in strikes.items() if n >= self.settings.quarantine_after}
        for doc in upserts:
            if doc.lesson_id in jailed:  # indexed for full text only: an equal hash is not retried
                vectors[doc.lesson_id] = {f: np.zeros(self.dims, np.float32) for f in INDEX_FACETS}
        entries = [index_entry(doc, vectors[doc.lesson_id]) for doc in upserts if doc.lesson_id in vectors]
        outcome.failed_lessons, outcome.quarantined = len(failures) - len(jailed), len(jailed)
        if failures:
            log.warning("semantic refresh: %d Lesson(s) failed to embed, %d of them while the provider was busy, "
                        "%d quarantined (kind=%s codes=%s generation=%s)", len(failures), len(busy), len(jailed), kind,
                        ",".join(sorted({e.code for e in failures.values()})), self.generation)
        outcome.examined = len(docs)
        outcome.embedded, outcome.metadata_only, outcome.removed = len(entries) - len(jailed), len(metadata), len(removed)
        changed = bool(entries or metadata or removed) or self._state.snapshot is None
        new = self._prepared(base.apply(entries, removed, [record_of(d) for d in metadata])) if changed else base
        with self._cond:
            st = self._state
            st.snapshot = new
            st.inflight_ids = set()
            st.profile_mismatch = False
            st.last_error = None
            st.failed_ids = frozenset()
            st.stale_seen = False
            st.builds += 1
            # a failed Lesson that never reached the index is in neither ``docs`` nor ``removed`` once deleted:
            # a refresh that read it and found no page forgets its failure too (or it stays ``degraded``)
            gone = {i for i in (*st.strikes, *st.busy_ids) if i not in fresh and (kind == "full" or i in ids)}
            st.busy_ids = (st.busy_ids - set(docs) - set(removed) - gone) | busy
            for lesson_id in gone:
                st.strikes.pop(lesson_id, None)
            for lesson_id in set(docs) | set(removed):
                if lesson_id in strikes:
                    st.strikes[lesson_id] = strikes[lesson_id]
                elif lesson_id in busy:  # not the Lesson's fault: neither a strike nor a clean attempt
                    pass
                elif lesson_id in removed or lesson_id in vectors:
                    st.strikes.pop(lesson_id, None)
                    st.quarantined.pop(lesson_id, None)
                if lesson_id in jailed:
                    st.quarantined[lesson_id] = docs[lesson_id].retrieval_hash
            st.retry_ids -= (set(docs) | set(removed)) - busy  # a busy provider did not try the text: kept
            st.lessons_retry_at = self.clock() + FAILURE_RETRY_SECONDS if st.failed_lessons() else None
            done = set(fresh) | set(removed) | (ids if kind != "full" else set(base.ids))
            st.missing_ids -= done
            st.stale_ids -= done
            if kind == "full":
                st.last_reconcile_at = self.clock()
                st.canonical_count = len(fresh)
                st.orphans_removed = len(removed)
                st.missing_ids.clear()
                st.stale_ids.clear()
                if head is not None:  # tombstones up to the head are reflected by this scan
                    st.tombstones = {i: t for i, t in st.tombstones.items() if t[0] > head}
            elif st.canonical_count is not None:  # a dirty or follow refresh: keep the Lesson count current
                st.canonical_count += sum(1 for i in fresh if i not in base) - sum(1 for i in removed if i in base)
        outcome.swapped = changed
        outcome.seconds = self.clock() - started
        if changed and new.needs_compaction():
            self._compact(new)
        if head is not None:
            self._commit(lambda: self.follower.commit_position(head))
        if kind == "full":
            with self._cond:
                self._state.note_applied(head.timestamp if head is not None else format_ts(datetime.fromtimestamp(began_wall, timezone.utc)), began_wall)
        return outcome

    def _compact(self, built: IndexSnapshot) -> None:
        """Merge the snapshot's segments into one (docs/hybrid-search.md#segments); swap it in if still current.

        Runs in this worker (no request waits); the merged snapshot answers
        exactly like the segmented one, so the swap changes no result.
        """
        started = self.clock()
        merged = self._prepared(built.compacted())  # same rows and order: takes over what ``built`` holds
        with self._cond:
            if self._state.snapshot is built:
                self._state.snapshot = merged
        if self.metrics is not None:
            self.metrics.observe("semantic_compaction_seconds", self.clock() - started)

    def _prepared(self, snapshot: Any) -> Any:
        """``snapshot`` after the :attr:`prepare` hook ran on it (in the calling worker, before it serves).

        A failing hook is logged and counted (``semantic_prepare_errors``) and the snapshot serves
        anyway: what the hook did not compute, the request path computes on first use. Its duration
        is ``semantic_prepare_seconds``."""
        if self.prepare is None:
            return snapshot
        started = self.clock()
        try:
            self.prepare(snapshot)
        except Exception as exc:  # a missing precomputation must never block a refresh
            log.warning("snapshot preparation failed (code=%s generation=%s)", type(exc).__name__,
                        snapshot.generation)
            if self.metrics is not None:
                self.metrics.incr("semantic_prepare_errors")
        if self.metrics is not None:
            self.metrics.observe("semantic_prepare_seconds", self.clock() - started)
        return snapshot

    # ----------------------------------------------------------- follower
    def _stream_head(self) -> ChangePosition | None:
        """The stream head before a full scan (the checkpoint it earns), None without a follower or on error."""
        if self.follower is None:
            return None
        try:
            return self.follower.head()
        except (RepositoryError, ToolError) as exc:
            self._follow_failed(exc)
            return None

    def _follow(self) -> None:
        """One follower poll and the ``follow`` refresh of its ids (docs/hybrid-search.md#follower)."""
        began_wall = self.wall()
        try:
            batch = self.follower.poll()
        except (RepositoryError, ToolError) as exc:
            self._follow_failed(exc)
            return
        if batch.gap is not None:
            log.warning("recent-changes gap (%s): full rebuild (generation=%s)", batch.gap, self.generation)
            if self.metrics is not None:
                self.metrics.incr("semantic_follow_rebuilds", cause=batch.gap)
            with self._cond:
                self._state.full_pending = True
                self._idle.clear()
            return
        self._bury(batch)
        if batch.refresh:
            self._idle.clear()
            outcome = self._refresh("follow", set(batch.refresh))
            with self._cond:
                self._state.last_outcome = outcome
            self._observe(outcome)
            if outcome.error is not None:
                return
        self._commit(lambda: self.follower.commit(batch))
        lag = None if batch.newest_timestamp is None else max(0.0, self.wall() - epoch_seconds(batch.newest_timestamp))
        with self._cond:
            self._state.note_applied(batch.newest_timestamp, began_wall)
            self._state.follow_error = None
            self._state.last_poll_at = self.clock()
            if lag is not None:
                self._state.follow_lag_seconds = round(lag, 1)
        if self.metrics is not None:
            for change_kind, count in batch.counts.items():
                self.metrics.incr("semantic_follow_changes", count, kind=change_kind)
            if lag is not None:
                self.metrics.observe("semantic_follow_lag_seconds", lag)
            self.metrics.incr("semantic_follow_polls", outcome="ok")

    def _bury(self, batch: FollowBatch) -> None:
        """Record the batch's tombstones and lift revived ones BEFORE its refresh swaps (answer-time check)."""
        with self._cond:
            st = self._state
            snap = st.snapshot
            for lesson_id in batch.revived:
                st.tombstones.pop(lesson_id, None)
            for lesson_id, position in batch.tombstones.items():
                record = snap.record(lesson_id) if snap is not None else None
                st.tombstones[lesson_id] = (position, record.revision_id if record else 0)
            while len(st.tombstones) > MAX_TOMBSTONES:
                st.tombstones.pop(next(iter(st.tombstones)))

    def _commit(self, save: Callable[[], None]) -> None:
        try:
            save()
        except OSError as exc:
            self._follow_failed(exc)

    def _follow_failed(self, exc: Exception) -> None:
        code = getattr(exc, "code", None) or type(exc).__name__
        with self._cond:
            self._state.follow_error = code
        log.warning("recent-changes follower failed (code=%s generation=%s)", code, self.generation)
        if self.metrics is not None:
            self.metrics.incr("semantic_follow_polls", outcome=code)

    def _scan_all(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        cursor: str | None = None
        for _ in range(MAX_SCAN_BATCHES):
            page = self.repository.scan_snapshots(cursor, SNAPSHOT_BATCH)
            for snap in page.snapshots:
                out[snap.id] = snap
            cursor = page.next_cursor
            if not cursor:
                return out
        raise RepositoryError("full reconcile exceeded its scan bound")

    @staticmethod
    def _diff(base: IndexSnapshot, docs: dict[str, ProjectionDocument], force: set[str] = frozenset()):
        """Split fresh projections into (new or changed retrieval_hash, metadata/revision-only change);
        ids in ``force`` (quarantined Lessons an operator retries) are re-embedded whatever their hash."""
        upserts, metadata = [], []
        for lesson_id in sorted(docs):
            doc = docs[lesson_id]
            record = base.record(lesson_id)
            if record is not None and record.revision_id > doc.revision_id:
                continue  # an older read never replaces a newer indexed revision
            if record is None or record.retrieval_hash != doc.retrieval_hash or lesson_id in force:
                upserts.append(doc)
            elif record.revision_id != doc.revision_id or record.metadata_hash != doc.metadata.metadata_hash:
                metadata.append(doc)
        return upserts, metadata

    def _embed(self, docs: list[ProjectionDocument]) -> tuple[dict[str, dict[str, Any]], dict[str, EmbeddingError]]:
        """Vectors of ``docs`` and the Lessons that failed on their own: ``(vectors, {lesson_id: its last error})``;
        an error whose ``blames_text`` is False (a timeout, no connection, HTTP 429/502/503/504: the provider
        was busy) counts no strike.

        One batched call first. When it fails with an error that can belong to one
        text (an invalid answer or HTTP 4xx, a timeout, a 5xx), the failing group is
        halved until every failing Lesson stands alone; all halves of one level are
        tried before any is halved again, so one bad Lesson never gives the circuit
        breaker more than two failures in a row. When no Lesson could be embedded at
        all, the provider's probe decides: a failed probe (or :data:`PROVIDER_DOWN`
        at any step) raises, and nobody is blamed (docs/hybrid-search.md#quarantine).
        """
        try:
            return self._embed_all(docs), {}
        except PROVIDER_DOWN:
            raise
        except EmbeddingError as exc:
            failing: list[tuple[list[ProjectionDocument], EmbeddingError]] = [(docs, exc)]
        vectors: dict[str, dict[str, Any]] = {}
        failures: dict[str, EmbeddingError] = {}
        while failing:
            halves = []
            for group, error in failing:
                if len(group) == 1:
                    failures[group[0].lesson_id] = error
                else:
                    halves += [group[:len(group) // 2], group[len(group) // 2:]]
            failing = []
            for half in halves:
                try:
                    vectors.update(self._embed_all(half, retries=0))
                except PROVIDER_DOWN:
                    raise
                except EmbeddingError as exc:
                    failing.append((half, exc))
        if not vectors:
            self.provider.probe()  # raises when the provider cannot embed anything
        return vectors, failures

    def _embed_all(self, docs: list[ProjectionDocument], **kwargs: Any) -> dict[str, dict[str, Any]]:
        """Embed every non-empty facet of ``docs`` in one batched call; empty facets get zero vectors."""
        texts, slots = [], []
        for doc in docs:
            for facet in INDEX_FACETS:
                text = doc.text(facet)
                if text:
                    texts.append(text)
                    slots.append((doc.lesson_id, facet))
        matrix = (self.provider.embed_documents(texts, facets=[facet for _, facet in slots], **kwargs)
                  if texts else np.zeros((0, self.dims), np.float32))
        out: dict[str, dict[str, Any]] = {d.lesson_id: {f: np.zeros(self.dims, np.float32) for f in INDEX_FACETS}
                                          for d in docs}
        for row, (lesson_id, facet) in enumerate(slots):
            out[lesson_id][facet] = matrix[row]
        return out

    def _fail(self, outcome: RefreshOutcome, exc: Exception, ids: Iterable[str]) -> RefreshOutcome:
        """Keep the old snapshot; record the failure or the profile mismatch.

        Contract: docs/retrieval.md#index-lifecycle, docs/retrieval.md#generation.
        """
        outcome.error = getattr(exc, "code", None) or type(exc).__name__
        mismatch = isinstance(exc, ProviderProfileMismatch)
        with self._cond:
            st = self._state
            st.inflight_ids = set()
            st.last_error = outcome.error
            st.failed_ids = frozenset(st.failed_ids | set(ids))
            st.failures += 1
            st.profile_verified = False
            st.profile_mismatch = st.profile_mismatch or mismatch
        if mismatch:
            log.error("semantic index blocked: the served model does not match the profile (generation=%s)",
                      self.generation)
        else:
            log.warning("semantic refresh failed (kind=%s code=%s generation=%s)", outcome.kind, outcome.error,
                        self.generation)
        return outcome

    def _observe(self, outcome: RefreshOutcome) -> None:
        if self.metrics is None:
            return
        labels = {"kind": outcome.kind, "outcome": outcome.error or "ok"}
        self.metrics.incr("semantic_refreshes", **labels)
        self.metrics.observe("semantic_refresh_seconds", outcome.seconds, kind=outcome.kind)
        self.metrics.incr("semantic_embedded_lessons", outcome.embedded, kind=outcome.kind)
        self.metrics.incr("semantic_metadata_updates", outcome.metadata_only, kind=outcome.kind)
        self.metrics.incr("semantic_removed_lessons", outcome.removed, kind=outcome.kind)
