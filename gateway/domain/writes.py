"""The five MCP writes as pure functions: request → validated request → planned page.

No I/O here. ``gateway/tools/write_common.py`` reads the Lesson, asks
:mod:`gateway.domain.idempotency` about the operation_id, calls the planner
below, runs the hooks_spec checker on (current, planned) and saves through
``gateway/wiki/edit.py``.

Shapes (the JSON Schemas in ``schema/tools/`` are generated from the same
schema source; this module re-checks everything so a handler called directly
is just as strict):

* :func:`parse_request(tool, arguments) <parse_request>` → :class:`Request`
  (``lesson_id`` of the page written, normalised ``payload``, request
  ``digest``). Raises :class:`WriteRefused` ``invalid_argument`` naming
  ``field`` and ``rule``.
* ``plan_<tool>(request, snapshot, *, account, now, …)`` → :class:`Plan` (new
  page, its wikitext, the summary with its marker, the response fields).
  Raises :class:`WriteRefused` (``invalid_argument``, ``rule_violation``,
  ``not_found``, ``revision_conflict``, ``not_configured``).
* :func:`replay_response` → the response fields of an already applied request.

Server-managed values: author/added_by/created_by/verified_by = the gateway
account; created_at = updated_at = now on create; every later write sets
``updated_at`` = max(now, previous + 1 s) and stamps appended records with it
(hooks_spec HS18); record_origin ``lab``; review_state ``Draft``; derived ids
from :mod:`gateway.domain.ids`.

Conflict salt: every update appends 1 + 20 spaces/tabs (derived from the
request digest) to the ``|updated_at=`` line. MediaWiki and the codec trim
parameter values, so the stored value is unchanged, but two different writes
from one base now differ on that line even within the same second, so
MediaWiki's three-way merge always conflicts instead of merging them
(docs/consistency.md).

Contract: ``docs/tools.md#write-semantics`` and the write tools' sections of
``docs/tools.md``; the page data in ``docs/data-contract.md``; rule ids in
``hooks_spec/rules.md``.
"""
from __future__ import annotations

import hashlib
import re as _re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

from gateway.domain.codec import serialize_page
from gateway.domain.confidence import create_problem, revision_problems
from gateway.domain.digests import evidence_digest
from gateway.domain.idempotency import request_digest
from gateway.domain.ids import derive_evidence_id, derive_lesson_id, derive_verification_id
from gateway.domain.markers import Marker, build_summary
from gateway.domain.model import LessonPage, LessonSnapshot
from gateway.domain.rules import join_list, value_problems
from gateway.domain.schema import RecordDef, load_schema
from gateway.domain.seals import SealError, make_seal
from gateway.domain.timestamps import format_ts, next_updated_at
from gateway.domain.verdicts import current_verdict

__all__ = ["WriteRefused", "Request", "Plan", "TOOLS", "parse_request", "plan", "replay_response", "salt"]

#: tool → (marker tag, kind)
TOOLS = {
    "create_lesson_draft": ("S3W", "create"),
    "link_lessons": ("S3W", "link"),
    "attach_evidence": ("S3W", "evidence"),
    "record_evidence_verification": ("S3V", "verify"),
    "revise_lesson": ("S3R", "revise"),
}
#: Tool limits and value patterns from schema/lesson.toml (``[limits]``, ``[patterns]``).
LIMITS = load_schema().limits
OPERATION_ID_PATTERN = load_schema().patterns["operation_id"]
_OP = _re.compile(OPERATION_ID_PATTERN)


class WriteRefused(Exception):
    """A write that must not happen; nothing was written.

    ``code`` (``invalid_argument``, ``rule_violation``, ``not_found``,
    ``revision_conflict``, ``not_configured``), a ``message`` for the agent,
    optional ``field`` (argument path) and ``rule`` (hooks_spec/GW id or JSON
    Schema keyword), ``details`` (small JSON object).
    """

    def __init__(self, code: str, message: str, *, field: str | None = None, rule: str | None = None,
                 details: dict | None = None):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.field, self.rule, self.details = code, message, field, rule, details


