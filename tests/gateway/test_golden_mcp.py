"""Behaviour-preservation test: fixed MCP requests, answers compared byte for byte with recorded files.

A fixed sequence of JSON-RPC messages (``initialize``, ``tools/list`` and each
of the Lesson tools with valid and invalid arguments, plus a write without the
token) is POSTed to ``/mcp`` of the real WSGI app (``create_app``: transport,
dispatcher, registry building the tool schemas from the tool modules, the real handlers)
through Flask's test client. To make the answers deterministic the Lesson
store is :class:`~support.memory.InMemoryRepository`, the tool clock and
the repository clock are fixed, the seal keys and the cursor secret are fixed,
cursor expiry uses the fixed clock, and the embedding provider is disabled.
Later requests take ids, revision ids and digests from earlier answers, so
the sequence is one scenario: its steps run in order in one test.

Each step has one file ``tests/gateway/golden/mcp/<NN>-<step>.txt``: the request
(headers that matter and the exact body) and the answer (status line,
``Content-Type`` and the exact body bytes). The test fails on any byte of
difference, on a missing file and on a file no step produces.

Re-recording (only when an answer changes ON PURPOSE — a protocol, schema or
description change — never to make a refactor pass)::

    S3RM_GOLDEN_RECORD=1 python -m pytest -q tests/gateway/test_golden_mcp.py
    git diff tests/gateway/golden/mcp/    # read every changed answer

and say in the commit message which answers changed and why.
"""
from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable

import pytest

from gateway.app import create_app
from gateway.config import DEFAULT_SCHEMA_DIR, GatewayConfig, load_config
from gateway.tools import cursors
from gateway.retrieval.hybrid.service import RetrievalService
from support.memory import InMemoryRepository

GOLDEN_DIR = Path(__file__).parent / "golden" / "mcp"
RECORD = os.environ.get("S3RM_GOLDEN_RECORD") == "1"

TOKEN = "golden-write-token-0123456789"
NOW = datetime(2026, 12, 1, 9, 0, 0, tzinfo=timezone.utc)
HEADERS = {"Host": "127.0.0.1:8080", "Accept": "application/json, text/event-stream",
           "Content-Type": "application/json", "MCP-Protocol-Version": "2025-06-18"}
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _config() -> GatewayConfig:
    return GatewayConfig(
        allowed_hosts=frozenset({"127.0.0.1:8080"}), allowed_origins=frozenset({"http://127.0.0.1:8080"}),
        write_auth_mode="token", write_token_sha256=hashlib.sha256(TOKEN.encode()).hexdigest(),
        wiki_username="S3Agent@gateway",
        revision_hmac_keys=MappingProxyType({"k1": "golden-seal-key-one-0123456789"}),
        revision_hmac_active_key_id="k1", schema_dir=DEFAULT_SCHEMA_DIR,
        cursor_secret=b"golden-cursor-secret-0123456789", cursor_secret_ephemeral=False)


def _fields(title: str, **overrides: Any) -> dict[str, Any]:
    """Valid create_lesson_draft arguments. Written out here on purpose (not imported from the
    write harness) so a change to shared test data cannot change the recorded answers."""
    base = {
        "title": title,
        "question": "Why did long training runs run out of GPU memory?",
        "attempt": "Compared the caching allocator with expandable segments.",
        "context": "A100 80GB, PyTorch 2.3, 7B model, batch 16",
        "observation": "Peak reserved memory grew 30% over 10k steps.",
        "interpretation": "Fragmentation of cached blocks, not a leak.",
        "reusable_lesson": "Enable expandable segments before hunting leaks.",
        "applicability": "Long runs with variable sequence lengths.",
        "confidence": "medium",
        "evidence": "Allocator traces of run 31.",
        "initial_evidence": {"citation": "git lab/probes@4f19a2e results/run-031/summary.json",
                             "url": "https://example.org/run-031", "kind": "log",
                             "verification_basis": "full_text", "note": "lines 1-40"},
    }
    base.update(overrides)
    return base


CLAIM = {"verification_basis": "full_text", "source_identity": "run-031 summary.json@4f19a2e",
         "source_sha256": "a" * 64, "source_locator": "lines 1-40", "coverage": "whole file",
         "outcome": "supports", "claim_fields": ["observation", "interpretation", "reusable_lesson"]}

INIT = {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "golden", "version": "1"}}

Answers = dict[str, Any]
Step = tuple[str, Callable[[Answers], tuple[dict, dict]]]


