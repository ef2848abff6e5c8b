"""Document vectors remembered by their exact input text (docs/hybrid-search.md#vector-memo).

A Lesson created over MCP is embedded twice within seconds: its three facets for
the write-time duplicate check, then its facets and whole text by the refresher
once the dirty hint arrives. The texts are the same, and so is the model, so
:class:`~gateway.retrieval.embedding.client.OpenAICompatibleProvider` keeps the last
vectors it computed keyed by the SHA-256 of the exact formatted input and
embeds each text once. Only digests and vectors are held, never text.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence

import numpy as np

from gateway.core.lru import BoundedLRU

__all__ = ["VECTOR_MEMO_SIZE", "VectorMemo"]

#: Vectors remembered per provider (384-dim float32: 1.5 KiB each; 1024-dim: 4 KiB).
VECTOR_MEMO_SIZE = 2048


class VectorMemo:
    """Thread-safe LRU of ``(dims,)`` float32 vectors keyed by the SHA-256 of their input text.

    Vectors are stored and returned read-only, so a caller cannot alter a remembered one.
    """

    def __init__(self, size: int = VECTOR_MEMO_SIZE):
        self._items: BoundedLRU[bytes, np.ndarray] = BoundedLRU(size)

    @staticmethod
    def key(text: str, form: Mapping[str, Any] | None = None) -> bytes:
        """The memo key of one exact input text, sent in the default form or with request fields ``form``.

        ``form`` is framed by bytes no UTF-8 text holds (0xFF, 0x00), so no default-form text
        shares a key with a text sent in another form.
        """
        if form is None:
            return hashlib.sha256(text.encode("utf-8")).digest()
        framed = b"\xff" + json.dumps(dict(form), sort_keys=True).encode("utf-8") + b"\x00"
        return hashlib.sha256(framed + text.encode("utf-8")).digest()

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """The remembered vectors among ``keys`` (each hit becomes the most recent)."""
        return self._items.get_many(keys)

    def put_many(self, keys: Sequence[bytes], matrix: np.ndarray) -> None:
        """Remember row ``i`` of ``matrix`` ``(len(keys), dims)`` under ``keys[i]``; the oldest go first."""
        self._items.put_many((key, _frozen(row)) for key, row in zip(keys, matrix))

    def __len__(self) -> int:
        return len(self._items)


def _frozen(row: np.ndarray) -> np.ndarray:
    vec = np.array(row, dtype=np.float32, copy=True)
    vec.setflags(write=False)
    return vec
