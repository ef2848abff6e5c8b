"""Resources, prompts and completions through the real WSGI app, both eras (docs/transport.md#resources).

The app is ``create_app`` with the real tools over an in-memory Lesson store, so
``resources/read`` is exactly a ``get_lesson`` answer and ``resources/list`` a
``search_lessons`` listing.
"""
from __future__ import annotations

import hashlib
import json
from types import MappingProxyType

import pytest
from support.schema_dirs import SCHEMA
from support.lessons import evidence, lesson
from test_transport import HEADERS, rpc

from gateway.app import create_app
from gateway.config import DEFAULT_SCHEMA_DIR, GatewayConfig
from gateway.domain.codec import serialize_page
from support.memory import InMemoryRepository

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
TOKEN = "surface-write-token-0123456789"


@pytest.fixture()
def repo() -> InMemoryRepository:
    repo = InMemoryRepository()
    for i in range(25):
        repo.put_page(f"les-{i:02d}", serialize_page(lesson(f"les-{i:02d}", title=f"Lesson number {i}",
                                                            evidence_items=[evidence("e1")]), SCHEMA))
    return repo


def make_client(repo, **settings):
    """The real app over ``repo``; ``settings`` override GatewayConfig fields."""
    config = GatewayConfig(
        allowed_hosts=frozenset({"127.0.0.1:8080"}), allowed_origins=frozenset({"http://127.0.0.1:8080"}),
        write_auth_mode="token", write_token_sha256=hashlib.sha256(TOKEN.encode()).hexdigest(),
        schema_dir=DEFAULT_SCHEMA_DIR, revision_hmac_keys=MappingProxyType({"k1": "surface-seal-key-0123456789"}),
        revision_hmac_active_key_id="k1", cursor_secret=b"surface-cursor-secret-0123456789",
        cursor_secret_ephemeral=False, **settings)
    return create_app(config, repository_factory=lambda _c: repo, wiki_probe=lambda: True).test_client()


@pytest.fixture()
def client(repo):
    return make_client(repo)


def call(client, method: str, params: dict | None = None, *, era: str = "2025", name: str | None = None):
    """POST one request; returns (HTTP status, body)."""
    headers = dict(HEADERS)
    body = dict(params or {})
    if era == "modern":
        body["_meta"] = META
        headers.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": method})
        if name is not None:
            headers["Mcp-Name"] = name
    else:
        headers["MCP-Protocol-Version"] = "2025-11-25"
    r = client.post("/mcp", data=json.dumps(rpc(method, body)), headers=headers)
    return r.status_code, r.get_json()


def test_capabilities_are_advertised_in_both_eras(client):
    _, init = call(client, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                          "clientInfo": {"name": "t", "version": "1"}})
    _, disc = call(client, "server/discover", era="modern")
    for caps in (init["result"]["capabilities"], disc["result"]["capabilities"]):
        assert caps == {"tools": {"listChanged": False}, "resources": {"listChanged": False},
                        "prompts": {"listChanged": False}, "completions": {}}