@dataclass(frozen=True)
class Request:
    """A validated write request.

    ``values`` holds the validated arguments (strings, lists, ints);
    ``payload`` the normalised request hashed into ``digest``.
    """

    tool: str
    tag: str
    kind: str
    operation_id: str
    lesson_id: str
    values: dict[str, Any]
    payload: dict[str, Any]
    digest: str


@dataclass(frozen=True)
class Plan:
    """A planned save: new ``page`` and ``wikitext``, ``summary`` (with marker), ``base_revision_id``
    (None = create), the tool's response fields except ``status``/``current_revision_id``, and
    ``dirty`` (True after a create or a core-content revise: the semantic index hint fires)."""

    request: Request
    page: LessonPage
    wikitext: str
    summary: str
    base_revision_id: int | None
    response: dict[str, Any]
    dirty: bool
    existing_lessons: frozenset[str] | None = field(default=None)


# ------------------------------------------------------------------ argument checks
def _bad(field_: str, rule: str, message: str) -> WriteRefused:
    return WriteRefused("invalid_argument", message, field=field_, rule=rule)


def _closed(args: Mapping[str, Any], allowed: set[str], where: str = "") -> None:
    for key in args:
        if key not in allowed:
            path = f"{where}.{key}" if where else str(key)
            raise _bad(path, "GW02", f"{path} is not accepted (unknown or server-managed field)")


def _string(args: Mapping[str, Any], name: str, *, where: str = "", required: bool) -> str:
    path = f"{where}.{name}" if where else name
    value = args.get(name)
    if value is None:
        if required:
            raise _bad(path, "required", f"{path} is required")
        return ""
    if not isinstance(value, str):
        raise _bad(path, "type", f"{path} must be a string")
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        raise _bad(path, "unicode", f"{path} contains a lone surrogate, which cannot be stored")
    return value


def _field_value(args, rec: RecordDef, name: str, *, where: str = "", required: bool | None = None) -> str:
    f = rec.field(name)
    req = f.required if required is None else required
    value = _string(args, name, where=where, required=req)
    if req and value == "":
        path = f"{where}.{name}" if where else name
        raise _bad(path, "HS03", f"{path} must not be empty")
    for problem in value_problems(rec, f, value, where or None):
        raise _bad(problem.field, problem.rule, problem.message)
    return value


def _operation_id(args) -> str:
    op = _string(args, "operation_id", required=True)
    if not _OP.match(op):
        raise _bad("operation_id", "pattern", "operation_id must match " + OPERATION_ID_PATTERN)
    return op


def _int(args, name: str, *, minimum: int = 1) -> int:
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(name, "type", f"{name} must be an integer")
    if value < minimum:
        raise _bad(name, "minimum", f"{name} must be at least {minimum}")
    return value


def _lesson_id(args, name: str, *, required: bool = True) -> str:
    value = _string(args, name, required=required)
    if not value and not required:
        return ""
    meta = load_schema().meta
    if not _re.fullmatch(meta["id_pattern"], value) or len(value) > int(meta["id_max_length"]):
        raise _bad(name, "pattern", f"{name} must be a Lesson id ([a-z0-9_-], at most {meta['id_max_length']} "
                                    "characters, without the Lesson: prefix)")
    return value


def _no_legacy_basis(value: str, path: str) -> None:
    if value in load_schema().enum("verification_basis").extra.get("legacy_only", ()):
        raise _bad(path, "HS27", f"{path} not_recorded is only for legacy evidence; give the range you "
                                 "actually checked (full_text, official_abstract, partial_source, metadata_only)")


