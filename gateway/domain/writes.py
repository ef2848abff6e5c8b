"""What the MCP writes share, as pure functions and values: requests, plans, operations.

No I/O here. Each write tool module ``gateway/tools/<tool>.py`` supplies a
:class:`WriteOperation` — its marker ``tag``/``kind`` and three rules:
``parse`` (arguments → normalised values and payload), ``plan`` (request +
current page → planned page) and ``replay`` (the answer of an already applied
request). The one write pipeline, ``gateway/tools/write_pipeline.py``, reads
the Lesson, asks :mod:`gateway.domain.idempotency` about the operation_id,
calls the operation's rules, runs the hooks_spec checker on (current,
planned) and saves through ``gateway/wiki/edit.py``.

Shapes (the JSON Schemas in ``schema/tools/`` are generated from the same
schema source; the operations re-check everything so a handler called
directly is just as strict):

* :func:`parse_request(operation, arguments, schema) <parse_request>` → :class:`Request`
  (``lesson_id`` of the page written, normalised ``payload``, request
  ``digest``). Raises :class:`WriteRefused` ``invalid_argument`` naming
  ``field`` and ``rule``.
* ``operation.plan(request, snapshot, env)`` → :class:`Plan` (new page, its
  wikitext, the summary with its marker, the response fields). Raises
  :class:`WriteRefused` (``invalid_argument``, ``rule_violation``,
  ``not_found``, ``revision_conflict``, ``not_configured``).
* ``operation.replay(request, snapshot, prior_marker, schema)`` → the response fields
  of an already applied request.

Every rule reads field definitions, limits and patterns from the
:class:`~gateway.config.schema.Schema` it is handed (the configuration's,
``GatewayConfig.schema``; on :class:`WriteEnv` for plans).

Server-managed values: author/added_by/created_by/verified_by = the gateway
account; created_at = updated_at = now on create; every later write sets
``updated_at`` = max(now, previous + 1 s) and stamps appended records with it
(hooks_spec HS18, :func:`touch`); record_origin ``lab``; review_state
``Draft``; derived ids from :mod:`gateway.domain.ids`.

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
from typing import Any, Callable, Collection, Mapping, NamedTuple, Sequence

from gateway.core.errors import GatewayError
from gateway.domain.codec import serialize_page
from gateway.domain.idempotency import request_digest
from gateway.domain.ids import lesson_id_problem
from gateway.domain.markers import Marker, build_summary
from gateway.domain.model import LessonPage, LessonSnapshot
from gateway.domain.rules import join_list, value_problems
from gateway.config.schema import RecordDef, Schema
from gateway.domain.timestamps import next_updated_at

__all__ = [
    "Parsed", "Plan", "Request", "WriteEnv", "WriteOperation", "WriteRefused",
    "bad", "claim_values", "closed", "core_fields", "evidence_values", "expect_revision", "field_value", "finish",
    "int_arg", "lesson_id_arg", "marker_for", "parse_request", "plain_response", "salt", "string_arg", "touch",
]



class WriteRefused(GatewayError):
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

def bad(field_: str, rule: str, message: str) -> WriteRefused:
    """A :class:`WriteRefused` ``invalid_argument`` naming ``field_`` and ``rule``."""
    return WriteRefused("invalid_argument", message, field=field_, rule=rule)

def closed(args: Mapping[str, Any], allowed: set[str], where: str = "") -> None:
    """Refuse (GW02) any key of ``args`` outside ``allowed``; ``where`` prefixes the field path."""
    for key in args:
        if key not in allowed:
            path = f"{where}.{key}" if where else str(key)
            raise bad(path, "GW02", f"{path} is not accepted (unknown or server-managed field)")

def string_arg(args: Mapping[str, Any], name: str, *, where: str = "", required: bool) -> str:
    """The string argument ``name`` (``""`` when absent and not required); refuses non-strings and lone surrogates."""
    path = f"{where}.{name}" if where else name
    value = args.get(name)
    if value is None:
        if required:
            raise bad(path, "required", f"{path} is required")
        return ""
    if not isinstance(value, str):
        raise bad(path, "type", f"{path} must be a string")
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        raise bad(path, "unicode", f"{path} contains a lone surrogate, which cannot be stored")
    return value

def field_value(args, rec: RecordDef, name: str, *, where: str = "", required: bool | None = None,
                schema: Schema) -> str:
    """The value of field ``name`` of record ``rec``, checked against ``schema`` (length, enum, pattern; HS03 when required and empty)."""
    f = rec.field(name)
    req = f.required if required is None else required
    value = string_arg(args, name, where=where, required=req)
    if req and value == "":
        path = f"{where}.{name}" if where else name
        raise bad(path, "HS03", f"{path} must not be empty")
    for problem in value_problems(rec, f, value, where or None, schema=schema):
        raise bad(problem.field, problem.rule, problem.message)
    return value

def _operation_id(args, schema: Schema) -> str:
    op = string_arg(args, "operation_id", required=True)
    pattern = schema.patterns["operation_id"]
    if not _re.match(pattern, op):
        raise bad("operation_id", "pattern", "operation_id must match " + pattern)
    return op

def int_arg(args, name: str, *, minimum: int = 1) -> int:
    """The integer argument ``name`` (≥ ``minimum``; booleans refused)."""
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(name, "type", f"{name} must be an integer")
    if value < minimum:
        raise bad(name, "minimum", f"{name} must be at least {minimum}")
    return value

def lesson_id_arg(args, name: str, *, required: bool = True, schema: Schema) -> str:
    """The Lesson id argument ``name`` (``meta.id_pattern``, ``meta.id_max_length``; ``""`` when optional and absent);
    refused with the reason :func:`gateway.domain.ids.lesson_id_problem` gives."""
    value = string_arg(args, name, required=required)
    if not value and not required:
        return ""
    problem = lesson_id_problem(value, schema.meta)
    if problem:
        raise bad(name, "pattern", f"{name}: {problem}")
    return value

def _no_legacy_basis(value: str, path: str, schema: Schema) -> None:
    if value in schema.enum("verification_basis").extra.get("legacy_only", ()):
        raise bad(path, "HS27", f"{path} not_recorded is only for legacy evidence; give the range you "
                                 "actually checked (full_text, official_abstract, partial_source, metadata_only)")

def evidence_values(args, where: str, *, id_key: str, schema: Schema) -> dict[str, str]:
    """The client fields of a new evidence in ``args`` (the id under ``id_key``, ``""`` = derive it); legacy-only bases refused (HS27)."""
    ev = schema.evidence
    allowed = {f.name for f in ev.fields if f.client_settable and f.name != "id"} | {id_key}
    closed(args, allowed, where)
    out = {"id": ""}
    raw_id = string_arg(args, id_key, where=where, required=False)
    if raw_id:
        path = f"{where}.{id_key}" if where else id_key
        for problem in value_problems(ev, ev.field("id"), raw_id, schema=schema):
            raise bad(path, problem.rule, f"{path} must be a short id of [a-z0-9_-] (at most "
                                           f"{ev.field('id').max_length} characters)")
        out["id"] = raw_id
    for name in sorted(allowed - {id_key}):
        out[name] = field_value(args, ev, name, where=where, schema=schema)
    _no_legacy_basis(out["verification_basis"], f"{where}.verification_basis" if where else "verification_basis",
                     schema)
    return out

def claim_values(args, where: str, *, allowed_extra: set[str], schema: Schema) -> dict[str, str]:
    """The client part of a verification record in ``args`` (claim_fields joined as stored; HS04, HS27)."""
    vr = schema.verification
    names = [f.name for f in vr.fields if f.client_settable and f.name not in ("evidence_id", "evidence_digest")]
    closed(args, set(names) | allowed_extra, where)
    out: dict[str, str] = {}
    for name in names:
        path = f"{where}.{name}" if where else name
        if name == "claim_fields":
            items = args.get(name)
            if items is None:
                raise bad(path, "required", f"{path} is required")
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise bad(path, "type", f"{path} must be a list of claim field names")
            if not items:
                raise bad(path, "minItems", f"{path} must name at least one claim field")
            if len(set(items)) != len(items):
                raise bad(path, "uniqueItems", f"{path} lists a field twice")
            allowed = schema.enum("claim_field").values
            if any(i not in allowed for i in items):
                raise bad(path, "HS04", f"{path} may only list: {', '.join(allowed)}")
            out[name] = join_list(items, "claim_field", schema)
        else:
            out[name] = field_value(args, vr, name, where=where, schema=schema)
    _no_legacy_basis(out["verification_basis"], f"{where}.verification_basis" if where else "verification_basis",
                     schema)
    return out

def core_fields(schema: Schema) -> list[str]:
    """Lesson fields a client sets on create and changes on revise (``settable = client``)."""
    return [f.name for f in schema.lesson.fields if f.client_settable]


class Parsed(NamedTuple):
    """What an operation's ``parse`` returns: the Lesson written, the validated values, the hashed payload."""

    lesson_id: str
    values: dict[str, Any]
    payload: dict[str, Any]


