"""Exact copy-on-write index (docs/retrieval.md#index-records, docs/retrieval.md#index-lifecycle)."""
from __future__ import annotations

import numpy as np
import pytest

from gateway.retrieval.index import FilterMask, IndexEntry, IndexRecord, IndexSnapshot, epoch_seconds
from gateway.config.profiles import INDEX_FACETS as FACETS

DIMS = 16
RNG = np.random.default_rng(7)


def unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def entry(i: int, *, confidence="medium", origin="lab", rhash=None, updated=1000) -> IndexEntry:
    record = IndexRecord(lesson_id=f"l{i:03d}", revision_id=i + 1,
                         retrieval_hash=rhash or "sha256:" + f"{i:064x}",
                         metadata_hash="sha256:" + f"{i + 7:064x}", created_at=10, updated_at=updated,
                         confidence=confidence, record_origin=origin, review_state="Draft")
    return IndexEntry(record, {f: unit(RNG.standard_normal(DIMS)) for f in FACETS})


def test_records_hold_only_ids_revision_hashes_times_and_filter_scalars():
    names = {f.name for f in IndexRecord.__dataclass_fields__.values()}
    assert names == {"lesson_id", "revision_id", "retrieval_hash", "metadata_hash", "created_at", "updated_at",
                     "confidence", "record_origin", "review_state", "truncated_mask"}


def test_search_is_exact_and_ordered():
    entries = [entry(i) for i in range(200)]
    snap = IndexSnapshot.from_entries("g", DIMS, entries)
    q = unit(RNG.standard_normal(DIMS))
    hits = snap.search("mechanism", q, 10)
    brute = sorted(((float(e.vectors["mechanism"] @ q), e.record.lesson_id) for e in entries), key=lambda t: (-t[0], t[1]))
    assert [h.lesson_id for h in hits] == [i for _, i in brute[:10]]
    assert [h.rank for h in hits] == list(range(1, 11))
    assert all(abs(h.score - s) < 1e-5 for h, (s, _) in zip(hits, brute))
    assert snap.search("mechanism", q, 500)[-1].rank == 200


def test_apply_is_copy_on_write():
    snap = IndexSnapshot.from_entries("g", DIMS, [entry(i) for i in range(5)])
    before = {f: snap.matrix(f).copy() for f in FACETS}
    replaced = entry(2, rhash="sha256:" + "ab" * 32)
    new = snap.apply([replaced, entry(9)], deletes=["l000"],
                     metadata_updates=[IndexRecord("l003", 99, snap.retrieval_hash("l003"), "sha256:" + "cd" * 32,
                                                   10, 2000, "high", "imported", "Reviewed")])
    assert snap.ids == ("l000", "l001", "l002", "l003", "l004")
    for f in FACETS:
        assert np.array_equal(snap.matrix(f), before[f])
    assert set(new.ids) == {"l001", "l002", "l003", "l004", "l009"}
    assert new.retrieval_hash("l002") == "sha256:" + "ab" * 32
    assert np.allclose(new.vector("approach", "l002"), replaced.vectors["approach"])
    rec = new.record("l003")
    assert (rec.revision_id, rec.confidence, rec.record_origin, rec.review_state, rec.updated_at) == \
        (99, "high", "imported", "Reviewed", 2000)
    assert np.array_equal(new.vector("situation", "l003"), snap.vector("situation", "l003"))  # no re-embedding
    assert "l000" not in new and new.record("l000") is None


def test_matrices_are_read_only_float32_and_normalised():
    snap = IndexSnapshot.from_entries("g", DIMS, [entry(i) for i in range(3)])
    m = snap.matrix("situation")
    assert m.shape == (3, DIMS) and m.dtype == np.float32 and not m.flags.writeable
    cols = snap.columns("situation")
    assert cols.shape == (DIMS, 3) and cols.flags.c_contiguous and not cols.flags.writeable
    with pytest.raises(ValueError):
        m[0, 0] = 1.0
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)


def test_hash_round_trip_keeps_trailing_zero_bytes():
    h = "sha256:" + "11" * 31 + "00"
    snap = IndexSnapshot.from_entries("g", DIMS, [entry(1, rhash=h)])
    assert snap.retrieval_hash("l001") == h


def test_filters_exclude_and_floor():
    entries = [entry(0, confidence="high"), entry(1, confidence="low", origin="imported", updated=5000),
               entry(2, confidence="high", origin="imported")]
    snap = IndexSnapshot.from_entries("g", DIMS, entries)
    q = entries[1].vectors["situation"]
    allowed = snap.allowed_rows(FilterMask(confidence=("high",)))
    assert {h.lesson_id for h in snap.search("situation", q, 10, allowed=allowed)} == {"l000", "l002"}
    allowed = snap.allowed_rows(FilterMask(record_origin=("imported",), updated_after=4000))
    assert [h.lesson_id for h in snap.search("situation", q, 10, allowed=allowed)] == ["l001"]
    assert snap.allowed_rows(FilterMask()) is None
    assert "l001" not in {h.lesson_id for h in snap.search("situation", q, 10, exclude=["l001"])}
    assert [h.lesson_id for h in snap.search("situation", q, 10, min_score=0.999)] == ["l001"]


def test_zero_rows_and_empty_snapshots():
    empty = IndexSnapshot.empty("g", DIMS)
    assert len(empty) == 0 and empty.search("approach", unit(np.ones(DIMS)), 5) == []
    e = entry(1)
    zero = IndexEntry(e.record, {**e.vectors, "approach": np.zeros(DIMS, np.float32)})
    snap = IndexSnapshot.from_entries("g", DIMS, [zero])
    assert snap.search("approach", unit(np.ones(DIMS)), 1)[0].score == 0.0


def test_wrong_dimensions_are_refused():
    e = entry(1)
    bad = IndexEntry(e.record, {**e.vectors, "mechanism": np.ones(DIMS + 1, np.float32)})
    with pytest.raises(ValueError):
        IndexSnapshot.from_entries("g", DIMS, [bad])


def test_epoch_seconds():
    assert epoch_seconds("1970-01-01T00:01:00Z") == 60
    assert epoch_seconds("garbage") == 0


def test_memory_stays_close_to_the_raw_matrices():
    n, dims = 5000, 384
    entries = []
    for i in range(n):
        record = IndexRecord(f"lesson-{i:06d}", i, "sha256:" + f"{i:064x}", "sha256:" + f"{i:064x}", 1, 2,
                             "low", "lab", "Draft")
        entries.append(IndexEntry(record, {f: np.full(dims, 1 / np.sqrt(dims), np.float32) for f in FACETS}))
    snap = IndexSnapshot.from_entries("g", dims, entries)
    assert snap.nbytes() <= 1.1 * snap.matrix_bytes()