def _call(name: str, arguments: Any, *, write: bool = False, id_: int = 1) -> tuple[dict, dict]:
    body = {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    return body, (AUTH if write else {})


def _rpc(method: str, params: dict | None = None, id_: int = 1) -> tuple[dict, dict]:
    body: dict = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        body["params"] = params
    return body, {}


def _sc(answers: Answers, step: str) -> dict:
    """``structuredContent`` of an earlier step's successful tool call."""
    return answers[step]["result"]["structuredContent"]


def _revise_a(answers: Answers) -> tuple[dict, dict]:
    """The one valid revise_lesson call (sent twice: applied, then replayed)."""
    return _call("revise_lesson", {
        "operation_id": "op-revise-a-0001", "lesson_id": "gpu-allocator-fragmentation",
        "expected_revision_id": _sc(answers, "verify")["current_revision_id"],
        "basis_evidence_ids": [_sc(answers, "attach")["evidence_id"]],
        "changes": {"interpretation": "Fragmentation of cached blocks under variable shapes, not a leak."},
        "reason": "The run-044 trace shows the shape dependence."}, write=True)


STEPS: list[Step] = [
    ("initialize", lambda a: _rpc("initialize", INIT)),
    ("initialize-no-version", lambda a: _rpc("initialize", {"capabilities": {}})),
    ("tools-list", lambda a: _rpc("tools/list")),
    ("unknown-method", lambda a: _rpc("tools/unknown")),
    ("unknown-tool", lambda a: _call("no_such_tool", {})),
    # ------------------------------------------------------------ create_lesson_draft
    ("create-a", lambda a: _call("create_lesson_draft", _fields(
        "GPU allocator fragmentation under long runs", operation_id="op-create-a-0001",
        lesson_id="gpu-allocator-fragmentation"), write=True)),
    ("create-b", lambda a: _call("create_lesson_draft", _fields(
        "Expandable segments fix OOM in long runs", operation_id="op-create-b-0001",
        lesson_id="expandable-segments-oom", initial_verification=CLAIM), write=True)),
    ("create-a-replay", lambda a: _call("create_lesson_draft", _fields(
        "GPU allocator fragmentation under long runs", operation_id="op-create-a-0001",
        lesson_id="gpu-allocator-fragmentation"), write=True)),
    ("create-no-token", lambda a: (_call("create_lesson_draft", _fields(
        "No token", operation_id="op-create-x-0001"))[0], {})),
    ("create-missing-field", lambda a: _call("create_lesson_draft", {
        k: v for k, v in _fields("Missing question", operation_id="op-create-m-0001").items()
        if k != "question"}, write=True)),
    ("create-bad-confidence", lambda a: _call("create_lesson_draft", _fields(
        "Bad confidence", operation_id="op-create-c-0001", confidence="certain"), write=True)),
    ("create-unknown-field", lambda a: _call("create_lesson_draft", _fields(
        "Unknown field", operation_id="op-create-u-0001", colour="blue"), write=True)),
    # ------------------------------------------------------------ link_lessons
    ("link", lambda a: _call("link_lessons", {
        "operation_id": "op-link-ab-0001", "from": "expandable-segments-oom", "relation": "supports",
        "to": "gpu-allocator-fragmentation", "note": "Same allocator traces."}, write=True)),
    ("link-missing-target", lambda a: _call("link_lessons", {
        "operation_id": "op-link-ax-0001", "from": "gpu-allocator-fragmentation", "relation": "supports",
        "to": "no-such-lesson"}, write=True)),
    ("link-bad-relation", lambda a: _call("link_lessons", {
        "operation_id": "op-link-ar-0001", "from": "gpu-allocator-fragmentation", "relation": "likes",
        "to": "expandable-segments-oom"}, write=True)),
    ("link-self", lambda a: _call("link_lessons", {
        "operation_id": "op-link-aa-0001", "from": "gpu-allocator-fragmentation", "relation": "supports",
        "to": "gpu-allocator-fragmentation"}, write=True)),
    # ------------------------------------------------------------ attach_evidence
    ("attach", lambda a: _call("attach_evidence", {
        "operation_id": "op-attach-a-0001", "lesson_id": "gpu-allocator-fragmentation",
        "citation": "git lab/probes@77aa01b results/run-044/trace.json", "kind": "log",
        "verification_basis": "full_text", "note": "allocator trace"}, write=True)),
    ("attach-missing-lesson", lambda a: _call("attach_evidence", {
        "operation_id": "op-attach-x-0001", "lesson_id": "no-such-lesson", "citation": "c",
        "kind": "log", "verification_basis": "full_text"}, write=True)),
    ("attach-bad-kind", lambda a: _call("attach_evidence", {
        "operation_id": "op-attach-k-0001", "lesson_id": "gpu-allocator-fragmentation", "citation": "c",
        "kind": "rumour", "verification_basis": "full_text"}, write=True)),
    # ------------------------------------------------------------ record_evidence_verification
    ("verify", lambda a: _call("record_evidence_verification", {
        "operation_id": "op-verify-a-0001", "lesson_id": "gpu-allocator-fragmentation",
        "evidence_id": _sc(a, "attach")["evidence_id"],
        "expected_revision_id": _sc(a, "attach")["current_revision_id"],
        "expected_evidence_digest": _sc(a, "attach")["evidence_digest"], **CLAIM}, write=True)),
    ("verify-stale-revision", lambda a: _call("record_evidence_verification", {
        "operation_id": "op-verify-s-0001", "lesson_id": "gpu-allocator-fragmentation",
        "evidence_id": _sc(a, "attach")["evidence_id"],
        "expected_revision_id": _sc(a, "attach")["current_revision_id"],
        "expected_evidence_digest": _sc(a, "attach")["evidence_digest"], **CLAIM}, write=True)),
    ("verify-bad-digest", lambda a: _call("record_evidence_verification", {
        "operation_id": "op-verify-d-0001", "lesson_id": "gpu-allocator-fragmentation",
        "evidence_id": _sc(a, "attach")["evidence_id"],
        "expected_revision_id": _sc(a, "verify")["current_revision_id"],
        "expected_evidence_digest": "sha256:" + "0" * 64, **CLAIM}, write=True)),
    ("verify-bad-sha", lambda a: _call("record_evidence_verification", {
        "operation_id": "op-verify-h-0001", "lesson_id": "gpu-allocator-fragmentation",
        "evidence_id": _sc(a, "attach")["evidence_id"],
        "expected_revision_id": _sc(a, "verify")["current_revision_id"],
        "expected_evidence_digest": _sc(a, "attach")["evidence_digest"],
        **{**CLAIM, "source_sha256": "xyz"}}, write=True)),
    # ------------------------------------------------------------ revise_lesson
    ("revise", lambda a: _revise_a(a)),
    ("revise-replay", lambda a: _revise_a(a)),
    ("revise-stale", lambda a: _call("revise_lesson", {
        "operation_id": "op-revise-s-0001", "lesson_id": "gpu-allocator-fragmentation",
        "expected_revision_id": _sc(a, "verify")["current_revision_id"],
        "basis_evidence_ids": [_sc(a, "attach")["evidence_id"]],
        "changes": {"title": "Allocator fragmentation"}}, write=True)),
    ("revise-unknown-evidence", lambda a: _call("revise_lesson", {
        "operation_id": "op-revise-e-0001", "lesson_id": "gpu-allocator-fragmentation",
        "expected_revision_id": _sc(a, "revise")["current_revision_id"],
        "basis_evidence_ids": ["no-such-evidence"], "changes": {"title": "Allocator fragmentation"}},
        write=True)),
    ("revise-empty-changes", lambda a: _call("revise_lesson", {
        "operation_id": "op-revise-c-0001", "lesson_id": "gpu-allocator-fragmentation",
        "expected_revision_id": _sc(a, "revise")["current_revision_id"],
        "basis_evidence_ids": [_sc(a, "attach")["evidence_id"]], "changes": {}}, write=True)),
    # ------------------------------------------------------------ get_lesson
    ("get", lambda a: _call("get_lesson", {"id": "gpu-allocator-fragmentation"})),
    ("get-fields", lambda a: _call("get_lesson", {
        "id": "expandable-segments-oom", "fields": ["title", "confidence"], "citation_detail": "full"})),
    ("get-missing", lambda a: _call("get_lesson", {"id": "no-such-lesson"})),
    ("get-bad-id", lambda a: _call("get_lesson", {"id": "Not An Id"})),
    ("get-bad-cursor", lambda a: _call("get_lesson", {
        "id": "gpu-allocator-fragmentation", "citations_cursor": "garbage"})),
    # ------------------------------------------------------------ search_lessons
    ("search", lambda a: _call("search_lessons", {"query": "allocator fragmentation"})),
    ("search-page", lambda a: _call("search_lessons", {"query": "segments", "limit": 1})),
    ("search-next", lambda a: _call("search_lessons", {
        "query": "segments", "limit": 1, "cursor": _sc(a, "search-page")["next_cursor"]})),
    ("search-filters", lambda a: _call("search_lessons", {
        "filters": {"confidence": ["medium"]}, "fields": ["title"]})),
    ("search-bad-limit", lambda a: _call("search_lessons", {"query": "gpu", "limit": 0})),
    ("search-bad-mode", lambda a: _call("search_lessons", {"query": "gpu", "retrieval_mode": "magic"})),
    ("search-bad-cursor", lambda a: _call("search_lessons", {"query": "gpu", "cursor": "garbage"})),
    # ------------------------------------------------------------ find_related_lessons
    ("related", lambda a: _call("find_related_lessons", {"id": "gpu-allocator-fragmentation"})),
    ("related-out", lambda a: _call("find_related_lessons", {
        "id": "expandable-segments-oom", "direction": "outgoing", "relation_types": ["supports"]})),
    ("related-missing", lambda a: _call("find_related_lessons", {"id": "no-such-lesson"})),
    ("related-bad-direction", lambda a: _call("find_related_lessons", {
        "id": "gpu-allocator-fragmentation", "direction": "sideways"})),
    # ------------------------------------------------------------ find_analogies
    ("analogies", lambda a: _call("find_analogies", {"id": "gpu-allocator-fragmentation"})),
    ("analogies-missing", lambda a: _call("find_analogies", {"id": "no-such-lesson"})),
    ("analogies-bad-score", lambda a: _call("find_analogies", {
        "id": "gpu-allocator-fragmentation", "min_score": 7})),
    # ------------------------------------------------------------ audit_lessons
    ("audit", lambda a: _call("audit_lessons", {"expectations": [
        {"id": "gpu-allocator-fragmentation", "revision_id": _sc(a, "revise")["current_revision_id"],
         "content_digest": _sc(a, "get")["content_digest"],
         "evidence_ids": [_sc(a, "attach")["evidence_id"]]},
        {"id": "expandable-segments-oom", "revision_id": 1,
         "relations": [{"relation": "supports", "to": "gpu-allocator-fragmentation"}]},
        {"id": "no-such-lesson"}]})),
    ("audit-empty", lambda a: _call("audit_lessons", {"expectations": []})),
    ("audit-bad-digest", lambda a: _call("audit_lessons", {"expectations": [
        {"id": "gpu-allocator-fragmentation", "content_digest": "md5:abc"}]})),
    ("arguments-not-object", lambda a: _call("search_lessons", ["query"])),
]


def _render(request_body: bytes, headers: dict, response) -> bytes:
    head = "".join(f"{k}: {v}\n" for k, v in sorted(headers.items()) if k != "Authorization")
    if "Authorization" in headers:
        head += "Authorization: Bearer <write token>\n"
    return (b"POST /mcp\n" + head.encode() + b"\n" + request_body + b"\n\n--- response\n"
            + f"{response.status_code} {response.headers.get('Content-Type', '')}\n\n".encode()
            + response.get_data() + b"\n")


@pytest.fixture()
def golden_client(monkeypatch):
    fixed = NOW.timestamp()
    defaults = list(cursors.CursorCodec.__init__.__defaults__)
    defaults[-1] = lambda: fixed                      # cursor expiry from the fixed clock
    monkeypatch.setattr(cursors.CursorCodec.__init__, "__defaults__", tuple(defaults))
    repo = InMemoryRepository(clock=lambda: NOW)
    retrieval = RetrievalService(load_config({}).retrieval, repo)   # provider disabled
    app = create_app(_config(), repository_factory=lambda _config: repo, wiki_probe=lambda: True,
                     clock=lambda: NOW, retrieval=retrieval)
    yield app.test_client()
    retrieval.stop()


def test_mcp_answers_match_the_recorded_files(golden_client):
    answers: Answers = {}
    produced: dict[str, bytes] = {}
    for number, (name, build) in enumerate(STEPS, start=1):
        body, extra = build(answers)
        headers = {**HEADERS, **extra}
        raw = json.dumps(body, ensure_ascii=False, sort_keys=True).encode()
        response = golden_client.post("/mcp", data=raw, headers=headers)
        answers[name] = response.get_json(silent=True)
        produced[f"{number:02d}-{name}.txt"] = _render(raw, headers, response)
    if RECORD:
        GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
        for old in GOLDEN_DIR.glob("*.txt"):
            old.unlink()
        for filename, data in produced.items():
            (GOLDEN_DIR / filename).write_bytes(data)
    recorded = {p.name for p in GOLDEN_DIR.glob("*.txt")}
    assert recorded == set(produced), f"golden files differ from steps: {sorted(recorded ^ set(produced))}"
    changed = [f for f, data in produced.items() if (GOLDEN_DIR / f).read_bytes() != data]
    assert not changed, f"answers differ from tests/gateway/golden/mcp (see module docstring to re-record): {changed}"
