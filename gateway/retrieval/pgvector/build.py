"""Build a new generation while the active one serves, with the change tail applied (``s3rm index build``).

Contract: docs/operations.md#generation-lifecycle.

:func:`build_generation` runs the ordinary refresher of a
:class:`~gateway.retrieval.hybrid.service.RetrievalService`, pinned to
``<its generation id>.<label>``, under that generation's own indexer lease:

1. register the generation (``building``) and record the change-sequence head
   as its watermark (a ``build_started`` event) — before anything is read;
2. the full build: read the stream head, scan every Lesson, embed, write;
3. the tail: one recent-changes poll from the head read in step 2, so every
   create, edit, delete or move made while the scan ran is applied;
4. stop (the lease is released), optionally create HNSW indexes, mark
   ``ready`` (a ``build_ready`` event; the first generation ever also becomes
   active). From here the leader of the active generation copies every row it
   wrote since step 1 into the new one and keeps doing so until the cutover
   (:func:`gateway.retrieval.pgvector.lifecycle.propagate`), so nothing changed
   between the tail poll and the cutover is missing either.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from gateway.retrieval.pgvector import lifecycle
from gateway.retrieval.pgvector.store import PgStore
from gateway.retrieval.pgvector.schema import StoreError

__all__ = ["BuildReport", "build_generation"]


@dataclass(frozen=True)
class BuildReport:
    """What a build did: ``name``; ``embedded`` / ``examined`` Lessons of the full build; ``tail_examined``
    Lessons the tail poll re-read and ``tail_embedded`` the ones it embedded (changed since the scan read
    them; both None when the service has no follower); ``seconds``; final ``state``."""

    name: str
    embedded: int
    examined: int
    tail_examined: int | None
    tail_embedded: int | None
    seconds: float
    state: str


def build_generation(service: Any, store: PgStore, label: str, *, timeout: float = 3600.0, hnsw: bool = False,
                     hnsw_memory: str | None = None, hnsw_workers: int | None = None,
                     clock: Callable[[], float] = time.monotonic) -> BuildReport:
    """Build ``<service.own_generation>.<label>`` (module docstring) with a not yet started ``service`` whose
    refresher is a :class:`~gateway.retrieval.pgvector.refresher.SharedRefresher` over ``store``.

    With ``hnsw``, ``hnsw_memory`` (PostgreSQL ``maintenance_work_mem``, e.g. ``'2GB'``) and
    ``hnsw_workers`` (``max_parallel_maintenance_workers``) apply to the HNSW builds of this
    session only (:meth:`PgStore.build_hnsw`, docs/operations.md#generations).

    Raises StoreError when the generation exists beyond ``building``, or when the build fails (the
    refresher's error code) or exceeds ``timeout`` seconds; the generation then stays ``building``.
    """
    refresher = service.refresher
    name = f"{service.own_generation}.{label}"
    known = store.generation(name)
    if known is not None and known.state != "building":
        raise StoreError(f"generation {name!r} already exists ({known.state}); retire it or pick another label")
    store.register(name, refresher.dims)
    lifecycle.track_changes(store, name, lifecycle.change_head(store))
    refresher.pin(name)
    started = clock()
    deadline = started + timeout
    service.start()
    try:
        full = _wait(lambda: (o := refresher.last_outcome) is not None and o.kind == "full" and o, deadline, clock)
        if full.error:
            raise StoreError(f"build of {name} failed ({full.error})")
        tail = tail_embedded = None
        if refresher.follower is not None:
            refresher.request_follow()
            _wait(lambda: refresher.health().get("last_poll_age_seconds") is not None, deadline, clock)
            if not refresher.wait_idle(max(0.0, deadline - clock())):
                raise StoreError(f"the change tail of {name} was not applied in {timeout:.0f} s")
            last = refresher.last_outcome
            followed = last is not None and last.kind == "follow"
            tail, tail_embedded = (last.examined, last.embedded) if followed else (0, 0)
            if last is not None and last.error:
                raise StoreError(f"the change tail of {name} failed ({last.error})")
    finally:
        service.stop()
    if hnsw:
        store.build_hnsw(name, maintenance_work_mem=hnsw_memory, parallel_workers=hnsw_workers)
    store.mark_ready(name)
    store.activate_if_unset(name)
    info = store.require(name)
    return BuildReport(name, full.embedded, full.examined, tail, tail_embedded, clock() - started, info.state)


def _wait(predicate: Callable[[], Any], deadline: float, clock: Callable[[], float]) -> Any:
    while clock() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise StoreError("the build did not finish in time")
