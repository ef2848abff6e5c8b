"""A snapshot's own memo of query-independent arrays derived from it (docs/hybrid-search.md#k-occurrence).

Each index snapshot (:class:`~gateway.retrieval.index.snapshot.IndexSnapshot`,
:class:`~gateway.retrieval.pgvector.snapshot.PgSnapshot`) owns one
:class:`DerivedCache`: what is computed from its rows and vectors alone (the
k-occurrence ``N_k`` of a facet, a partition's centroid) lives exactly as long
as the snapshot, so no module-level table keeps an old snapshot alive. The
refresher fills the entries the shipped ranking reads (``pin=True``) before it
swaps the snapshot in; anything else a request asks for is computed on first use
and kept among at most :data:`MAX_LAZY` entries (oldest dropped first).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable

__all__ = ["DerivedCache", "MAX_LAZY"]

#: Entries computed on first use kept per snapshot (pinned ones do not count).
MAX_LAZY = 8


class DerivedCache:
    """Thread-safe memo ``key → value`` with pinned entries and at most ``limit`` unpinned ones.

    ``build`` runs outside the lock: two threads asking for the same missing key may both compute it
    (the values are equal; the first stored wins). Values must be treated as read-only.
    """

    __slots__ = ("_lock", "_pinned", "_lazy", "_limit")

    def __init__(self, limit: int = MAX_LAZY, pinned: dict[Hashable, Any] | None = None):
        self._lock = threading.Lock()
        self._pinned: dict[Hashable, Any] = dict(pinned or {})
        self._lazy: OrderedDict[Hashable, Any] = OrderedDict()
        self._limit = limit

    def get(self, key: Hashable, build: Callable[[], Any], *, pin: bool = False) -> Any:
        """The value of ``key``, computed by ``build()`` when missing. ``pin``: keep it for the snapshot's life
        (also moves an entry computed on first use to the pinned ones)."""
        with self._lock:
            if key in self._pinned:
                return self._pinned[key]
            if key in self._lazy:
                value = self._lazy[key]
                if pin:
                    self._pinned[key] = self._lazy.pop(key)
                else:
                    self._lazy.move_to_end(key)
                return value
        value = build()
        with self._lock:
            if pin:
                return self._pinned.setdefault(key, value)
            if key in self._pinned:
                return self._pinned[key]
            value = self._lazy.setdefault(key, value)
            while len(self._lazy) > self._limit:
                self._lazy.popitem(last=False)
            return value

    def pinned(self) -> dict[Hashable, Any]:
        """A copy of the pinned entries (a compacted snapshot with the same rows in the same order takes them)."""
        with self._lock:
            return dict(self._pinned)

    def __len__(self) -> int:
        with self._lock:
            return len(self._pinned) + len(self._lazy)

    def keys(self) -> list[Hashable]:
        """Every key held, pinned first (tests and benchmarks)."""
        with self._lock:
            return [*self._pinned, *self._lazy]