def _evidence_values(args, where: str, *, id_key: str) -> dict[str, str]:
    ev = load_schema().evidence
    allowed = {f.name for f in ev.fields if f.client_settable and f.name != "id"} | {id_key}
    _closed(args, allowed, where)
    out = {"id": ""}
    raw_id = _string(args, id_key, where=where, required=False)
    if raw_id:
        path = f"{where}.{id_key}" if where else id_key
        for problem in value_problems(ev, ev.field("id"), raw_id):
            raise _bad(path, problem.rule, f"{path} must be a short id of [a-z0-9_-] (at most "
                                           f"{ev.field('id').max_length} characters)")
        out["id"] = raw_id
    for name in sorted(allowed - {id_key}):
        out[name] = _field_value(args, ev, name, where=where)
    _no_legacy_basis(out["verification_basis"], f"{where}.verification_basis" if where else "verification_basis")
    return out


def _claims(args, where: str, *, allowed_extra: set[str]) -> dict[str, str]:
    vr = load_schema().verification
    names = [f.name for f in vr.fields if f.client_settable and f.name not in ("evidence_id", "evidence_digest")]
    _closed(args, set(names) | allowed_extra, where)
    out: dict[str, str] = {}
    for name in names:
        path = f"{where}.{name}" if where else name
        if name == "claim_fields":
            items = args.get(name)
            if items is None:
                raise _bad(path, "required", f"{path} is required")
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise _bad(path, "type", f"{path} must be a list of claim field names")
            if not items:
                raise _bad(path, "minItems", f"{path} must name at least one claim field")
            if len(set(items)) != len(items):
                raise _bad(path, "uniqueItems", f"{path} lists a field twice")
            allowed = load_schema().enum("claim_field").values
            if any(i not in allowed for i in items):
                raise _bad(path, "HS04", f"{path} may only list: {', '.join(allowed)}")
            out[name] = join_list(items, "claim_field")
        else:
            out[name] = _field_value(args, vr, name, where=where)
    _no_legacy_basis(out["verification_basis"], f"{where}.verification_basis" if where else "verification_basis")
    return out


def _core_fields() -> list[str]:
    return [f.name for f in load_schema().lesson.fields if f.client_settable]


