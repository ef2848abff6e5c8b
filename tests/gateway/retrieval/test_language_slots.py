"""The language slots of ``rrf_v10`` (docs/hybrid-search.md#language-slots), on constructed lists and vectors.

Deterministic unit tests: plain id lists and a small in-memory index snapshot built from fixed vectors
(no model, no wiki); the property test runs on a fixed seed.
"""
from __future__ import annotations

import random

import numpy as np

from gateway.config.profiles import INDEX_FACETS, WHOLE_PASSAGE
from gateway.retrieval.hybrid import slots
from gateway.retrieval.hybrid.fusion import RankContribution, RankingConfig
from gateway.retrieval.index.records import IndexEntry, IndexRecord
from gateway.retrieval.index.snapshot import IndexSnapshot

DIMS = 8


def test_korean_positions_take_the_slot_order_and_english_positions_stay():
    order = ["k1", "e1", "k2", "e2", "k3", "e3"]
    korean = {"k1", "k2", "k3", "k4"}
    own = ["k4", "k3", "k1"]  # the slot channel's order (k2 is not in it)
    out = slots.refill(order, korean, own, depth=10)
    assert [out[i] for i in (1, 3, 5)] == ["e1", "e2", "e3"]          # English positions never move
    assert out == ["k4", "e1", "k3", "e2", "k1", "e3", "k2"]          # the rest follows without repeats


def test_only_the_first_depth_positions_are_refilled():
    order = ["k1", "e1", "k2", "k3", "e2"]
    out = slots.refill(order, {"k1", "k2", "k3"}, ["k3", "k2", "k1"], depth=2)
    assert out == ["k3", "e1", "k1", "k2", "e2"]  # k3 moved up into the one Korean slot; the rest keeps its order


def test_a_short_slot_order_leaves_the_remaining_korean_positions_to_fusion_order():
    order = ["k1", "k2", "e1", "k3"]
    out = slots.refill(order, {"k1", "k2", "k3"}, ["k3"], depth=4)
    assert out == ["k3", "k1", "e1", "k2"]
    assert slots.refill(order, {"k1", "k2", "k3"}, [], depth=4) == order


def test_refill_is_a_permutation_that_keeps_every_other_language_position():
    rng = random.Random(20261205)
    for _ in range(300):
        n = rng.randint(0, 25)
        order = [f"x{i}" for i in range(n)]
        korean = {i for i in order if rng.random() < 0.5}
        own = rng.sample(sorted(korean), rng.randint(0, len(korean)))
        depth = rng.randint(0, 12)
        out = slots.refill(order, korean, own, depth)
        assert sorted(out) == sorted(order)
        for position, lesson_id in enumerate(order[:depth]):
            if lesson_id not in korean:
                assert out[position] == lesson_id
        assert out[depth:] == [i for i in order if i in set(out[depth:])]  # the tail keeps fusion order


def vote(channel: str, rank: int) -> RankContribution:
    return RankContribution(channel, rank, 0.5)


def test_language_slots_use_only_revalidated_candidates_and_report_what_moved():
    ordered = ["k1", "e1", "k2", "e2"]
    votes = {"k1": [vote("bm25", 1)], "e1": [vote("semantic:situation", 1)],
             "k2": [vote("bm25", 2), vote(slots.SLOT_CHANNEL, 1)], "e2": [vote("semantic:whole", 3)]}
    new, moved = slots.language_slots(ordered, votes, lambda i: i.startswith("k"), depth=10)
    assert new == ["k2", "e1", "k1", "e2"]
    assert moved == {"k2": 3, "k1": 1}
    # a Lesson with a slot vote that is not in the fused list (dropped by revalidation) never enters
    new, moved = slots.language_slots(["k1", "e1"], {**votes, "k9": [vote(slots.SLOT_CHANNEL, 1)]},
                                      lambda i: i.startswith("k"), depth=10)
    assert new == ["k1", "e1"] and moved == {}


