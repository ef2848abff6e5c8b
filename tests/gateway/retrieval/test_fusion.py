"""rrf_v8 fusion with fixed vectors (deterministic unit tests; docs/retrieval.md#fusion)."""
from __future__ import annotations

import numpy as np
import pytest

from gateway.retrieval.hybrid.fusion import (
    ANALOGIES,
    SEARCH,
    DEFAULT_RANKING,
    SEARCH_CHANNELS,
    ANALOGY_CHANNELS,
    Calibration,
    FusionCandidate,
    RankContribution as V,
    basis_of,
    exact_match,
    fuse,
    is_exact_query,
    partial_share,
    preliminary_order,
    rrf_raw,
    verified_coverage,
)
from support.lessons import evidence, lesson, verification

CAL = Calibration(semantic_floor=0.0, redundancy_floor=0.5, near_identical=0.95, same_topic=0.9)


def cand(lesson_id, *votes, **kw):
    return FusionCandidate(lesson_id, tuple(votes), **kw)


def order(results):
    return [r.lesson_id for r in results]


def test_rrf_uses_ranks_only_and_service_score_is_within_0_1():
    top_everywhere = cand("a", *(V(c, 1, 0.1) for c in SEARCH_CHANNELS))
    only_text = cand("b", V("full_text", 1))
    out = fuse([only_text, top_everywhere], operation=SEARCH, channels=SEARCH_CHANNELS, calibration=CAL)
    assert order(out) == ["a", "b"]
    assert out[0].score == 1.0
    assert abs(out[1].score - 1.0 / sum(DEFAULT_RANKING.weights[c] for c in SEARCH_CHANNELS)) < 1e-6
    # raw cosine values never matter, only ranks
    assert rrf_raw([V("semantic:situation", 3, 0.99)]) == rrf_raw([V("semantic:situation", 3, 0.01)])
    # one channel counts once, with its best rank
    assert rrf_raw([V("full_text", 1), V("full_text", 5)]) == rrf_raw([V("full_text", 1)])


def test_exact_identifier_matches_form_the_first_tier():
    semantic_star = cand("sem", *(V(c, 1) for c in SEARCH_CHANNELS[1:]))
    exact = cand("exact", V("full_text", 2), exact=True)
    out = fuse([semantic_star, exact], operation=SEARCH, channels=SEARCH_CHANNELS, calibration=CAL)
    assert order(out) == ["exact", "sem"]
    assert out[0].score < out[1].score  # the tier, not the score, puts it first


def test_stored_relations_come_first_with_score_one():
    rel = cand("rel", V("relation", 1, 1.0))
    sem = cand("sem", V("source:situation", 1), V("source:mechanism", 1), V("lexical", 1))
    out = fuse([sem, rel], operation=ANALOGIES, channels=ANALOGY_CHANNELS, calibration=CAL, min_score=0.99)
    assert order(out) == ["rel"]  # min_score drops sem (< 0.99), never the relation
    assert out[0].score == 1.0 and out[0].basis == "stored_relation"


def test_evidence_prior_reorders_only_within_a_band():
    # same band (scores ≈ 0.399 / 0.377), the verified one wins
    a = cand("a", V("full_text", 2), coverage=0.0)
    b = cand("b", V("semantic:situation", 1), V("semantic:mechanism", 5), coverage=1.0)
    out = fuse([a, b], operation=SEARCH, channels=SEARCH_CHANNELS, calibration=CAL)
    assert out[0].score // DEFAULT_RANKING.band_width == out[1].score // DEFAULT_RANKING.band_width
    assert order(out) == ["b", "a"] and out[0].score < out[1].score
    # different bands: full coverage never lifts a candidate over a higher band
    hi = cand("hi", V("full_text", 1), V("semantic:situation", 1), coverage=0.0)
    lo = cand("lo", V("full_text", 2), coverage=1.0)
    assert order(fuse([lo, hi], operation=SEARCH, channels=SEARCH_CHANNELS, calibration=CAL)) == ["hi", "lo"]