@dataclass(frozen=True)
class WriteEnv:
    """What a planner may use besides the request and the page: the gateway ``account``, ``now``
    (aware UTC), the seal ``keys`` and ``active_kid``, ``exists(ids) -> ids that exist`` (a wiki read)
    and the ``schema`` the page is written by."""

    account: str
    now: datetime
    keys: Mapping[str, str]
    active_kid: str
    exists: Callable[[Sequence[str]], Collection[str]]
    schema: Schema


def plain_response(status: str, fields: dict[str, Any], current: int, applied: int | None,
                   duplicates: dict[str, Any] | None) -> dict[str, Any]:
    """``{"status", **fields, "current_revision_id"}`` — the answer shape of most writes."""
    return {"status": status, **fields, "current_revision_id": current}


@dataclass(frozen=True)
class WriteOperation:
    """One write tool's part of the write pipeline, as a value (docs/tools.md#write-semantics).

    * ``name`` — the tool name (also hashed into the request digest);
    * ``tag`` / ``kind`` — the summary marker it writes (docs/tools.md#markers);
    * ``parse(arguments, operation_id, schema) -> Parsed``; ``plan(request, snapshot, env) -> Plan``
      (``snapshot`` is ``None`` only for an operation that ``creates``);
      ``replay(request, snapshot, prior_marker, schema) -> fields``; all raise :class:`WriteRefused`;
    * ``respond(status, fields, current, applied, duplicates) -> result`` — the answer's key order;
    * ``creates`` — the page must not exist yet (a taken id is ``lesson_exists``, a conflict too)
      and the duplicate check runs after the save; otherwise a missing page is ``not_found`` on
      ``lesson_field`` and a conflict is ``revision_conflict``;
    * ``success_status`` — ``status`` of a first application (``created`` or ``revised``).
    """

    name: str
    tag: str
    kind: str
    parse: Callable[[Mapping[str, Any], str, Schema], Parsed]
    plan: Callable[["Request", LessonSnapshot | None, WriteEnv], "Plan"]
    replay: Callable[["Request", LessonSnapshot, Marker, Schema], dict[str, Any]]
    respond: Callable[[str, dict[str, Any], int, int | None, dict[str, Any] | None], dict[str, Any]] = plain_response
    creates: bool = False
    lesson_field: str = "lesson_id"
    success_status: str = "created"


