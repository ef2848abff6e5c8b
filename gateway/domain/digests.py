"""Content digests that clients echo back (``docs/data-contract.md#digests``).

Both digests are ``"sha256:" + hex`` over *canonical JSON bytes*: the UTF-8
encoding of ``json.dumps(obj, ensure_ascii=False, sort_keys=True,
separators=(",", ":"))``, where every value is the decoded field string
(exactly what ``get_lesson`` returns, never the wikitext encoding).

* Evidence digest — object of ALL evidence fields of ``schema/lesson.toml``
  (id, citation, url, kind, verification_basis, note, added_by, added_at;
  absent ones as ``""``). ``record_evidence_verification`` requires the
  caller's ``expected_evidence_digest`` to equal it.
* Content digest — object ``{"lesson": {all Lesson fields}, "evidence":
  [...], "verifications": [...], "relations": [...]}`` with records in page
  order, each holding all of its schema fields. ``audit_lessons`` compares it.

The algorithm is part of the public contract: changing it is a breaking
change and needs a new prefix (e.g. ``sha256v2:``).
"""
from __future__ import annotations

import hashlib
import json

from gateway.domain.model import LessonPage
from gateway.config.schema import Schema

PREFIX = "sha256:"


def canonical_json(obj) -> bytes:
    """UTF-8 bytes of ``obj`` as sorted, compact, non-ASCII-escaped JSON."""
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _complete(values: dict[str, str], names: tuple[str, ...]) -> dict[str, str]:
    return {name: values.get(name, "") for name in names}


def evidence_digest(evidence: dict[str, str], schema: Schema) -> str:
    """Digest of one evidence record: ``"sha256:<64 hex>"``."""
    body = canonical_json(_complete(evidence, schema.evidence.field_names))
    return PREFIX + hashlib.sha256(body).hexdigest()


def content_digest(page: LessonPage, schema: Schema) -> str:
    """Digest of a whole Lesson (fields and all records): ``"sha256:<64 hex>"``."""
    obj = {
        "lesson": _complete(page.fields, schema.lesson.field_names),
        "evidence": [_complete(e, schema.evidence.field_names) for e in page.evidence],
        "verifications": [_complete(v, schema.verification.field_names) for v in page.verifications],
        "relations": [_complete(r, schema.relation.field_names) for r in page.relations],
    }
    return PREFIX + hashlib.sha256(canonical_json(obj)).hexdigest()
