"""Legacy's merge of the lists of several phrasings of one question (docs/retrieval.md#phrasings).

Pure: hand-made :class:`RankedList` values through
:func:`gateway.retrieval.legacy.search.merge_phrasings`; the tool runs it end to end over a real
wiki in tests/gateway/tools/test_read_tools.py (``test_another_phrasing_finds_the_lesson_written_in_the_other_language``).
"""
from __future__ import annotations

from support.lessons import lesson

from gateway.domain.model import LessonSnapshot
from gateway.retrieval.legacy import lexical
from gateway.retrieval.legacy.search import (
    ANALOGY_FIELDS,
    Ranked,
    RankedList,
    merge_phrasings,
    quality_weight,
    relevance,
)

KOREAN = "oauth 토큰 인증 호출 실패함"
ENGLISH = "Why did OAuth token calls fail for customers in the Seoul region"

def _lesson(lesson_id: str, *texts: str):
    """A Lesson whose title and seven text fields are ``texts``, in the analogy projection's order."""
    return lesson(lesson_id, **dict(zip(ANALOGY_FIELDS, texts, strict=True)))


#: A Korean Lesson the Korean question reaches by two of its words (in the title), and nothing else.
HUB = _lesson(
    "hub", "내부 인증서 만료로 서비스 간 호출 장애",
    "아무 배포도 없었는데 서비스 간 인증 호출이 한꺼번에 막힌 이유는?",
    "막힌 호출의 오류를 확인하고 인증서를 재발급했다. 이후 자동 갱신과 만료 알림을 추가했다.",
    "사내 서비스끼리 상호 TLS로 통신하고 인증서는 수동으로 1년마다 갱신했다.",
    "새벽에 모든 서비스 간 호출이 만료 오류로 막혔다.",
    "갱신 담당자가 바뀌면서 만료일 관리가 누락되었고 감시도 없었다.",
    "인증서 갱신은 자동화하고 만료일을 모니터링한다.",
    "인증서를 쓰는 모든 내부 서비스.")
#: The English Lesson the question is about: it holds three of the English phrasing's eight words and
#: the Korean question's one Latin word.
ANSWER = _lesson(
    "answer", "OAuth token calls broke after a key rotation",
    "Why were OAuth token calls rejected for a while?",
    "We compared the key ids in the rejected tokens with the published set of keys.",
    "The platform rotated the signing keys that its authentication service uses.",
    "Calls signed with the old key were refused until the caches of the frontends expired.",
    "The engine trusted a cached key set that no longer held the key in use.",
    "Publish a new key before signing with it and keep the old one until caches expire.",
    "Any service that validates tokens against a cached set of keys.")


def _snap(page) -> LessonSnapshot:
    return LessonSnapshot("hub" if page is HUB else "answer", 1, "2026-01-01T00:00:00Z", page, "")


def _list(text: str, *pages) -> RankedList:
    """One phrasing's list of ``pages`` in that order, each scored as legacy scores it there."""
    terms = lexical.query_terms(text)
    items = tuple(Ranked(_snap(page), round(relevance(terms, page, place) * quality_weight(_snap(page)), 6),
                         "full_text") for place, page in enumerate(pages))
    return RankedList(items, len(items), 100, False)


TERMS = [lexical.query_terms(KOREAN), lexical.query_terms(ENGLISH)]


def ids(merged: RankedList) -> list[str]:
    return [r.snapshot.id for r in merged.items]


def test_a_lesson_reached_by_two_generic_words_of_one_phrasing_does_not_outrank_the_other_phrasings_answer():
    korean, english = _list(KOREAN, HUB, ANSWER), _list(ENGLISH, ANSWER)
    assert quality_weight(_snap(HUB)) == quality_weight(_snap(ANSWER)) == 1.0  # both are sentences
    # Each list alone: the hub (two of the Korean words, in its title) scores above the answer (the English
    # phrasing's answer holds three of its eight words), so the best score over the phrasings (legacy-v2)
    # put the hub first.
    assert korean.items[0].score > english.items[0].score
    merged = merge_phrasings(TERMS, [korean, english])
    assert ids(merged) == ["answer", "hub"]
    assert merged.scanned == 3 and merged.scan_limit == 200 and not merged.partial


def test_the_merged_score_is_the_mean_over_the_phrasings_with_terms_and_min_score_applies_to_it():
    korean, english = _list(KOREAN, HUB, ANSWER), _list(ENGLISH, ANSWER)
    merged = {r.snapshot.id: r.score for r in merge_phrasings(TERMS, [korean, english]).items}
    assert merged["answer"] == round((relevance(TERMS[0], ANSWER, 1) + relevance(TERMS[1], ANSWER, 0)) / 2, 6)
    assert merged["hub"] == round((relevance(TERMS[0], HUB, 0) + relevance(TERMS[1], HUB, None)) / 2, 6)
    kept = merge_phrasings(TERMS, [korean, english], min_score=merged["answer"])
    assert ids(kept) == ["answer"]
    empty = merge_phrasings([*TERMS, lexical.query_terms("the of and")],
                            [korean, english, RankedList((), 0, 100, False)])
    assert {r.snapshot.id: r.score for r in empty.items} == merged
    assert all(0.0 <= score <= 1.0 for score in merged.values())