@pytest.mark.parametrize("era", ["2025", "modern"])
def test_resources_list_pages_newest_first_and_read_returns_get_lesson(client, repo, era):
    repo.put_page("les-03", serialize_page(lesson("les-03", title="Edited last", evidence_items=[evidence("e1")]), SCHEMA))
    _, first = call(client, "resources/list", era=era)
    page = first["result"]
    assert [r["uri"] for r in page["resources"][:2]] == ["lesson://les-03", "lesson://les-24"]
    assert page["resources"][0]["title"] == "Edited last" and page["resources"][0]["mimeType"] == "application/json"
    assert len(page["resources"]) == 20 and page["nextCursor"]
    _, second = call(client, "resources/list", {"cursor": page["nextCursor"]}, era=era)
    uris = [r["uri"] for r in page["resources"] + second["result"]["resources"]]
    assert len(uris) == len(set(uris)) == 25 and "nextCursor" not in second["result"]
    if era == "modern":
        assert page["ttlMs"] == 30000 and page["cacheScope"] == "public" and page["resultType"] == "complete"
    else:
        assert "ttlMs" not in page and "resultType" not in page

    _, read = call(client, "resources/read", {"uri": "lesson://les-03"}, era=era, name="lesson://les-03")
    contents = read["result"]["contents"]
    _, tool = call(client, "tools/call", {"name": "get_lesson", "arguments": {"id": "les-03"}}, era=era,
                   name="get_lesson")
    assert contents == [{"uri": "lesson://les-03", "mimeType": "application/json",
                         "text": tool["result"]["content"][0]["text"]}]
    assert json.loads(contents[0]["text"])["lesson"]["title"] == "Edited last"
    if era == "modern":
        assert read["result"]["ttlMs"] <= 60000 and read["result"]["cacheScope"] == "public"


@pytest.mark.parametrize("era, code", [("2025", -32002), ("modern", -32602)])
@pytest.mark.parametrize("uri", ["lesson://missing", "lesson://Bad Id", "file:///etc/passwd", "lesson://a/b"])
def test_resource_not_found(client, era, code, uri):
    status, body = call(client, "resources/read", {"uri": uri}, era=era, name=uri if uri.isascii() else None)
    assert status == 200 and body["error"]["code"] == code and body["error"]["data"] == {"uri": uri}
    assert body["id"] == 1 and "Resource not found" in body["error"]["message"]


def test_templates_and_bad_cursor(client):
    _, body = call(client, "resources/templates/list", era="modern")
    assert body["result"]["resourceTemplates"][0]["uriTemplate"] == "lesson://{id}"
    assert body["result"]["ttlMs"] >= 0 and body["result"]["cacheScope"] == "public"
    _, body = call(client, "resources/list", {"cursor": "not-a-cursor"})
    assert body["error"]["code"] == -32602 and body["error"]["data"]["code"] == "invalid_cursor"


@pytest.mark.parametrize("era", ["2025", "modern"])
def test_prompts_list_and_get_in_both_languages(client, era):
    _, body = call(client, "prompts/list", era=era)
    prompts = {p["name"]: p for p in body["result"]["prompts"]}
    assert list(prompts) == ["record_lesson", "migrate_memory", "verify_evidence", "revise_lesson"]
    assert all(any(a["name"] == "language" for a in p["arguments"]) for p in prompts.values())
    if era == "modern":
        assert body["result"]["ttlMs"] >= 0 and body["result"]["cacheScope"] == "public"
    _, ko = call(client, "prompts/get", {"name": "record_lesson", "arguments": {"topic": "GPU 단편화"}}, era=era,
                 name="record_lesson")
    text = ko["result"]["messages"][0]["content"]["text"]
    assert ko["result"]["messages"][0]["role"] == "user" and "search_lessons를 먼저" in text and "GPU 단편화" in text
    _, en = call(client, "prompts/get", {"name": "revise_lesson", "arguments": {
        "lesson_id": "les-01", "new_evidence": "run 32", "relation": "supersedes", "language": "en"}}, era=era,
        name="revise_lesson")
    text = en["result"]["messages"][0]["content"]["text"]
    assert "expected_revision_id" in text and "relation supersedes" in text and "les-01" in text
    _, mig = call(client, "prompts/get", {"name": "migrate_memory"}, era=era, name="migrate_memory")
    help_page = (DEFAULT_SCHEMA_DIR / "pages" / "help" / "migration.wiki").read_text(encoding="utf-8")
    assert mig["result"]["messages"][0]["content"]["text"] in help_page  # the help page's own prompt


