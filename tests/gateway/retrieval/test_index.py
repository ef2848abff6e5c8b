"""Exact copy-on-write index (docs/retrieval.md#index-records, docs/retrieval.md#index-lifecycle)."""
from __future__ import annotations

import numpy as np
import pytest

from gateway.retrieval.index.records import FilterMask, IndexEntry, IndexRecord, epoch_seconds
from gateway.retrieval.index.snapshot import IndexSnapshot
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
    assert cols.shape == (DIMS, 3) and cols.dtype == np.float32 and not cols.flags.writeable
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


# ------------------------------------------------------------------ segments (docs/hybrid-search.md#segments)
from dataclasses import replace  # noqa: E402

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from gateway.retrieval.index import snapshot as index_module  # noqa: E402
from gateway.retrieval.index.bm25 import Bm25Postings, lucene_scores  # noqa: E402

#: A few directions only, so equal scores (ties) happen often and tie-breaking is exercised.
_BASIS = [unit(np.random.default_rng(s).standard_normal(DIMS)) for s in range(5)]
_WORDS = ["disk", "alarm", "무시", "경보", "cache", "leak", "dns", "retry"]


def _entry(lesson_id: str, seed: int, revision: int, confidence: str = "medium") -> IndexEntry:
    rng = np.random.default_rng(seed)
    record = IndexRecord(lesson_id, revision, "sha256:" + f"{seed:064x}", "sha256:" + f"{seed + 1:064x}", 10,
                         1000 + seed % 7, confidence, ("lab", "imported")[seed % 2], "Draft")
    vectors = {f: _BASIS[int(rng.integers(len(_BASIS)))] for f in FACETS}
    terms = tuple(rng.choice(_WORDS, size=int(rng.integers(0, 6))).tolist())
    return IndexEntry(record, vectors, terms)


_ops = st.lists(st.tuples(st.sampled_from(["upsert", "delete", "meta", "compact"]), st.integers(0, 30),
                          st.integers(0, 10_000)), min_size=1, max_size=40)


def _results(snap: IndexSnapshot, queries) -> list:
    out = []
    for q in queries:
        for facet in FACETS:
            out.append(snap.search(facet, q, 7))
            out.append(snap.search(facet, q, 7, allowed=snap.allowed_rows(FilterMask(confidence=("high",))),
                                   exclude=["l-3"], min_score=-0.5))
    for words in (["disk", "alarm"], ["경보"], ["nothing"], _WORDS):
        out.append(snap.lexical_search(words, 5))
    korean = snap.hangul_rows()
    out.append(snap.search("whole", queries[0], 4, allowed=korean))
    total = sum(snap.scores(f, queries[1]) for f in FACETS)
    out.append(snap.top(total, 6, exclude=["l-1"]))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ops)
def test_segmented_search_equals_a_freshly_built_monolithic_index(ops):
    snap = IndexSnapshot.from_entries("g", DIMS, [_entry(f"l-{i}", i, 1) for i in range(12)])
    model = {e.record.lesson_id: e for e in (_entry(f"l-{i}", i, 1) for i in range(12))}
    for op, key, seed in ops:
        lesson_id = f"l-{key}"
        if op == "upsert":
            entry = _entry(lesson_id, seed, seed + 2, confidence=("high", "low")[seed % 2])
            snap, model[lesson_id] = snap.apply([entry]), entry
        elif op == "delete":
            snap = snap.apply(deletes=[lesson_id])
            model.pop(lesson_id, None)
        elif op == "meta" and lesson_id in model:
            record = replace(model[lesson_id].record, revision_id=seed + 5, confidence="high", updated_at=seed)
            snap = snap.apply(metadata_updates=[record])
            model[lesson_id] = replace(model[lesson_id], record=record)
        elif op == "compact":
            snap = snap.compacted()
    order = sorted(model, key=lambda i: hash((i, len(ops))))  # any row order: results must not depend on it
    fresh = IndexSnapshot.from_entries("g", DIMS, [model[i] for i in order])
    assert snap.segment_count <= index_module.MAX_SEGMENTS
    assert len(snap) == len(fresh) and set(snap.ids) == set(fresh.ids) == set(model)
    for lesson_id in model:
        assert snap.record(lesson_id) == fresh.record(lesson_id) == model[lesson_id].record
        assert snap.terms(lesson_id) == fresh.terms(lesson_id)
        for f in FACETS:
            assert np.array_equal(snap.vector(f, lesson_id), fresh.vector(f, lesson_id))
    queries = [_BASIS[0], unit(_BASIS[1] + _BASIS[2]), unit(np.random.default_rng(99).standard_normal(DIMS))]
    assert _results(snap, queries) == _results(fresh, queries)  # same ids, ranks and exact scores
    assert snap.compacted().segment_count == 1 and _results(snap.compacted(), queries) == _results(fresh, queries)


