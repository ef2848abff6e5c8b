"""JSON-RPC 2.0 message classification and error bodies for the MCP endpoint.

Error codes (JSON-RPC 2.0 §5.1): -32700 parse error, -32600 invalid request,
-32601 method not found, -32602 invalid params, -32603 internal error. The
gateway adds -32001 (write not authorised) for HTTP 401/403 answers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.types import ErrorData, JSONRPCError

__all__ = [
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "UNAUTHORIZED",
    "JsonRpcError",
    "Message",
    "classify",
    "error_body",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNAUTHORIZED = -32001


class JsonRpcError(Exception):
    """A protocol-level failure answered with a JSON-RPC error object.

    ``http_status`` is the HTTP status of the response carrying it; ``data`` is
    an optional small JSON object (never secrets, arguments or Lesson content);
    ``request_id`` is the id to echo when known.
    """

    def __init__(
        self,
        code: int,
        message: str,
        *,
        http_status: int = 200,
        data: dict[str, Any] | None = None,
        request_id: str | int | None = None,
    ):
        super().__init__(message)
        self.request_id = request_id
        self.code = code
        self.message = message
        self.http_status = http_status
        self.data = data


def error_body(request_id: str | int | None, code: int, message: str, data: dict[str, Any] | None = None) -> dict:
    """The JSON-RPC error response object; ``id`` is ``null`` when the request id is unknown (JSON-RPC 2.0 §5)."""
    error = ErrorData(code=code, message=message, data=data)
    if request_id is None:
        return {"jsonrpc": "2.0", "id": None, "error": error.model_dump(by_alias=True, exclude_none=True, mode="json")}
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=error).model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )


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
