"""Legacy's partial matches must share a SPECIFIC word (docs/retrieval.md#specific-partial-matches).

Unit tests run the search over the in-memory repository (its ``total`` is the count of matching
Lessons, as MediaWiki's ``totalhits``); the last test runs it over a real MediaWiki (its own wiki
copy), whose single-term searches carry the counts the rule reads.
"""
from __future__ import annotations

import math

import pytest

from gateway.domain.codec import serialize_page
from gateway.domain.repository import FullTextResult
from gateway.retrieval.legacy import lexical
from gateway.retrieval.legacy import search as legacy
from gateway.retrieval.request import SearchRequest
from gateway.wiki.repository import MediaWikiRepository
from support.lessons import agent_client, lesson, write_pages
from support.memory import InMemoryRepository
from support.schema_dirs import SCHEMA

#: An unanswerable Korean question (no Lesson holds "만료" or "중단"): "인증서" is held by one Lesson,
#: "서비스" by many.
QUESTION = "인증서 만료로 서비스 중단"


def _korean(lesson_id: str, title: str, sentence: str):
    """A Korean Lesson written in sentences (content quality of language): ``title`` and ``sentence``
    in every text field, so the words the test names are the only query words it holds."""
    return lesson(lesson_id, title=title, question=f"{sentence} 왜 그랬을까?", attempt=f"{sentence} 원인을 찾아보았다.",
                  context=f"{sentence} 평소와 같은 환경이었다.", observation=f"{sentence} 기록을 남겼다.",
                  interpretation=f"{sentence} 설정을 잘못 이해했다.", reusable_lesson=f"{sentence} 미리 점검한다.",
                  applicability=f"{sentence} 비슷한 시스템 전반.")


#: Six Lessons holding only the common word of QUESTION, one holding its specific word.
CORPUS = {
    **{f"common-{i}": _korean(f"common-{i}", f"{topic} 서비스 지연", f"{topic} 서비스가 느려졌다.")
       for i, topic in enumerate(("결제", "검색", "알림", "로그인", "업로드", "채팅"))},
    "cert": _korean("cert", "내부 인증서 갱신 누락", "내부 인증서를 사람이 갱신하다 잊었다."),
}


def _memory(pages) -> InMemoryRepository:
    repo = InMemoryRepository()
    for lesson_id, page in pages.items():
        repo.save_page(lesson_id, serialize_page(page, SCHEMA), "t", base_revision_id=None)
    return repo


def _ids(repo, query: str) -> list[str]:
    return [r.snapshot.id for r in legacy.search(repo, SearchRequest(query=query)).items]


def test_term_weights_follow_the_rarity_of_each_word_within_the_query():
    terms = lexical.query_terms("인증서 서비스 장애 만료")
    counts = {"인증서*": 1, "서비스*": 10, "만료*": 0}   # "장애*" was not searched alone
    weights = legacy.term_weights(terms, counts)
    assert weights["서비스*"] == pytest.approx(math.log(2))            # the commonest counted word
    assert weights["인증서*"] == pytest.approx(math.log(11))           # ten times rarer
    assert weights["장애*"] == pytest.approx(math.log(1 + 1 / legacy.UNCOUNTED_FACTOR))  # counts as common
    assert weights["만료*"] == 0.0                                     # no Lesson holds it


def test_an_unanswerable_question_keeps_the_specific_partial_match_and_drops_common_word_filler():
    repo = _memory(CORPUS)
    assert _ids(repo, QUESTION) == ["cert"]
    # what legacy-v3 showed: the six common-word Lessons around it (the same ranking without the counts)
    terms = lexical.query_terms(QUESTION)
    found = legacy.gather(repo, terms)
    assert found.counts == {"인증서*": 1, "서비스*": 6, "만료*": 0, "중단*": 0}
    before = legacy.rank_candidates(terms, found.ids, found.snapshots, legacy.SearchFilters(), by_quality=True)
    assert {r.snapshot.id for r in before} == set(CORPUS)


def test_partial_matches_sharing_words_as_common_as_the_best_one_stay():
    """The floor is relative to the best partial match: a question whose words are all about as common
    keeps every Lesson that shares one of them (its answer may be any of them)."""
    pages = {**CORPUS, **{f"outage-{i}": _korean(f"outage-{i}", f"{t} 장애", f"{t}에 장애가 났다.")
                          for i, t in enumerate(("저장소", "네트워크", "전원", "냉방", "디스크"))}}
    repo = _memory(pages)
    assert set(_ids(repo, "서비스 장애")) == {f"common-{i}" for i in range(6)} | {f"outage-{i}" for i in range(5)}


def test_lessons_holding_two_terms_and_full_matches_are_never_judged_by_the_rule():
    pages = {**CORPUS, "two": _korean("two", "서비스 중단 보고", "서비스가 중단되었다.")}
    repo = _memory(pages)
    assert _ids(repo, QUESTION) == ["two", "cert"]   # two common words hold together; "cert" the rare one
    # the Lesson holding every term sets no bar: the others sharing "서비스" are judged among themselves
    found = _ids(repo, "결제 서비스")
    assert found[0] == "common-0" and set(found) == {f"common-{i}" for i in range(6)} | {"two"}


def test_a_backend_that_does_not_count_hits_ranks_as_before():
    class Uncounted(InMemoryRepository):
        def search_full_text(self, query: str, limit: int) -> FullTextResult:
            result = super().search_full_text(query, limit)
            return FullTextResult(result.hits, result.scanned, result.scan_limit, result.partial)

    repo = Uncounted()
    for lesson_id, page in CORPUS.items():
        repo.save_page(lesson_id, serialize_page(page, SCHEMA), "t", base_revision_id=None)
    assert legacy.gather(repo, lexical.query_terms(QUESTION)).counts == {}
    assert set(_ids(repo, QUESTION)) == set(CORPUS)


# ------------------------------------------------------------------ real MediaWiki
@pytest.fixture(scope="module")
def wiki_repo(module_wiki) -> MediaWikiRepository:
    """This module's own wiki copy holding CORPUS (the rule reads counts of the whole namespace)."""
    client = agent_client(module_wiki)
    write_pages(client, CORPUS)
    return MediaWikiRepository(client, SCHEMA)


def test_on_mediawiki_the_single_term_searches_carry_counts_and_filler_is_dropped(wiki_repo):
    terms = lexical.query_terms(QUESTION)
    found = legacy.gather(wiki_repo, terms)
    assert found.counts == {"인증서*": 1, "서비스*": 6, "만료*": 0, "중단*": 0}   # MediaWiki's totalhits
    assert _ids(wiki_repo, QUESTION) == ["cert"]
    assert set(_ids(wiki_repo, "결제 서비스 인증서")) == {"common-0", "cert"}   # two words / one rare word
