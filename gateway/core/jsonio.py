"""JSON encoding and the ONE JSON HTTP response helper of the gateway.

Every JSON body the gateway sends — MCP answers, health and metrics, the
graph endpoint, Flask error pages, and the raw error pages of the gunicorn
worker — is encoded by :func:`encode_json`: compact separators, non-ASCII
kept as UTF-8 (docs/transport.md#tool-results).
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from flask import Response

__all__ = ["MODERN_ONLY_FIELDS", "compact_json", "dump_model", "encode_json", "json_response"]


def compact_json(obj: Any) -> str:
    """Serialize ``obj`` as compact JSON text (``separators=(',', ':')``, non-ASCII kept).

    This is the exact text placed in a tool result's ``content[0].text``.
    Raises ``TypeError`` for values JSON cannot represent.
    """
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def encode_json(obj: Any) -> bytes:
    """Serialize ``obj`` as compact UTF-8 JSON bytes, the form every response body uses.

    Lone surrogates (valid in JSON input, invalid in UTF-8) fall back to ASCII
    escapes so encoding never fails.
    """
    text = compact_json(obj)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=True).encode("ascii")


#: Fields ``mcp_types`` (python-sdk 2.x) always serialises that only the 2026-07-28 wire carries
#: (``resultType``, the ``ttlMs``/``cacheScope`` caching hints): left out of every 2025-era answer,
#: which stays byte-for-byte what it was (docs/transport.md#protocol-versions).
MODERN_ONLY_FIELDS = frozenset({"result_type", "ttl_ms", "cache_scope"})


def dump_model(model: Any) -> dict[str, Any]:
    """An ``mcp_types`` model as its 2025-era wire JSON: camelCase aliases, no ``None`` members, no
    :data:`MODERN_ONLY_FIELDS` (the 2026-07-28 members are added by ``gateway.transport.protocol``)."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json", exclude=set(MODERN_ONLY_FIELDS))


def json_response(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """A Flask response with a compact UTF-8 JSON body and ``Content-Type: application/json``.

    ``obj`` is any JSON value, or ``bytes`` already encoded by :func:`encode_json`
    (sent as they are, e.g. a cached body). ``headers`` are set on the response.
    """
    body = obj if isinstance(obj, bytes) else encode_json(obj)
    response = Response(body, status=status, mimetype="application/json")
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response
