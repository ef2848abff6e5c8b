"""Opaque, signed, expiring pagination cursors (itsdangerous; one key or a shared key ring).

Contract: docs/tools.md#cursors (what a cursor binds) and
docs/retrieval.md#fallback (an issued hybrid cursor never switches order).

Format (what ``next_cursor`` holds): an itsdangerous ``URLSafeSerializer`` token,
``payload "." signature`` — the payload is base64url of the envelope's compact JSON
(zlib-compressed and prefixed with ``.`` when that is shorter), the signature
base64url HMAC-SHA256 under salt :data:`CURSOR_SALT`. The envelope is::

    {"v": 3, "t": "<tool or sub-list>", "fp": "<request fingerprint>", "p": <position>, "x": <expiry, unix s>}

* ``fp`` — :func:`fingerprint`: SHA-256 hex over the canonical JSON of
  everything that decides the ordering and membership of the result list:
  tool, query, filters, fields, min_score, effective mode, ranking version,
  generation and scope (for ``find_analogies`` also the source id, source
  revision and source projection hash; for ``get_lesson`` sub-lists the Lesson
  revision). A cursor is only accepted with the same fingerprint.
* ``p`` — the position inside that list (an offset, or a small object such as a
  repository continuation); cursors advance only by what a page returned.
* ``x`` — expiry; a cursor older than :data:`CURSOR_TTL_SECONDS` is refused.

Keys: ``S3RM_CURSOR_SECRET`` (or a per-process random key when unset, so cursors
then die with the process), plus, with several gateways on one shared store
(docs/operations.md#pgvector-backend), a key ring ``{kid: secret}`` from the
store's ``s3rm_cursor_key`` table. itsdangerous signs with the newest key (the
highest kid when there is a ring; the envelope then names it as ``"k"``) and
verifies with every key, so rotation never breaks issued cursors. A
:class:`CursorKeyRing` picks up a key added by ``s3rm index rotate-cursor-key``
without a restart: a cursor naming a key id this process does not know reloads
the ring from the store (at most once per ``min_reload_seconds``), and the ring
reloads anyway every ``max_age_seconds`` so every gateway soon signs with the
newest key.

Everything wrong with a cursor — malformed, bad signature, issued in the
envelope versions 1 and 2 of the hand-written format this one replaced, other
tool or request, expired — raises :class:`~gateway.core.errors.ToolError`
``invalid_cursor`` whose message tells the caller to restart from the first
page. Cursors are not encrypted: the position is visible but cannot be altered.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from typing import Any, Callable

from itsdangerous import BadData, BadPayload, BadSignature, URLSafeSerializer

from gateway.core.errors import ToolError

__all__ = ["CURSOR_SALT", "CURSOR_TTL_SECONDS", "CURSOR_VERSION", "CursorCodec", "CursorKeyRing",
           "fingerprint", "invalid_cursor"]

#: The envelope version (1 and 2 were the hand-written HMAC format; their cursors are refused).
CURSOR_VERSION = 3
#: The itsdangerous salt: a cursor signature is valid for cursors only, never for another signed value.
CURSOR_SALT = "s3rm-cursor"
#: How long an issued cursor stays valid.
CURSOR_TTL_SECONDS = 6 * 3600
_MAX_LENGTH = 4096
_MIN_KEY_BYTES = 16


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


def fingerprint(request: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of ``request`` (the parts that define the result list)."""
    return hashlib.sha256(_canonical(request)).hexdigest()