def test_verified_coverage_counts_verified_supporting_evidence_only():
    unverified = lesson("x", evidence_items=[evidence("e1"), evidence("e2")])
    assert verified_coverage(unverified) == 0.0
    one = lesson("x", evidence_items=[evidence("e1"), evidence("e2")],
                 verifications=[verification("v1", "e1", "supports", verification_basis="full_text")])
    assert abs(verified_coverage(one) - 1 / 3) < 1e-9
    contradicted = lesson("x", evidence_items=[evidence("e1")],
                          verifications=[verification("v1", "e1", "contradicts", verification_basis="full_text")])
    assert verified_coverage(contradicted) == 0.0
    metadata_only = lesson("x", evidence_items=[evidence("e1")],
                           verifications=[verification("v1", "e1", "supports", verification_basis="metadata_only")])
    assert verified_coverage(metadata_only) == 0.0


def test_min_score_applies_before_diversity():
    vec = {"approach": np.array([1.0, 0.0], np.float32), "mechanism": np.array([1.0, 0.0], np.float32)}
    strong = cand("strong", V("full_text", 1), V("semantic:mechanism", 1), vectors=vec)
    twin = cand("twin", V("full_text", 2), V("semantic:mechanism", 2), vectors=vec)
    weak = cand("weak", V("semantic:approach", 30), vectors={"approach": np.array([0.0, 1.0], np.float32)})
    out = fuse([strong, twin, weak], operation=SEARCH, channels=SEARCH_CHANNELS, calibration=CAL,
               min_score=0.2)
    assert order(out) == ["strong", "twin"]  # weak was dropped first, so it cannot be promoted for diversity


def test_diversity_demotes_a_near_duplicate_mechanism_but_only_boundedly():
    same = {"approach": np.array([1.0, 0.0], np.float32), "mechanism": np.array([1.0, 0.0], np.float32)}
    other = {"approach": np.array([0.0, 1.0], np.float32), "mechanism": np.array([0.0, 1.0], np.float32)}
    first = cand("a-first", V("full_text", 1), V("semantic:mechanism", 1), vectors=same)
    dup = cand("b-dup", V("full_text", 2), V("semantic:mechanism", 2), vectors=same)
    different = cand("c-diff", V("full_text", 3), V("semantic:mechanism", 3), vectors=other)
    out = fuse([first, dup, different], operation=SEARCH, channels=SEARCH_CHANNELS, calibration=CAL)
    assert order(out) == ["a-first", "c-diff", "b-dup"]
    # a long run of duplicates: the head can be passed over at most max_displacement times
    dups = [cand(f"d{i:02d}", V("full_text", i + 1), vectors=same) for i in range(12)]
    fresh = cand("zz-fresh", V("full_text", 13), vectors=other)
    out = fuse(dups + [fresh], operation=SEARCH, channels=SEARCH_CHANNELS, calibration=CAL)
    assert out.index(next(r for r in out if r.lesson_id == "d01")) <= 1 + DEFAULT_RANKING.max_displacement


def test_diversity_spreads_record_origins_when_scores_are_close():
    lab = [cand(f"lab{i}", V("full_text", i + 1), record_origin="lab") for i in range(3)]
    imported = cand("imp", V("full_text", 4), record_origin="imported")
    out = fuse(lab + [imported], operation=SEARCH, channels=SEARCH_CHANNELS, calibration=CAL)
    assert order(out).index("imp") < 3


def test_basis_values():
    assert basis_of(["full_text"], SEARCH) == "full_text"
    assert basis_of(["semantic:situation", "semantic:mechanism"], SEARCH) == "semantic_similarity"
    assert basis_of(["full_text", "semantic:approach"], SEARCH) == "hybrid"
    assert basis_of(["lexical"], ANALOGIES) == "lexical"
    assert basis_of(["lexical", "source:mechanism"], ANALOGIES) == "hybrid"
    assert basis_of(["relation", "lexical"], ANALOGIES) == "stored_relation"


