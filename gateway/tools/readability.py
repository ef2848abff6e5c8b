"""Refuse a write that would make a Lesson (or a page of one of its sub-lists) unreadable.

Contract (docs/read-path.md#read-back): whatever a write tool accepts,
``get_lesson`` can return whole, byte for byte. Every tools/call response is
capped at ``S3RM_OUTPUT_MAX_BYTES`` (the whole JSON-RPC message, which carries
the result twice: ``structuredContent`` and its JSON text copy). So before a
save the write pipeline checks the planned page with :func:`check_readable`:

* one Lesson field, alone (``get_lesson`` with ``fields: [<field>]``), plus
* the largest citation (``citation_detail=full``, which never shortens), the
  largest verification record and the largest stored relation — one item of
  each sub-list, because a sub-list limit is at least 1 —
* plus a fixed allowance for the envelope's variable parts (request id, the
  three cursors, ``truncated``) of :data:`ENVELOPE_ALLOWANCE` bytes,

must fit the cap. The check takes the largest field and the largest item of
each list together (a bound on every combination a reader can ask for), so
any field can be read whole with ``fields: [<field>]`` and every sub-list page
with limit 1 holds its item whole. If the bound is over the cap, the write is
refused with ``value_too_large_to_read`` (nothing saved) naming the field or
record and the byte figures.

Errors raised: :class:`gateway.tools.base.ToolError` subclass given by the
caller's ``error`` factory (the write pipeline passes its ``WriteToolError``).
"""
from __future__ import annotations

from typing import Any, Callable

from gateway.domain.model import LessonPage
from gateway.domain.schema import Schema
from gateway.tools.base import OutputBudget
from gateway.tools.read_items import citation_items, verification_item

__all__ = ["ENVELOPE_ALLOWANCE", "check_readable", "largest_readable_bytes"]

#: Bytes kept free for what a read adds around the values: a long request id, three cursors
#: (about 250 bytes each), ``truncated`` and a 12-digit revision id.
ENVELOPE_ALLOWANCE = 1536

_REVISION = 10 ** 12
_DIGEST = "sha256:" + "0" * 64


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


def _response(lesson_id: str, field: tuple[str, str] | None, lists: dict[str, dict[str, Any] | None]) -> dict:
    out: dict[str, Any] = {"id": lesson_id, "revision_id": _REVISION, "content_digest": _DIGEST,
                           "lesson": dict([field]) if field else {}}
    for name, item in lists.items():
        out[name] = {"items": [item] if item is not None else [], "next_cursor": None, "total": 1}
    return out


def largest_readable_bytes(budget: OutputBudget, lesson_id: str = "x" * 120) -> int:
    """UTF-8 bytes of the longest single ASCII field ``get_lesson`` returns whole when the lists are empty."""
    empty = budget.measure(_response(lesson_id, ("question", ""), {"citations": None, "verifications": None,
                                                                   "relations": None}))
    # every character of an ASCII value without escapes costs one byte in each of the two copies
    return max(0, (budget.cap_bytes - ENVELOPE_ALLOWANCE - empty) // 2)


def check_readable(page: LessonPage, lesson_id: str, budget: OutputBudget, schema: Schema,
                   error: Callable[..., Exception]) -> None:
    """Raise ``error("value_too_large_to_read", message, field=…, details=…)`` if ``page`` could not be read whole.

    ``page``: the page as it would be saved; ``budget``: the server's response cap. See the module doc.
    """
    limit = budget.cap_bytes - ENVELOPE_ALLOWANCE
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
    total = budget.measure(_response(lesson_id, (field_name, field_value), items))
    if total <= limit:
        return
    # name the biggest part: the field, or the record that tips it over
    parts = {f"field {field_name}": worst} | {f"{name} record": size for name, (_, size) in lists.items() if size > 0}
    culprit = max(parts, key=lambda k: parts[k])
    raise error(
        "value_too_large_to_read",
        f"nothing saved: after this write get_lesson could not return Lesson {lesson_id} whole — its {culprit} "
        f"with one item of each sub-list needs {total} response bytes, over the {limit} this server can return "
        f"(S3RM_OUTPUT_MAX_BYTES={budget.cap_bytes}, each value is sent twice, UTF-8). Shorten the longest text "
        "(non-ASCII characters take 2-4 bytes each) and retry.",
        field=field_name if culprit.startswith("field ") else None,
        details={"needed_bytes": total, "limit_bytes": limit, "largest": culprit},
    )
