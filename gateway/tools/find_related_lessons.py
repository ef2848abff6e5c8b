"""Read tool ``find_related_lessons``: its spec, input and output JSON Schemas, and its handler (docs/tools.md#find-related-lessons).

Input: ``id``, ``relation_types`` (default all), ``direction``
(``outgoing`` | ``incoming`` | ``both``, default both), ``limit``, ``cursor``.

Edges come from :meth:`LessonRepository.find_relation_edges` — outgoing from
the Lesson's own page, incoming through the wiki's link tables (or SMW
``ask``) without reading every Lesson; ``partial``/``scanned``/``scan_limit``
report that bounded scan. Symmetric types (``analogous_to``) are shown from
both ends: such an edge matches either direction filter, while ``from``/``to``
and ``direction`` keep the stored orientation and ``symmetric`` is true. A
symmetric pair stored on both pages (A→B and B→A) is listed once, as the
requested Lesson's own (outgoing) copy (docs/data-contract.md#relations). Each
result names the OTHER Lesson (``id``) with its current title ("" when that
Lesson no longer exists). Order: outgoing edges in page order, then incoming
ones by source id; offset cursor bound to (id, types, direction).
"""
from __future__ import annotations

from typing import Any


from gateway.core.errors import ToolError
from gateway.tools.contract import ToolContext, tool_spec
from gateway.tools.policy import describe
from gateway.retrieval.request import DEFAULT_LIMIT
from gateway.tools.read_path import fit_page, Pager, read_tool, repository
from gateway.tools.read_items import standings, symmetric_relations, unmirrored
from gateway.tools.schema_builders import (
    array, cursor, DIRECTIONS, enum, Fields, next_cursor, obj, page_limit, scan_props, standing_out,
    STANDING_MAX
)

__all__ = ["NAME", "SPEC"]

NAME = "find_related_lessons"
SCAN_LIMIT = 500


@read_tool
def handle(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run ``find_related_lessons`` (see module doc)."""
    repo = repository(ctx)
    lesson_id = arguments["id"]
    schema = ctx.schema
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

    outgoing = [e for e in edges.outgoing if wanted(e.relation, "outgoing")]
    rows = [(e, "outgoing", e.target) for e in outgoing]
    rows += [(e, "incoming", e.source) for e in sorted(unmirrored(outgoing, edges.incoming, symmetric),
                                                       key=lambda e: e.source) if wanted(e.relation, "incoming")]
    pager = Pager(ctx, NAME, {"id": lesson_id, "types": sorted(types), "direction": direction})
    offset = pager.offset(arguments.get("cursor"))
    window = rows[offset:offset + limit]
    snaps = repo.get_snapshots([other for _, _, other in window])
    corrections = standings(repo, snaps, STANDING_MAX)
    fix = ctx.shapes.conformer(NAME, "results", "[]")
    items = []
    for edge, stored, other in window:
        item = {"id": other, "title": snaps[other].page.fields.get("title", "") if other in snaps else "",
                "relation": edge.relation, "direction": stored, "from": edge.source, "to": edge.target,
                "symmetric": edge.relation in symmetric}
        if edge.note:
            item["note"] = edge.note
        if other in corrections:
            item["standing"] = corrections[other]
        items.append(fix.fix(item))

    def build(part) -> dict[str, Any]:
        return {"id": lesson_id, "results": [i for i in part if i is not None],
                "next_cursor": pager.next_offset(offset, len(part), len(rows)),
                "partial": edges.partial, "scanned": edges.scanned, "scan_limit": edges.scan_limit}

    result, _ = fit_page(ctx.budget, items, build)
    return result


# ------------------------------------------------------------------ schemas
def input_schema(schema_fields: Fields) -> dict:
    return obj({
        "id": schema_fields.lesson_id(),
        "relation_types": array("Only these relation types (default: all).",
                                schema_fields.field(schema_fields.schema.relation, "relation"), min_items=1, unique=True),
        "direction": enum("Which stored edges to follow.", ("outgoing", "incoming", "both"), default="both"),
        "limit": page_limit(schema_fields, "Results per page."),
        "cursor": cursor(schema_fields),
    }, ["id"], "List Lessons linked to a Lesson by stored relations.")


def output_schema(schema_fields: Fields) -> dict:
    rel = schema_fields.schema.relation
    result = obj({
        "id": schema_fields.lesson_id("Id of the related Lesson."),
        "title": schema_fields.field(schema_fields.schema.lesson, "title"),
        "relation": schema_fields.field(rel, "relation"),
        "direction": enum("outgoing or incoming, seen from the requested Lesson.", DIRECTIONS),
        "from": schema_fields.field(rel, "from"),
        "to": schema_fields.field(rel, "to"),
        "note": schema_fields.field(rel, "note"),
        "symmetric": {"description": "True for relation types shown in both directions.", "type": "boolean"},
        "standing": standing_out(schema_fields),
    }, ["id", "title", "relation", "direction", "from", "to", "symmetric"], "One related Lesson.")
    return obj({
        "id": schema_fields.lesson_id("The requested Lesson."),
        "results": array("Related Lessons.", result, max_items=schema_fields.limits["page_max"]),
        "next_cursor": next_cursor(schema_fields),
        **scan_props(),
    }, ["id", "results", "next_cursor", "partial", "scanned", "scan_limit"], "Related Lessons.")


SPEC = tool_spec(NAME, 'Find related Lessons', describe(
        """List one Lesson's stored relations, by type and direction, as a cursor page. analogous_to is symmetric (listed once)."""
    ), 'read', handle, input_schema, output_schema)
