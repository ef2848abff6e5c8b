"""The whole-read rule: one value or record is always returned whole, and writes are checked against it.

Contract (docs/read-path.md#read-back): whatever a write tool accepts,
``get_lesson`` returns whole, byte for byte. ``S3RM_OUTPUT_MAX_BYTES`` (the
cap, measured over the whole JSON-RPC message, which carries the result
twice: ``structuredContent`` and its JSON text copy) bounds how much one
answer packs: pages shrink and, in a read of several fields, long fields are
shortened. But a *minimal read* — ``get_lesson`` with one field
(``fields: [<field>]``) and the first item of each sub-list page — is never
shortened: when it is over the cap it is sent whole anyway, up to the *read
ceiling* of :func:`whole_read_bytes`, the largest minimal read the published
schemas allow (every stored string at its ``maxLength`` in the character that
costs the most bytes on the wire). So no value within the published limits
is ever refused for its size or cut on read.

:func:`check_readable` is the write pipeline's guard for the same rule: a
planned page whose minimal read would exceed the ceiling (only possible when
the page already holds values beyond the schema, e.g. from a browser edit) is
refused with ``value_too_large_to_read`` (nothing saved), naming the field or
record and the byte figures.

Errors raised: the caller's ``error`` factory (the write pipeline passes its
``WriteToolError``).
"""
from __future__ import annotations

from typing import Any, Callable

from gateway.domain.model import LessonPage
from gateway.config.schema import FieldDef, RecordDef, Schema
from gateway.tools.shaping import truncate_text
from gateway.tools.contract import OutputBudget
from gateway.tools.read_items import citation_items, verification_item
from gateway.tools.schema_builders import STANDING_MAX

__all__ = ["ENVELOPE_ALLOWANCE", "check_readable", "short_field_chars", "whole_read_bytes"]

#: Bytes kept free for what a read adds around the values: a long request id, three cursors
#: (about 250 bytes each), ``truncated`` and a 12-digit revision id.
ENVELOPE_ALLOWANCE = 1536

_REVISION = 10 ** 12
_DIGEST = "sha256:" + "0" * 64
#: A control character: escaped as ``\u0001`` (6 bytes) in ``structuredContent`` and as
#: ``\\u0001`` (7 bytes) in its JSON text copy, the most any character costs on the wire.
_COSTLIEST = "\x01"


def _largest(items: list[dict[str, Any]], budget: OutputBudget) -> tuple[dict[str, Any] | None, int]:
    best, size = None, -1
    for item in items:
        n = budget.measure({"x": item})
        if n > size:
            best, size = item, n
    return best, size


def _relation_view(record: dict[str, str]) -> dict[str, Any]:
    item: dict[str, Any] = {"from": record.get("from", ""), "relation": record.get("relation", ""),
                            "to": record.get("to", ""), "created_by": record.get("created_by", ""),
                            "created_at": record.get("created_at", ""), "direction": "outgoing", "symmetric": False}
    if record.get("note"):
        item["note"] = record["note"]
    return item


def _response(lesson_id: str, lesson: dict[str, str], lists: dict[str, dict[str, Any] | None]) -> dict:
    out: dict[str, Any] = {"id": lesson_id, "revision_id": _REVISION, "content_digest": _DIGEST, "lesson": lesson}
    for name, item in lists.items():
        out[name] = {"items": [item] if item is not None else [], "next_cursor": None, "total": 1}
    return out


def _worst_value(f: FieldDef, schema: Schema) -> str:
    """The value of ``f`` that costs the most response bytes within the published limits."""
    if f.enum and f.type == "enum_list":  # every value, comma-separated
        return ",".join(schema.enum(f.enum).values)
    if f.enum:
        return max(schema.enum(f.enum).values, key=len)
    if f.type == "timestamp":
        return "2026-01-01T00:00:00Z"
    if f.type in ("text", "longtext", "account"):
        return _COSTLIEST * (f.max_length or 0)
    if f.type == "url":  # no control characters or spaces in a URL; a quote costs 2 + 4 bytes
        return '"' * (f.max_length or 0)
    return "a" * (f.max_length or 0)  # ids, digests: ASCII patterns


