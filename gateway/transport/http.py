"""The ``/mcp`` endpoint: stateless Streamable HTTP with JSON responses (no SSE, no sessions).

Order of checks for ``POST /mcp`` (each failure is a JSON body, never HTML):

===========================================  =======  ==========================
rule                                         status   JSON-RPC code
===========================================  =======  ==========================
Host not exactly allowlisted                 421      -32600
Origin present and not allowlisted           403      -32600
body larger than S3RM_MAX_BODY_BYTES         413      -32600
Accept does not admit application/json       406      -32600
Content-Type not application/json (UTF-8)    415      -32600
body not UTF-8 JSON                          400      -32700
batch array / not a JSON-RPC message         400      -32600
2026-07-28: _meta missing / not a string     400      -32602
2026-07-28: header/body mismatch             400      -32020 (HeaderMismatch)
unsupported protocol version (either era)    400      -32022 (supported list in data)
notification or client response              202      (empty body)
unknown method                               200      -32601 (404 in the 2026-07-28 era)
unknown tool / bad params                    200      -32602
write without token / wrong token            401/403  -32001
github mode: no/invalid access token          401      -32001 (WWW-Authenticate: resource_metadata)
github mode: write without mcp:write          403      -32001 (error="insufficient_scope")
open mode: principal over its rate limit     429      -32003 (Retry-After)
read/write class queue full / wait timed out 429/503  -32003 (Retry-After)
===========================================  =======  ==========================

In ``github`` mode (docs/transport.md#github-mode) every POST needs a valid
OAuth access token for this resource before anything else is read; the
verified principal travels in ``Credentials.principal``.

In ``open`` mode every request is charged to its principal's token bucket
(:mod:`gateway.ops.ratelimit`); the principal is the verified write token or the
client address, taken from the proxy's header only with the proxy secret.

``GET`` and ``DELETE`` (and any other method) → 405 with ``Allow: POST``: the
server offers no SSE stream and no sessions to terminate (MCP transports:
"MUST ... return HTTP 405"). ``OPTIONS`` answers CORS preflights for
allowlisted origins on ``/mcp`` and ``/mcp/*``.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Mapping

from flask import Blueprint, Response, current_app, request
from werkzeug.exceptions import RequestEntityTooLarge

from gateway.core.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    JsonRpcError,
    PARSE_ERROR,
    UNAUTHORIZED,
    error_body,
)
from gateway.core.jsonio import encode_json, json_response
from gateway.ops.ratelimit import client_address, principal_key
from gateway.transport import headers as rules
from gateway.auth.service import Unauthenticated
from gateway.config.github import SCOPE_WRITE
from gateway.ops.access import AuthError, Credentials, authorize
from gateway.transport.jsonrpc import Message, classify
from gateway.transport.request_rules import check_modern_request, check_notification_version, is_modern_request

__all__ = ["bp", "empty_response", "overload_refusal", "rpc_error_response"]

log = logging.getLogger("s3rm.transport")

bp = Blueprint("mcp", __name__)

_OTHER_METHODS = ["GET", "DELETE", "PUT", "PATCH"]


def rpc_error_response(err: JsonRpcError, request_id: str | int | None = None) -> Response:
    """The HTTP response carrying ``err`` as a JSON-RPC error object with ``err.http_status``.

    Extra headers the error defines (``err.headers``, e.g. ``Retry-After`` of
    a 429/503) are copied onto the response.
    """
    rid = err.request_id if err.request_id is not None else request_id
    return json_response(error_body(rid, err.code, err.message, err.data), err.http_status,
                         getattr(err, "headers", None))


def empty_response(status: int) -> Response:
    """A response with no body and no Content-Type (202 for notifications, 204 for preflights)."""
    response = Response(status=status)
    response.headers.remove("Content-Type")
    return response


def _state():
    return current_app.extensions["s3rm"]


@bp.before_request
def _check_host_and_origin():
    """Host (421) and Origin (403) apply to every /mcp and /mcp/* request, preflights included."""
    config = _state().config
    try:
        rules.check_host(request.headers.get("Host"), config)
        rules.check_origin(request.headers.get("Origin"), config)
    except JsonRpcError as err:
        return rpc_error_response(err)
    return None


@bp.after_request
def _add_cors(response: Response) -> Response:
    if request.method != "OPTIONS":
        for key, value in rules.cors_headers(request.headers.get("Origin"), _state().config).items():
            response.headers[key] = value
        if getattr(_state(), "oauth", None) is not None and "Access-Control-Expose-Headers" in response.headers:
            # github mode: browser clients read the OAuth challenge of a 401/403
            response.headers["Access-Control-Expose-Headers"] += ", WWW-Authenticate"
    response.vary.add("Origin")
    return response


@bp.route("/mcp", methods=["POST", "OPTIONS", *_OTHER_METHODS], provide_automatic_options=False)
def mcp_endpoint():
    """The MCP endpoint: POST carries one JSON-RPC message; OPTIONS is a preflight; the rest get 405."""
    if request.method == "OPTIONS":
        return _preflight(None)
    if request.method != "POST":
        return _not_allowed()
    try:
        return _handle_post(_state())
    except JsonRpcError as err:
        return rpc_error_response(err)


def _read_body(limit: int) -> bytes:
    """The request body, at most ``limit`` bytes; raises 413 for anything larger.

    With ``Content-Length`` the size is checked before reading. A chunked
    body (no length; the server terminates the stream, ``wsgi.input_terminated``)
    is read directly from the server's stream up to ``limit + 1`` bytes, so an
    oversized one is refused instead of silently truncated. A body with
    neither is empty (never an unbounded read).
    """
    length = request.content_length
    if length is not None:
        if length > limit:
            raise _too_large(limit)
        try:
            body = request.get_data(cache=False)
        except RequestEntityTooLarge:
            raise _too_large(limit) from None
        if len(body) > limit:
            raise _too_large(limit)
        return body
    if "wsgi.input_terminated" not in request.environ:
        return b""
    stream = request.environ["wsgi.input"]
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        data = stream.read(min(65536, limit + 1 - total))
        if not data:
            break
        chunks.append(data)
        total += len(data)
    if total > limit:
        raise _too_large(limit)
    return b"".join(chunks)


def _too_large(limit: int) -> JsonRpcError:
    return JsonRpcError(
        INVALID_REQUEST, f"Payload Too Large: the request body exceeds {limit} bytes", http_status=413
    )


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN/Infinity/-Infinity; RFC 8259 JSON does not, and NaN
    # would slip past every range check in the tool schemas.
    raise ValueError(f"{name} is not JSON")


def _parse(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise JsonRpcError(PARSE_ERROR, "Parse error: the body is not valid UTF-8", http_status=400) from None
    except RecursionError:
        raise JsonRpcError(PARSE_ERROR, "Parse error: the JSON nests deeper than this server accepts",
                           http_status=400) from None
    except ValueError:
        raise JsonRpcError(PARSE_ERROR, "Parse error: the body is not valid JSON (NaN and Infinity are not JSON)",
                           http_status=400) from None


def _message(headers: Mapping[str, str], body: bytes) -> Message:
    """The one JSON-RPC message of a POST: 406 (Accept), 415 (Content-Type), 400 (JSON, shape) first."""
    rules.check_accept(headers.get("Accept"))
    rules.check_content_type(headers.get("Content-Type"))
    return classify(_parse(body))


def overload_refusal(state, method: str, target: str, headers: Mapping[str, str], body: bytes,
                     remote_addr: str | None) -> tuple[int, dict[str, str], bytes] | None:
    """The 429 a whole request gets before any request thread takes it, or ``None`` to serve it as usual.

    Called by the gateway's worker from its event loop (docs/operations.md#early-refusal) for every
    complete request: ``method`` and ``target`` from the request line, ``headers`` case-insensitive,
    ``body`` the body's bytes, ``remote_addr`` the socket peer. It answers only when the
    read or write admission class is refusing callers (:meth:`Admission.shedding`, checked first, so
    a gateway with capacity pays one lock) and this request is a ``POST /mcp`` ``tools/call`` that
    would reach that class's admission: Host, Origin, Accept, Content-Type, JSON, the 2026-07-28
    header/body rules, the tool and its arguments object and the write token are checked as
    :func:`_handle_post` and the dispatcher check them, and any failure returns ``None`` so a request
    thread answers with its usual error. In ``open`` mode the caller's token bucket is charged as
    :func:`_handle_post` charges it (its ``rate_limited`` 429 is the answer when empty); ``github``
    mode is never refused here (verifying an access token consults the state store).

    Returns ``(status, headers, body)``: the same JSON-RPC error (``-32003``, ``queue_full``,
    ``Retry-After``), security and CORS headers as the answer from a request thread.
    """
    admission, config = state.admission, state.config
    if (method != "POST" or target.split("?", 1)[0] != "/mcp" or admission is None
            or config.write_auth_mode == "github" or not admission.shedding()):
        return None
    try:
        rules.check_host(headers.get("Host"), config)
        rules.check_origin(headers.get("Origin"), config)
        message = _message(headers, body)
        if message.kind != "request" or message.method != "tools/call":
            return None
        if is_modern_request(message.method, headers.get("MCP-Protocol-Version"), message.params):
            check_modern_request(message, {key.lower(): value for key, value in headers.items()}, headers.items())
    except JsonRpcError:
        return None
    open_mode = config.write_auth_mode == "open"  # the only mode whose principal is the caller's address
    address = client_address(headers, remote_addr, config.proxy_secret) if open_mode else ""
    credentials = Credentials(authorization=headers.get("Authorization"), remote_addr=address)
    kind = state.dispatcher.admission_kind(message.params, credentials)
    if kind is None or not admission.classes[kind].saturated():
        return None
    refusal: JsonRpcError | None = None
    request_id = message.id
    if open_mode and state.rate_limiter is not None:
        reader = authorize("read", credentials, config)
        try:
            state.rate_limiter.check(principal_key(reader.kind, reader.subject))
        except JsonRpcError as err:  # a thread refuses it before reading the body: no id
            refusal, request_id = err, None
    # A slot freed since the check above: a request thread serves the call (in open mode charging the
    # bucket once more, the only difference from the thread path, and only in that race).
    refusal = refusal or admission.refuse_now(kind)
    if refusal is None:
        return None
    out = {"Content-Type": "application/json", **getattr(refusal, "headers", {}),
           **rules.cors_headers(headers.get("Origin"), config), "Vary": "Origin", **rules.security_headers(True)}
    return refusal.http_status, out, encode_json(error_body(request_id, refusal.code, refusal.message, refusal.data))


def _unauthenticated(oauth, err: Unauthenticated) -> Response:
    body = error_body(None, UNAUTHORIZED, err.message, {"code": err.error or "missing_token"})
    return json_response(body, 401, {"WWW-Authenticate": oauth.challenge(err.error)})


def _auth_error_headers(state, err: AuthError) -> dict[str, str]:
    oauth = getattr(state, "oauth", None)
    if oauth is not None:
        if err.reason == "insufficient_scope":
            return {"WWW-Authenticate": oauth.challenge("insufficient_scope", SCOPE_WRITE)}
        return {"WWW-Authenticate": oauth.challenge("invalid_token")} if err.status == 401 else {}
    return {"WWW-Authenticate": 'Bearer realm="s3rm-write"'} if err.status == 401 else {}


def _handle_post(state) -> Response:
    config = state.config
    principal = None
    if config.write_auth_mode == "github":
        try:
            principal = state.oauth.authenticate(request.headers.get("Authorization"))
        except Unauthenticated as err:
            return _unauthenticated(state.oauth, err)
    credentials = Credentials(
        authorization=request.headers.get("Authorization"),
        remote_addr=client_address(request.headers, request.remote_addr, config.proxy_secret),
        principal=principal,
    )
    if config.write_auth_mode == "open" and state.rate_limiter is not None:
        principal = authorize("read", credentials, config)  # never raises for kind "read"
        state.rate_limiter.check(principal_key(principal.kind, principal.subject))
    message = _message(request.headers, _read_body(config.max_body_bytes))
    modern = None
    if is_modern_request(message.method, request.headers.get("MCP-Protocol-Version"), message.params):
        # 2026-07-28: the version travels in _meta and the routing headers must match the body
        headers = {key.lower(): value for key, value in request.headers.items()}
        if message.kind != "request":
            check_notification_version(headers)
            return empty_response(202)
        modern = check_modern_request(message, headers, request.headers.items())
    elif message.kind != "request":
        # 2025 era: an absent MCP-Protocol-Version means 2025-03-26; any other value routed modern above
        return empty_response(202)

    try:
        result = state.protocol.handle(message, credentials, modern)
    except AuthError as err:
        body = error_body(message.id, UNAUTHORIZED, err.message, {"code": err.reason})
        return json_response(body, err.status, _auth_error_headers(state, err))
    except JsonRpcError as err:
        return rpc_error_response(err, message.id)
    except Exception as exc:  # a bug outside the tool dispatcher
        log.error("MCP request failed method=%s exception=%s", message.method, type(exc).__name__)
        return json_response(error_body(message.id, INTERNAL_ERROR, "Internal error"), 500)
    return json_response({"jsonrpc": "2.0", "id": message.id, "result": result})


def _not_allowed() -> Response:
    """405 for GET (no SSE stream is offered), DELETE (no sessions exist) and anything else."""
    err = JsonRpcError(
        INVALID_REQUEST,
        "Method Not Allowed: this MCP endpoint is stateless and answers POST only",
        http_status=405,
    )
    response = rpc_error_response(err)
    response.headers["Allow"] = "POST"
    return response


@bp.route("/mcp/<path:rest>", methods=["OPTIONS"], provide_automatic_options=False)
def mcp_subpath_preflight(rest: str):
    """CORS preflight for ``/mcp/*`` (gateway JSON the browser reads lives there, docs/browser.md#gateway-json)."""
    return _preflight(rest)


def _preflight(rest: str | None) -> Response:
    """CORS preflight: 204 with the allowed methods and headers for an allowlisted Origin.

    (A disallowed Origin was already refused with 403 by the Origin check.)
    Without an Origin this is a plain OPTIONS: 204 with ``Allow``.
    """
    origin = request.headers.get("Origin")
    response = empty_response(204)
    if origin is None:
        response.headers["Allow"] = "POST, OPTIONS" if rest is None else "GET, OPTIONS"
        return response
    for key, value in rules.preflight_headers(origin).items():
        response.headers[key] = value
    return response


@bp.route("/mcp/whoami", methods=["GET"])
def whoami():
    """Who the gateway takes the caller for, and whether its writes would be accepted; writes nothing.

    ``GET /mcp/whoami`` with the same ``Authorization`` header the MCP client
    sends answers 200 with ``{"mode", "principal", "subject", "scopes",
    "can_write", "problem"}``; ``problem`` is ``null`` or
    ``{"code": missing_token | invalid_token | writes_disabled |
    insufficient_scope, "message"}`` — the refusal a write would get
    (docs/transport.md#checking-the-connection). ``s3rm doctor`` calls it.
    """
    try:
        return _whoami(_state())
    except JsonRpcError as err:  # open mode: over the rate limit
        return rpc_error_response(err)


def _whoami(state) -> Response:
    config = state.config
    credentials = Credentials(
        authorization=request.headers.get("Authorization"),
        remote_addr=client_address(request.headers, request.remote_addr, config.proxy_secret),
    )
    if config.write_auth_mode == "open" and state.rate_limiter is not None:
        reader = authorize("read", credentials, config)
        state.rate_limiter.check(principal_key(reader.kind, reader.subject))
    problem = None
    principal = None
    if config.write_auth_mode == "github":
        try:
            principal = state.oauth.authenticate(credentials.authorization)
        except Unauthenticated as err:
            problem = {"code": err.error or "missing_token", "message": err.message}
        credentials = Credentials(credentials.authorization, credentials.remote_addr, principal)
    if problem is None:
        try:
            principal = authorize("write", credentials, config)
        except AuthError as err:
            problem = {"code": err.reason, "message": err.message}
            if principal is None:
                principal = authorize("read", credentials, config)
    body = {
        "mode": config.write_auth_mode,
        "principal": principal.kind if principal is not None else "anonymous",
        "subject": principal.subject if principal is not None else "",
        "scopes": sorted(principal.scopes) if principal is not None else [],
        "can_write": problem is None,
        "problem": problem,
    }
    return json_response(body, 200, {"Cache-Control": "no-store"})