def test_exact_query_detection_and_matching():
    for q in ("ERR_QUIC_PROTOCOL_ERROR", "personas-prewarm", "0x80070005", "sqlite3.OperationalError",
              "database is locked", '"out of memory"', "expandableSegments"):
        assert is_exact_query(q), q
    for q in ("memory", "dns", "캐시", "GPU memory"):
        assert not is_exact_query(q), q
    assert exact_match("ERR_QUIC_PROTOCOL_ERROR", ["Chrome showed err_quic_protocol_error today"])
    assert exact_match('"database is locked"', ["OperationalError: database   is locked"])
    assert not exact_match("database is locked", ["the database was locked"])


def test_preliminary_order_is_deterministic_and_puts_relations_first():
    votes = {"b": [V("full_text", 1)], "a": [V("full_text", 1)], "r": [V("relation", 3)]}
    assert preliminary_order(votes) == ["r", "a", "b"]


def test_fusion_is_deterministic():
    cands = [cand(f"x{i}", V("full_text", (i * 7) % 11 + 1), V("semantic:situation", (i * 3) % 11 + 1))
             for i in range(11)]
    first = fuse(cands, operation=SEARCH, channels=SEARCH_CHANNELS, calibration=CAL)
    second = fuse(list(reversed(cands)), operation=SEARCH, channels=SEARCH_CHANNELS, calibration=CAL)
    assert order(first) == order(second)


def test_query_language_and_its_weights():
    """docs/hybrid-search.md#ranking: Korean, mixed and other queries get their own channel weights."""
    from gateway.retrieval.hybrid.fusion import DEFAULT_RANKING as CONFIG
    from gateway.retrieval.language import query_language

    assert query_language("서명된 URL로 버킷 객체를 요청하면 오류") == "hangul"
    assert query_language("Azure AD backend scale unit 하나가 실패") == "mixed"
    assert query_language("storage outage after a typo") == "latin" and query_language("1234 !!") == "latin"
    korean = CONFIG.for_query("인증서가 만료되어 접속이 실패함")
    assert korean.version == CONFIG.version
    for channel, weight in CONFIG.language_weights["hangul"].items():
        assert korean.weights[channel] == weight
    assert CONFIG.for_query("storage outage").weights == CONFIG.weights
    assert CONFIG.weights["bm25_partial"] < CONFIG.weights["bm25"]


def test_fuse_refuses_an_unknown_operation():
    with pytest.raises(ValueError):
        fuse([], operation="search_lessons", channels=SEARCH_CHANNELS, calibration=CAL)


def test_partial_share_is_the_matched_share_relative_to_the_complete_threshold():
    """docs/hybrid-search.md#partial-share."""
    assert partial_share(1, 8, 0.5) == pytest.approx(0.25)
    assert partial_share(3, 8, 0.5) == pytest.approx(0.75)
    assert partial_share(5, 8, 0.5) == 1.0 and partial_share(0, 8, 0.5) == 0.0
    with pytest.raises(ValueError):
        partial_share(1, 0, 0.5)


def test_a_partial_vote_counts_with_its_share_of_the_channel_weight():
    w, k = DEFAULT_RANKING.weights["bm25_partial"], DEFAULT_RANKING.k
    assert rrf_raw([V("bm25_partial", 1, share=0.25)]) == pytest.approx(w * 0.25 / (k + 1))
    # the best-ranked vote of a channel is the one counted, with its own share
    assert rrf_raw([V("bm25_partial", 3, share=1.0), V("bm25_partial", 1, share=0.5)]) == \
        pytest.approx(w * 0.5 / (k + 1))
    assert rrf_raw([V("bm25", 1)]) == pytest.approx(DEFAULT_RANKING.weights["bm25"] / (k + 1))
