"""One bounded, thread-safe least-recently-used map for the gateway's in-process memos.

Used by the projection memo (:class:`gateway.retrieval.indexing.projection.ProjectionBuilder`) and
the document-vector memo (:class:`gateway.retrieval.embedding.vector_memo.VectorMemo`): values are
immutable for their key, so a hit is returned as stored. The eviction order is
``cachetools.LRUCache``'s; this class adds the lock and the batch calls.
"""
from __future__ import annotations

import threading
from typing import Generic, Hashable, Iterable, TypeVar

from cachetools import LRUCache

__all__ = ["BoundedLRU"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedLRU(Generic[K, V]):
    """At most ``size`` entries (``size`` ≤ 0 keeps none); the least recently used go first.

    A hit (:meth:`get`, :meth:`get_many`) makes its entry the most recent. Thread-safe.
    """

    def __init__(self, size: int):
        self._size = max(0, int(size))
        self._items: LRUCache[K, V] = LRUCache(maxsize=max(1, self._size))
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value stored under ``key``, or None."""
        with self._lock:
            return self._items.get(key)

    def get_many(self, keys: Iterable[K]) -> dict[K, V]:
        """The stored values among ``keys`` (one lock for all)."""
        out: dict[K, V] = {}
        with self._lock:
            for key in keys:
                value = self._items.get(key)
                if value is not None:
                    out[key] = value
        return out

    def put_many(self, items: Iterable[tuple[K, V]]) -> None:
        """Store every ``(key, value)`` as the most recent; the oldest beyond ``size`` go."""
        if not self._size:
            return
        with self._lock:
            for key, value in items:
                self._items[key] = value

    def put(self, key: K, value: V) -> None:
        """:meth:`put_many` of one entry."""
        self.put_many(((key, value),))

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
