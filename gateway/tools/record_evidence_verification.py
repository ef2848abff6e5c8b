"""Write tool ``record_evidence_verification``: its spec and input and output JSON Schemas (docs/tools.md#record_evidence_verification).

The handler is :func:`gateway.tools.write_common.write_handler` (validation,
operation_id replay, hooks_spec check, conditional save; docs/tools.md#write-semantics).
"""
from __future__ import annotations

from mcp_types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.policy import describe
from gateway.tools.schema_parts import (
    DIGEST_PATTERN, enum, Fields, obj, operation_id, revision_id, string, VERDICTS, WRITE_STATUSES
)
from gateway.tools.write_common import write_handler

__all__ = ["NAME", "SPEC"]

NAME = "record_evidence_verification"


# ------------------------------------------------------------------ schemas
def input_schema(F: Fields) -> dict:
    claim = F.verification_claim_props(F.enum_values("verification_basis", "in"))
    props = {
        "operation_id": operation_id(),
        "lesson_id": F.lesson_id(),
        "evidence_id": F.evidence_id("Id of the evidence that was checked."),
        "expected_revision_id": revision_id("Revision the caller read; the write fails if the Lesson moved on."),
        "expected_evidence_digest": string("Digest of the evidence as the caller read it.", 71,
                                           pattern=DIGEST_PATTERN),
        **claim,
    }
    return obj(props, list(props), "Append one verification record to an evidence.")


def output_schema(F: Fields) -> dict:
    return obj({
        "status": enum("created, or replayed for an exact retry.", WRITE_STATUSES),
        "lesson_id": F.lesson_id(),
        "verification_id": F.verification_id(),
        "evidence_id": F.evidence_id(),
        "current_revision_id": revision_id("Current revision of the Lesson."),
        "current_verdict": enum("Current verdict of the evidence after this record.", VERDICTS),
    }, ["status", "lesson_id", "verification_id", "evidence_id", "current_revision_id", "current_verdict"],
        "Outcome of record_evidence_verification.")


SPEC = ToolSpec(
    name=NAME,
    title='Record evidence verification',
    description=describe(
        """Append one verification record to an evidence item of a Lesson: the source checked (identity, SHA-256, locator, coverage), the outcome (supports, contradicts, inconclusive) and the claim fields it covers. Needs the write token in token mode, expected_revision_id and expected_evidence_digest (from get_lesson). Records are append-only; the latest one per evidence is its current verdict. Carries an operation_id. Returns current_revision_id."""
    ),
    kind='write',
    annotations=ToolAnnotations(
        title='Record evidence verification',
        readOnlyHint=False,
        destructiveHint=False,
        idempotentHint=True,
        openWorldHint=False,
    ),
    input_schema=input_schema,
    output_schema=output_schema,
    handler=write_handler(NAME),
)