# ------------------------------------------------------------------ parse
def parse_request(tool: str, arguments: Mapping[str, Any]) -> Request:
    """Validate ``arguments`` of write ``tool`` and normalise them (see module doc)."""
    if tool not in TOOLS:
        raise ValueError(f"{tool} is not a write tool")
    if not isinstance(arguments, Mapping):
        raise _bad("", "type", "arguments must be an object")
    op = _operation_id(arguments)
    tag, kind = TOOLS[tool]
    schema = load_schema()
    if tool == "create_lesson_draft":
        core = _core_fields()
        _closed(arguments, {"operation_id", "lesson_id", "initial_evidence", "initial_verification", *core})
        values: dict[str, Any] = {name: _field_value(arguments, schema.lesson, name) for name in core}
        given_id = _lesson_id(arguments, "lesson_id", required=False)
        evidence_arg = arguments.get("initial_evidence")
        if not isinstance(evidence_arg, Mapping):
            raise _bad("initial_evidence", "required" if evidence_arg is None else "type",
                       "initial_evidence is required: the Lesson is stored with its first evidence")
        values["initial_evidence"] = _evidence_values(evidence_arg, "initial_evidence", id_key="id")
        ver = arguments.get("initial_verification")
        if ver is not None and not isinstance(ver, Mapping):
            raise _bad("initial_verification", "type", "initial_verification must be an object")
        values["initial_verification"] = _claims(ver, "initial_verification", allowed_extra=set()) if ver else None
        lesson_id = given_id or derive_lesson_id(values["title"], op)
        payload = {"lesson_id": given_id, **{n: values[n] for n in core},
                   "initial_evidence": values["initial_evidence"],
                   "initial_verification": values["initial_verification"]}
    elif tool == "link_lessons":
        _closed(arguments, {"operation_id", "from", "relation", "to", "note"})
        rel = schema.relation
        values = {"from": _lesson_id(arguments, "from"), "to": _lesson_id(arguments, "to"),
                  "relation": _field_value(arguments, rel, "relation"),
                  "note": _field_value(arguments, rel, "note")}
        lesson_id = values["from"]
        payload = dict(values)
    elif tool == "attach_evidence":
        values = {"lesson_id": _lesson_id(arguments, "lesson_id")}
        rest = {k: v for k, v in arguments.items() if k not in ("operation_id", "lesson_id")}
        values["evidence"] = _evidence_values(rest, "", id_key="evidence_id")
        lesson_id = values["lesson_id"]
        payload = {"lesson_id": lesson_id, "evidence": values["evidence"]}
    elif tool == "record_evidence_verification":
        fixed = {"operation_id", "lesson_id", "evidence_id", "expected_revision_id", "expected_evidence_digest"}
        values = {"lesson_id": _lesson_id(arguments, "lesson_id"),
                  "evidence_id": _field_value(arguments, schema.verification, "evidence_id"),
                  "expected_revision_id": _int(arguments, "expected_revision_id"),
                  "expected_evidence_digest": _field_value(
                      {"evidence_digest": _string(arguments, "expected_evidence_digest", required=True)},
                      schema.verification, "evidence_digest")}
        rest = {k: v for k, v in arguments.items() if k not in fixed}
        values["claims"] = _claims(rest, "", allowed_extra=set())
        lesson_id = values["lesson_id"]
        payload = {k: values[k] for k in ("lesson_id", "evidence_id", "expected_revision_id",
                                          "expected_evidence_digest")} | {"claims": values["claims"]}
    else:  # revise_lesson
        _closed(arguments, {"operation_id", "lesson_id", "expected_revision_id", "basis_evidence_ids", "changes",
                            "reason"})
        values = {"lesson_id": _lesson_id(arguments, "lesson_id"),
                  "expected_revision_id": _int(arguments, "expected_revision_id"),
                  "reason": _string(arguments, "reason", required=False)}
        if len(values["reason"]) > LIMITS["reason_max_length"]:
            raise _bad("reason", "maxLength", f"reason is longer than {LIMITS['reason_max_length']} characters")
        basis = arguments.get("basis_evidence_ids")
        if not isinstance(basis, list) or not all(isinstance(b, str) for b in basis):
            raise _bad("basis_evidence_ids", "required" if basis is None else "type",
                       "basis_evidence_ids must be a list of evidence ids already on the Lesson")
        if not 1 <= len(basis) <= LIMITS["basis_evidence_max"]:
            raise _bad("basis_evidence_ids", "GW05",
                       f"basis_evidence_ids must name 1 to {LIMITS['basis_evidence_max']} evidence ids")
        if len(set(basis)) != len(basis):
            raise _bad("basis_evidence_ids", "uniqueItems", "basis_evidence_ids lists an id twice")
        for i, b in enumerate(basis):
            _field_value({"evidence_id": b}, schema.verification, "evidence_id", where=f"basis_evidence_ids[{i}]")
        values["basis_evidence_ids"] = list(basis)
        changes = arguments.get("changes")
        if not isinstance(changes, Mapping):
            raise _bad("changes", "required" if changes is None else "type", "changes must be an object")
        if not changes:
            raise _bad("changes", "minProperties", "changes must name at least one field")
        _closed(changes, set(_core_fields()), "changes")
        values["changes"] = {name: _field_value(changes, schema.lesson, name, where="changes", required=True)
                             for name in _core_fields() if name in changes}
        lesson_id = values["lesson_id"]
        payload = {"lesson_id": lesson_id, "expected_revision_id": values["expected_revision_id"],
                   "basis_evidence_ids": sorted(values["basis_evidence_ids"]), "changes": values["changes"],
                   "reason": values["reason"]}
    return Request(tool=tool, tag=tag, kind=kind, operation_id=op, lesson_id=lesson_id, values=values,
                   payload=payload, digest=request_digest(tool, payload))


