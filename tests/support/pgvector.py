"""Index entries with random unit vectors for the pgvector backend tests (ids ``L-0000`` …).

Every fourth Lesson has Korean lexical terms (the language partition), the
rest English ones; confidences cycle low/medium/high; updated times step by 10 s.
"""
from __future__ import annotations

import numpy as np

from gateway.config.profiles import INDEX_FACETS
from gateway.retrieval.index.records import IndexEntry, IndexRecord


def random_entries(n: int, *, seed: int = 7, dims: int = 16) -> list[IndexEntry]:
    """``n`` entries with L2-normalised float32 vectors drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        vecs = {}
        for f in INDEX_FACETS:
            v = rng.standard_normal(dims).astype(np.float32)
            vecs[f] = v / np.linalg.norm(v)
        record = IndexRecord(lesson_id=f"L-{i:04d}", revision_id=100 + i, retrieval_hash="sha256:" + f"{i:064x}",
                             metadata_hash="sha256:" + f"{i + 1:064x}", created_at=1_700_000_000 + i,
                             updated_at=1_700_000_000 + 10 * i, confidence=("low", "medium", "high")[i % 3],
                             record_origin="lab", review_state="Draft")
        terms = ("장애", "복구") if i % 4 == 0 else ("dns", f"term{i % 5}")
        out.append(IndexEntry(record, vecs, terms))
    return out
