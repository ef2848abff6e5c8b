"""The shared-store refresher: one indexer leader per generation, every other gateway only follows.

Contract: docs/operations.md#indexer-leader, docs/operations.md#generations,
docs/hybrid-search.md#pgvector-backend, docs/retrieval.md#semantic-status.

:class:`SharedRefresher` is an :class:`~gateway.retrieval.indexing.refresher.IndexRefresher`
whose snapshots are :class:`~gateway.retrieval.pgvector.snapshot.PgSnapshot`
views. Its one thread wakes every ``S3RM_PG_POLL_SECONDS`` (or at once on a hint) and:

1. a heartbeat thread takes or renews the lease of the generation it serves
   every third of ``S3RM_PG_LEASE_SECONDS`` (:meth:`PgStore.acquire`), so a
   long refresh never lets a live leader's lease lapse;
2. follows the alias: the served generation is the ``active`` one when it was
   built from this gateway's inputs (same profile, projection and ranking:
   its name is this gateway's generation id, optionally with a ``.label``
   suffix), else this gateway's own generation; a flip swaps the view at once;
3. as **leader** it drains the shared dirty queue into its own pending ids,
   polls the recent-changes follower when idle, and runs the ordinary refresh
   (re-read, diff by hash, embed only what changed)
   whose swap writes through the fenced store; a full reconcile every
   ``S3RM_SEMANTIC_RECONCILE_SECONDS``. A new leader starts from the rows the
   old one wrote, so its first reconcile embeds nothing that is already current;
4. as **follower** it never embeds or writes Lesson rows: its hints go to the
   dirty queue, and its view follows the store's change rows;
5. lifecycle (docs/operations.md#generation-lifecycle, :mod:`.lifecycle`): the
   leader copies its changed rows into every companion generation (same
   inputs, ``ready``, or ``previous`` within ``S3RM_INDEX_ROLLBACK_WINDOW_SECONDS``)
   and retires the previous one once the window is over; every gateway keeps a
   synced view of the generation under shadow comparison (when it has this
   gateway's inputs) for :meth:`shadow_target`, and a cached overview of the
   registry (states, Lessons, build progress, step counts) for :meth:`health`.

A write refused by fencing (:class:`~gateway.retrieval.pgvector.store.FencingError`)
drops leadership, returns the work to the shared queue and is counted
(``pgvector_fenced_writes``); nothing of it reaches the store.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from gateway.retrieval.pgvector import lifecycle
from gateway.retrieval.pgvector.snapshot import LeaseHandle, PgSnapshot, SearchOptions
from gateway.retrieval.pgvector.schema import FencingError, holder_id
from gateway.retrieval.pgvector.store import PgStore
from gateway.retrieval.indexing.refresher import IndexRefresher
from gateway.retrieval.hybrid.shadow import ShadowTarget

__all__ = ["SharedRefresher"]

log = logging.getLogger("s3rm.pgvector")

#: Seconds between reads of the registry overview, the companion list and the shadow configuration.
LIFECYCLE_SECONDS = 2.0


class SharedRefresher(IndexRefresher):
    """IndexRefresher over the shared store (module docstring). Extra args: ``store``, ``options``,
    ``lease_seconds``, ``poll_seconds``, ``rollback_window_seconds``."""

    def __init__(self, *args: Any, store: PgStore, options: SearchOptions = SearchOptions(),
                 lease_seconds: float = 10.0, poll_seconds: float = 1.0, rollback_window_seconds: float = 86400.0,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.rollback_window_seconds = rollback_window_seconds
        self._companions: list[str] = []
        self._overview: dict[str, Any] = {}
        self._next_lifecycle = 0.0
        self._shadow: tuple[PgSnapshot, float] | None = None
        self.propagated_rows = 0
        self.store = store
        self.options = options
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.lease = LeaseHandle(holder_id())
        self.served: str | None = None
        self.pinned: str | None = None
        self.fenced_writes = 0
        self.embedded_total = 0

    # ------------------------------------------------------------ control
    @property
    def is_leader(self) -> bool:
        """True while this gateway holds the served generation's indexer lease."""
        return self.lease.token is not None

    def start(self) -> bool:
        """Start the worker and the lease heartbeat (a thread of its own, so a long refresh never lets
        a live leader's lease lapse); False when disabled or already started."""
        started = super().start()
        if started:
            self._heartbeat = threading.Thread(target=self._beat, name="s3rm-indexer-lease", daemon=True)
            self._heartbeat.start()
        return started

    def _beat(self) -> None:
        while True:
            with self._cond:
                if self._stop:
                    return
            target = self.served
            if target is not None:
                try:
                    token = self.store.acquire(target, self.lease.holder, self.lease_seconds)
                except Exception as exc:  # the store is unreachable: we cannot prove we lead
                    log.warning("lease renewal failed: %s", type(exc).__name__)
                    token = None
                if token is not None and token != self.lease.token:
                    log.info("indexer lease taken (generation=%s token=%s)", target, token)
                with self._cond:
                    if self.served == target:
                        self.lease.token = token
                        if token is not None:
                            self._cond.notify_all()
            with self._cond:
                self._cond.wait(self.lease_seconds / 3)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the worker and hand the lease over at once."""
        super().stop(timeout)
        if self.is_leader and self.served is not None:
            try:
                self.store.release(self.served, self.lease.holder)
            except Exception:  # pragma: no cover - best effort at shutdown
                log.warning("lease release failed (generation=%s)", self.served)
        self.lease.token = None

    def health(self) -> dict[str, Any]:
        """The base counts plus ``backend``, ``leader``, ``served_generation``, ``fenced_writes`` and
        ``embedded_total`` (Lessons this process embedded)."""
        out = super().health()
        out.update(backend="pgvector", leader=self.is_leader, served_generation=self.served,
                   fenced_writes=self.fenced_writes, embedded_total=self.embedded_total)
        view = self._overview
        shadow = self._shadow
        out["lifecycle"] = {
            "states": {n: g["state"] for n, g in view.get("generations", {}).items()},
            "lessons": {n: g["lessons"] for n, g in view.get("generations", {}).items() if g["lessons"] is not None},
            "steps": view.get("steps", {}),
            "kept_fresh": list(self._companions) if self.is_leader else [],
            "propagated_rows": self.propagated_rows,
            "shadow_generation": shadow[0].generation if shadow else None,
            "shadow_sample": shadow[1] if shadow else None,
        }
        out["build_progress"] = view.get("build_progress") or None
        return out

    def shadow_target(self) -> ShadowTarget | None:
        """The running shadow comparison this gateway can take part in (docs/operations.md#shadow-queries)."""
        shadow = self._shadow
        if shadow is None:
            return None
        return ShadowTarget(shadow[0], shadow[1], lambda sample: lifecycle.record_shadow(self.store, sample))

    # ------------------------------------------------------------- worker
    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._stop and not self._state.pending_ids and not self._state.full_pending:
                    self._cond.wait(self.poll_seconds)
                if self._stop:
                    self._idle.set()
                    return
            try:
                self._tick()
            except FencingError as exc:
                self._fenced(exc)
            except Exception as exc:  # the worker must survive a store outage
                log.warning("shared index step failed: %s", type(exc).__name__)
                with self._cond:
                    self._state.last_error = "store_unavailable"
                    self._state.running = None
                time.sleep(min(self.poll_seconds, 1.0))

    def pin(self, generation: str) -> None:
        """Index and serve exactly ``generation`` whatever the alias says (``s3rm index build``); before start."""
        self.pinned = generation

    def _serving_target(self) -> str:
        if self.pinned is not None:
            return self.pinned
        active, _, _ = self.store.alias()
        if active is not None and active.split(".", 1)[0] == self.generation:
            return active
        return self.generation

    def _tick(self) -> None:
        target = self._serving_target()
        if target != self.served:
            self._switch(target)
        if self.is_leader:
            self._lead(target)
        else:
            self._track(target)
        try:
            self._lifecycle(target)
        except FencingError:
            raise
        except Exception as exc:  # e.g. a table retired meanwhile: the next step retries; serving is unaffected
            log.warning("lifecycle step failed: %s", type(exc).__name__)
            self._count("index_lifecycle_errors")

    def _lifecycle(self, target: str) -> None:
        """Step 5 of the module docstring: propagation and retirement (leader), shadow view and overview (all)."""
        if self.clock() >= self._next_lifecycle:
            self._next_lifecycle = self.clock() + LIFECYCLE_SECONDS
            if self.is_leader and lifecycle.retire_expired(self.store, self.rollback_window_seconds):
                self._count("index_lifecycle_steps", step="retired")
            self._companions = lifecycle.companions(self.store, target, self.rollback_window_seconds)
            self._overview = {**lifecycle.overview(self.store), "steps": lifecycle.event_counts(self.store)}
            self._follow_shadow(target, lifecycle.shadow_config(self.store))
        elif self._shadow is not None:
            view, sample = self._shadow
            self._shadow = (view.synced(), sample)
        if self.is_leader and self.lease.token is not None:
            for companion in self._companions:
                copied = lifecycle.propagate(self.store, target, companion, self.lease.holder, self.lease.token)
                if copied:
                    self.propagated_rows += copied
                    self._count("index_propagated_rows", copied, target=companion)

    def _follow_shadow(self, served: str, config: tuple[str, float] | None) -> None:
        """Load, sync or drop the view of the generation under shadow comparison."""
        if config is None or config[0] == served or lifecycle.inputs_of(config[0]) != lifecycle.inputs_of(served):
            self._shadow = None  # none, or built from other inputs: this gateway's query vectors do not fit
            return
        name, sample = config
        current = self._shadow
        if current is not None and current[0].generation == name:
            self._shadow = (current[0].synced(), sample)
            return
        info = self.store.generation(name)
        if info is None or info.state == "retired" or info.dims != self.dims:
            self._shadow = None
            return
        self._shadow = (PgSnapshot.load(self.store, name, self.dims, LeaseHandle(self.lease.holder), self.options),
                        sample)
        log.info("shadow comparison of generation %s on %.0f %% of hybrid searches", name, 100 * sample)

    def _count(self, name: str, amount: int = 1, **labels: str) -> None:
        if self.metrics is not None:
            self.metrics.incr(name, amount, **labels)

    def _switch(self, target: str) -> None:
        """Serve ``target`` (startup or an alias flip): register it if it is ours, load its view."""
        if self.served is not None and self.is_leader:
            self.store.release(self.served, self.lease.holder)
        self.lease.token = None
        info = self.store.generation(target) or self.store.register(target, self.dims)
        if info.dims != self.dims:
            raise ValueError(f"generation {target} has {info.dims} dims, this gateway {self.dims}")
        view = self._prepared(PgSnapshot.load(self.store, target, self.dims, self.lease, self.options))
        with self._cond:
            self._state.snapshot = view
            self._state.full_pending = True
            self._state.last_error = None
        self.served = target
        self.lease.token = self.store.acquire(target, self.lease.holder, self.lease_seconds)
        log.info("serving generation %s (%d Lessons, leader=%s)", target, len(view), self.is_leader)

    def _lead(self, target: str) -> None:
        queued = self.store.take_dirty(target)
        with self._cond:
            st = self._state
            st.pending_ids.update(queued)
            due = st.last_reconcile_started is None or self.clock() - st.last_reconcile_started >= \
                self.settings.reconcile_seconds
            kind = "full" if st.full_pending or due else ("dirty" if st.pending_ids else None)
            follow = kind is None and self.follower is not None and self.clock() >= self._next_follow
            if follow:
                self._next_follow = self.clock() + self.settings.follow_seconds
            if kind is None and not follow:
                self._idle.set()
                return
            if follow:
                st.running = "follow"
        if follow:  # the recent-changes follower runs on the leader only (docs/hybrid-search.md#follower)
            try:
                self._follow()
            finally:
                with self._cond:
                    self._state.running = None
            return
        with self._cond:
            st = self._state
            ids = set(st.pending_ids)
            st.pending_ids.clear()
            st.full_pending = False
            if kind == "full":
                st.last_reconcile_started = self.clock()
            st.running = kind
            st.last_attempt_at = self.clock()
        try:
            outcome = self._refresh(kind, ids)
        except FencingError:
            self.store.queue_dirty(target, ids)  # the new leader does this work
            raise
        except BaseException:
            with self._cond:
                self._state.pending_ids.update(ids)
            raise
        finally:
            with self._cond:
                self._state.running = None
        with self._cond:
            self._state.last_outcome = outcome
        self._observe(outcome)
        if outcome.error is None and kind == "full":
            self.store.mark_reconciled(target, time.time())
            if self.pinned is None:  # a pinned build (s3rm index build) replays its tail before it is ready
                self.store.mark_ready(target)
                self.store.activate_if_unset(target)
        with self._cond:
            if not self._state.pending_ids and not self._state.full_pending:
                self._idle.set()

    def _track(self, target: str) -> None:
        """A serving-only gateway: hand local hints to the leader, apply the store's new change rows."""
        with self._cond:
            ids = set(self._state.pending_ids)
            self._state.pending_ids.clear()
            self._state.full_pending = False
        self.store.queue_dirty(target, ids)
        view = self._state.snapshot
        fresh = view.synced() if isinstance(view, PgSnapshot) else view
        if fresh is not view:
            self._prepared(fresh)
        info = self.store.generation(target)
        with self._cond:
            st = self._state
            if fresh is not view:
                st.snapshot = fresh
                st.stale_seen = False
                st.builds += 1
            st.last_error = None
            if info is not None and info.reconciled_at is not None:
                st.last_reconcile_at = self.clock() - max(0.0, time.time() - info.reconciled_at)
                st.canonical_count = len(fresh) if fresh is not None else None
            self._idle.set()

    def _observe(self, outcome: Any) -> None:
        """Metrics of one refresh, plus this process's embedded-Lesson total (every refresh kind)."""
        self.embedded_total += outcome.embedded
        super()._observe(outcome)

    def _fenced(self, exc: FencingError) -> None:
        self.fenced_writes += 1
        log.warning("indexer write refused by fencing (generation=%s): another gateway leads", self.served)
        self.lease.token = None
        with self._cond:
            self._state.running = None
        if self.metrics is not None:
            self.metrics.incr("pgvector_fenced_writes")
