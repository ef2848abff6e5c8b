"""Write tool ``attach_evidence``: its spec and input and output JSON Schemas (docs/tools.md#attach-evidence).

Its :data:`OPERATION` (parse, plan and replay rules as one value) feeds the one write
pipeline, :func:`gateway.tools.write_pipeline.write_handler` (validation, operation_id
replay, hooks_spec check, conditional save; docs/tools.md#write-semantics).
"""
from __future__ import annotations

from typing import Any, Mapping


from gateway.config.schema import Schema
from gateway.domain.digests import evidence_digest
from gateway.domain.ids import derive_evidence_id
from gateway.domain.markers import Marker
from gateway.domain.model import LessonSnapshot
from gateway.domain.writes import (
    Parsed, Plan, Request, WriteEnv, WriteOperation, WriteRefused, evidence_values, finish, lesson_id_arg,
    marker_for, touch
)
from gateway.tools.contract import tool_spec
from gateway.tools.policy import describe
from gateway.tools.schema_builders import (
    enum, Fields, new_evidence_props, obj, operation_id, revision_id, string, WRITE_STATUSES
)
from gateway.tools.write_pipeline import write_handler

__all__ = ["NAME", "OPERATION", "SPEC"]

NAME = "attach_evidence"


# ------------------------------------------------------------------ operation
def _attach_id(request: Request) -> str:
    return request.values["evidence"]["id"] or derive_evidence_id(request.operation_id, "attach")


def parse(arguments: Mapping[str, Any], op: str, schema: Schema) -> Parsed:
    """Validate and normalise the arguments of ``attach_evidence`` (raises WriteRefused ``invalid_argument``)."""
    values = {"lesson_id": lesson_id_arg(arguments, "lesson_id", schema=schema)}
    rest = {k: v for k, v in arguments.items() if k not in ("operation_id", "lesson_id")}
    values["evidence"] = evidence_values(rest, "", id_key="evidence_id", schema=schema)
    lesson_id = values["lesson_id"]
    payload = {"lesson_id": lesson_id, "evidence": values["evidence"]}
    return Parsed(lesson_id, values, payload)


def plan(request: Request, snapshot: LessonSnapshot | None, env: WriteEnv) -> Plan:
    """Plan the save of ``attach_evidence`` (raises WriteRefused; docs/tools.md#attach-evidence)."""
    account, now = env.account, env.now
    snap = snapshot
    ev_id = _attach_id(request)
    if snap.page.evidence_by_id(ev_id) is not None:
        raise WriteRefused("rule_violation", f"evidence id {ev_id} is already used on this Lesson",
                           field="evidence_id", rule="HS24")
    page, stamp = touch(snap, now)
    evidence = {**request.values["evidence"], "id": ev_id, "added_by": account, "added_at": stamp}
    page = page.evolve(evidence=snap.page.evidence + (evidence,))
    response = {"lesson_id": request.lesson_id, "evidence_id": ev_id, "evidence_digest": evidence_digest(evidence, env.schema)}
    return finish(request, page, f"MCP attach_evidence {ev_id}", marker_for(request, snap.revision_id),
                  snap.revision_id, response, dirty=False, schema=env.schema)


def replay(request: Request, snapshot: LessonSnapshot, prior_marker: Marker, schema: Schema) -> dict[str, Any]:
    """Response fields of an already applied ``attach_evidence`` request (docs/tools.md#idempotency-scopes)."""
    ev_id = _attach_id(request)
    stored = snapshot.page.evidence_by_id(ev_id)
    if stored is None:
        raise WriteRefused("malformed_lesson", "this request was applied earlier but its evidence is no longer "
                           "on the Lesson (edited outside the gateway); the auditor reports it")
    return {"lesson_id": request.lesson_id, "evidence_id": ev_id, "evidence_digest": evidence_digest(stored, schema)}


#: This tool's part of the write pipeline (docs/tools.md#attach-evidence).
OPERATION = WriteOperation(name=NAME, tag="S3W", kind="evidence", parse=parse, plan=plan, replay=replay)


# ------------------------------------------------------------------ schemas
def input_schema(schema_fields: Fields) -> dict:
    ev = new_evidence_props(schema_fields)
    props = {"operation_id": operation_id(schema_fields), "lesson_id": schema_fields.lesson_id(),
             "evidence_id": ev.pop("id")}
    props.update(ev)
    required = ["operation_id", "lesson_id"] + [n for n in ev if schema_fields.schema.evidence.field(n).required]
    return obj(props, required, "Attach one evidence to an existing Lesson.")


def output_schema(schema_fields: Fields) -> dict:
    return obj({
        "status": enum("created, or replayed for an exact retry.", WRITE_STATUSES),
        "lesson_id": schema_fields.lesson_id(),
        "evidence_id": schema_fields.evidence_id(),
        "evidence_digest": string("Digest of the stored evidence.", 71, pattern=schema_fields.patterns["digest"]),
        "current_revision_id": revision_id("Current revision of the Lesson."),
    }, ["status", "lesson_id", "evidence_id", "evidence_digest", "current_revision_id"],
        "Outcome of attach_evidence.")


SPEC = tool_spec(NAME, 'Attach evidence', describe(
        """Append one evidence item to a Lesson; it returns the evidence digest."""
    ), 'write', write_handler(OPERATION), input_schema, output_schema)
