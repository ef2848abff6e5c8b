"""The lexical channel: Korean morphemes (kiwipiepy) + BM25 (bm25s) — docs/hybrid-search.md#lexical-channel.

Real Kiwi model, real bm25s; the cases are the ones MediaWiki's word index
misses: particles attached to the word, compounds written as one word, and
the same words written with or without spaces.
"""
from __future__ import annotations

import numpy as np
import pytest

from gateway.retrieval.index.analyzer import analyze
from gateway.retrieval.hybrid.channels import lexical_votes
from gateway.retrieval.index.records import IndexEntry, IndexRecord
from gateway.retrieval.index.snapshot import IndexSnapshot
from gateway.config.profiles import INDEX_FACETS

DIMS = 4
SHA = "sha256:" + "0" * 64


def snapshot(texts: dict[str, str]) -> IndexSnapshot:
    entries = []
    for lesson_id, text in texts.items():
        record = IndexRecord(lesson_id, 1, SHA, SHA, 0, 0, "low", "synthetic", "Draft")
        vectors = {f: np.zeros(DIMS, np.float32) for f in INDEX_FACETS}
        entries.append(IndexEntry(record, vectors, tuple(analyze(text))))
    return IndexSnapshot.from_entries("g", DIMS, entries)


DOCS = {
    "frag": "GPU 메모리 단편화로 반복된 OOM. 캐싱 할당기의 블록이 잘게 쪼개졌다.",
    "ckpt": "디스크가 가득 차 체크포인트 파일이 손상됨. 저장 도중 용량이 바닥났다.",
    "pool": "트랜잭션을 닫지 않아 DB 커넥션풀 고갈. 예외 경로에서 세션을 닫지 않았다.",
    "cert": "내부 인증서 만료로 서비스 간 API 호출 실패.",
    "english": "Storage outage caused by a typo in a command that removed too many servers.",
}


@pytest.fixture(scope="module")
def snap():
    return snapshot(DOCS)


@pytest.mark.parametrize("variant", ["단편화", "단편화로", "단편화가", "단편화를", "단편화에서는"])
def test_particles_and_endings_do_not_change_the_terms(variant):
    assert "단편" in analyze(variant)
    assert not [t for t in analyze(variant) if t.endswith(("로", "가", "를", "에서는"))]


def test_compound_and_spaced_spellings_meet(snap):
    joined, spaced = set(analyze("체크포인트파일")), set(analyze("체크포인트 파일"))
    assert joined & spaced >= {"파일"}
    assert snap.lexical_search(analyze("체크포인트파일이 깨짐"), 3)[0].lesson_id == "ckpt"
    # a compound Kiwi keeps whole ("커넥션풀") still meets the spaced spelling through its 2-syllable pieces
    assert snap.lexical_search(analyze("커넥션 풀이 바닥남"), 3)[0].lesson_id == "pool"


@pytest.mark.parametrize("query,expected", [
    ("메모리단편화 때문에 학습이 죽음", "frag"),          # spacing removed
    ("GPU 메모리 단편화가 원인", "frag"),               # particle attached
    ("인증서가 만료돼서 호출이 끊김", "cert"),            # particle + conjugated verb
    ("typo in a command took storage down", "english"),  # English words, stop words dropped
])
def test_bm25_channel_ranks_the_matching_lesson_first(snap, query, expected):
    hits = snap.lexical_search(analyze(query), 5)
    assert hits and hits[0].lesson_id == expected and hits[0].rank == 1 and hits[0].score > 0


def test_no_known_term_means_no_hits_and_masks_apply(snap):
    assert snap.lexical_search(analyze("완전히 무관한 낱말"), 5) == [] or all(
        h.lesson_id != "english" for h in snap.lexical_search(analyze("완전히 무관한 낱말"), 5))
    assert snap.lexical_search([], 5) == []
    allowed = np.array([i != "frag" for i in snap.ids])
    assert "frag" not in {h.lesson_id for h in snap.lexical_search(analyze("메모리 단편화"), 5, allowed=allowed)}
    assert "frag" not in {h.lesson_id for h in snap.lexical_search(analyze("메모리 단편화"), 5, exclude=["frag"])}


def test_terms_survive_copy_on_write(snap):
    new = snap.apply(deletes=["cert"])
    assert new.terms("frag") == snap.terms("frag") and new.terms("cert") == ()
    assert new.lexical_search(analyze("인증서 만료"), 5) == []
    assert snap.lexical_search(analyze("인증서 만료"), 5)[0].lesson_id == "cert"  # the old snapshot is unchanged


def test_identifiers_are_kept_whole_and_split():
    terms = analyze("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True 설정")
    # the identifier itself is never stemmed (it must match exactly); its parts are, like any word
    assert {"pytorch_cuda_alloc_conf", "expandable_segments", "expand", "segment"} <= set(terms)
    assert analyze("") == [] and analyze("   ") == []


@pytest.mark.parametrize("lesson,query", [
    ("the backup generators failed to start", "generator failure after a power loss"),
    ("servers were removed from service", "removing a server"),
    ("DNS resolvers ran out of capacity", "the resolver fleet"),
])
def test_english_inflections_meet_through_their_stem(lesson, query):
    """docs/hybrid-search.md#lexical-channel: a paraphrase meets the Lesson's inflected words."""
    assert set(analyze(lesson)) & set(analyze(query))


def test_words_with_digits_are_not_stemmed_and_korean_text_stems_its_english_words():
    assert {"gpu0", "5xx", "us-west1-b"} <= set(analyze("gpu0 5xx errors in us-west1-b"))
    assert "error" in analyze("gpu0 5xx errors") and "errors" not in analyze("gpu0 5xx errors")
    # an English word inside a Korean sentence gets the same stem as in English text
    assert "generat" in analyze("generators가 고장났다") and "generat" in analyze("generators failed")


def test_stemmed_bm25_ranks_the_inflected_lesson_first():
    snap = snapshot({"gen": "Backup generators failed to start when grid power was lost.",
                     "dns": "Resolver capacity ran out during a traffic spike."})
    hits = snap.lexical_search(analyze("generator failure"), 2)
    assert hits and hits[0].lesson_id == "gen"


def test_partial_bm25_votes_carry_the_share_of_query_terms_the_lesson_holds():
    """docs/hybrid-search.md#partial-share: two of eight terms vote weaker than three of eight."""
    snap = snapshot({"two": "cache memory notes.", "three": "python cache memory notes.",
                     "all": "cache eviction growing memory python web service keeps"})
    terms = analyze("cache without eviction keeps growing memory in a python web service")
    complete, partial, _ = lexical_votes(snap, terms, 10, None, 0.5)
    assert [lesson_id for lesson_id, _ in complete] == ["all"] and complete[0][1].share == 1.0
    shares = {lesson_id: vote.share for lesson_id, vote in partial}
    n = len(set(terms))
    assert shares == pytest.approx({"two": 2 / (0.5 * n), "three": 3 / (0.5 * n)})
