"""Ids the server derives from a write request (``docs/tools.md#derived-ids``).

A retried request must create nothing twice, so every id the server picks is a
pure function of the request:

* Lesson id (``create_lesson_draft`` without ``lesson_id``): an ASCII slug of
  the title (at most 48 characters, ``lesson`` when the title has no ASCII
  letters or digits) + ``-`` + 10 hex digits of sha256 over the
  operation_id. The hash depends on the operation_id only, so reusing an
  operation_id for a different create of the same title lands on the same
  page and is reported as ``idempotency_conflict`` instead of silently
  creating a second Lesson.
* Evidence id (initial evidence or ``attach_evidence`` without an id):
  ``ev-`` + 10 hex of sha256 over ``operation_id`` and the role.
* Verification id (always server-set): ``vr-`` + 10 hex, same way.

All derived ids match ``meta.id_pattern`` / ``meta.evidence_id_pattern``.
Contract: ``docs/tools.md#derived-ids`` (a retried request creates nothing twice).
"""
from __future__ import annotations

import hashlib
import re
import unicodedata

__all__ = ["slugify", "derive_lesson_id", "derive_evidence_id", "derive_verification_id"]

_SLUG_MAX = 48


def _h(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:10]


def slugify(title: str) -> str:
    """ASCII slug of ``title``: NFKD, lower case, runs of other characters become ``-``."""
    text = unicodedata.normalize("NFKD", title or "").encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    slug = slug[:_SLUG_MAX].rstrip("-")
    return slug or "lesson"


def derive_lesson_id(title: str, operation_id: str) -> str:
    """Lesson id for a create without ``lesson_id`` (see module doc)."""
    return f"{slugify(title)}-{_h('lesson', operation_id)}"


def derive_evidence_id(operation_id: str, role: str) -> str:
    """Evidence id for ``role`` (``initial`` or ``attach``) of the request with ``operation_id``."""
    return f"ev-{_h('evidence', role, operation_id)}"


def derive_verification_id(operation_id: str, role: str) -> str:
    """Verification record id for ``role`` (``initial`` or ``record``) of the request."""
    return f"vr-{_h('verification', role, operation_id)}"