# ------------------------------------------------------------------ plan helpers
#: Spaces/tabs in the conflict salt: 2**SALT_BITS patterns, so two different writes from one base
#: in the same second collide with probability 2**-SALT_BITS (then edit.py's post-check still catches it).
SALT_BITS = 20


def salt(wikitext: str, digest: str) -> str:
    """Append the conflict salt (a space + SALT_BITS spaces/tabs from ``digest``) to the ``|updated_at=`` line."""
    bits = int(hashlib.sha256(("salt:" + digest).encode()).hexdigest()[:8], 16)
    tail = " " + "".join("\t" if bits >> i & 1 else " " for i in range(SALT_BITS))
    lines = wikitext.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("|updated_at="):
            lines[i] = line.rstrip(" \t") + tail
            break
    return "\n".join(lines)


def _marker(request: Request, parent: int) -> Marker:
    return Marker(tag=request.tag, parent=parent, op=request.operation_id, kind=request.kind,
                  digest=request.digest[:32])


def _update(snapshot: LessonSnapshot, now: datetime) -> tuple[LessonPage, str]:
    stamp = next_updated_at(now, snapshot.page.fields.get("updated_at"))
    return snapshot.page.evolve(fields={**snapshot.page.fields, "updated_at": stamp}), stamp


def _finish(request: Request, page: LessonPage, human: str, marker: Marker, base: int | None,
            response: dict, dirty: bool, existing: frozenset[str] | None = None) -> Plan:
    text = serialize_page(page)
    if base is not None:
        text = salt(text, request.digest)
    return Plan(request=request, page=page, wikitext=text, summary=build_summary(human, marker),
                base_revision_id=base, response=response, dirty=dirty, existing_lessons=existing)


def _require_snapshot(request: Request, snapshot: LessonSnapshot | None) -> LessonSnapshot:
    if snapshot is None:
        field_ = "from" if request.tool == "link_lessons" else "lesson_id"
        raise WriteRefused("not_found", f"Lesson {request.lesson_id} does not exist", field=field_)
    return snapshot


def _expect_revision(request: Request, snapshot: LessonSnapshot) -> None:
    expected = request.values["expected_revision_id"]
    if snapshot.revision_id != expected:
        raise WriteRefused(
            "revision_conflict",
            f"Lesson {request.lesson_id} is at revision {snapshot.revision_id}, not {expected}: read it again "
            "with get_lesson and recompute the change",
            rule="GW03", details={"current_revision_id": snapshot.revision_id},
        )


# ------------------------------------------------------------------ planners
def plan(request: Request, snapshot: LessonSnapshot | None, *, account: str, now: datetime,
         target_exists: bool | None = None, keys: Mapping[str, str] | None = None, active_kid: str = "") -> Plan:
    """Plan the save of ``request`` on ``snapshot`` (None when the page does not exist).

    ``target_exists`` is needed for link_lessons, ``keys``/``active_kid`` for
    revise_lesson. Raises :class:`WriteRefused`.
    """
    tool = request.tool
    if tool == "create_lesson_draft":
        return _plan_create(request, account=account, now=now)
    snap = _require_snapshot(request, snapshot)
    if tool == "link_lessons":
        return _plan_link(request, snap, account=account, now=now, target_exists=bool(target_exists))
    if tool == "attach_evidence":
        return _plan_evidence(request, snap, account=account, now=now)
    if tool == "record_evidence_verification":
        return _plan_verify(request, snap, account=account, now=now)
    return _plan_revise(request, snap, account=account, now=now, keys=keys or {}, active_kid=active_kid)


def _ids_of_create(request: Request) -> tuple[str, str | None]:
    ev_id = request.values["initial_evidence"]["id"] or derive_evidence_id(request.operation_id, "initial")
    vr_id = derive_verification_id(request.operation_id, "initial") if request.values["initial_verification"] else None
    return ev_id, vr_id


