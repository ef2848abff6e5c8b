"""Write tool ``record_evidence_verification``: its spec and input and output JSON Schemas (docs/tools.md#record-evidence-verification).

Its :data:`OPERATION` (parse, plan and replay rules as one value) feeds the one write
pipeline, :func:`gateway.tools.write_pipeline.write_handler` (validation, operation_id
replay, hooks_spec check, conditional save; docs/tools.md#write-semantics).
"""
from __future__ import annotations

from typing import Any, Mapping


from gateway.domain.digests import evidence_digest
from gateway.domain.ids import derive_verification_id
from gateway.domain.markers import Marker
from gateway.domain.model import LessonSnapshot
from gateway.config.schema import Schema
from gateway.domain.verdicts import current_verdict
from gateway.domain.writes import (
    Parsed, Plan, Request, WriteEnv, WriteOperation, WriteRefused, claim_values, expect_revision,
    field_value, finish, int_arg, lesson_id_arg, marker_for, string_arg, touch
)
from gateway.tools.contract import tool_spec
from gateway.tools.policy import describe
from gateway.tools.schema_builders import (
    enum, Fields, obj, operation_id, revision_id, string, VERDICTS, WRITE_STATUSES
)
from gateway.tools.write_pipeline import write_handler

__all__ = ["NAME", "OPERATION", "SPEC"]

NAME = "record_evidence_verification"


# ------------------------------------------------------------------ operation
def parse(arguments: Mapping[str, Any], op: str, schema: Schema) -> Parsed:
    """Validate and normalise the arguments of ``record_evidence_verification`` (raises WriteRefused ``invalid_argument``)."""
    fixed = {"operation_id", "lesson_id", "evidence_id", "expected_revision_id", "expected_evidence_digest"}
    values = {"lesson_id": lesson_id_arg(arguments, "lesson_id", schema=schema),
              "evidence_id": field_value(arguments, schema.verification, "evidence_id", schema=schema),
              "expected_revision_id": int_arg(arguments, "expected_revision_id"),
              "expected_evidence_digest": field_value(
                  {"evidence_digest": string_arg(arguments, "expected_evidence_digest", required=True)},
                  schema.verification, "evidence_digest", schema=schema)}
    rest = {k: v for k, v in arguments.items() if k not in fixed}
    values["claims"] = claim_values(rest, "", allowed_extra=set(), schema=schema)
    lesson_id = values["lesson_id"]
    payload = {k: values[k] for k in ("lesson_id", "evidence_id", "expected_revision_id",
                                      "expected_evidence_digest")} | {"claims": values["claims"]}
    return Parsed(lesson_id, values, payload)


def plan(request: Request, snapshot: LessonSnapshot | None, env: WriteEnv) -> Plan:
    """Plan the save of ``record_evidence_verification`` (raises WriteRefused; docs/tools.md#record-evidence-verification)."""
    account, now = env.account, env.now
    snap = snapshot
    v = request.values
    expect_revision(request, snap)
    evidence = snap.page.evidence_by_id(v["evidence_id"])
    if evidence is None:
        raise WriteRefused("not_found", f"evidence {v['evidence_id']} is not on Lesson {request.lesson_id}",
                           field="evidence_id", rule="HS28")
    digest = evidence_digest(evidence, env.schema)
    if v["expected_evidence_digest"] != digest:
        raise WriteRefused("rule_violation", "expected_evidence_digest does not match the evidence as stored; "
                           "read it again with get_lesson", field="expected_evidence_digest", rule="GW04",
                           details={"current_evidence_digest": digest})
    vr_id = derive_verification_id(request.operation_id, "record")
    if any(r.get("id") == vr_id for r in snap.page.verifications):
        raise WriteRefused("rule_violation", "derived verification id already used; use a new operation_id",
                           field="operation_id", rule="HS25")
    page, stamp = touch(snap, now)
    record = {**v["claims"], "id": vr_id, "evidence_id": v["evidence_id"], "evidence_digest": digest,
              "verified_by": account, "verified_at": stamp}
    page = page.evolve(verifications=snap.page.verifications + (record,))
    response = {"lesson_id": request.lesson_id, "verification_id": vr_id, "evidence_id": v["evidence_id"],
                "current_verdict": current_verdict(page, v["evidence_id"]).verdict}
    return finish(request, page, f"MCP record_evidence_verification {v['evidence_id']}: {v['claims']['outcome']}",
                  marker_for(request, snap.revision_id), snap.revision_id, response, dirty=False,
                  schema=env.schema)


def replay(request: Request, snapshot: LessonSnapshot, prior_marker: Marker, schema: Schema) -> dict[str, Any]:
    """Response fields of an already applied ``record_evidence_verification`` request (docs/tools.md#idempotency-scopes)."""
    v = request.values
    return {"lesson_id": request.lesson_id, "verification_id": derive_verification_id(request.operation_id, "record"),
            "evidence_id": v["evidence_id"], "current_verdict": current_verdict(snapshot.page, v["evidence_id"]).verdict}


#: This tool's part of the write pipeline (docs/tools.md#record-evidence-verification).
OPERATION = WriteOperation(name=NAME, tag="S3V", kind="verify", parse=parse, plan=plan, replay=replay)


# ------------------------------------------------------------------ schemas
def input_schema(schema_fields: Fields) -> dict:
    claim = schema_fields.verification_claim_props(schema_fields.enum_values("verification_basis", "in"))
    props = {
        "operation_id": operation_id(schema_fields),
        "lesson_id": schema_fields.lesson_id(),
        "evidence_id": schema_fields.evidence_id("Id of the evidence that was checked."),
        "expected_revision_id": revision_id("Revision you read; refused if the Lesson changed since."),
        "expected_evidence_digest": string("Digest of the evidence as the caller read it.", 71,
                                           pattern=schema_fields.patterns["digest"]),
        **claim,
    }
    return obj(props, list(props), "Append one verification record to an evidence.")


def output_schema(schema_fields: Fields) -> dict:
    return obj({
        "status": enum("created, or replayed for an exact retry.", WRITE_STATUSES),
        "lesson_id": schema_fields.lesson_id(),
        "verification_id": schema_fields.verification_id(),
        "evidence_id": schema_fields.evidence_id(),
        "current_revision_id": revision_id("Current revision of the Lesson."),
        "current_verdict": enum("Current verdict of the evidence after this record.", VERDICTS),
    }, ["status", "lesson_id", "verification_id", "evidence_id", "current_revision_id", "current_verdict"],
        "Outcome of record_evidence_verification.")


SPEC = tool_spec(NAME, 'Record evidence verification', describe(
        """Append one verification record to an evidence item. expected_revision_id and expected_evidence_digest come from get_lesson. The latest record per evidence is its current verdict."""
    ), 'write', write_handler(OPERATION), input_schema, output_schema)
