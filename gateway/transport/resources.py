"""Every Lesson as an MCP resource ``lesson://<id>`` (docs/transport.md#resources).

No reader of its own: ``resources/list`` is a ``search_lessons`` listing
(empty query: newest first by last edit, the same signed cursors, scopes and
byte cap) and ``resources/read`` is a ``get_lesson`` call whose JSON result is
the resource text, both run through the :class:`~gateway.tools.dispatcher.Dispatcher`
(authorisation and admission of a read, output cap, long-field rules, logs
and metrics under the tool's name). Unknown Lessons are "resource not found":
``-32602`` with ``data.uri`` at 2026-07-28 (SEP-2164), ``-32002`` in the 2025
era (the code the 2025 revisions recommend).
"""
from __future__ import annotations

import json
from typing import Any

from mcp_types import Resource, ResourceTemplate

from gateway.core.errors import INTERNAL_ERROR, INVALID_PARAMS, JsonRpcError
from gateway.core.jsonio import dump_model
from gateway.ops.access import Credentials
from gateway.tools.dispatcher import Dispatcher

__all__ = [
    "SCHEME", "TEMPLATE", "READ_TTL_MS", "RESOURCE_NOT_FOUND_2025", "LessonResources", "lesson_uri", "tool_error",
]

SCHEME = "lesson://"
TEMPLATE = "lesson://{id}"
MIME_TYPE = "application/json"
#: ``ttlMs`` of resources/list and resources/read: a client that caches them sees its own write
#: (or anyone's) within 30 seconds, well inside a minute.
READ_TTL_MS = 30_000
#: Resource not found before 2026-07-28 (the 2025 revisions' recommended code).
RESOURCE_NOT_FOUND_2025 = -32002
#: Lessons per resources/list page (search_lessons' maximum limit).
PAGE_SIZE = 20
_LIST_FIELDS = ["title", "reusable_lesson", "updated_at"]


def lesson_uri(lesson_id: str) -> str:
    """``lesson://<id>`` of a Lesson."""
    return SCHEME + lesson_id


def tool_error(result) -> tuple[str, dict[str, Any]]:
    """``(code, error object)`` of an ``isError`` tool result."""
    error = json.loads(result.content[0].text)["error"]
    return error.get("code", "internal_error"), error


def _as_rpc_error(code: str, error: dict[str, Any], request_id: str | int | None) -> JsonRpcError:
    """A tool failure behind a resource method as a JSON-RPC error: argument faults -32602, the rest -32603."""
    rpc_code = INVALID_PARAMS if code in ("invalid_cursor", "invalid_argument") else INTERNAL_ERROR
    data = {"code": code, **({"retryable": error["retryable"]} if "retryable" in error else {})}
    return JsonRpcError(rpc_code, str(error.get("message", code)), request_id=request_id, data=data)


class LessonResources:
    """resources/list, resources/templates/list and resources/read over the read tools."""

    def __init__(self, dispatcher: Dispatcher):
        self.dispatcher = dispatcher
        self.template = dump_model(ResourceTemplate(
            name="lesson", title="Lesson", uri_template=TEMPLATE, mime_type=MIME_TYPE,
            description="One Lesson by id, as get_lesson returns it (JSON: lesson fields, citations, "
                        "verifications, relations)."))

    def _call(self, tool: str, arguments: dict[str, Any], request_id, credentials: Credentials, overhead: int):
        return self.dispatcher.call({"name": tool, "arguments": arguments}, request_id=request_id,
                                    credentials=credentials, overhead_bytes=overhead)

    def list(self, params: dict[str, Any], request_id, credentials: Credentials, overhead: int = 0) -> dict[str, Any]:
        """``{"resources": [...], "nextCursor"?}``: Lessons newest first, ``PAGE_SIZE`` per page."""
        arguments: dict[str, Any] = {"fields": _LIST_FIELDS, "limit": PAGE_SIZE}
        cursor = params.get("cursor")
        if cursor is not None:
            if not isinstance(cursor, str) or not cursor:
                raise JsonRpcError(INVALID_PARAMS, '"cursor" must be the nextCursor string of a previous page',
                                   request_id=request_id)
            arguments["cursor"] = cursor
        result = self._call("search_lessons", arguments, request_id, credentials, overhead)
        if result.is_error:
            raise _as_rpc_error(*tool_error(result), request_id)
        page = result.structured_content
        resources = [dump_model(Resource(
            uri=lesson_uri(hit["id"]), name=hit["id"], title=hit.get("title") or None, mime_type=MIME_TYPE,
            description=hit.get("reusable_lesson") or None,
            annotations={"lastModified": hit["updated_at"]} if hit.get("updated_at") else None,
        )) for hit in page["results"]]
        out: dict[str, Any] = {"resources": resources}
        if page.get("next_cursor"):
            out["nextCursor"] = page["next_cursor"]
        return out

    def templates(self) -> dict[str, Any]:
        return {"resourceTemplates": [self.template]}

    def read(self, params: dict[str, Any], request_id, credentials: Credentials, *, modern: bool,
             overhead: int = 0) -> dict[str, Any]:
        """``{"contents": [{uri, mimeType, text}]}`` with the get_lesson JSON of the Lesson."""
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise JsonRpcError(INVALID_PARAMS, 'resources/read needs "uri" (lesson://<id>)', request_id=request_id)
        lesson_id = uri[len(SCHEME):] if uri.startswith(SCHEME) else ""
        if not lesson_id or "/" in lesson_id:
            raise self._not_found(uri, request_id, modern, "this server's resources are lesson://<id>")
        result = self._call("get_lesson", {"id": lesson_id}, request_id, credentials, overhead + len(uri) + 64)
        if result.is_error:
            code, error = tool_error(result)
            if code in ("not_found", "invalid_argument"):
                raise self._not_found(uri, request_id, modern, "no Lesson has this id")
            raise _as_rpc_error(code, error, request_id)
        return {"contents": [{"uri": uri, "mimeType": MIME_TYPE, "text": result.content[0].text}]}

    @staticmethod
    def _not_found(uri: str, request_id, modern: bool, why: str) -> JsonRpcError:
        return JsonRpcError(INVALID_PARAMS if modern else RESOURCE_NOT_FOUND_2025,
                            f"Resource not found: {uri[:120]!r} ({why})", request_id=request_id,
                            data={"uri": uri[:512]})
