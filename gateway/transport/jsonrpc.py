"""JSON-RPC 2.0 message classification for the MCP endpoint (docs/transport.md#http-rules).

The error codes, :class:`~gateway.core.errors.JsonRpcError` and the error body
live in :mod:`gateway.core.errors`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.core.errors import INVALID_PARAMS, INVALID_REQUEST, JsonRpcError

__all__ = ["Message", "classify"]


@dataclass(frozen=True)
class Message:
    """One classified JSON-RPC message from the client.

    ``kind``: ``request`` (has an id: answered), ``notification`` (no id: 202)
    or ``response`` (a reply to a server request: 202, ignored).
    """

    kind: str
    method: str | None
    id: str | int | None
    params: dict[str, Any]


def _valid_id(value: Any) -> bool:
    return (isinstance(value, str) or isinstance(value, int)) and not isinstance(value, bool)


def classify(payload: Any) -> Message:
    """Classify a decoded JSON body as one JSON-RPC message.

    Raises :class:`JsonRpcError` ``-32600`` (HTTP 400) for a batch array
    (batching was removed in MCP 2025-06-18), a non-object, a wrong
    ``jsonrpc`` version, a bad id or method, and ``-32602`` for non-object params.
    """
    if isinstance(payload, list):
        raise JsonRpcError(
            INVALID_REQUEST,
            "JSON-RPC batches are not supported (removed in MCP 2025-06-18): send one message per POST",
            http_status=400,
        )
    if not isinstance(payload, dict):
        raise JsonRpcError(INVALID_REQUEST, "the body must be one JSON-RPC message object", http_status=400)
    raw_id = payload.get("id")
    known_id = raw_id if _valid_id(raw_id) else None
    if payload.get("jsonrpc") != "2.0":
        raise _invalid(known_id, 'the message must carry "jsonrpc": "2.0"')
    if "method" not in payload:
        if ("result" in payload) != ("error" in payload) and known_id is not None:
            return Message("response", None, known_id, {})
        raise _invalid(known_id, 'a request must carry a "method" string')
    method = payload["method"]
    if not isinstance(method, str) or not method:
        raise _invalid(known_id, '"method" must be a non-empty string')
    if "id" in payload and known_id is None:
        raise _invalid(None, '"id" must be a string or an integer (MCP request ids are never null)')
    params = payload.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise JsonRpcError(
            INVALID_PARAMS,
            '"params" must be a JSON object',
            http_status=400 if known_id is None else 200,
            request_id=known_id,
        )
    kind = "request" if "id" in payload else "notification"
    return Message(kind, method, known_id, params)


def _invalid(request_id: str | int | None, message: str) -> JsonRpcError:
    return JsonRpcError(INVALID_REQUEST, message, http_status=400, request_id=request_id)