def _worst_record(record: RecordDef, schema: Schema) -> dict[str, str]:
    return {f.name: _worst_value(f, schema) for f in record.fields}


def short_field_chars(schema: Schema) -> int:
    """Characters of the longest Lesson field that is not long text (255: ``author``).

    A read of several fields never shortens a field below this, so short fields stay whole.
    """
    return max(f.max_length or 0 for f in schema.lesson.fields if f.type != "longtext")


def _minimal_reads(page: LessonPage, lesson_id: str, budget: OutputBudget, schema: Schema
                   ) -> tuple[int, str, dict[str, int]]:
    """(bytes of the largest minimal read of ``page``, its largest part, each sub-list item's bytes).

    Two shapes are measured, each with the largest item of every sub-list:
    the largest field alone, and every field shortened to
    :func:`short_field_chars` (what a read of all fields sends when the items
    alone fill the cap).
    """
    lists = {
        "citations": _largest(citation_items(page, "full", schema), budget),
        "verifications": _largest([verification_item(v) for v in page.verifications], budget),
        "relations": _largest([_relation_view(r) for r in page.relations], budget),
    }
    items = {name: item for name, (item, _) in lists.items()}
    field_name, field_value, worst = "", "", -1
    for name, value in page.fields.items():
        size = budget.measure({"x": value})
        if size > worst:
            field_name, field_value, worst = name, value, size
    floor = short_field_chars(schema)
    markers = {name: truncate_text(value, floor)[0] if schema.lesson.field(name).max_length else value
               for name, value in page.fields.items()}
    total = max(budget.measure(_response(lesson_id, {field_name: field_value}, items)),
                budget.measure(_response(lesson_id, markers, items)))
    parts = {f"field {field_name}": worst} | {f"{name} record": size for name, (_, size) in lists.items() if size > 0}
    return total + ENVELOPE_ALLOWANCE, max(parts, key=lambda k: parts[k]), parts


def whole_read_bytes(schema: Schema) -> int:
    """Response bytes (before the transport's per-request overhead) of the largest minimal read the schemas allow.

    A Lesson with every stored string at its ``maxLength`` in the costliest
    character, one item in each sub-list and a full ``standing`` block, read as
    in the module doc; the read ceiling is ``max(cap, this + overhead)``.
    """
    fields = _worst_record(schema.lesson, schema)
    page = LessonPage(fields=fields, evidence=(_worst_record(schema.evidence, schema),),
                      verifications=(_worst_record(schema.verification, schema),),
                      relations=(_worst_record(schema.relation, schema),))
    id_chars = int(schema.meta.get("id_max_length", 120))
    budget = OutputBudget(0)
    total, _, _ = _minimal_reads(page, "a" * id_chars, budget, schema)
    ids = ["a" * id_chars] * STANDING_MAX
    standing = {"superseded_by": ids, "contradicted_by": ids,
                "evidence_contradicted": ["a" * (schema.evidence.field("id").max_length or 64)] * STANDING_MAX}
    return total + budget.measure({"x": {"standing": standing}}) - budget.measure({"x": {}})


def check_readable(page: LessonPage, lesson_id: str, budget: OutputBudget, schema: Schema,
                   error: Callable[..., Exception]) -> None:
    """Raise ``error("value_too_large_to_read", message, field=…, details=…)`` if ``page`` could not be read whole.

    ``page``: the page as it would be saved; ``budget``: this call's budget
    (its ``ceiling_bytes`` is the limit). See the module doc.
    """
    total, culprit, _ = _minimal_reads(page, lesson_id, budget, schema)
    if total <= budget.ceiling_bytes:
        return
    raise error(
        "value_too_large_to_read",
        f"nothing saved: after this write get_lesson could not return Lesson {lesson_id} whole — its {culprit} "
        f"with one item of each sub-list needs {total} response bytes, over the {budget.ceiling_bytes} this "
        "server returns for one value (the page holds values longer than the published maxLength, e.g. from a "
        "browser edit). Shorten the longest text and retry.",
        field=culprit[len("field "):] if culprit.startswith("field ") else None,
        details={"needed_bytes": total, "limit_bytes": budget.ceiling_bytes, "largest": culprit},
    )
