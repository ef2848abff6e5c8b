"""Writers learn which facets the index cuts (docs/hybrid-search.md#truncation-report).

The report is computed locally by the generation's projection builder (the
window is measured in characters, exactly as the index cuts), so the write
path never calls the embedding server. Through the real app: a create or a
revise with a facet longer than the window answers ``embedding_truncated``;
nothing cut or semantic search off → the key is absent.
"""
from __future__ import annotations

import hashlib
import json
from types import MappingProxyType

from gateway.app import create_app
from gateway.config import DEFAULT_SCHEMA_DIR, GatewayConfig
from gateway.retrieval.hybrid.service import RetrievalService
from gateway.retrieval.indexing.projection import ELISION, ProjectionBuilder
from support.schema_dirs import SCHEMA
from support.memory import InMemoryRepository
from support.embedding import PickyProvider, settings_for
from support.lessons import lesson
from support.write_harness import evidence_args, lesson_fields

TOKEN = "truncation-write-token-0123456789"
HEADERS = {"Host": "127.0.0.1:8080", "Accept": "application/json", "Content-Type": "application/json",
           "Authorization": f"Bearer {TOKEN}"}
LONG_CONTEXT = "context words " * 300        # 4,200 characters
LONG_OBSERVATION = "observed value " * 200   # 3,000 characters


def test_report_names_the_cut_fields_and_the_kept_share_the_index_sees():
    builder = ProjectionBuilder(SCHEMA)
    page = lesson("tr-1", context=LONG_CONTEXT, observation=LONG_OBSERVATION)
    report = builder.truncation_report(page)
    doc = builder.build("tr-1", page)
    assert set(report) == {t.facet for t in doc.truncation} == {"situation", "whole"}
    situation = next(t for t in doc.truncation if t.facet == "situation")
    assert report["situation"]["kept"] == int(100 * (situation.kept_chars - len(ELISION)) / situation.chars) / 100
    assert 0 < report["situation"]["kept"] < 1
    # head = "question…, context: …" (first 2/3 of the window), tail = end of observation
    assert report["situation"]["fields"] == ["context", "observation"]
    assert "title" not in report["whole"]["fields"] and "applicability" not in report["whole"]["fields"]
    assert builder.truncation_report(lesson("tr-2")) == {}


def test_a_field_wholly_inside_the_dropped_middle_is_named():
    page = lesson("tr-3", question="q " * 1500, context="short middle", observation="o " * 1500)
    assert ProjectionBuilder(SCHEMA).truncation_report(page)["situation"]["fields"] == ["question", "context",
                                                                                  "observation"]


def _app(retrieval):
    config = GatewayConfig(
        allowed_hosts=frozenset({"127.0.0.1:8080"}), allowed_origins=frozenset({"http://127.0.0.1:8080"}),
        write_auth_mode="token", write_token_sha256=hashlib.sha256(TOKEN.encode()).hexdigest(),
        wiki_username="S3Agent@gateway", revision_hmac_keys=MappingProxyType({"k1": "trunc-seal-key-0123456789"}),
        revision_hmac_active_key_id="k1", schema_dir=DEFAULT_SCHEMA_DIR,
        cursor_secret=b"trunc-cursor-secret-0123456789", cursor_secret_ephemeral=False)
    repo = InMemoryRepository()
    return create_app(config, repository_factory=lambda _: repo, wiki_probe=lambda: True, retrieval=retrieval)


def _call(app, tool: str, arguments: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    answer = app.test_client().post("/mcp", data=json.dumps(body), headers=HEADERS).get_json()
    assert "error" not in answer and not answer["result"].get("isError"), answer
    return answer["result"]["structuredContent"]


def test_create_and_revise_tell_the_writer_what_was_cut():
    service = RetrievalService(settings_for("http://127.0.0.1:9/v1/embeddings", follow_seconds=0.0),
                               InMemoryRepository(), provider=PickyProvider())  # not started: no refresh needed
    app = _app(service)
    created = _call(app, "create_lesson_draft", {
        "operation_id": "op-trunc-1", "lesson_id": "tr-long",
        **lesson_fields(context=LONG_CONTEXT, observation=LONG_OBSERVATION), "initial_evidence": evidence_args()})
    cut = created["embedding_truncated"]
    assert set(cut) == {"situation", "whole"} and cut["situation"]["fields"] == ["context", "observation"]
    revised = _call(app, "revise_lesson", {
        "operation_id": "op-trunc-2", "lesson_id": "tr-long", "expected_revision_id": created["current_revision_id"],
        "basis_evidence_ids": created["evidence_ids"], "changes": {"context": "A100, PyTorch 2.3."}})
    assert "embedding_truncated" not in revised  # short enough now
    service.stop()


def test_absent_when_semantic_search_is_disabled():
    app = _app(None)
    created = _call(app, "create_lesson_draft", {
        "operation_id": "op-trunc-3", "lesson_id": "tr-off",
        **lesson_fields(context=LONG_CONTEXT, observation=LONG_OBSERVATION), "initial_evidence": evidence_args()})
    assert "embedding_truncated" not in created
