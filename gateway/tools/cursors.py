"""Opaque, HMAC-signed pagination cursors (v1 envelope; v2 with a shared key ring).

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

**v2** (several gateways on one shared store, docs/operations.md#pgvector-backend):
the codec gets a key ring ``{kid: secret}`` (from the store's
``s3rm_cursor_key`` table, the same on every gateway); the envelope adds
``"k": kid`` and ``"v": 2``, the MAC context is ``b"s3rm-cursor.v2."``, the newest
kid signs and every kid in the ring verifies (rotation without breaking issued
cursors). The generation stays bound through ``fp``, the expiry through ``x``.
A :class:`CursorKeyRing` picks up a key added by ``s3rm index
rotate-cursor-key`` without a restart: a cursor with a key id this process
does not know reloads the ring from the store (at most once per
``min_reload_seconds``), and the ring reloads anyway every
``max_age_seconds`` so every gateway soon signs with the newest key.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import threading
import time
from typing import Any, Callable

from gateway.core.errors import ToolError

__all__ = ["CURSOR_TTL_SECONDS", "CURSOR_VERSION", "CURSOR_VERSION_SHARED", "CursorCodec", "CursorKeyRing",
           "fingerprint", "invalid_cursor"]

CURSOR_VERSION = 1
#: The envelope version of cursors signed with a shared key ring.
CURSOR_VERSION_SHARED = 2
#: How long an issued cursor stays valid.
CURSOR_TTL_SECONDS = 6 * 3600
_MAC_CONTEXT = b"s3rm-cursor.v1."
_MAC_CONTEXT_V2 = b"s3rm-cursor.v2."
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


class CursorKeyRing:
    """The process-wide v2 key ring ``{kid: secret}``, reloaded from the shared store when needed.

    Args:
        load: ``() -> {kid: secret}`` (``PgStore.cursor_keys``); may raise (the ring then keeps its keys).
        keys: the ring loaded at start.
        min_reload_seconds: least time between two reloads caused by unknown key ids (a flood of
            forged ids costs at most one store read per interval).
        max_age_seconds: reload on use when the ring is older than this (new keys start signing).
        clock: monotonic seconds (tests inject one).

    Thread-safe; contract: docs/operations.md#pgvector-backend (rotation).
    """

    def __init__(self, load: Callable[[], dict[int, bytes]], keys: dict[int, bytes], *,
                 min_reload_seconds: float = 5.0, max_age_seconds: float = 300.0,
                 clock: Callable[[], float] = time.monotonic):
        self._load = load
        self._keys = dict(keys)
        self._min = min_reload_seconds
        self._max_age = max_age_seconds
        self._clock = clock
        self._loaded_at = self._tried_at = clock()
        self._lock = threading.Lock()
        #: how many reloads ran (successful or not)
        self.reloads = 0

    def _reload(self, why: str) -> None:
        self._tried_at = self._clock()
        self.reloads += 1
        try:
            keys = self._load()
        except Exception as exc:  # the store may be down: keep verifying with what we have
            logging.getLogger("s3rm.cursors").warning("cursor key reload (%s) failed: %s", why, type(exc).__name__)
            return
        if keys:
            self._keys, self._loaded_at = dict(keys), self._tried_at

    def keys(self) -> dict[int, bytes]:
        """The current ring (reloaded first when older than ``max_age_seconds``)."""
        with self._lock:
            if self._clock() - self._tried_at >= self._max_age:
                self._reload("age")
            return dict(self._keys)

    def lookup(self, kid: int) -> bytes | None:
        """The secret of ``kid``; an unknown kid reloads the ring unless the last reload was too recent."""
        with self._lock:
            if kid not in self._keys and self._clock() - self._tried_at >= self._min:
                self._reload("unknown key id")
            return self._keys.get(kid)


class CursorCodec:
    """Issues and checks cursors with one HMAC key (v1) or a shared key ring (v2).

    Args:
        secret: v1 HMAC key (``GatewayConfig.cursor_secret``), at least 16 bytes.
        ttl_seconds: lifetime of issued cursors.
        clock: ``() -> unix seconds`` (tests inject one).
        keys: optional v2 key ring ``{kid: secret}`` (each at least 16 bytes) or a
            :class:`CursorKeyRing`; when given, cursors are issued as v2 with the newest kid,
            and v2 cursors of any kid verify (a ring looks an unknown kid up in the store).
    """

    def __init__(self, secret: bytes, ttl_seconds: int = CURSOR_TTL_SECONDS,
                 clock: Callable[[], float] = time.time, *,
                 keys: "dict[int, bytes] | CursorKeyRing | None" = None):
        self._ring = keys if isinstance(keys, CursorKeyRing) else None
        if self._ring is not None:
            keys = self._ring.keys()
        if len(secret) < 16 and not keys:
            raise ValueError("cursor secret must be at least 16 bytes")
        if keys and any(len(k) < 16 for k in keys.values()):
            raise ValueError("cursor keys must be at least 16 bytes")
        self._secret = secret
        self._keys = dict(keys or {})
        self._ttl = ttl_seconds
        self._clock = clock

    def _mac(self, body: bytes, kid: int | None = None) -> bytes:
        if kid is None:
            return hmac.new(self._secret, _MAC_CONTEXT + body, hashlib.sha256).digest()
        return hmac.new(self._keys[kid], _MAC_CONTEXT_V2 + body, hashlib.sha256).digest()

    def encode(self, tool: str, fp: str, position: Any) -> str:
        """A signed cursor for ``position`` in the list identified by ``tool`` and fingerprint ``fp``."""
        envelope = {"v": CURSOR_VERSION, "t": tool, "fp": fp, "p": position, "x": int(self._clock()) + self._ttl}
        kid = max(self._keys) if self._keys else None
        if kid is not None:
            envelope.update(v=CURSOR_VERSION_SHARED, k=kid)
        body = _canonical(envelope)
        token = f"{_b64(body)}.{_b64(self._mac(body, kid))}"
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
        try:
            envelope = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            envelope = None
        kid = envelope.get("k") if isinstance(envelope, dict) and envelope.get("v") == CURSOR_VERSION_SHARED else None
        if (kid is not None and isinstance(kid, int) and not isinstance(kid, bool) and kid not in self._keys
                and self._ring is not None and self._ring.lookup(kid) is not None):
            self._keys = self._ring.keys()  # a key rotated in after this process loaded its ring
        if kid is not None and (not isinstance(kid, int) or kid not in self._keys):
            raise invalid_cursor("The cursor was not issued by this server or was altered.")
        if kid is None and len(self._secret) < 16:
            raise invalid_cursor("The cursor was not issued by this server or was altered.")
        if not hmac.compare_digest(mac, self._mac(body, kid)):
            raise invalid_cursor("The cursor was not issued by this server or was altered.")
        if envelope is None:
            raise invalid_cursor("The cursor is malformed.")
        if not isinstance(envelope, dict) or envelope.get("v") not in (CURSOR_VERSION, CURSOR_VERSION_SHARED):
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