# ------------------------------------------------------------------ parse
def parse_request(operation: WriteOperation, arguments: Mapping[str, Any], schema: Schema) -> Request:
    """Validate ``arguments`` of ``operation`` against ``schema`` and normalise them (see module doc)."""
    if not isinstance(arguments, Mapping):
        raise bad("", "type", "arguments must be an object")
    op = _operation_id(arguments, schema)
    parsed = operation.parse(arguments, op, schema)
    return Request(tool=operation.name, tag=operation.tag, kind=operation.kind, operation_id=op,
                   lesson_id=parsed.lesson_id, values=parsed.values, payload=parsed.payload,
                   digest=request_digest(operation.name, parsed.payload))


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

def marker_for(request: Request, parent: int) -> Marker:
    """The summary marker of ``request`` on top of revision ``parent`` (0 for a create)."""
    return Marker(tag=request.tag, parent=parent, op=request.operation_id, kind=request.kind,
                  digest=request.digest[:32])

def touch(snapshot: LessonSnapshot, now: datetime) -> tuple[LessonPage, str]:
    """``snapshot``'s page with ``updated_at`` moved to max(now, previous + 1 s); returns (page, stamp)."""
    stamp = next_updated_at(now, snapshot.page.fields.get("updated_at"))
    return snapshot.page.evolve(fields={**snapshot.page.fields, "updated_at": stamp}), stamp

def finish(request: Request, page: LessonPage, human: str, marker: Marker, base: int | None,
           response: dict, dirty: bool, existing: frozenset[str] | None = None, *, schema: Schema) -> Plan:
    """The :class:`Plan` for ``page``: serialised by ``schema`` (salted when ``base`` is set) with its summary
    and response fields."""
    text = serialize_page(page, schema)
    if base is not None:
        text = salt(text, request.digest)
    return Plan(request=request, page=page, wikitext=text, summary=build_summary(human, marker, schema),
                base_revision_id=base, response=response, dirty=dirty, existing_lessons=existing)

def expect_revision(request: Request, snapshot: LessonSnapshot) -> None:
    """Refuse (GW03 ``revision_conflict``) when the Lesson is not at the request's ``expected_revision_id``."""
    expected = request.values["expected_revision_id"]
    if snapshot.revision_id != expected:
        raise WriteRefused(
            "revision_conflict",
            f"Lesson {request.lesson_id} is at revision {snapshot.revision_id}, not {expected}: read it again "
            "with get_lesson and recompute the change",
            rule="GW03", details={"current_revision_id": snapshot.revision_id},
        )
