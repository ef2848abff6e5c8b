"""Write tool ``revise_lesson``: its spec and input and output JSON Schemas (docs/tools.md#revise_lesson).

The handler is :func:`gateway.tools.write_common.write_handler` (validation,
operation_id replay, hooks_spec check, conditional save; docs/tools.md#write-semantics).
"""
from __future__ import annotations

from mcp_types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.policy import describe
from gateway.tools.schema_parts import array, enum, Fields, LIMITS, obj, operation_id, revision_id, string
from gateway.tools.write_common import write_handler

__all__ = ["NAME", "SPEC"]

NAME = "revise_lesson"


# ------------------------------------------------------------------ schemas
def input_schema(F: Fields) -> dict:
    rec = F.schema.lesson
    changes = obj({n: F.field(rec, n, "in") for n in F.changeable_fields()}, (),
                  "New values of the core fields to change.", minProperties=1)
    return obj({
        "operation_id": operation_id(),
        "lesson_id": F.lesson_id(),
        "expected_revision_id": revision_id("Revision the caller read; the write fails if the Lesson moved on."),
        "basis_evidence_ids": array("Evidence already on the Lesson that justifies the change.", F.evidence_id(),
                                    min_items=1, max_items=LIMITS["basis_evidence_max"], unique=True),
        "changes": changes,
        "reason": string("Short human reason for the revision summary. It is not Lesson data: MediaWiki summaries "
                         "hold 500 characters including the gateway's seal, so it is shortened to fit (with …), "
                         "brackets become parentheses and control/format characters become spaces, so it can "
                         "never form a link or a marker. Put anything that must be kept verbatim in the Lesson.",
                         LIMITS["reason_max_length"]),
    }, ["operation_id", "lesson_id", "expected_revision_id", "basis_evidence_ids", "changes"],
        "Change allowed core fields of a Lesson in a new revision.")


def output_schema(F: Fields) -> dict:
    return obj({
        "status": enum("revised, or replayed for an exact retry.", ("revised", "replayed")),
        "lesson_id": F.lesson_id(),
        "applied_revision_id": revision_id("Revision this request created (the original one on replay)."),
        "current_revision_id": revision_id("Latest revision of the Lesson now."),
        "changed_fields": array("Fields whose value actually changed.",
                                {"type": "string", "enum": F.changeable_fields()}, unique=True),
    }, ["status", "lesson_id", "applied_revision_id", "current_revision_id", "changed_fields"],
        "Outcome of revise_lesson.")


SPEC = ToolSpec(
    name=NAME,
    title='Revise Lesson',
    description=describe(
        """Conditionally overwrite core fields of an existing Lesson in a new revision. Needs the write token in token mode, expected_revision_id (the revision you read: a changed Lesson is refused, never auto-merged) and 1-8 basis_evidence_ids already on the Lesson; raising confidence needs supporting verification records. operation_id: an identical retry returns the applied revision instead of revising twice. Returns current_revision_id."""
    ),
    kind='write',
    annotations=ToolAnnotations(
        title='Revise Lesson',
        readOnlyHint=False,
        destructiveHint=True,
        idempotentHint=True,
        openWorldHint=False,
    ),
    input_schema=input_schema,
    output_schema=output_schema,
    handler=write_handler(NAME),
)
