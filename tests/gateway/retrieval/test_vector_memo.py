"""VectorMemo (gateway/retrieval/embedding/vector_memo.py): bounded, read-only, keyed by exact text."""
from __future__ import annotations

import numpy as np
import pytest

from gateway.retrieval.embedding.vector_memo import VectorMemo


def test_the_oldest_vectors_go_first_and_a_hit_becomes_recent():
    memo = VectorMemo(size=2)
    a, b, c = (VectorMemo.key(t) for t in ("a", "b", "c"))
    memo.put_many([a, b], np.eye(2, dtype=np.float32))
    assert set(memo.get_many([a])) == {a}  # a is now the most recent
    memo.put_many([c], np.ones((1, 2), dtype=np.float32))
    assert set(memo.get_many([a, b, c])) == {a, c} and len(memo) == 2


def test_keys_are_exact_texts_and_vectors_are_read_only():
    assert VectorMemo.key("passage: x") != VectorMemo.key("query: x") != VectorMemo.key("x ")
    memo = VectorMemo()
    key = VectorMemo.key("x")
    source = np.array([[0.6, 0.8]], dtype=np.float32)
    memo.put_many([key], source)
    source[0, 0] = 0.0  # the memo copied the row
    vec = memo.get_many([key])[key]
    assert vec.tolist() == pytest.approx([0.6, 0.8])
    with pytest.raises(ValueError):
        vec[0] = 1.0


def test_size_zero_remembers_nothing():
    memo = VectorMemo(size=0)
    memo.put_many([VectorMemo.key("x")], np.ones((1, 2), dtype=np.float32))
    assert len(memo) == 0


def test_the_shared_lru_keeps_single_entries_in_use_order():
    """gateway/core/lru.py, also behind the projection memo (ProjectionBuilder.build)."""
    from gateway.core.lru import BoundedLRU

    lru: BoundedLRU[str, int] = BoundedLRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # a is now the most recent
    lru.put("c", 3)
    assert (lru.get("a"), lru.get("b"), lru.get("c"), len(lru)) == (1, None, 3, 2)