def test_apply_adds_a_segment_and_leaves_the_base_blocks_untouched():
    base = IndexSnapshot.from_entries("g", DIMS, [entry(i) for i in range(300)])
    block = base._segments[0].blocks["whole"]
    new = base.apply([entry(5, rhash="sha256:" + "ab" * 32), entry(400)], deletes=["l007"])
    assert new.segment_count == 2 and new._segments[0].blocks["whole"] is block  # shared, not copied
    assert len(new) == 300 and "l007" not in new and "l400" in new and "l007" in base
    assert len(new._segments[1]) == 2
    assert not new.needs_compaction()


def test_many_small_applies_keep_the_segment_count_bounded_and_compaction_is_asked_for():
    snap = IndexSnapshot.from_entries("g", DIMS, [entry(i) for i in range(50)])
    for i in range(index_module.MAX_SEGMENTS * 3):
        snap = snap.apply([entry(1000 + i)])
    assert snap.segment_count <= index_module.MAX_SEGMENTS and len(snap) == 50 + index_module.MAX_SEGMENTS * 3
    big = IndexSnapshot.from_entries("g", DIMS, [entry(i) for i in range(100)])
    grown = big.apply([entry(2000 + i) for i in range(index_module.COMPACT_MIN_ROWS + 1)])
    assert grown.needs_compaction() and not grown.compacted().needs_compaction()


def test_bm25_matches_bm25s_lucene_scores():
    import bm25s

    rng = np.random.default_rng(3)
    docs = [tuple(rng.choice(_WORDS, size=int(rng.integers(1, 9))).tolist()) for _ in range(40)]
    model = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    model.index([list(d) for d in docs], show_progress=False)
    query = ["disk", "경보", "retry"]
    ours = lucene_scores([(Bm25Postings(docs), None)], query)[0]
    assert np.allclose(ours, model.get_scores(query), rtol=1e-5, atol=1e-6)


def test_search_by_language_ranks_both_languages_on_one_standardised_scale():
    """docs/hybrid-search.md#ranking: every Korean Lesson sits closer to a Korean query than any
    English one (a constant offset); the z-score inside each language removes it."""
    axis = unit(np.eye(DIMS)[0])
    korean_offset = unit(np.eye(DIMS)[1])

    def lesson(i, closeness, korean):
        v = unit(closeness * axis + (1.0 if korean else 0.2) * korean_offset + 0.05 * unit(RNG.standard_normal(DIMS)))
        record = entry(i).record
        terms = ("캐시", "메모리") if korean else ("cache", "memory")
        return IndexEntry(record, {f: v for f in FACETS}, terms)

    entries = [lesson(0, 1.0, False)] + [lesson(i, 0.0, False) for i in range(1, 20)] + \
        [lesson(i, 0.5, True) for i in range(20, 30)]
    from gateway.retrieval.hybrid.cross_language import search_by_language

    snap = IndexSnapshot.from_entries("g", DIMS, entries)
    query = unit(axis + korean_offset)
    plain = snap.search("whole", query, 5)
    assert all(snap.hangul_rows()[snap.ids.index(h.lesson_id)] for h in plain)  # the offset wins in raw cosine
    standard = search_by_language(snap, "whole", query, 5)
    assert standard[0].lesson_id == "l000" and [h.rank for h in standard] == [1, 2, 3, 4, 5]
    assert len({h.lesson_id for h in standard}) == 5
    assert search_by_language(snap, "whole", query, 5, exclude=("l000",))[0].lesson_id != "l000"
    assert all(h.lesson_id == "l000" for h in search_by_language(snap, "whole", query, 5, min_score=0.99)) or \
        not search_by_language(snap, "whole", query, 5, min_score=0.99)
