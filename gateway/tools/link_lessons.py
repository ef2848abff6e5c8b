"""Write tool ``link_lessons``: its spec and input and output JSON Schemas (docs/tools.md#link-lessons).

Its :data:`OPERATION` (parse, plan and replay rules as one value) feeds the one write
pipeline, :func:`gateway.tools.write_pipeline.write_handler` (validation, operation_id
replay, hooks_spec check, conditional save; docs/tools.md#write-semantics).
"""
from __future__ import annotations

from typing import Any, Mapping


from gateway.domain.markers import Marker
from gateway.domain.model import LessonSnapshot
from gateway.config.schema import Schema
from gateway.domain.writes import (
    Parsed, Plan, Request, WriteEnv, WriteOperation, WriteRefused, closed, field_value, finish,
    lesson_id_arg, marker_for, touch
)
from gateway.tools.contract import tool_spec
from gateway.tools.policy import describe
from gateway.tools.schema_builders import enum, Fields, obj, operation_id, revision_id, WRITE_STATUSES
from gateway.tools.write_pipeline import write_handler

__all__ = ["NAME", "OPERATION", "SPEC"]

NAME = "link_lessons"


# ------------------------------------------------------------------ operation
def parse(arguments: Mapping[str, Any], op: str, schema: Schema) -> Parsed:
    """Validate and normalise the arguments of ``link_lessons`` (raises WriteRefused ``invalid_argument``)."""
    closed(arguments, {"operation_id", "from", "relation", "to", "note"})
    rel = schema.relation
    values = {"from": lesson_id_arg(arguments, "from", schema=schema), "to": lesson_id_arg(arguments, "to", schema=schema),
              "relation": field_value(arguments, rel, "relation", schema=schema),
              "note": field_value(arguments, rel, "note", schema=schema)}
    lesson_id = values["from"]
    payload = dict(values)
    return Parsed(lesson_id, values, payload)


def plan(request: Request, snapshot: LessonSnapshot | None, env: WriteEnv) -> Plan:
    """Plan the save of ``link_lessons`` (raises WriteRefused; docs/tools.md#link-lessons)."""
    account, now = env.account, env.now
    snap = snapshot
    v = request.values
    if v["to"] == v["from"]:
        raise WriteRefused("invalid_argument", "a Lesson cannot be related to itself", field="to", rule="HS36")
    if v["to"] not in env.exists([v["to"]]):
        raise WriteRefused("not_found", f"target Lesson {v['to']} does not exist", field="to", rule="HS34")
    if any((r.get("from"), r.get("relation"), r.get("to")) == (v["from"], v["relation"], v["to"])
           for r in snap.page.relations):
        raise WriteRefused("rule_violation", f"the relation {v['relation']} to {v['to']} is already stored",
                           field="to", rule="HS35")
    page, stamp = touch(snap, now)
    relation = {"from": v["from"], "relation": v["relation"], "to": v["to"], "note": v["note"],
                "created_by": account, "created_at": stamp}
    page = page.evolve(relations=snap.page.relations + (relation,))
    response = {"from": v["from"], "relation": v["relation"], "to": v["to"]}
    return finish(request, page, f"MCP link_lessons: {v['relation']} -> {v['to']}",
                  marker_for(request, snap.revision_id), snap.revision_id, response, dirty=False,
                  existing=frozenset({v["to"]}), schema=env.schema)


def replay(request: Request, snapshot: LessonSnapshot, prior_marker: Marker, schema: Schema) -> dict[str, Any]:
    """Response fields of an already applied ``link_lessons`` request (docs/tools.md#idempotency-scopes)."""
    v = request.values
    return {"from": v["from"], "relation": v["relation"], "to": v["to"]}


#: This tool's part of the write pipeline (docs/tools.md#link-lessons).
OPERATION = WriteOperation(name=NAME, tag="S3W", kind="link", parse=parse, plan=plan, replay=replay, lesson_field="from")


# ------------------------------------------------------------------ schemas
def input_schema(schema_fields: Fields) -> dict:
    rel = schema_fields.schema.relation
    return obj({
        "operation_id": operation_id(schema_fields),
        "from": schema_fields.lesson_id("Lesson the relation is stored on."),
        "relation": schema_fields.field(rel, "relation", "in"),
        "to": schema_fields.lesson_id("Existing target Lesson."),
        "note": schema_fields.field(rel, "note", "in"),
    }, ["operation_id", "from", "relation", "to"], "Add one typed relation.")


def output_schema(schema_fields: Fields) -> dict:
    rel = schema_fields.schema.relation
    return obj({
        "status": enum("created, or replayed for an exact retry.", WRITE_STATUSES),
        "from": schema_fields.field(rel, "from"),
        "relation": schema_fields.field(rel, "relation"),
        "to": schema_fields.field(rel, "to"),
        "current_revision_id": revision_id("Current revision of the from Lesson."),
    }, ["status", "from", "relation", "to", "current_revision_id"], "Outcome of link_lessons.")


SPEC = tool_spec(NAME, 'Link Lessons', describe(
        """Add one directed relation between two existing Lessons, with an optional note. Duplicate edges are refused."""
    ), 'write', write_handler(OPERATION), input_schema, output_schema)