def invalid_cursor(reason: str) -> ToolError:
    """The ``invalid_cursor`` error: ``reason`` plus the instruction to restart from the first page."""
    return ToolError("invalid_cursor", f"{reason} Restart from the first page: repeat the call without a cursor.")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class CursorKeyRing:
    """The process-wide key ring ``{kid: secret}``, reloaded from the shared store when needed.

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
    """Issues and checks cursors with the process key and, when given, a shared key ring.

    Args:
        secret: the process key (``GatewayConfig.cursor_secret``), at least 16 bytes unless a ring is given.
        ttl_seconds: lifetime of issued cursors.
        clock: ``() -> unix seconds`` (tests inject one).
        keys: optional key ring ``{kid: secret}`` (each at least 16 bytes) or a
            :class:`CursorKeyRing`; when given, cursors are signed with the newest kid, and
            cursors signed with any kid verify (a ring looks an unknown kid up in the store).

    Raises ValueError for a key shorter than 16 bytes.
    """

    def __init__(self, secret: bytes, ttl_seconds: int = CURSOR_TTL_SECONDS,
                 clock: Callable[[], float] = time.time, *,
                 keys: "dict[int, bytes] | CursorKeyRing | None" = None):
        self._ring = keys if isinstance(keys, CursorKeyRing) else None
        if self._ring is not None:
            keys = self._ring.keys()
        if len(secret) < _MIN_KEY_BYTES and not keys:
            raise ValueError("cursor secret must be at least 16 bytes")
        if keys and any(len(k) < _MIN_KEY_BYTES for k in keys.values()):
            raise ValueError("cursor keys must be at least 16 bytes")
        self._secret = secret
        self._ttl = ttl_seconds
        self._clock = clock
        self._use(dict(keys or {}))

    def _use(self, keys: dict[int, bytes]) -> None:
        """Sign with the newest ring key (else the process key); verify with all of them."""
        self._keys = keys
        secrets = [self._secret] if len(self._secret) >= _MIN_KEY_BYTES else []
        secrets += [keys[kid] for kid in sorted(keys)]  # itsdangerous signs with the last, verifies with each
        # The expiry stays in the envelope instead of itsdangerous' timed serializer, which stamps
        # the issue time and refuses a stamp from the future: one second of clock skew between two
        # gateways sharing the ring would refuse fresh cursors as expired.
        self._serializer = URLSafeSerializer(secrets, salt=CURSOR_SALT, serializer_kwargs={"sort_keys": True},
                                             signer_kwargs={"digest_method": hashlib.sha256,
                                                            "key_derivation": "hmac"})

    def encode(self, tool: str, fp: str, position: Any) -> str:
        """A signed cursor for ``position`` in the list identified by ``tool`` and fingerprint ``fp``.

        Raises ValueError when the cursor would be longer than 4096 characters."""
        envelope = {"v": CURSOR_VERSION, "t": tool, "fp": fp, "p": position, "x": int(self._clock()) + self._ttl}
        if self._keys:
            envelope["k"] = max(self._keys)
        token = self._serializer.dumps(envelope)
        if len(token) > _MAX_LENGTH:
            raise ValueError("cursor position is too large")
        return token

    def decode(self, token: str, tool: str, fp: str) -> Any:
        """The position stored in ``token``; raises ToolError ``invalid_cursor`` when it is not valid here."""
        # every cursor we issue is ASCII (base64url and "."); anything else, a lone surrogate
        # included, is malformed before itsdangerous would try to encode it as UTF-8
        if not isinstance(token, str) or len(token) > _MAX_LENGTH or not token.isascii():
            raise invalid_cursor("The cursor is malformed.")
        envelope = self._verified(token)
        if not isinstance(envelope, dict) or envelope.get("v") != CURSOR_VERSION:
            raise invalid_cursor("The cursor has an unsupported version.")
        if envelope.get("t") != tool:
            raise invalid_cursor("The cursor belongs to another tool or list.")
        if envelope.get("fp") != fp:
            raise invalid_cursor("The cursor was issued for a different request (query, filters, fields, "
                                 "scope, mode, ranking or index generation changed).")
        expiry = envelope.get("x")
        if not _is_int(expiry) or expiry < self._clock():
            raise invalid_cursor("The cursor has expired.")
        return envelope.get("p")

    def _verified(self, token: str) -> Any:
        """The envelope of a token signed with one of our keys; ``invalid_cursor`` otherwise."""
        try:
            return self._serializer.loads(token)
        except BadSignature as exc:
            claimed = self._claimed(exc.payload)
        except BadData:  # signed by us, yet not base64/JSON: never issued that way
            raise invalid_cursor("The cursor is malformed.") from None
        if claimed is None:
            raise invalid_cursor("The cursor is malformed.")
        if isinstance(claimed, dict) and claimed.get("v") in (1, 2):
            raise invalid_cursor("The cursor has an unsupported version.")  # the hand-written format
        kid = claimed.get("k") if isinstance(claimed, dict) else None
        if (self._ring is not None and _is_int(kid) and kid not in self._keys
                and self._ring.lookup(kid) is not None):
            self._use(self._ring.keys())  # a key rotated in after this process loaded its ring
            try:
                return self._serializer.loads(token)
            except BadData:
                pass
        raise invalid_cursor("The cursor was not issued by this server or was altered.")

    def _claimed(self, payload: bytes | None) -> Any:
        """What an unverified payload claims (read only to choose the message or reload the ring), or None."""
        if payload is None:
            return None
        try:
            return self._serializer.load_payload(payload)
        except BadPayload:
            return None
