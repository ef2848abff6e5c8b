"""Opaque, HMAC-signed pagination cursors (v1 envelope).

Contract: docs/tools.md#cursors (what a cursor binds) and
docs/retrieval.md#fallback (an issued hybrid cursor never switches order).

Format (what ``next_cursor`` holds)::

    base64url(envelope_json) "." base64url(HMAC-SHA256(key, b"s3rm-cursor.v1." + envelope_json))

``envelope_json`` is canonical JSON (sorted keys, compact) of::

    {"v": 1, "t": "<tool or sub-list>", "fp": "<request fingerprint>", "p": <position>, "x": <expiry, unix s>}

* ``fp`` — :func:`fingerprint`: SHA-256 hex over the canonical JSON of
  everything that decides the ordering and membership of the result list:
  tool, query, filters, fields, min_score, effective mode, ranking version,
  generation and scope (for ``find_analogies`` also the source id, source
  revision and source projection hash; for ``get_lesson`` sub-lists the Lesson
  revision). A cursor is only accepted with the same fingerprint.
* ``p`` — the position inside that list (an offset, or a small object such as a
  repository continuation); cursors advance only by what a page returned.
* ``x`` — expiry; a cursor older than :data:`CURSOR_TTL_SECONDS` is refused.

The key is ``S3RM_CURSOR_SECRET`` (or a per-process random key when unset, so
cursors then die with the process). Base64url without padding keeps cursors
URL- and JSON-safe. Everything wrong with a cursor — not base64/JSON, bad MAC,
other version/tool/request, expired — raises :class:`~gateway.core.errors.ToolError`
``invalid_cursor`` whose message tells the caller to restart from the first page.
Cursors are not encrypted: the position is visible but cannot be altered.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from typing import Any, Callable

from gateway.core.errors import ToolError

__all__ = ["CURSOR_TTL_SECONDS", "CURSOR_VERSION", "CursorCodec", "fingerprint", "invalid_cursor"]

CURSOR_VERSION = 1
#: How long an issued cursor stays valid.
CURSOR_TTL_SECONDS = 6 * 3600
_MAC_CONTEXT = b"s3rm-cursor.v1."
_MAX_LENGTH = 4096


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def fingerprint(request: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of ``request`` (the parts that define the result list)."""
    return hashlib.sha256(_canonical(request)).hexdigest()


def invalid_cursor(reason: str) -> ToolError:
    """The ``invalid_cursor`` error: ``reason`` plus the instruction to restart from the first page."""
    return ToolError("invalid_cursor", f"{reason} Restart from the first page: repeat the call without a cursor.")


class CursorCodec:
    """Issues and checks cursors with one HMAC key.

    Args:
        secret: HMAC key (``GatewayConfig.cursor_secret``), at least 16 bytes.
        ttl_seconds: lifetime of issued cursors.
        clock: ``() -> unix seconds`` (tests inject one).
    """

    def __init__(self, secret: bytes, ttl_seconds: int = CURSOR_TTL_SECONDS,
                 clock: Callable[[], float] = time.time):
        if len(secret) < 16:
            raise ValueError("cursor secret must be at least 16 bytes")
        self._secret = secret
        self._ttl = ttl_seconds
        self._clock = clock

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._secret, _MAC_CONTEXT + body, hashlib.sha256).digest()

    def encode(self, tool: str, fp: str, position: Any) -> str:
        """A signed cursor for ``position`` in the list identified by ``tool`` and fingerprint ``fp``."""
        body = _canonical({"v": CURSOR_VERSION, "t": tool, "fp": fp, "p": position,
                           "x": int(self._clock()) + self._ttl})
        token = f"{_b64(body)}.{_b64(self._mac(body))}"
        if len(token) > _MAX_LENGTH:
            raise ValueError("cursor position is too large")
        return token

    def decode(self, token: str, tool: str, fp: str) -> Any:
        """The position stored in ``token``; raises ToolError ``invalid_cursor`` when it is not valid here."""
        if not isinstance(token, str) or len(token) > _MAX_LENGTH or token.count(".") != 1:
            raise invalid_cursor("The cursor is malformed.")
        body_part, mac_part = token.split(".")
        try:
            body, mac = _unb64(body_part), _unb64(mac_part)
        except (binascii.Error, ValueError):
            raise invalid_cursor("The cursor is malformed.") from None
        if not hmac.compare_digest(mac, self._mac(body)):
            raise invalid_cursor("The cursor was not issued by this server or was altered.")
        try:
            envelope = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise invalid_cursor("The cursor is malformed.") from None
        if not isinstance(envelope, dict) or envelope.get("v") != CURSOR_VERSION:
            raise invalid_cursor("The cursor has an unsupported version.")
        if envelope.get("t") != tool:
            raise invalid_cursor("The cursor belongs to another tool or list.")
        if envelope.get("fp") != fp:
            raise invalid_cursor("The cursor was issued for a different request (query, filters, fields, "
                                 "scope, mode, ranking or index generation changed).")
        expiry = envelope.get("x")
        if not isinstance(expiry, int) or expiry < self._clock():
            raise invalid_cursor("The cursor has expired.")
        return envelope.get("p")
