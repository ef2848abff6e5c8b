"""Write tool ``revise_lesson``: its spec and input and output JSON Schemas (docs/tools.md#revise-lesson).

Its :data:`OPERATION` (parse, plan and replay rules as one value) feeds the one write
pipeline, :func:`gateway.tools.write_pipeline.write_handler` (validation, operation_id
replay, hooks_spec check, conditional save; docs/tools.md#write-semantics).
"""
from __future__ import annotations

from typing import Any, Mapping


from gateway.domain.confidence import revision_problems
from gateway.domain.markers import Marker
from gateway.domain.model import LessonSnapshot
from gateway.config.schema import Schema
from gateway.domain.seals import SealError, make_seal
from gateway.domain.writes import (
    Parsed, Plan, Request, WriteEnv, WriteOperation, WriteRefused, bad, closed, core_fields,
    expect_revision, field_value, finish, int_arg, lesson_id_arg, string_arg, touch
)
from gateway.tools.contract import tool_spec
from gateway.tools.policy import describe
from gateway.tools.schema_builders import (
    array, duplicate_candidates_out, embedding_truncated_out, enum, Fields, obj, operation_id, revision_id, string
)
from gateway.tools.write_pipeline import write_handler

__all__ = ["NAME", "OPERATION", "SPEC"]

NAME = "revise_lesson"


# ------------------------------------------------------------------ operation
def parse(arguments: Mapping[str, Any], op: str, schema: Schema) -> Parsed:
    """Validate and normalise the arguments of ``revise_lesson`` (raises WriteRefused ``invalid_argument``)."""
    closed(arguments, {"operation_id", "lesson_id", "expected_revision_id", "basis_evidence_ids", "changes",
                       "reason"})
    values = {"lesson_id": lesson_id_arg(arguments, "lesson_id", schema=schema),
              "expected_revision_id": int_arg(arguments, "expected_revision_id"),
              "reason": string_arg(arguments, "reason", required=False)}
    if len(values["reason"]) > schema.limits["reason_max_length"]:
        raise bad("reason", "maxLength", f"reason is longer than {schema.limits['reason_max_length']} characters")
    basis = arguments.get("basis_evidence_ids")
    if not isinstance(basis, list) or not all(isinstance(b, str) for b in basis):
        raise bad("basis_evidence_ids", "required" if basis is None else "type",
                  "basis_evidence_ids must be a list of evidence ids already on the Lesson")
    if not 1 <= len(basis) <= schema.limits["basis_evidence_max"]:
        raise bad("basis_evidence_ids", "GW05",
                  f"basis_evidence_ids must name 1 to {schema.limits['basis_evidence_max']} evidence ids")
    if len(set(basis)) != len(basis):
        raise bad("basis_evidence_ids", "uniqueItems", "basis_evidence_ids lists an id twice")
    for i, b in enumerate(basis):
        field_value({"evidence_id": b}, schema.verification, "evidence_id", where=f"basis_evidence_ids[{i}]",
                    schema=schema)
    values["basis_evidence_ids"] = list(basis)
    changes = arguments.get("changes")
    if not isinstance(changes, Mapping):
        raise bad("changes", "required" if changes is None else "type", "changes must be an object")
    if not changes:
        raise bad("changes", "minProperties", "changes must name at least one field")
    closed(changes, set(core_fields(schema)), "changes")
    values["changes"] = {name: field_value(changes, schema.lesson, name, where="changes", required=True, schema=schema)
                         for name in core_fields(schema) if name in changes}
    lesson_id = values["lesson_id"]
    payload = {"lesson_id": lesson_id, "expected_revision_id": values["expected_revision_id"],
               "basis_evidence_ids": sorted(values["basis_evidence_ids"]), "changes": values["changes"],
               "reason": values["reason"]}
    return Parsed(lesson_id, values, payload)


