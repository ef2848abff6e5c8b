"""The MCP 2026-07-28 ("modern") request rules: era routing, the ``_meta`` envelope and header-body checks.

Contract: docs/transport.md#protocol-versions and docs/transport.md#the-2026-07-28-request-rules.
Sources: MCP 2026-07-28 "Versioning and Compatibility" (every request carries
its version in ``params._meta``; an unsupported one gets
``UnsupportedProtocolVersionError`` -32022 listing the supported versions) and
"Streamable HTTP" (``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name``
MUST match the body; ``Mcp-Name`` may be ``=?base64?...?=``-encoded and is
decoded before comparison; a mismatch, a missing or a malformed header is
``HeaderMismatch`` -32020 with HTTP 400).

A request is served in the modern era when its ``MCP-Protocol-Version`` header
names anything but a handshake revision (2025-03-26, 2025-06-18, 2025-11-25), or
when it has no such header but its ``_meta`` carries the modern protocol-version
key. ``initialize`` (which negotiates in its body) is modern only when it is
sent *at* a revision served here without a handshake (header or ``_meta``
version 2026-07-28): that revision removed the method, so it is answered 404
``-32601`` (SEP-2575); any other ``initialize`` keeps the 2025 behaviour.
"""
from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from gateway.core.errors import HEADER_MISMATCH, INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION, JsonRpcError
from gateway.transport.headers import ALL_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS
from gateway.transport.jsonrpc import Message

__all__ = [
    "PROTOCOL_VERSION_META_KEY",
    "CLIENT_CAPABILITIES_META_KEY",
    "SERVER_INFO_META_KEY",
    "ModernEnvelope",
    "is_modern_request",
    "decode_header_value",
    "check_modern_request",
    "check_notification_version",
]

PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META_KEY = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"

#: Methods whose ``Mcp-Name`` header mirrors a body parameter (Streamable HTTP, "Standard Request Headers").
_NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_ROUTING_HEADERS = ("mcp-protocol-version", "mcp-method", "mcp-name")
_B64_SENTINEL = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$", re.DOTALL)
_HEADER_SAFE = re.compile(r"^[\x20-\x7e\t]*$")


@dataclass(frozen=True)
class ModernEnvelope:
    """A 2026-07-28 request that passed every envelope rule: its ``protocol_version`` is served here."""

    protocol_version: str


def _meta(params: Mapping[str, Any]) -> Any:
    return params.get("_meta")


def is_modern_request(method: str | None, version_header: str | None, params: Mapping[str, Any]) -> bool:
    """True when the request is to be served under the 2026-07-28 rules (see the module docstring).

    ``initialize`` selects the 2025 era (it negotiates its version in the body) unless it is sent at
    a modern revision (header, or ``_meta`` without a header), which removed it.
    """
    if method == "initialize":
        if version_header is not None:
            return version_header.strip() in MODERN_PROTOCOL_VERSIONS
        meta = _meta(params)
        return isinstance(meta, dict) and meta.get(PROTOCOL_VERSION_META_KEY) in MODERN_PROTOCOL_VERSIONS
    if version_header is not None:
        return version_header.strip() not in SUPPORTED_PROTOCOL_VERSIONS
    meta = _meta(params)
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


def decode_header_value(value: str | None) -> str | None:
    """The header value with the ``=?base64?<b64>?=`` sentinel decoded (UTF-8); ``None`` when malformed.

    A value without the sentinel is returned as it is. Bad or non-canonical
    base64 and invalid UTF-8 give ``None``, so a corrupt header never equals a
    body value.
    """
    if value is None:
        return None
    match = _B64_SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(raw).decode("ascii") != payload:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _mismatch(message: str, request_id: str | int | None) -> JsonRpcError:
    return JsonRpcError(HEADER_MISMATCH, f"Header mismatch: {message}", http_status=400, request_id=request_id)


