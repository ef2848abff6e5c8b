"""``find_related_lessons`` handler (DESIGN.md §2–§3).

Input: ``id``, ``relation_types`` (default all), ``direction``
(``outgoing`` | ``incoming`` | ``both``, default both), ``limit``, ``cursor``.

Edges come from :meth:`LessonRepository.find_relation_edges` — outgoing from
the Lesson's own page, incoming through the wiki's link tables (or SMW
``ask``) without reading every Lesson; ``partial``/``scanned``/``scan_limit``
report that bounded scan. Symmetric types (``analogous_to``) are shown from
both ends: such an edge matches either direction filter, while ``from``/``to``
and ``direction`` keep the stored orientation and ``symmetric`` is true. Each
result names the OTHER Lesson (``id``) with its current title ("" when that
Lesson no longer exists). Order: outgoing edges in page order, then incoming
ones by source id; offset cursor bound to (id, types, direction).
"""
from __future__ import annotations

from typing import Any

from gateway.core.errors import ToolError
from gateway.domain.schema import load_schema
from gateway.retrieval.shaping import conformer
from gateway.tools.base import ToolContext
from gateway.tools.read_common import DEFAULT_LIMIT, Pager, fit_page, read_tool, repository
from gateway.tools.read_items import symmetric_relations

__all__ = ["handle"]

TOOL = "find_related_lessons"
SCAN_LIMIT = 500


@read_tool
def handle(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run ``find_related_lessons`` (see module doc)."""
    repo = repository(ctx)
    lesson_id = arguments["id"]
    schema = load_schema()
    types = frozenset(arguments.get("relation_types") or schema.enum("relation").values)
    direction = arguments.get("direction", "both")
    limit = int(arguments.get("limit", DEFAULT_LIMIT))
    symmetric = symmetric_relations(schema)
    wants_sym = bool(types & symmetric)
    edges = repo.find_relation_edges(lesson_id, outgoing=direction != "incoming" or wants_sym,
                                     incoming=direction != "outgoing" or wants_sym, limit=SCAN_LIMIT)
    if not edges.outgoing and not repo.exists([lesson_id]):
        raise ToolError("not_found", f"No Lesson with id {lesson_id!r}; use search_lessons to find ids.")

    def wanted(relation: str, stored: str) -> bool:
        return relation in types and (direction in ("both", stored) or relation in symmetric)

    rows = [(e, "outgoing", e.target) for e in edges.outgoing if wanted(e.relation, "outgoing")]
    rows += [(e, "incoming", e.source) for e in sorted(edges.incoming, key=lambda e: e.source)
             if wanted(e.relation, "incoming")]
    pager = Pager(ctx, TOOL, {"id": lesson_id, "types": sorted(types), "direction": direction})
    offset = pager.offset(arguments.get("cursor"))
    window = rows[offset:offset + limit]
    snaps = repo.get_snapshots([other for _, _, other in window])
    fix = conformer(str(ctx.config.schema_dir), TOOL, "results", "[]")
    items = []
    for edge, stored, other in window:
        item = {"id": other, "title": snaps[other].page.fields.get("title", "") if other in snaps else "",
                "relation": edge.relation, "direction": stored, "from": edge.source, "to": edge.target,
                "symmetric": edge.relation in symmetric}
        if edge.note:
            item["note"] = edge.note
        items.append(fix.fix(item))

    def build(part) -> dict[str, Any]:
        return {"id": lesson_id, "results": [i for i in part if i is not None],
                "next_cursor": pager.next_offset(offset, len(part), len(rows)),
                "partial": edges.partial, "scanned": edges.scanned, "scan_limit": edges.scan_limit}

    result, _ = fit_page(ctx.budget, items, build)
    return result
