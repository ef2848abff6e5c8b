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

__all__ = ["compact_json", "encode_json", "json_response"]


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
