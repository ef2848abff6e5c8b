"""Document vectors remembered by their exact input text (docs/hybrid-search.md#vector-memo).

A Lesson created over MCP is embedded twice within seconds: its three facets for
the write-time duplicate check, then its facets and whole text by the refresher
once the dirty hint arrives. The texts are the same, and so is the model, so
:class:`~gateway.retrieval.embedding.OpenAICompatibleProvider` keeps the last
vectors it computed keyed by the SHA-256 of the exact formatted input and
embeds each text once. Only digests and vectors are held, never text.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Sequence

import numpy as np

__all__ = ["VECTOR_MEMO_SIZE", "VectorMemo"]

#: Vectors remembered per provider (384-dim float32: 1.5 KiB each; 1024-dim: 4 KiB).
VECTOR_MEMO_SIZE = 2048


class VectorMemo:
    """Thread-safe LRU of ``(dims,)`` float32 vectors keyed by the SHA-256 of their input text.

    Vectors are stored and returned read-only, so a caller cannot alter a remembered one.
    """

    def __init__(self, size: int = VECTOR_MEMO_SIZE):
        self._size = max(0, int(size))
        self._items: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(text: str) -> bytes:
        """The memo key of one exact input text."""
        return hashlib.sha256(text.encode("utf-8")).digest()

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """The remembered vectors among ``keys`` (each hit becomes the most recent)."""
        out: dict[bytes, np.ndarray] = {}
        with self._lock:
            for key in keys:
                vec = self._items.get(key)
                if vec is not None:
                    self._items.move_to_end(key)
                    out[key] = vec
        return out

    def put_many(self, keys: Sequence[bytes], matrix: np.ndarray) -> None:
        """Remember row ``i`` of ``matrix`` ``(len(keys), dims)`` under ``keys[i]``; the oldest go first."""
        if not self._size:
            return
        with self._lock:
            for key, row in zip(keys, matrix):
                vec = np.array(row, dtype=np.float32, copy=True)
                vec.setflags(write=False)
                self._items[key] = vec
                self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