def plan(request: Request, snapshot: LessonSnapshot | None, env: WriteEnv) -> Plan:
    """Plan the save of ``revise_lesson`` (raises WriteRefused; docs/tools.md#revise-lesson)."""
    account, now = env.account, env.now
    snap = snapshot
    keys, active_kid = env.keys, env.active_kid
    v = request.values
    expect_revision(request, snap)
    schema = env.schema
    legacy = set(schema.enum("verification_basis").extra.get("legacy_only", ()))
    basis = []
    for i, eid in enumerate(v["basis_evidence_ids"]):
        evidence = snap.page.evidence_by_id(eid)
        if evidence is None:
            raise WriteRefused("invalid_argument", f"basis evidence {eid} is not on Lesson {request.lesson_id}; "
                               "attach it first", field=f"basis_evidence_ids[{i}]", rule="GW05")
        basis.append(evidence)
    if all(e.get("verification_basis") in legacy for e in basis):
        raise WriteRefused("rule_violation", "a revise needs at least one basis evidence whose "
                           "verification_basis is not not_recorded", field="basis_evidence_ids", rule="GW07")
    changed = [n for n in schema.lesson.field_names
               if n in v["changes"] and v["changes"][n] != snap.page.fields.get(n, "")]
    if not changed:
        raise WriteRefused("invalid_argument", "the requested values equal the current ones; nothing to revise",
                           field="changes", rule="GW08")
    page, _ = touch(snap, now)
    page = page.evolve(fields={**page.fields, **{n: v["changes"][n] for n in changed}})
    problems = revision_problems(snap.page, page, evidence_ids=v["basis_evidence_ids"], schema=schema)
    if problems:
        raise WriteRefused("rule_violation", problems[0].message, field="basis_evidence_ids", rule=problems[0].rule,
                           details={"rules": [p.rule for p in problems]})
    try:
        seal = make_seal(keys=keys, active_kid=active_kid, lesson_id=request.lesson_id, account=account,
                         op=request.operation_id, request_digest=request.digest, basis_ids=v["basis_evidence_ids"],
                         fields=tuple(changed), parent=snap.revision_id, page=page,
                         schema=schema)
    except SealError as exc:
        raise WriteRefused("not_configured", f"revise_lesson is unavailable on this server: {exc}") from None
    human = "MCP revise_lesson: " + (v["reason"] or ", ".join(changed))
    response = {"lesson_id": request.lesson_id, "changed_fields": changed}
    return finish(request, page, human, seal, snap.revision_id, response, dirty=True, schema=schema)


def replay(request: Request, snapshot: LessonSnapshot, prior_marker: Marker, schema: Schema) -> dict[str, Any]:
    """Response fields of an already applied ``revise_lesson`` request (docs/tools.md#idempotency-scopes)."""
    return {"lesson_id": request.lesson_id, "changed_fields": list(prior_marker.fields)}


def respond(status: str, fields: dict[str, Any], current: int, applied: int | None,
            duplicates: dict[str, Any] | None) -> dict[str, Any]:
    """The revise answer: the plain shape plus ``applied_revision_id`` (the original revision on replay) and,
    when the revision changed embedded text, ``duplicate_candidates`` (as on create)."""
    out = {"status": status, **fields, "applied_revision_id": applied if applied is not None else current,
           "current_revision_id": current}
    if duplicates is not None:
        out["duplicate_candidates"] = duplicates
    return out


#: This tool's part of the write pipeline (docs/tools.md#revise-lesson).
OPERATION = WriteOperation(name=NAME, tag="S3R", kind="revise", parse=parse, plan=plan, replay=replay, respond=respond, success_status="revised")


# ------------------------------------------------------------------ schemas
def input_schema(schema_fields: Fields) -> dict:
    rec = schema_fields.schema.lesson
    # each field means what create_lesson_draft's same field says: described there once
    fields = {n: {k: v for k, v in schema_fields.field(rec, n, "in").items() if k != "description"}
              for n in schema_fields.changeable_fields()}
    changes = obj(fields, (), "New values of the fields to change (see create_lesson_draft).",
                  minProperties=1)
    return obj({
        "operation_id": operation_id(schema_fields),
        "lesson_id": schema_fields.lesson_id(),
        "expected_revision_id": revision_id("Revision you read; refused if the Lesson changed since."),
        "basis_evidence_ids": array("Evidence on the Lesson that justifies the change.", schema_fields.evidence_id(),
                                    min_items=1, max_items=schema_fields.schema.limits["basis_evidence_max"], unique=True),
        "changes": changes,
        "reason": string("Edit summary (not Lesson data; shortened and sanitised).",
                         schema_fields.schema.limits["reason_max_length"]),
    }, ["operation_id", "lesson_id", "expected_revision_id", "basis_evidence_ids", "changes"],
        "Change allowed core fields of a Lesson in a new revision.")


def output_schema(schema_fields: Fields) -> dict:
    return obj({
        "status": enum("revised, or replayed for an exact retry.", ("revised", "replayed")),
        "lesson_id": schema_fields.lesson_id(),
        "applied_revision_id": revision_id("Revision this request created (the original one on replay)."),
        "current_revision_id": revision_id("Latest revision of the Lesson now."),
        "changed_fields": array("Fields whose value actually changed.",
                                {"type": "string", "enum": schema_fields.changeable_fields()}, unique=True),
        "duplicate_candidates": duplicate_candidates_out(schema_fields),
        "embedding_truncated": embedding_truncated_out(schema_fields),
    }, ["status", "lesson_id", "applied_revision_id", "current_revision_id", "changed_fields"],
        "Outcome of revise_lesson.")


SPEC = tool_spec(NAME, 'Revise Lesson', describe(
        """Overwrite fields of a Lesson in a new revision, only if it is still at expected_revision_id (never merged). basis_evidence_ids must be on the Lesson; raising confidence needs supporting verification records. Returns duplicate_candidates when the new text comes near another Lesson."""
    ), 'write', write_handler(OPERATION), input_schema, output_schema, destructive=True)
