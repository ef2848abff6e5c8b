"""Write tool ``create_lesson_draft``: its spec and input and output JSON Schemas (docs/tools.md#create-lesson-draft).

Its :data:`OPERATION` (parse, plan and replay rules as one value) feeds the one write
pipeline, :func:`gateway.tools.write_pipeline.write_handler` (validation, operation_id
replay, hooks_spec check, conditional save; docs/tools.md#write-semantics).
"""
from __future__ import annotations

from typing import Any, Mapping


from gateway.domain.confidence import create_problem
from gateway.domain.digests import evidence_digest
from gateway.domain.ids import derive_evidence_id, derive_lesson_id, derive_verification_id
from gateway.domain.markers import Marker
from gateway.domain.model import LessonPage, LessonSnapshot
from gateway.config.schema import Schema
from gateway.domain.timestamps import format_ts
from gateway.domain.writes import (
    Parsed, Plan, Request, WriteEnv, WriteOperation, WriteRefused, bad, claim_values, closed, core_fields,
    evidence_values, field_value, finish, lesson_id_arg, marker_for
)
from gateway.tools.contract import tool_spec
from gateway.tools.policy import describe
from gateway.tools.schema_builders import (
    array, duplicate_candidates_out, embedding_truncated_out, enum, Fields, new_evidence_props, obj, operation_id, revision_id, score,
    WRITE_STATUSES,
)
from gateway.tools.write_pipeline import write_handler

__all__ = ["NAME", "OPERATION", "SPEC"]

NAME = "create_lesson_draft"


# ------------------------------------------------------------------ operation
def _ids_of_create(request: Request) -> tuple[str, str | None]:
    ev_id = request.values["initial_evidence"]["id"] or derive_evidence_id(request.operation_id, "initial")
    vr_id = derive_verification_id(request.operation_id, "initial") if request.values["initial_verification"] else None
    return ev_id, vr_id


def parse(arguments: Mapping[str, Any], op: str, schema: Schema) -> Parsed:
    """Validate and normalise the arguments of ``create_lesson_draft`` (raises WriteRefused ``invalid_argument``)."""
    core = core_fields(schema)
    closed(arguments, {"operation_id", "lesson_id", "initial_evidence", "initial_verification", *core})
    values: dict[str, Any] = {name: field_value(arguments, schema.lesson, name, schema=schema) for name in core}
    given_id = lesson_id_arg(arguments, "lesson_id", required=False, schema=schema)
    evidence_arg = arguments.get("initial_evidence")
    if not isinstance(evidence_arg, Mapping):
        raise bad("initial_evidence", "required" if evidence_arg is None else "type",
                  "initial_evidence is required: the Lesson is stored with its first evidence")
    values["initial_evidence"] = evidence_values(evidence_arg, "initial_evidence", id_key="id", schema=schema)
    ver = arguments.get("initial_verification")
    if ver is not None and not isinstance(ver, Mapping):
        raise bad("initial_verification", "type", "initial_verification must be an object")
    values["initial_verification"] = claim_values(ver, "initial_verification", allowed_extra=set(), schema=schema) if ver else None
    lesson_id = given_id or derive_lesson_id(values["title"], op)
    payload = {"lesson_id": given_id, **{n: values[n] for n in core},
               "initial_evidence": values["initial_evidence"],
               "initial_verification": values["initial_verification"]}
    return Parsed(lesson_id, values, payload)


def plan(request: Request, snapshot: LessonSnapshot | None, env: WriteEnv) -> Plan:
    """Plan the save of ``create_lesson_draft`` (raises WriteRefused; docs/tools.md#create-lesson-draft)."""
    account, now = env.account, env.now
    v = request.values
    stamp = format_ts(now)
    fields = {name: v[name] for name in core_fields(env.schema)}
    fields.update({"record_origin": "lab", "author": account, "reviewer": "", "review_state": "Draft",
                   "created_at": stamp, "updated_at": stamp})
    ev_id, vr_id = _ids_of_create(request)
    evidence = {**v["initial_evidence"], "id": ev_id, "added_by": account, "added_at": stamp}
    verifications: tuple[dict[str, str], ...] = ()
    if v["initial_verification"]:
        claims = v["initial_verification"]
        if claims["verification_basis"] != evidence["verification_basis"]:
            raise WriteRefused("invalid_argument", "initial_verification.verification_basis must equal "
                               "initial_evidence.verification_basis (the same source, checked the same way)",
                               field="initial_verification.verification_basis", rule="HS31")
        verifications = ({**claims, "id": vr_id, "evidence_id": ev_id, "evidence_digest": evidence_digest(evidence, env.schema),
                          "verified_by": account, "verified_at": stamp},)
    page = LessonPage(fields=fields, evidence=(evidence,), verifications=verifications)
    problem = create_problem(page, env.schema)
    if problem:
        raise WriteRefused("rule_violation", problem.message + "; send initial_verification or use a lower "
                           "confidence", field="confidence", rule=problem.rule)
    response = {"id": request.lesson_id, "evidence_ids": [ev_id], "verification_ids": [vr_id] if vr_id else []}
    return finish(request, page, "MCP create_lesson_draft", marker_for(request, 0), None, response, dirty=True,
                  schema=env.schema)