@pytest.mark.parametrize("params, words", [
    ({"name": "nope"}, ["Unknown prompt", "record_lesson"]),
    ({"name": "record_lesson"}, ["'topic' is required"]),
    ({"name": "record_lesson", "arguments": {"topic": "x", "language": "fr"}}, ["'language'", "ko, en"]),
    ({"name": "record_lesson", "arguments": {"topic": "x", "confidence": "sure"}}, ["low, medium, high"]),
    ({"name": "verify_evidence", "arguments": {"lesson_id": "Not An Id"}}, ["Lesson id"]),
    ({"name": "verify_evidence", "arguments": {"lesson_id": "a", "extra": "1"}}, ["unknown argument 'extra'"]),
    ({"name": "verify_evidence", "arguments": {"lesson_id": 5}}, ["must be a string"]),
])
def test_prompt_argument_errors_are_clear(client, params, words):
    _, body = call(client, "prompts/get", params)
    assert body["error"]["code"] == -32602
    assert all(w in body["error"]["message"] for w in words), body["error"]["message"]


@pytest.mark.parametrize("ref, argument, values", [
    ({"type": "ref/resource", "uri": "lesson://{id}"}, {"name": "id", "value": "les-1"},
     [f"les-{i}" for i in range(10, 20)]),
    ({"type": "ref/prompt", "name": "verify_evidence"}, {"name": "lesson_id", "value": "les-2"},
     ["les-20", "les-21", "les-22", "les-23", "les-24"]),
    ({"type": "ref/prompt", "name": "revise_lesson"}, {"name": "relation", "value": "su"},
     ["supports", "suggests", "supersedes"]),
    ({"type": "ref/prompt", "name": "record_lesson"}, {"name": "confidence", "value": ""}, ["low", "medium", "high"]),
    ({"type": "ref/prompt", "name": "record_lesson"}, {"name": "language", "value": "e"}, ["en"]),
    ({"type": "ref/prompt", "name": "record_lesson"}, {"name": "topic", "value": "gp"}, []),
    ({"type": "ref/resource", "uri": "lesson://{id}"}, {"name": "id", "value": "no such"}, []),
])
@pytest.mark.parametrize("era", ["2025", "modern"])
def test_completion(client, ref, argument, values, era):
    _, body = call(client, "completion/complete", {"ref": ref, "argument": argument}, era=era)
    completion = body["result"]["completion"]
    assert completion["values"] == values and completion["total"] == len(values) and completion["hasMore"] is False


def test_completion_is_bounded_to_100(client, repo):
    for i in range(120):
        repo.put_page(f"bulk-{i:03d}", serialize_page(lesson(f"bulk-{i:03d}", evidence_items=[evidence("e1")]), SCHEMA))
    _, body = call(client, "completion/complete", {"ref": {"type": "ref/resource", "uri": "lesson://{id}"},
                                                   "argument": {"name": "id", "value": "bulk"}})
    completion = body["result"]["completion"]
    assert len(completion["values"]) == 100 and completion["hasMore"] is True


@pytest.mark.parametrize("params", [
    {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "x", "value": ""}},
    {"ref": {"type": "ref/prompt", "name": "record_lesson"}, "argument": {"name": "nope", "value": ""}},
    {"ref": {"type": "ref/resource", "uri": "file://{x}"}, "argument": {"name": "x", "value": ""}},
    {"ref": {"type": "ref/other"}, "argument": {"name": "x", "value": ""}},
    {"argument": {"name": "x", "value": ""}},
])
def test_completion_errors(client, params):
    _, body = call(client, "completion/complete", params)
    assert body["error"]["code"] == -32602


def test_the_repository_default_prefix_walk_matches_the_in_memory_answer(repo):
    from gateway.domain.repository import LessonRepository

    assert LessonRepository.ids_by_prefix(repo, "les-1", 100) == repo.ids_by_prefix("les-1", 100) == [
        f"les-{i}" for i in range(10, 20)]
    assert LessonRepository.ids_by_prefix(repo, "les-", 3) == ["les-00", "les-01", "les-02"]
