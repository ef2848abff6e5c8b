"""ChatGPT's ``search`` and ``fetch`` (docs/transport.md#chatgpt-search-and-fetch) through the real app.

``OPENAI_SEARCH`` / ``OPENAI_FETCH`` are JSON Schemas written from OpenAI's
"Building MCP servers for ChatGPT and API integrations" (https://platform.openai.com/docs/mcp):
a tool result is exactly one content item of type ``text`` whose text is a JSON
object — search: ``results``, each with ``id``, ``title`` and ``url`` strings;
fetch: ``id``, ``title``, ``text``, ``url`` strings and optional ``metadata``
(key/value pairs, string values).
"""
from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator
from test_mcp_surface import call, make_client, repo  # noqa: F401

from gateway.tools.registry import READ_TOOLS, WRITE_TOOLS

URL = "https://wiki.example.org/index.php?title=Lesson:{id}"
TEXT_RESULT = {
    "type": "object",
    "required": ["content"],
    "properties": {"content": {"type": "array", "minItems": 1, "maxItems": 1, "items": {
        "type": "object", "required": ["type", "text"],
        "properties": {"type": {"const": "text"}, "text": {"type": "string"}}}}},
}
OPENAI_SEARCH = {
    "type": "object", "required": ["results"], "additionalProperties": False,
    "properties": {"results": {"type": "array", "items": {
        "type": "object", "required": ["id", "title", "url"],
        "properties": {"id": {"type": "string"}, "title": {"type": "string"}, "url": {"type": "string"}}}}},
}
OPENAI_FETCH = {
    "type": "object", "required": ["id", "title", "text", "url"],
    "properties": {"id": {"type": "string"}, "title": {"type": "string"}, "text": {"type": "string"},
                   "url": {"type": "string"},
                   "metadata": {"type": ["object", "null"], "additionalProperties": {"type": "string"}}},
}


def openai_answer(result: dict, schema: dict) -> dict:
    """The JSON object of a tool result, after checking both layers against OpenAI's documented shape."""
    Draft202012Validator(TEXT_RESULT).validate(result)
    answer = json.loads(result["content"][0]["text"])
    Draft202012Validator(schema).validate(answer)
    assert result.get("isError") is False and result["structuredContent"] == answer
    return answer


@pytest.mark.parametrize("era", ["2025", "modern"])
def test_search_and_fetch_answer_in_openais_shapes(repo, era):  # noqa: F811
    client = make_client(repo, chatgpt_lesson_url=URL)
    _, listed = call(client, "tools/list", era=era)
    assert [t["name"] for t in listed["result"]["tools"]] == [*READ_TOOLS, *WRITE_TOOLS, "search", "fetch"]
    _, body = call(client, "tools/call", {"name": "search", "arguments": {"query": "Lesson number 7"}}, era=era,
                   name="search")
    found = openai_answer(body["result"], OPENAI_SEARCH)["results"]
    assert {"id": "les-07", "title": "Lesson number 7",
            "url": "https://wiki.example.org/index.php?title=Lesson:les-07"} in found and len(found) <= 20
    _, body = call(client, "tools/call", {"name": "fetch", "arguments": {"id": "les-07"}}, era=era, name="fetch")
    doc = openai_answer(body["result"], OPENAI_FETCH)
    assert doc["id"] == "les-07" and doc["url"].endswith("Lesson:les-07")
    assert doc["text"].startswith("# Lesson number 7")
    assert "We tried something." in doc["text"] and "Paper 2024, section 3" in doc["text"]
    assert doc["metadata"]["confidence"] == "medium" and int(doc["metadata"]["revision_id"]) > 0
    # the same reader as get_lesson: an unknown id is its not_found
    _, body = call(client, "tools/call", {"name": "fetch", "arguments": {"id": "nope"}}, era=era, name="fetch")
    assert body["result"]["isError"] is True and '"not_found"' in body["result"]["content"][0]["text"]


def test_off_by_default_tools_list_is_exactly_the_ten_tools(client):
    _, listed = call(client, "tools/list")
    assert [t["name"] for t in listed["result"]["tools"]] == [*READ_TOOLS, *WRITE_TOOLS]
    _, body = call(client, "tools/call", {"name": "search", "arguments": {"query": "x"}})
    assert body["error"]["code"] == -32602 and "Unknown tool" in body["error"]["message"]


@pytest.fixture()
def client(repo):  # noqa: F811
    return make_client(repo)


@pytest.mark.parametrize("value", ["ftp://x/{id}", "https://wiki.example.org/Lesson", "not a url"])
def test_setting_is_validated(value):
    from gateway.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="S3RM_CHATGPT_LESSON_URL"):
        load_config({"S3RM_CHATGPT_LESSON_URL": value})
    assert load_config({"S3RM_CHATGPT_LESSON_URL": URL}).chatgpt_lesson_url == URL
    assert load_config({}).chatgpt_lesson_url == ""
