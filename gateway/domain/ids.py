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

:func:`lesson_id_problem` says why a given Lesson id is refused: an id is a page
title (``Lesson:<id>``), and MediaWiki's title parser turns ``_`` into a space,
trims spaces at both ends and merges runs of them (``MediaWikiTitleCodec::splitTitleString``),
so ``trailing_id_`` would be stored as ``Lesson:trailing_id`` and never be found
again. ``meta.id_pattern`` therefore allows ``_`` only between two other
characters; every other character it allows (``a-z``, ``0-9``, ``-``) MediaWiki
keeps as it is, and the namespace is never capitalised
(``docs/data-contract.md#page``).
"""
from __future__ import annotations

import hashlib
import re
import unicodedata

__all__ = ["slugify", "derive_lesson_id", "derive_evidence_id", "derive_verification_id", "lesson_id_problem"]

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


def lesson_id_problem(value: str, meta) -> str | None:
    """Why ``value`` is not a Lesson id, as one sentence without the value; None when it is one.

    ``meta`` is the schema source's ``[meta]`` table (``id_pattern``, ``id_max_length``). The
    underscore rule gets its own sentence: MediaWiki would store such a page under another title.
    """
    limit = int(meta["id_max_length"])
    if re.fullmatch(meta["id_pattern"], value) and len(value) <= limit:
        return None
    if not value:
        return "a Lesson id may not be empty"
    if len(value) > limit:
        return f"a Lesson id has at most {limit} characters"
    if re.fullmatch(r"[a-z0-9_-]+", value):
        return ("a Lesson id may not start or end with '_' or hold '__': MediaWiki trims and merges "
                "underscores in page titles, so the page would be stored under another id")
    return "a Lesson id uses only a-z, 0-9, '-' and '_' (without the Lesson: prefix)"
