"""HMAC seals on ``revise_lesson`` revisions (the ``[S3R …]`` marker).

A seal proves that a revision came through the gateway with a given request.
It binds, with HMAC-SHA256 under a configured key:

* the Lesson id (a seal copied onto another Lesson fails),
* the saving account (MediaWiki's revision user; a seal copied into someone
  else's edit fails),
* the operation_id and the request digest prefix ``d``,
* ``b`` — a digest of the sorted basis evidence ids (the ids themselves do not
  fit the 500-character summary: 8 ids × 64 characters),
* ``f`` — the fields that actually changed,
* ``p`` — the parent revision the revise was based on (MediaWiki's
  ``parentid`` must equal it),
* ``h`` — the body digest: the first 32 hex digits of the Lesson's content
  digest (:func:`gateway.domain.digests.content_digest`) of the saved content.

Signed message (UTF-8): the fields joined by U+001F in the order
``"S3R", "v1", kid, lesson_id, account, op, d, b, f, p, h``.
``s`` = base64url(HMAC-SHA256(key[kid], message)) without padding (43 chars).

Keys come from ``S3RM_REVISION_HMAC_KEYS`` (``{"key id": "secret"}``) and
``S3RM_REVISION_HMAC_ACTIVE_KEY_ID`` (the key new seals use). Old key ids stay
in the map after a rotation so older seals keep verifying; a seal whose key id
is unknown never verifies. Keys are never logged or returned.

Contract: ``docs/tools.md#seals`` (what is sealed) and
``docs/tools.md#replay-detection`` (only seals whose signature, author, parent
and body digest all check out count as an earlier write).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Mapping

from gateway.core.errors import GatewayError
from gateway.domain.digests import canonical_json, content_digest
from gateway.domain.markers import KID_PATTERN, Marker
from gateway.config.schema import Schema
from gateway.domain.model import LessonPage

__all__ = ["SealError", "SealCheck", "basis_digest", "body_digest", "make_seal", "verify_seal"]


class SealError(GatewayError, ValueError):
    """A seal cannot be made (no usable active key)."""


def basis_digest(evidence_ids) -> str:
    """16 hex digits of sha256 over the canonical JSON of the sorted, de-duplicated basis ids."""
    return hashlib.sha256(canonical_json(sorted(set(evidence_ids)))).hexdigest()[:16]


def body_digest(page: LessonPage, schema: Schema) -> str:
    """32 hex digits of the page's content digest under ``schema`` (``sha256:`` prefix dropped)."""
    return content_digest(page, schema)[len("sha256:"):][:32]


def _key_bytes(secret) -> bytes:
    return secret if isinstance(secret, bytes) else str(secret).encode("utf-8")


def _message(kid: str, lesson_id: str, account: str, op: str, d: str, b: str, fields: tuple[str, ...],
             parent: int, h: str) -> bytes:
    parts = ("S3R", "v1", kid, lesson_id, account, op, d, b, ",".join(fields), str(parent), h)
    return "\x1f".join(parts).encode("utf-8")


def _sign(secret, message: bytes) -> str:
    mac = hmac.new(_key_bytes(secret), message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")


def make_seal(*, keys: Mapping[str, str], active_kid: str, lesson_id: str, account: str, op: str,
              request_digest: str, basis_ids, fields: tuple[str, ...], parent: int, page: LessonPage,
              schema: Schema) -> Marker:
    """Build the S3R marker for a revise of ``lesson_id`` producing ``page`` (digested under ``schema``).

    Raises:
        SealError: no active key, the active key id is not configured, or it
            is not summary-safe (``[A-Za-z0-9._-]{1,32}``).
    """
    if not active_kid or active_kid not in keys:
        raise SealError("no active revision HMAC key is configured (S3RM_REVISION_HMAC_KEYS / "
                        "S3RM_REVISION_HMAC_ACTIVE_KEY_ID)")
    if not re.fullmatch(KID_PATTERN, active_kid):
        raise SealError("the active revision HMAC key id must match [A-Za-z0-9._-]{1,32}")
    d = request_digest[:32]
    b = basis_digest(basis_ids)
    h = body_digest(page, schema)
    sig = _sign(keys[active_kid], _message(active_kid, lesson_id, account, op, d, b, tuple(fields), parent, h))
    return Marker(tag="S3R", parent=parent, op=op, kind="revise", digest=d, kid=active_kid, basis=b,
                  fields=tuple(fields), body=h, signature=sig)


@dataclass(frozen=True)
class SealCheck:
    """Outcome of :func:`verify_seal`: ``ok`` plus, when not ok, which part failed (``reason``)."""

    ok: bool
    reason: str = ""


def verify_seal(marker: Marker, *, keys: Mapping[str, str], lesson_id: str, account: str,
                parent_revision_id: int | None, page: LessonPage | None, schema: Schema) -> SealCheck:
    """Check an S3R marker against the revision it sits on.

    ``account`` is the revision's user, ``parent_revision_id`` MediaWiki's
    ``parentid`` (None = not known, not checked), ``page`` the revision's
    decoded content under ``schema`` (None = not known, body not checked). Never raises.
    """
    if marker.tag != "S3R":
        return SealCheck(False, "not a seal")
    secret = keys.get(marker.kid or "")
    if secret is None:
        return SealCheck(False, "unknown key id")
    expected = _sign(secret, _message(marker.kid, lesson_id, account, marker.op or "", marker.digest or "",
                                      marker.basis or "", marker.fields, marker.parent, marker.body or ""))
    if not hmac.compare_digest(expected, marker.signature or ""):
        return SealCheck(False, "signature does not match (wrong key, other Lesson, other author or altered seal)")
    if parent_revision_id is not None and parent_revision_id != marker.parent:
        return SealCheck(False, "parent revision differs from the sealed one")
    if page is not None and body_digest(page, schema) != marker.body:
        return SealCheck(False, "body digest differs from the saved content")
    return SealCheck(True)
