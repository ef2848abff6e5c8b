"""HTTP header rules of the MCP endpoint: Host, Origin, Accept, Content-Type, protocol version, CORS, security.

Sources: MCP 2025-06-18 / 2025-11-25 "Transports" (Streamable HTTP):
Origin MUST be validated and an invalid one answered with 403; the client MUST
send ``Accept`` listing ``application/json`` (and ``text/event-stream``). The
protocol-version rules of both eras live in :mod:`gateway.transport.request_rules`. Host validation (421
Misdirected Request), 406 and 415 follow the official python-sdk server.
Allowlists are exact (docs/transport.md#host-and-origin).

Each ``check_*`` function raises :class:`~gateway.core.errors.JsonRpcError`
with the HTTP status to answer; they never return a value.
"""
from __future__ import annotations

from typing import Iterable

from werkzeug.http import parse_options_header

from gateway.config import GatewayConfig
from gateway.core.errors import INVALID_REQUEST, JsonRpcError

__all__ = [
    "SUPPORTED_PROTOCOL_VERSIONS",
    "LATEST_PROTOCOL_VERSION",
    "MODERN_PROTOCOL_VERSIONS",
    "ALL_PROTOCOL_VERSIONS",
    "CORS_ALLOW_HEADERS",
    "check_host",
    "check_origin",
    "check_accept",
    "check_content_type",
    "cors_headers",
    "preflight_headers",
    "security_headers",
]

#: Protocol revisions reached through the ``initialize`` handshake ("legacy" era), oldest first.
SUPPORTED_PROTOCOL_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
#: Answered to an ``initialize`` asking for a revision we do not speak (MCP lifecycle, version negotiation).
LATEST_PROTOCOL_VERSION = "2025-11-25"
#: Stateless revisions with the version in every request's ``_meta`` ("modern" era; docs/transport.md#protocol-versions).
MODERN_PROTOCOL_VERSIONS = ("2026-07-28",)
#: Every revision this gateway serves, newest first: the ``supported`` list of an UnsupportedProtocolVersion error.
ALL_PROTOCOL_VERSIONS = MODERN_PROTOCOL_VERSIONS + tuple(reversed(SUPPORTED_PROTOCOL_VERSIONS))
#: Request headers a browser may send cross-origin to /mcp: the dev wiki's origin, and every header a
#: 2026-07-28 client sets (``Mcp-Method``, ``Mcp-Name``; docs/transport.md#cors).
CORS_ALLOW_HEADERS = "Content-Type, Authorization, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Accept"
CORS_ALLOW_METHODS = "GET, POST, OPTIONS"
CORS_MAX_AGE_SECONDS = "600"

_JSON_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


def check_host(host: str | None, config: GatewayConfig) -> None:
    """421 unless the ``Host`` header is exactly one of ``config.allowed_hosts`` (case-insensitive)."""
    if not host or host.strip().lower() not in config.allowed_hosts:
        raise JsonRpcError(
            INVALID_REQUEST,
            "Misdirected Request: this Host is not served here (see S3RM_MCP_PUBLIC_URL / S3RM_MCP_ALLOWED_HOSTS)",
            http_status=421,
        )


def origin_allowed(origin: str | None, config: GatewayConfig) -> bool:
    """True for an absent Origin (non-browser clients) or one of ``config.allowed_origins`` exactly.

    Exact means the serialised origin as browsers send it (RFC 6454: lower-case
    scheme and host, no path, no trailing slash); no case folding or trimming.
    """
    if origin is None:
        return True
    return origin in config.allowed_origins


def check_origin(origin: str | None, config: GatewayConfig) -> None:
    """403 when an ``Origin`` header is present and not exactly allowlisted (MCP transports: MUST)."""
    if not origin_allowed(origin, config):
        raise JsonRpcError(
            INVALID_REQUEST,
            "Forbidden: this Origin is not allowed (see S3RM_MCP_ALLOWED_ORIGINS)",
            http_status=403,
        )


def _media_ranges(header: str) -> Iterable[tuple[str, float]]:
    for item in header.split(","):
        if not item.strip():
            continue
        mimetype, params = parse_options_header(item)
        try:
            q = float(params.get("q", "1"))
        except ValueError:
            q = 0.0
        yield mimetype.lower(), q


def check_accept(accept: str | None) -> None:
    """406 unless ``Accept`` admits ``application/json`` (exactly, or via ``application/*`` / ``*/*``, q > 0).

    The gateway never streams, so ``text/event-stream`` is welcome but not
    required. A missing ``Accept`` is refused: the transport spec says the
    client MUST send one.
    """
    ok = accept is not None and any(
        mt in ("application/json", "application/*", "*/*") and q > 0 for mt, q in _media_ranges(accept)
    )
    if not ok:
        raise JsonRpcError(
            INVALID_REQUEST,
            "Not Acceptable: the client must accept application/json "
            "(send 'Accept: application/json, text/event-stream')",
            http_status=406,
        )


def check_content_type(content_type: str | None) -> None:
    """415 unless ``Content-Type`` is ``application/json`` (an optional ``charset`` must be UTF-8)."""
    mimetype, params = parse_options_header(content_type or "")
    charset = params.get("charset", "utf-8").lower()
    if mimetype.lower() != "application/json" or charset not in ("utf-8", "utf8"):
        raise JsonRpcError(
            INVALID_REQUEST,
            "Unsupported Media Type: Content-Type must be application/json (UTF-8)",
            http_status=415,
        )


def cors_headers(origin: str | None, config: GatewayConfig) -> dict[str, str]:
    """CORS headers for an actual (non-preflight) response: only for an allowlisted, present Origin."""
    if origin is None or not origin_allowed(origin, config):
        return {}
    return {
        "Access-Control-Allow-Origin": origin.strip(),
        "Access-Control-Expose-Headers": "MCP-Protocol-Version",
    }


def preflight_headers(origin: str) -> dict[str, str]:
    """Headers answering a CORS preflight from the (already allowlisted) ``origin``."""
    return {
        "Access-Control-Allow-Origin": origin.strip(),
        "Access-Control-Allow-Methods": CORS_ALLOW_METHODS,
        "Access-Control-Allow-Headers": CORS_ALLOW_HEADERS,
        "Access-Control-Max-Age": CORS_MAX_AGE_SECONDS,
    }


def security_headers(is_mcp: bool) -> dict[str, str]:
    """Headers set on every response (JSON only; nothing here is ever rendered as a page)."""
    headers = {
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Content-Security-Policy": _JSON_CSP,
        "X-Frame-Options": "DENY",
        "Cache-Control": "no-store",
    }
    if is_mcp:
        headers["Pragma"] = "no-cache"
    return headers
