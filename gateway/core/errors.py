"""Error types and codes shared by every layer (docs/tools.md#error-codes, docs/transport.md#http-rules).

Every exception class of the gateway derives from :class:`GatewayError`. Two
kinds of failure reach a client:

* a tool failure — :class:`ToolError`, answered by the dispatcher as an
  ``isError`` tool result whose text is :func:`error_payload`
  (``{"error": {"code", "message", "retryable", ...}}``);
* a protocol failure — :class:`JsonRpcError`, answered as a JSON-RPC error
  object (:func:`error_body`) with its own HTTP status.

JSON-RPC codes (JSON-RPC 2.0 §5.1): -32700 parse error, -32600 invalid
request, -32601 method not found, -32602 invalid params, -32603 internal
error; the gateway adds -32001 (write not authorised) for HTTP 401/403 answers.
MCP 2026-07-28 defines -32020 (HeaderMismatch) and -32022 (UnsupportedProtocolVersion),
both answered with HTTP 400 (docs/transport.md#the-2026-07-28-request-rules).
"""
from __future__ import annotations

from typing import Any

from mcp_types import ErrorData, JSONRPCError

__all__ = [
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "UNAUTHORIZED",
    "HEADER_MISMATCH",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "GatewayError",
    "JsonRpcError",
    "StoreUnavailable",
    "ToolError",
    "error_body",
    "error_payload",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNAUTHORIZED = -32001
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022


# ---------------------------------------------------------------- the root
class GatewayError(Exception):
    """The root of every exception class the gateway defines (``except GatewayError`` catches them all).

    Classes that a caller also catches as a built-in type keep that base too
    (for example ``ConfigError`` is also a ``ValueError``).
    """


# ---------------------------------------------------------------- store errors
class StoreUnavailable(GatewayError):
    """A state store the gateway needs (github mode's authorization state) cannot be reached now.

    Raised in place of the driver's connection errors (``sqlite3.DatabaseError``,
    ``psycopg.OperationalError`` and the pool's timeouts); the app answers it
    with HTTP 503 and ``Retry-After`` (docs/transport.md#github-store-outage), never a
    500. The message names the failure type only, never a DSN or a path.
    """

    retry_after_seconds = 5


# ------------------------------------------------------------------ tool errors
def error_payload(
    code: str,
    message: str,
    *,
    retryable: bool = False,
    details: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Build the JSON error object every failed tool call returns.

    Shape: ``{"error": {"code", "message", "retryable", [extra keys such as
    field/rule], ["details"]}}``. Error codes are short snake_case strings
    (docs/tools.md#error-codes); extra keys whose value is ``None`` are left out.
    """
    err: dict[str, Any] = {"code": code, "message": message, "retryable": bool(retryable)}
    err.update({k: v for k, v in extra.items() if v is not None})
    if details:
        err["details"] = details
    return {"error": err}


class ToolError(GatewayError):
    """An expected tool failure, reported to the client as an ``isError`` result.

    ``code`` is a short snake_case error code (e.g. ``not_found``,
    ``invalid_cursor``, ``revision_conflict``, ``not_implemented``); ``message``
    tells the agent what to do next; ``retryable`` says whether the same call
    may succeed later; ``details`` is an optional small JSON object (it is
    dropped if the error itself would exceed the output cap). Never put
    secrets in any of them.
    """

    def __init__(self, code: str, message: str, *, retryable: bool = False, details: dict[str, Any] | None = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = details

    def payload(self) -> dict[str, Any]:
        """Return the JSON error object (see :func:`error_payload`)."""
        return error_payload(self.code, self.message, retryable=self.retryable, details=self.details)


# ------------------------------------------------------------------ JSON-RPC errors
class JsonRpcError(GatewayError):
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
