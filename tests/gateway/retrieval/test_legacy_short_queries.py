"""Legacy search of a one- or two-word query over a real MediaWiki lists no word salad
(docs/retrieval.md#content-quality-in-legacy, ``legacy-v4``).

The salad is the noise corpus's own mixed-language Lesson (data/noise), written beside one Lesson
in sentences into this module's own wiki copy; the search runs through MediaWiki's full-text
search and legacy's ranking, as ``retrieval_mode=legacy`` serves it.
"""
from __future__ import annotations

import json

import pytest

from gateway.retrieval.filters import SearchFilters
from gateway.retrieval.legacy import lexical
from gateway.retrieval.legacy import search as legacy
from gateway.retrieval.request import SearchRequest
from gateway.wiki.repository import MediaWikiRepository
from support.lessons import agent_client, lesson, write_pages
from support.noise import NOISE_FILE
from support.schema_dirs import SCHEMA

SALAD = "noise-salad-mixed"
REAL = "wk-dns-outage"


def _noise_lesson(lesson_id: str):
    for line in NOISE_FILE.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["id"] == lesson_id:
            return lesson(lesson_id, **{k: v for k, v in record.items() if k != "id"})
    raise AssertionError(f"{lesson_id} is not in {NOISE_FILE}")


@pytest.fixture(scope="module")
def repo(module_wiki) -> MediaWikiRepository:
    client = agent_client(module_wiki)
    write_pages(client, {
        SALAD: _noise_lesson(SALAD),
        REAL: lesson(REAL, title="사내 DNS 장애로 배포가 멈춤",
                     question="사내 DNS 서버가 응답하지 않아 배포가 왜 멈췄을까?",
                     observation="DNS 장애가 한 시간 이어지는 동안 배포 작업이 이름을 찾지 못해 모두 실패했다.",
                     reusable_lesson="DNS 서버를 두 대 이상 두고 배포 도구에 캐시를 켠다."),
    })
    return MediaWikiRepository(client, SCHEMA)


def _ids(repo, query: str) -> list[str]:
    return [r.snapshot.id for r in legacy.search(repo, SearchRequest(query=query)).items]


def test_the_salad_holds_the_words_of_a_short_query_yet_is_not_listed(repo):
    assert legacy.quality_of(repo.get_snapshot(SALAD)) < legacy.NOISE_QUALITY
    hits = {h.id for h in repo.search_full_text("dns 장애*", 20).hits}
    assert {SALAD, REAL} <= hits                       # MediaWiki finds both by the two words
    assert _ids(repo, "DNS 장애") == [REAL]
    assert _ids(repo, "DNS") == [REAL]


def test_a_short_query_only_the_salad_answers_still_finds_it(repo):
    """Noise stays findable by its own words: with no other Lesson holding them, the salad is the answer."""
    assert _ids(repo, "그래디언트 tokenizer") == [SALAD]
    assert _ids(repo, "그래디언트") == [SALAD]


def test_a_salad_holding_every_word_of_a_longer_query_stays_last(repo):
    found = _ids(repo, "DNS 장애 배포")
    assert found == [REAL, SALAD]
    # legacy-v3's order kept the salad for the short query too (the bench's legacy_v3 column)
    terms = lexical.query_terms("DNS 장애")
    ids, _, snaps = legacy.candidates(repo, terms)
    before = legacy.rank_candidates(terms, ids, snaps, SearchFilters(), by_quality=True, noise_min_terms=0)
    assert [r.snapshot.id for r in before] == [REAL, SALAD]