def _plan_create(request: Request, *, account: str, now: datetime) -> Plan:
    v = request.values
    stamp = format_ts(now)
    fields = {name: v[name] for name in _core_fields()}
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
        verifications = ({**claims, "id": vr_id, "evidence_id": ev_id, "evidence_digest": evidence_digest(evidence),
                          "verified_by": account, "verified_at": stamp},)
    page = LessonPage(fields=fields, evidence=(evidence,), verifications=verifications)
    problem = create_problem(page)
    if problem:
        raise WriteRefused("rule_violation", problem.message + "; send initial_verification or use a lower "
                           "confidence", field="confidence", rule=problem.rule)
    response = {"id": request.lesson_id, "evidence_ids": [ev_id], "verification_ids": [vr_id] if vr_id else []}
    return _finish(request, page, "MCP create_lesson_draft", _marker(request, 0), None, response, dirty=True)


def _plan_link(request: Request, snap: LessonSnapshot, *, account: str, now: datetime, target_exists: bool) -> Plan:
    v = request.values
    if v["to"] == v["from"]:
        raise WriteRefused("invalid_argument", "a Lesson cannot be related to itself", field="to", rule="HS36")
    if not target_exists:
        raise WriteRefused("not_found", f"target Lesson {v['to']} does not exist", field="to", rule="HS34")
    if any((r.get("from"), r.get("relation"), r.get("to")) == (v["from"], v["relation"], v["to"])
           for r in snap.page.relations):
        raise WriteRefused("rule_violation", f"the relation {v['relation']} to {v['to']} is already stored",
                           field="to", rule="HS35")
    page, stamp = _update(snap, now)
    relation = {"from": v["from"], "relation": v["relation"], "to": v["to"], "note": v["note"],
                "created_by": account, "created_at": stamp}
    page = page.evolve(relations=snap.page.relations + (relation,))
    response = {"from": v["from"], "relation": v["relation"], "to": v["to"]}
    return _finish(request, page, f"MCP link_lessons: {v['relation']} -> {v['to']}",
                   _marker(request, snap.revision_id), snap.revision_id, response, dirty=False,
                   existing=frozenset({v["to"]}))


def _attach_id(request: Request) -> str:
    return request.values["evidence"]["id"] or derive_evidence_id(request.operation_id, "attach")


def _plan_evidence(request: Request, snap: LessonSnapshot, *, account: str, now: datetime) -> Plan:
    ev_id = _attach_id(request)
    if snap.page.evidence_by_id(ev_id) is not None:
        raise WriteRefused("rule_violation", f"evidence id {ev_id} is already used on this Lesson",
                           field="evidence_id", rule="HS24")
    page, stamp = _update(snap, now)
    evidence = {**request.values["evidence"], "id": ev_id, "added_by": account, "added_at": stamp}
    page = page.evolve(evidence=snap.page.evidence + (evidence,))
    response = {"lesson_id": request.lesson_id, "evidence_id": ev_id, "evidence_digest": evidence_digest(evidence)}
    return _finish(request, page, f"MCP attach_evidence {ev_id}", _marker(request, snap.revision_id),
                   snap.revision_id, response, dirty=False)


