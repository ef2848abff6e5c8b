"""Write tool ``attach_evidence``: its spec and input and output JSON Schemas (docs/tools.md#attach_evidence).

The handler is :func:`gateway.tools.write_common.write_handler` (validation,
operation_id replay, hooks_spec check, conditional save; docs/tools.md#write-semantics).
"""
from __future__ import annotations

from mcp_types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.policy import describe
from gateway.tools.schema_parts import (
    DIGEST_PATTERN, enum, Fields, new_evidence_props, obj, operation_id, revision_id, string, WRITE_STATUSES
)
from gateway.tools.write_common import write_handler

__all__ = ["NAME", "SPEC"]

NAME = "attach_evidence"


# ------------------------------------------------------------------ schemas
def input_schema(F: Fields) -> dict:
    ev = new_evidence_props(F)
    props = {"operation_id": operation_id(), "lesson_id": F.lesson_id(),
             "evidence_id": ev.pop("id")}
    props.update(ev)
    required = ["operation_id", "lesson_id"] + [n for n in ev if F.schema.evidence.field(n).required]
    return obj(props, required, "Attach one evidence to an existing Lesson.")


def output_schema(F: Fields) -> dict:
    return obj({
        "status": enum("created, or replayed for an exact retry.", WRITE_STATUSES),
        "lesson_id": F.lesson_id(),
        "evidence_id": F.evidence_id(),
        "evidence_digest": string("Digest of the stored evidence.", 71, pattern=DIGEST_PATTERN),
        "current_revision_id": revision_id("Current revision of the Lesson."),
    }, ["status", "lesson_id", "evidence_id", "evidence_digest", "current_revision_id"],
        "Outcome of attach_evidence.")


SPEC = ToolSpec(
    name=NAME,
    title='Attach evidence',
    description=describe(
        """Append one evidence item (citation, optional url, kind, verification_basis, note) to an existing Lesson. Needs the write token in token mode. The evidence id derives from the request and operation_id makes a retried call a no-op. Returns the evidence id, its digest and current_revision_id."""
    ),
    kind='write',
    annotations=ToolAnnotations(
        title='Attach evidence',
        readOnlyHint=False,
        destructiveHint=False,
        idempotentHint=True,
        openWorldHint=False,
    ),
    input_schema=input_schema,
    output_schema=output_schema,
    handler=write_handler(NAME),
)
