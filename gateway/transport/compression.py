"""gzip for JSON responses when the client accepts it (docs/transport.md#compression).

``tools/list`` is tens of kilobytes of JSON Schema and compresses about
tenfold; every MCP client library sends ``Accept-Encoding: gzip`` and
decompresses transparently. Bodies under :data:`MIN_BYTES` are sent as they
are (the gzip header would eat the gain). The output cap
(``S3RM_OUTPUT_MAX_BYTES``) is measured on the uncompressed JSON.
"""
from __future__ import annotations

import gzip

from flask import Response

__all__ = ["MIN_BYTES", "accepts_gzip", "compress_response"]

#: Smallest body worth compressing (bytes).
MIN_BYTES = 1024
_LEVEL = 6


def accepts_gzip(accept_encoding: str | None) -> bool:
    """True when ``Accept-Encoding`` admits ``gzip`` (named or ``*``) with q > 0 (RFC 9110 §12.5.3)."""
    if not accept_encoding:
        return False
    named: float | None = None
    star: float | None = None
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        q = 1.0
        params = params.strip()
        if params.lower().startswith("q="):
            try:
                q = float(params[2:])
            except ValueError:
                q = 0.0
        coding = coding.strip().lower()
        if coding in ("gzip", "x-gzip"):
            named = q
        elif coding == "*":
            star = q
    chosen = named if named is not None else star
    return chosen is not None and chosen > 0


def compress_response(response: Response, accept_encoding: str | None) -> Response:
    """gzip ``response`` in place when it is a JSON body of at least :data:`MIN_BYTES` and the client accepts it.

    Adds ``Vary: Accept-Encoding`` to every compressible response; leaves
    streamed, empty, already-encoded and non-JSON responses alone.
    """
    if response.direct_passthrough or response.is_streamed or "Content-Encoding" in response.headers:
        return response
    if response.mimetype != "application/json":
        return response
    body = response.get_data()
    if len(body) < MIN_BYTES:
        return response
    response.vary.add("Accept-Encoding")
    if not accepts_gzip(accept_encoding):
        return response
    response.set_data(gzip.compress(body, compresslevel=_LEVEL, mtime=0))
    response.headers["Content-Encoding"] = "gzip"
    return response