def _plan_verify(request: Request, snap: LessonSnapshot, *, account: str, now: datetime) -> Plan:
    v = request.values
    _expect_revision(request, snap)
    evidence = snap.page.evidence_by_id(v["evidence_id"])
    if evidence is None:
        raise WriteRefused("not_found", f"evidence {v['evidence_id']} is not on Lesson {request.lesson_id}",
                           field="evidence_id", rule="HS28")
    digest = evidence_digest(evidence)
    if v["expected_evidence_digest"] != digest:
        raise WriteRefused("rule_violation", "expected_evidence_digest does not match the evidence as stored; "
                           "read it again with get_lesson", field="expected_evidence_digest", rule="GW04",
                           details={"current_evidence_digest": digest})
    vr_id = derive_verification_id(request.operation_id, "record")
    if any(r.get("id") == vr_id for r in snap.page.verifications):
        raise WriteRefused("rule_violation", "derived verification id already used; use a new operation_id",
                           field="operation_id", rule="HS25")
    page, stamp = _update(snap, now)
    record = {**v["claims"], "id": vr_id, "evidence_id": v["evidence_id"], "evidence_digest": digest,
              "verified_by": account, "verified_at": stamp}
    page = page.evolve(verifications=snap.page.verifications + (record,))
    response = {"lesson_id": request.lesson_id, "verification_id": vr_id, "evidence_id": v["evidence_id"],
                "current_verdict": current_verdict(page, v["evidence_id"]).verdict}
    return _finish(request, page, f"MCP record_evidence_verification {v['evidence_id']}: {v['claims']['outcome']}",
                   _marker(request, snap.revision_id), snap.revision_id, response, dirty=False)


def _plan_revise(request: Request, snap: LessonSnapshot, *, account: str, now: datetime,
                 keys: Mapping[str, str], active_kid: str) -> Plan:
    v = request.values
    _expect_revision(request, snap)
    legacy = set(load_schema().enum("verification_basis").extra.get("legacy_only", ()))
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
    changed = [n for n in load_schema().lesson.field_names
               if n in v["changes"] and v["changes"][n] != snap.page.fields.get(n, "")]
    if not changed:
        raise WriteRefused("invalid_argument", "the requested values equal the current ones; nothing to revise",
                           field="changes", rule="GW08")
    page, _ = _update(snap, now)
    page = page.evolve(fields={**page.fields, **{n: v["changes"][n] for n in changed}})
    problems = revision_problems(snap.page, page, evidence_ids=v["basis_evidence_ids"])
    if problems:
        raise WriteRefused("rule_violation", problems[0].message, field="basis_evidence_ids", rule=problems[0].rule,
                           details={"rules": [p.rule for p in problems]})
    try:
        seal = make_seal(keys=keys, active_kid=active_kid, lesson_id=request.lesson_id, account=account,
                         op=request.operation_id, request_digest=request.digest, basis_ids=v["basis_evidence_ids"],
                         fields=tuple(changed), parent=snap.revision_id, page=page)
    except SealError as exc:
        raise WriteRefused("not_configured", f"revise_lesson is unavailable on this server: {exc}") from None
    human = "MCP revise_lesson: " + (v["reason"] or ", ".join(changed))
    response = {"lesson_id": request.lesson_id, "changed_fields": changed}
    return _finish(request, page, human, seal, snap.revision_id, response, dirty=True)


# ------------------------------------------------------------------ replay
def replay_response(request: Request, snapshot: LessonSnapshot, prior_marker: Marker) -> dict[str, Any]:
    """Response fields (without status/current_revision_id) of an already applied ``request``."""
    v = request.values
    page = snapshot.page
    if request.tool == "create_lesson_draft":
        ev_id, vr_id = _ids_of_create(request)
        return {"id": request.lesson_id, "evidence_ids": [ev_id], "verification_ids": [vr_id] if vr_id else []}
    if request.tool == "link_lessons":
        return {"from": v["from"], "relation": v["relation"], "to": v["to"]}
    if request.tool == "attach_evidence":
        ev_id = _attach_id(request)
        stored = page.evidence_by_id(ev_id)
        digest = evidence_digest(stored) if stored is not None else ""
        return {"lesson_id": request.lesson_id, "evidence_id": ev_id, "evidence_digest": digest}
    if request.tool == "record_evidence_verification":
        return {"lesson_id": request.lesson_id, "verification_id": derive_verification_id(request.operation_id,
                                                                                          "record"),
                "evidence_id": v["evidence_id"], "current_verdict": current_verdict(page, v["evidence_id"]).verdict}
    return {"lesson_id": request.lesson_id, "changed_fields": list(prior_marker.fields)}