def replay(request: Request, snapshot: LessonSnapshot, prior_marker: Marker, schema: Schema) -> dict[str, Any]:
    """Response fields of an already applied ``create_lesson_draft`` request (docs/tools.md#idempotency-scopes)."""
    ev_id, vr_id = _ids_of_create(request)
    return {"id": request.lesson_id, "evidence_ids": [ev_id], "verification_ids": [vr_id] if vr_id else []}


def respond(status: str, fields: dict[str, Any], current: int, applied: int | None,
            duplicates: dict[str, Any] | None) -> dict[str, Any]:
    """The create answer: ``status, id, current_revision_id, evidence_ids, verification_ids, duplicate_candidates``."""
    return {"status": status, "id": fields["id"], "current_revision_id": current,
            "evidence_ids": fields["evidence_ids"], "verification_ids": fields["verification_ids"],
            "duplicate_candidates": duplicates or {"status": "skipped", "items": []}}


#: This tool's part of the write pipeline (docs/tools.md#create-lesson-draft).
OPERATION = WriteOperation(name=NAME, tag="S3W", kind="create", parse=parse, plan=plan, replay=replay, respond=respond, creates=True)


# ------------------------------------------------------------------ schemas


def input_schema(schema_fields: Fields) -> dict:
    rec = schema_fields.schema.lesson
    basis = schema_fields.schema.enum("verification_basis")
    supporting = [v for v in basis.extra.get("supporting", ()) if v not in basis.extra.get("legacy_only", ())]
    evidence_props = new_evidence_props(schema_fields)
    initial_evidence = obj(evidence_props, [n for n in evidence_props
                                            if n != "id" and schema_fields.schema.evidence.field(n).required],
                           "First evidence, stored with the Lesson.")
    claim = schema_fields.verification_claim_props(supporting)
    initial_verification = obj(claim, list(claim),
                               "Verification of initial_evidence (needed for high confidence), same basis.")
    props: dict[str, dict] = {
        "operation_id": operation_id(schema_fields),
        "lesson_id": schema_fields.lesson_id("Derived from the request when omitted."),
    }
    for name in schema_fields.changeable_fields():
        props[name] = schema_fields.field(rec, name, "in")
    props["initial_evidence"] = initial_evidence
    props["initial_verification"] = initial_verification
    required = ["operation_id", *schema_fields.changeable_fields(), "initial_evidence"]
    return obj(props, required, "Create a lab Lesson with its first evidence in one revision.")


def output_schema(schema_fields: Fields) -> dict:
    return obj({
        "status": enum("created, or replayed for an exact retry.", WRITE_STATUSES),
        "id": schema_fields.lesson_id(),
        "current_revision_id": revision_id("Current revision of the Lesson."),
        "evidence_ids": array("Ids of the stored evidence.", schema_fields.evidence_id()),
        "verification_ids": array("Ids of the stored verification records.", schema_fields.verification_id()),
        "duplicate_candidates": duplicate_candidates_out(schema_fields),
        "embedding_truncated": embedding_truncated_out(schema_fields),
    }, ["status", "id", "current_revision_id", "evidence_ids", "verification_ids", "duplicate_candidates"],
        "Outcome of create_lesson_draft.")


SPEC = tool_spec(NAME, 'Create Lesson draft', describe(
        """Create a Lesson with its first evidence in one revision; the server sets author, timestamps and record_origin=lab."""
    ), 'write', write_handler(OPERATION), input_schema, output_schema)
