"""ChatGPT's connector tools ``search`` and ``fetch`` (docs/transport.md#chatgpt-search-and-fetch).

Served only when ``S3RM_CHATGPT_LESSON_URL`` is set (off by default: the Lesson
tools are the contract). Shapes from OpenAI's "Building MCP servers for
ChatGPT and API integrations" (https://platform.openai.com/docs/mcp): each
takes one string and answers one text content item holding JSON —
``search(query)`` → ``{"results": [{"id", "title", "url"}]}``,
``fetch(id)`` → ``{"id", "title", "text", "url", "metadata"}``. The same
object is ``structuredContent`` (validated against the closed output schema
below, like every tool).

No retrieval or reader of their own: ``search`` runs the ``search_lessons``
handler (same modes, scopes, listing on an empty query, byte cap) and
``fetch`` the ``get_lesson`` handler, then reshape the answer. ``text`` is the
Lesson as Markdown (its fields under their schema labels, then the first
citations); ``url`` is ``S3RM_CHATGPT_LESSON_URL`` with ``{id}`` filled in. Their
schemas are fixed by OpenAI's documentation, not derived from
``schema/lesson.toml``, so they are built here and not generated into ``schema/tools``.
"""
from __future__ import annotations

from typing import Any

from gateway.tools import get_lesson, search_lessons
from gateway.tools.contract import ToolContext, tool_spec
from gateway.tools.schema_builders import Fields, array, obj, string

__all__ = ["SEARCH", "FETCH", "SPECS", "lesson_url"]

#: Results one ``search`` returns (search_lessons' maximum page).
SEARCH_LIMIT = 20
_METADATA = ("revision_id", "content_digest", "confidence", "record_origin", "updated_at")


def lesson_url(ctx: ToolContext, lesson_id: str) -> str:
    return ctx.config.chatgpt_lesson_url.replace("{id}", lesson_id)


def _search(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    page = search_lessons.SPEC.handler(
        {"query": arguments["query"], "limit": SEARCH_LIMIT, "fields": ["title"]}, ctx)
    return {"results": [{"id": hit["id"], "title": hit.get("title") or hit["id"], "url": lesson_url(ctx, hit["id"])}
                        for hit in page["results"]]}


def _fetch(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    read = get_lesson.SPEC.handler({"id": arguments["id"]}, ctx)
    lesson = read["lesson"]
    labels = {f.name: f.label or f.name for f in ctx.schema.lesson.fields}
    parts = [f"# {lesson.get('title') or read['id']}"]
    for name, value in lesson.items():
        if name != "title" and value:
            parts.append(f"## {labels.get(name, name)} ({name})\n\n{value}")
    citations = read["citations"]["items"]
    if citations:
        parts.append("## Citations\n\n" + "\n".join(
            f"- {c.get('citation', '')}" + (f" <{c['url']}>" if c.get("url") else "") for c in citations))
    if "truncated" in read:
        parts.append(f"(Shortened to fit the response cap: {', '.join(read['truncated'])}; "
                     "get_lesson with fields=[...] reads one field whole.)")
    values = {"revision_id": read["revision_id"], "content_digest": read["content_digest"], **lesson}
    metadata = {key: str(values[key]) for key in _METADATA if values.get(key) not in (None, "")}
    return {"id": read["id"], "title": lesson.get("title") or read["id"], "text": "\n\n".join(parts),
            "url": lesson_url(ctx, read["id"]), "metadata": metadata}


def _search_input(schema_fields: Fields) -> dict:
    return obj({"query": string("What to look for, in plain words (empty lists the newest Lessons).",
                                schema_fields.limits["query_max_length"])}, ("query",))


def _search_output(schema_fields: Fields) -> dict:
    hit = obj({"id": schema_fields.lesson_id("Lesson id: pass it to fetch."), "title": string("Lesson title."),
               "url": string("Wiki page of the Lesson, for citation.")}, ("id", "title", "url"))
    return obj({"results": array("Matching Lessons, best first.", hit, max_items=SEARCH_LIMIT)}, ("results",))


def _fetch_input(schema_fields: Fields) -> dict:
    return obj({"id": schema_fields.lesson_id("Lesson id from a search result.")}, ("id",))


def _fetch_output(schema_fields: Fields) -> dict:
    metadata = obj({key: string(f"The Lesson's {key}.") for key in _METADATA}, (), "Lesson metadata.")
    return obj({"id": schema_fields.lesson_id(), "title": string("Lesson title."),
                "text": string("The Lesson as Markdown: its fields, then its first citations."),
                "url": string("Wiki page of the Lesson, for citation."), "metadata": metadata},
               ("id", "title", "text", "url", "metadata"))


SEARCH = tool_spec(
    "search", "Search Lessons (ChatGPT)",
    "Search the lab's research Lessons. Returns ids, titles and wiki URLs; read one with fetch.",
    "read", _search, _search_input, _search_output)
FETCH = tool_spec(
    "fetch", "Fetch a Lesson (ChatGPT)",
    "Read one Lesson by the id search returned: its full text as Markdown, its URL and metadata.",
    "read", _fetch, _fetch_input, _fetch_output)
SPECS = (SEARCH, FETCH)
