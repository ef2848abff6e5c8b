"""Write tool ``link_lessons``: its spec and input and output JSON Schemas (docs/tools.md#link_lessons).

The handler is :func:`gateway.tools.write_common.write_handler` (validation,
operation_id replay, hooks_spec check, conditional save; docs/tools.md#write-semantics).
"""
from __future__ import annotations

from mcp_types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.policy import describe
from gateway.tools.schema_parts import enum, Fields, obj, operation_id, revision_id, WRITE_STATUSES
from gateway.tools.write_common import write_handler

__all__ = ["NAME", "SPEC"]

NAME = "link_lessons"


# ------------------------------------------------------------------ schemas
def input_schema(F: Fields) -> dict:
    rel = F.schema.relation
    return obj({
        "operation_id": operation_id(),
        "from": F.lesson_id("Lesson the relation is stored on."),
        "relation": F.field(rel, "relation", "in"),
        "to": F.lesson_id("Existing target Lesson."),
        "note": F.field(rel, "note", "in"),
    }, ["operation_id", "from", "relation", "to"], "Add one typed relation.")


def output_schema(F: Fields) -> dict:
    rel = F.schema.relation
    return obj({
        "status": enum("created, or replayed for an exact retry.", WRITE_STATUSES),
        "from": F.field(rel, "from"),
        "relation": F.field(rel, "relation"),
        "to": F.field(rel, "to"),
        "current_revision_id": revision_id("Current revision of the from Lesson."),
    }, ["status", "from", "relation", "to", "current_revision_id"], "Outcome of link_lessons.")


SPEC = ToolSpec(
    name=NAME,
    title='Link Lessons',
    description=describe(
        """Add one directed relation between two existing Lessons (supports, contradicts, analogous_to, failed_because, works_when, suggests, supersedes) with an optional note. Needs the write token in token mode. The target must exist and duplicate edges are refused; operation_id makes a retry never add the edge twice. Returns current_revision_id."""
    ),
    kind='write',
    annotations=ToolAnnotations(
        title='Link Lessons',
        readOnlyHint=False,
        destructiveHint=False,
        idempotentHint=True,
        openWorldHint=False,
    ),
    input_schema=input_schema,
    output_schema=output_schema,
    handler=write_handler(NAME),
)