def test_exact_and_relation_tier_hits_keep_their_positions():
    """A Korean Lesson fusion put in the exact-identifier (or relation) tier is no Korean slot: the slot
    order never pushes it below a rest-tier hit, nor supplies it elsewhere (docs/retrieval.md#fusion tiers)."""
    ordered = ["k1", "e1", "k2", "k3"]  # k1: the verbatim (exact-tier) match of the query
    votes = {"k1": [vote("full_text", 1), vote(slots.SLOT_CHANNEL, 3)], "e1": [vote("semantic:whole", 1)],
             "k2": [vote("bm25", 2)], "k3": [vote("bm25", 3), vote(slots.SLOT_CHANNEL, 1)]}
    is_korean = lambda i: i.startswith("k")  # noqa: E731
    new, moved = slots.language_slots(ordered, votes, is_korean, depth=10, pinned={"k1"})
    assert new == ["k1", "e1", "k3", "k2"]  # k1 keeps first place; the rest-tier Korean positions are refilled
    assert moved == {"k3": 4, "k2": 3}
    new, _ = slots.language_slots(ordered, votes, is_korean, depth=10)
    assert new == ["k3", "e1", "k1", "k2"]  # without pins every Korean position is a slot


def test_scan_ids_make_room_for_slot_candidates_within_the_scan_limit():
    cfg = RankingConfig(scan_limit=5, slot_depth=3)
    order = ["a", "b", "c", "d", "e", "f", "k1", "k2", "k3", "k4"]
    hits = [(i, vote(slots.SLOT_CHANNEL, n)) for n, i in enumerate(["b", "k1", "k2", "k3"], 1)]
    assert slots.scan_ids(order, hits, cfg) == ["a", "b", "c", "k1", "k2"]
    assert slots.scan_ids(order, [], cfg) == order[:5]
    assert slots.scan_ids(order, hits[:1], cfg) == order[:5]


def test_slots_apply_to_hangul_queries_only():
    cfg = RankingConfig()
    assert cfg.slot_depth == 10 and cfg.slot_languages == ("hangul",)
    assert slots.applies(cfg, "메모리 부족으로 학습이 죽음")
    assert not slots.applies(cfg, "GPU out of memory during training")
    assert not slots.applies(cfg, "NCCL 초기화 hang")  # mixed: Hangul with English terms
    assert not slots.applies(RankingConfig(slot_depth=0), "메모리 부족으로 학습이 죽음")
    assert cfg.weights[slots.SLOT_CHANNEL] == 0.0


def entry(i: int, korean: bool, whole: np.ndarray, passage: np.ndarray) -> IndexEntry:
    record = IndexRecord(lesson_id=f"l{i:02d}", revision_id=i + 1, retrieval_hash="sha256:" + f"{i:064x}",
                         metadata_hash="sha256:" + f"{i + 3:064x}", created_at=10, updated_at=1000,
                         confidence="medium", record_origin="lab", review_state="Draft")
    vectors = {f: whole for f in INDEX_FACETS}
    vectors[WHOLE_PASSAGE] = passage
    terms = ("학습", "메모리") if korean else ("training", "memory")
    return IndexEntry(record, vectors, terms, 1.0 if i != 3 else 0.1)


def axis(n: int) -> np.ndarray:
    v = np.full(DIMS, 0.05, dtype=np.float32)
    v[n] = 1.0
    return v / np.linalg.norm(v)


def test_slot_votes_rank_korean_rows_by_the_passage_vector_inside_the_filters():
    # every Lesson's query-form whole vector points the same way; the passage-form vectors differ
    same = axis(0)
    snap = IndexSnapshot.from_entries("g", DIMS, [
        entry(0, True, same, axis(3)), entry(1, True, same, axis(1)), entry(2, False, same, axis(1)),
        entry(3, True, same, axis(1)),  # low content quality: below the semantic floor
        entry(4, True, same, (axis(1) + axis(2)) / np.linalg.norm(axis(1) + axis(2))),
    ])
    query = axis(1)
    hits = slots.slot_votes(snap, query, 10, None, 0.5)
    assert [i for i, _ in hits] == ["l01", "l04", "l00"]  # Korean rows only, by passage cosine, l03 under the floor
    assert all(v.channel == slots.SLOT_CHANNEL and v.indexed for _, v in hits)
    allowed = np.array([i != "l01" for i in snap.ids])
    assert [i for i, _ in slots.slot_votes(snap, query, 10, allowed, 0.5)] == ["l04", "l00"]
    assert slots.slot_votes(snap, query, 0, None, 0.5) == []
