"""Write tool ``create_lesson_draft``: its spec and input and output JSON Schemas (docs/tools.md#create_lesson_draft).

The handler is :func:`gateway.tools.write_common.write_handler` (validation,
operation_id replay, hooks_spec check, conditional save; docs/tools.md#write-semantics).
"""
from __future__ import annotations

from mcp_types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.policy import describe
from gateway.tools.schema_parts import (
    array, enum, Fields, LIMITS, new_evidence_props, obj, operation_id, revision_id, score, WRITE_STATUSES
)
from gateway.tools.write_common import write_handler

__all__ = ["NAME", "SPEC"]

NAME = "create_lesson_draft"


# ------------------------------------------------------------------ schemas
DUPLICATE_STATUSES = ("ok", "skipped", "not_ready", "disabled", "timeout", "saturated", "error")
DUPLICATE_BANDS = ("near_identical", "same_topic")


def input_schema(F: Fields) -> dict:
    rec = F.schema.lesson
    basis = F.schema.enum("verification_basis")
    supporting = [v for v in basis.extra.get("supporting", ()) if v not in basis.extra.get("legacy_only", ())]
    evidence_props = new_evidence_props(F)
    initial_evidence = obj(evidence_props, [n for n in evidence_props
                                            if n != "id" and F.schema.evidence.field(n).required],
                           "The first evidence, stored in the same revision as the Lesson.")
    claim = F.verification_claim_props(supporting)
    initial_verification = obj(claim, list(claim),
                               "Verification of the initial evidence (needed for high confidence), stored in the "
                               "same revision; its basis must equal the evidence's.")
    props: dict[str, dict] = {
        "operation_id": operation_id(),
        "lesson_id": F.lesson_id("Lesson id; derived from the request when omitted."),
    }
    for name in F.changeable_fields():
        props[name] = F.field(rec, name, "in")
    props["initial_evidence"] = initial_evidence
    props["initial_verification"] = initial_verification
    required = ["operation_id", *F.changeable_fields(), "initial_evidence"]
    return obj(props, required, "Create a lab Lesson with its first evidence in one revision.")


def output_schema(F: Fields) -> dict:
    candidate = obj({
        "id": F.lesson_id(),
        "title": F.field(F.schema.lesson, "title"),
        "score": score(),
        "band": enum("How close the existing Lesson is.", DUPLICATE_BANDS),
    }, ["id", "title", "score", "band"], "An existing Lesson that may say the same thing.")
    return obj({
        "status": enum("created, or replayed for an exact retry.", WRITE_STATUSES),
        "id": F.lesson_id(),
        "current_revision_id": revision_id("Current revision of the Lesson."),
        "evidence_ids": array("Ids of the stored evidence.", F.evidence_id()),
        "verification_ids": array("Ids of the stored verification records.", F.verification_id()),
        "duplicate_candidates": obj({
            "status": enum("Whether the duplicate check ran.", DUPLICATE_STATUSES),
            "items": array("Possible duplicates, best first.", candidate,
                           max_items=LIMITS["duplicate_candidates_max"]),
        }, ["status", "items"], "Existing Lessons that look like duplicates (advisory)."),
    }, ["status", "id", "current_revision_id", "evidence_ids", "verification_ids", "duplicate_candidates"],
        "Outcome of create_lesson_draft.")


SPEC = ToolSpec(
    name=NAME,
    title='Create Lesson draft',
    description=describe(
        """Create a Lesson with its initial evidence in one revision (title, question, attempt, context, observation, interpretation, reusable_lesson, applicability, confidence, initial_evidence). Needs the write token in token mode. The server sets author, timestamps, record_origin=lab and the review fields. operation_id makes retries safe: the identical request replays the first result instead of creating a second Lesson; the same id with a different request is an idempotency_conflict. Returns the Lesson id and current_revision_id."""
    ),
    kind='write',
    annotations=ToolAnnotations(
        title='Create Lesson draft',
        readOnlyHint=False,
        destructiveHint=False,
        idempotentHint=True,
        openWorldHint=False,
    ),
    input_schema=input_schema,
    output_schema=output_schema,
    handler=write_handler(NAME),
)