def check_modern_request(
    message: Message, headers: Mapping[str, str], header_lines: Iterable[tuple[str, str]]
) -> ModernEnvelope:
    """Check one 2026-07-28 request; return its envelope or raise :class:`JsonRpcError` (HTTP 400).

    Rules, first failure wins (docs/transport.md#the-2026-07-28-request-rules):

    0. an ``MCP-Protocol-Version`` header naming a revision not served here, on a
       request without a ``_meta`` version → -32022 (below);
    1. a routing header (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``)
       sent twice → -32020;
    2. ``params._meta`` not an object with the protocol-version and
       client-capabilities keys → -32602;
    3. ``MCP-Protocol-Version`` absent or not equal to the ``_meta`` version,
       ``Mcp-Method`` absent or not equal to ``method``, ``Mcp-Name`` (decoded)
       not equal to ``params.name`` of a ``tools/call``, or any of them with
       characters outside visible ASCII → -32020;
    4. the version is not a string → -32602; not served here → -32022 with
       ``data = {"supported": [...all served versions...], "requested": ...}``.

    ``headers``: lower-case name → value; ``header_lines``: the raw
    ``(name, value)`` pairs (duplicates are only visible there).
    """
    rid = message.id
    seen: set[str] = set()
    for name, _ in header_lines:
        key = name.lower()
        if key in _ROUTING_HEADERS:
            if key in seen:
                raise _mismatch(f"the {name} header appears more than once", rid)
            seen.add(key)
    meta = _meta(message.params)
    header_version = (headers.get("mcp-protocol-version") or "").strip()
    has_meta_version = isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta
    if header_version and header_version not in MODERN_PROTOCOL_VERSIONS and not has_meta_version:
        raise _unsupported(header_version, rid)
    if not isinstance(meta, dict):
        raise JsonRpcError(
            INVALID_PARAMS,
            f'params._meta must be an object carrying "{PROTOCOL_VERSION_META_KEY}" and '
            f'"{CLIENT_CAPABILITIES_META_KEY}" (MCP 2026-07-28 requests carry their version in _meta)',
            http_status=400,
            request_id=rid,
        )
    missing = [key for key in (PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY) if key not in meta]
    if missing:
        raise JsonRpcError(
            INVALID_PARAMS,
            f"params._meta is missing the required key(s): {', '.join(missing)}",
            http_status=400,
            request_id=rid,
        )
    for key in _ROUTING_HEADERS:
        value = headers.get(key)
        if value is not None and not _HEADER_SAFE.fullmatch(value):
            raise _mismatch(f"the {key} header carries characters outside visible ASCII", rid)
    version = meta[PROTOCOL_VERSION_META_KEY]
    version_header = headers.get("mcp-protocol-version")
    if version_header is None:
        raise _mismatch("the MCP-Protocol-Version header is missing", rid)
    if version_header.strip() != version:
        raise _mismatch(
            f"MCP-Protocol-Version header {version_header.strip()[:40]!r} does not match "
            f"the body's _meta version {str(version)[:40]!r}",
            rid,
        )
    method_header = headers.get("mcp-method")
    if method_header is None:
        raise _mismatch("the Mcp-Method header is missing", rid)
    if method_header != message.method:
        raise _mismatch(
            f"Mcp-Method header {method_header[:80]!r} does not match the body's method {str(message.method)[:80]!r}",
            rid,
        )
    name_key = _NAME_PARAM.get(str(message.method))
    if name_key is not None:
        body_value = message.params.get(name_key)
        name_header = headers.get("mcp-name")
        if body_value is not None:
            if name_header is None:
                raise _mismatch(f"the Mcp-Name header is missing (it mirrors params.{name_key})", rid)
            decoded = decode_header_value(name_header)
            if decoded is None:
                raise _mismatch("the Mcp-Name header is not valid =?base64?...?= (canonical base64 of UTF-8)", rid)
            if decoded != body_value:
                raise _mismatch(
                    f"Mcp-Name header value {decoded[:80]!r} does not match the body's params.{name_key} "
                    f"{str(body_value)[:80]!r}",
                    rid,
                )
    if not isinstance(version, str):
        raise JsonRpcError(
            INVALID_PARAMS, f"_meta {PROTOCOL_VERSION_META_KEY} must be a string", http_status=400, request_id=rid
        )
    if version not in MODERN_PROTOCOL_VERSIONS:
        raise _unsupported(version, rid)
    return ModernEnvelope(version)


def check_notification_version(headers: Mapping[str, str]) -> None:
    """Refuse (-32022, HTTP 400, no id) a notification whose ``MCP-Protocol-Version`` is not served here.

    2026-07-28 defines no other rule for notification POSTs; an accepted one gets 202.
    """
    version = (headers.get("mcp-protocol-version") or "").strip()
    if version and version not in MODERN_PROTOCOL_VERSIONS and version not in SUPPORTED_PROTOCOL_VERSIONS:
        raise _unsupported(version, None)


def _unsupported(version: str, request_id: str | int | None) -> JsonRpcError:
    return JsonRpcError(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version {version[:40]!r}; this server supports {', '.join(ALL_PROTOCOL_VERSIONS)}",
        http_status=400,
        request_id=request_id,
        data={"supported": list(ALL_PROTOCOL_VERSIONS), "requested": version},
    )
