"""JSON Schemas (draft 2020-12) of the ten MCP tools, built from the schema source.

This module is the ONE place where tool shapes are written down. Every string
length, enum and id pattern that also exists in ``schema/lesson.toml`` is taken
from the loaded :class:`~gateway.domain.schema.Schema`, so it is never typed
twice. ``s3rm schema generate`` writes the result to
``schema/tools/<tool>.input.schema.json`` and ``…output.schema.json``; the
gateway's tool registry loads those files (DESIGN.md §3, "The ten MCP tools").

Conventions (all enforced by tests/test_generate.py):

* every object is closed (``additionalProperties: false``) and lists ``required``;
* every property carries a ``description``;
* inputs add ``minLength: 1`` to required strings; outputs never do (legacy pages
  may hold empty optional values);
* new evidence and verification records never accept the legacy-only
  ``verification_basis`` values (``not_recorded``), outputs accept all values.

To change a shape, edit the matching ``_<tool>_input`` / ``_<tool>_output``
function below; the API limits live in :data:`LIMITS`.
"""
from __future__ import annotations

from typing import Any, Callable

from gateway.domain.schema import FieldDef, RecordDef, Schema, load_schema

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "https://s3rm.invalid/schema/tools/"
GENERATED_COMMENT = "Generated from schema/lesson.toml by `s3rm schema generate` (sync/toolschemas.py); do not edit."

#: API limits and value patterns: ``[limits]`` / ``[patterns]`` of schema/lesson.toml (docs/tools.md#output-limits).
LIMITS: dict[str, int] = load_schema().limits
OPERATION_ID_PATTERN = load_schema().patterns["operation_id"]
DIGEST_PATTERN = load_schema().patterns["digest"]
SHA256_PATTERN = load_schema().patterns["sha256"]

RETRIEVAL_MODES = ("legacy", "hybrid_v1")
SEMANTIC_STATUSES = ("disabled", "building", "ready", "stale", "degraded", "unavailable")
SEARCH_BASES = ("full_text", "lexical", "stored_relation", "semantic_similarity", "hybrid", "listing")
ANALOGY_BASES = ("stored_relation", "lexical", "semantic_similarity", "hybrid")
VERDICTS = ("supports", "contradicts", "inconclusive", "none", "ambiguous")
DIRECTIONS = ("outgoing", "incoming")
WRITE_STATUSES = ("created", "replayed")
AUDIT_STATUSES = ("ok", "missing", "mismatch")
AUDIT_EXPECTATIONS = ("revision_id", "content_digest", "evidence_ids", "relations")
DUPLICATE_STATUSES = ("ok", "skipped", "not_ready", "disabled", "timeout", "saturated", "error")
DUPLICATE_BANDS = ("near_identical", "same_topic")

#: The ten tools in the order DESIGN.md §3 lists them.
TOOL_NAMES = (
    "search_lessons", "get_lesson", "audit_lessons", "find_related_lessons", "find_analogies",
    "create_lesson_draft", "link_lessons", "attach_evidence", "record_evidence_verification",
    "revise_lesson",
)


# --------------------------------------------------------------------------- building blocks

def obj(properties: dict[str, dict], required: tuple[str, ...] | list[str] = (), description: str | None = None,
        **extra: Any) -> dict:
    """A closed JSON object schema (``additionalProperties: false``).

    ``required`` names must be keys of ``properties`` (ValueError otherwise).
    """
    missing = [r for r in required if r not in properties]
    if missing:
        raise ValueError(f"required names without a property: {missing}")
    out: dict[str, Any] = {"type": "object"}
    if description:
        out["description"] = description
    out["properties"] = properties
    out["required"] = list(required)
    out["additionalProperties"] = False
    out.update(extra)
    return out


def desc(schema: dict, description: str) -> dict:
    """Copy of ``schema`` with ``description`` set (placed first for readability)."""
    out = {"description": description}
    out.update({k: v for k, v in schema.items() if k != "description"})
    return out


def string(description: str, max_length: int | None = None, *, pattern: str | None = None,
           min_length: int | None = None, **extra: Any) -> dict:
    """A string schema with optional bounds and pattern."""
    out: dict[str, Any] = {"description": description, "type": "string"}
    if min_length is not None:
        out["minLength"] = min_length
    if max_length is not None:
        out["maxLength"] = max_length
    if pattern is not None:
        out["pattern"] = pattern
    out.update(extra)
    return out


def integer(description: str, minimum: int | None = None, maximum: int | None = None, **extra: Any) -> dict:
    """An integer schema with optional inclusive bounds."""
    out: dict[str, Any] = {"description": description, "type": "integer"}
    if minimum is not None:
        out["minimum"] = minimum
    if maximum is not None:
        out["maximum"] = maximum
    out.update(extra)
    return out


def enum(description: str, values, **extra: Any) -> dict:
    """A string enum schema."""
    return {"description": description, "type": "string", "enum": list(values), **extra}


def array(description: str, items: dict, *, min_items: int | None = None, max_items: int | None = None,
          unique: bool = False, **extra: Any) -> dict:
    """An array schema."""
    out: dict[str, Any] = {"description": description, "type": "array", "items": items}
    if min_items is not None:
        out["minItems"] = min_items
    if max_items is not None:
        out["maxItems"] = max_items
    if unique:
        out["uniqueItems"] = True
    out.update(extra)
    return out


def nullable(schema: dict) -> dict:
    """Allow ``null`` besides the schema's own type."""
    out = dict(schema)
    out["type"] = [schema["type"], "null"]
    if "enum" in out:
        out["enum"] = list(out["enum"]) + [None]
    return out


def page_limit(description: str, default: int | None = None) -> dict:
    """Page size 1..LIMITS['page_max'] (default LIMITS['page_default'])."""
    return integer(description, 1, LIMITS["page_max"],
                   default=LIMITS["page_default"] if default is None else default)


def cursor(description: str = "Opaque cursor from a previous page's next_cursor.") -> dict:
    """Input cursor (opaque string)."""
    return string(description, LIMITS["cursor_max_length"], min_length=1)


def next_cursor(description: str = "Cursor for the next page, or null when this is the last page.") -> dict:
    """Output cursor (string or null)."""
    return nullable(string(description, LIMITS["cursor_max_length"]))


def operation_id() -> dict:
    """Idempotency key of a write (seeds "저장과 수정")."""
    return string("Client-chosen idempotency key; retrying the same request with the same id replays it.",
                  128, pattern=OPERATION_ID_PATTERN)


def revision_id(description: str, minimum: int = 1) -> dict:
    """A MediaWiki revision id."""
    return integer(description, minimum)


def scan_props() -> dict[str, dict]:
    """``partial``/``scanned``/``scan_limit`` of bounded scans (DESIGN.md §3)."""
    return {
        "partial": {"description": "True when the scan stopped at scan_limit before covering every candidate.",
                    "type": "boolean"},
        "scanned": integer("Number of Lessons examined for this page.", 0),
        "scan_limit": integer("Maximum number of Lessons one request may examine.", 0),
    }


class Fields:
    """Field schemas derived from ``schema/lesson.toml`` (the single source of lengths and enums).

    ``direction`` is ``"in"`` (client input: required strings get ``minLength 1``,
    legacy-only enum values are dropped) or ``"out"`` (results: everything the
    wiki may hold).
    """

    def __init__(self, schema: Schema):
        self.schema = schema
        self.meta = schema.meta

    # ids -----------------------------------------------------------------
    def lesson_id(self, description: str = "Lesson id: the page title without the Lesson: prefix.") -> dict:
        """A Lesson id (``meta.id_pattern``, ``meta.id_max_length``)."""
        return string(description, int(self.meta["id_max_length"]), pattern=self.meta["id_pattern"])

    def evidence_id(self, description: str = "Evidence id, unique within its Lesson.") -> dict:
        """An evidence id (pattern and length from the evidence ``id`` field)."""
        return string(description, self.schema.evidence.field("id").max_length,
                      pattern=self.meta["evidence_id_pattern"])

    def verification_id(self, description: str = "Verification record id, unique within its Lesson.") -> dict:
        """A verification record id."""
        return string(description, self.schema.verification.field("id").max_length,
                      pattern=self.meta["evidence_id_pattern"])

    def timestamp(self, description: str) -> dict:
        """UTC ISO-8601 timestamp ``YYYY-MM-DDTHH:MM:SSZ``."""
        return string(description, 20, pattern=self.meta["timestamp_pattern"])

    def enum_values(self, name: str, direction: str = "out") -> list[str]:
        """Values of enum ``name``; for ``direction="in"`` without its legacy-only values."""
        e = self.schema.enum(name)
        drop = set(e.extra.get("legacy_only", ())) if direction == "in" else set()
        return [v for v in e.values if v not in drop]

    def field(self, rec: RecordDef, name: str, direction: str = "out", *, required: bool | None = None) -> dict:
        """Schema of field ``name`` of record ``rec`` (type, length, pattern, enum, Korean help)."""
        f = rec.field(name)
        return self.for_field(rec, f, direction, required=required)

    def for_field(self, rec: RecordDef, f: FieldDef, direction: str = "out", *, required: bool | None = None) -> dict:
        """Schema of one :class:`FieldDef` (see :meth:`field`)."""
        help_text = f"{f.label}: {f.help}"
        req = f.required if required is None else required
        min_len = 1 if (direction == "in" and req) else None
        if f.type == "enum":
            return enum(help_text, self.enum_values(f.enum, direction))
        if f.type == "enum_list":
            values = self.enum_values(f.enum, direction)
            return array(help_text, {"type": "string", "enum": values},
                         min_items=1 if direction == "in" else None, max_items=len(values), unique=True)
        if f.type == "timestamp":
            return self.timestamp(help_text)
        if f.type == "id":
            lesson_ref = rec.kind == "relation"
            pattern = self.meta["id_pattern"] if lesson_ref else self.meta["evidence_id_pattern"]
            max_len = int(self.meta["id_max_length"]) if lesson_ref else f.max_length
            return string(help_text, max_len, pattern=pattern)
        if f.type == "digest":
            return string(help_text, f.max_length, pattern=DIGEST_PATTERN)
        if f.type == "sha256":
            return string(help_text, f.max_length, pattern=SHA256_PATTERN)
        if f.type == "url":
            extra = {"format": "uri", "pattern": "^https?://"}
            if direction == "out":
                extra = {}
            return string(help_text, f.max_length, min_length=min_len, **extra)
        return string(help_text, f.max_length, min_length=min_len)

    def record_props(self, rec: RecordDef, names, direction: str = "out") -> dict[str, dict]:
        """Field schemas for ``names`` of ``rec``, in the given order."""
        return {n: self.field(rec, n, direction) for n in names}

    # groups -----------------------------------------------------------------
    def core_fields(self) -> list[str]:
        """Lesson fields a reader may select: everything except legacy fields (CHECKLIST S3)."""
        return [f.name for f in self.schema.lesson.fields if f.settable != "legacy"]

    def changeable_fields(self) -> list[str]:
        """Lesson fields a client may set on create and change on revise (``settable = client``)."""
        return [f.name for f in self.schema.lesson.fields if f.client_settable]

    def verification_claim_props(self, basis_values: list[str]) -> dict[str, dict]:
        """Client part of a verification record (basis restricted to ``basis_values``)."""
        rec = self.schema.verification
        props = {}
        for f in rec.fields:
            if not f.client_settable or f.name in ("evidence_id", "evidence_digest"):
                continue
            if f.name == "verification_basis":
                props[f.name] = enum(f"{f.label}: {f.help}", basis_values)
            else:
                props[f.name] = self.for_field(rec, f, "in")
        return props


# --------------------------------------------------------------------------- shared result shapes

def _citation_item(F: Fields) -> dict:
    ev = F.schema.evidence
    props = {
        "id": F.evidence_id(),
        "citation": F.field(ev, "citation"),
        "url": F.field(ev, "url"),
        "kind": F.field(ev, "kind"),
        "verification_basis": F.field(ev, "verification_basis"),
        "digest": string("Evidence digest (sha256 over the evidence's canonical JSON); echo it as "
                         "expected_evidence_digest when recording a verification.", 71, pattern=DIGEST_PATTERN),
        "current_verdict": enum("Outcome of the latest verification record of this evidence; none when it has "
                                "no record, ambiguous when the latest records cannot be ordered.", VERDICTS),
        "note": F.field(ev, "note"),
        "added_by": F.field(ev, "added_by"),
        "added_at": F.field(ev, "added_at"),
    }
    return obj(props, ["id", "citation", "kind", "verification_basis", "digest", "current_verdict"],
               "One evidence (citation) of a Lesson.")


def _verification_item(F: Fields) -> dict:
    rec = F.schema.verification
    props = {f.name: F.for_field(rec, f, "out") for f in rec.fields}
    props["id"] = F.verification_id()
    props["evidence_id"] = F.evidence_id("Id of the evidence this record checked.")
    return obj(props, list(props), "One append-only verification record.")


def _relation_item(F: Fields) -> dict:
    rec = F.schema.relation
    props = {f.name: F.for_field(rec, f, "out") for f in rec.fields}
    props["direction"] = enum("outgoing: stored on this Lesson; incoming: stored on another Lesson pointing here.",
                              DIRECTIONS)
    props["symmetric"] = {"description": "True for relation types shown in both directions (analogous_to).",
                          "type": "boolean"}
    required = [n for n in props if n != "note"]
    return obj(props, required, "One typed relation between two Lessons.")


def _sub_page(description: str, item: dict) -> dict:
    return obj({
        "items": array("This page of records.", item, max_items=LIMITS["page_max"]),
        "next_cursor": next_cursor(),
        "total": integer("Total number of records of this kind on the Lesson.", 0),
    }, ["items", "next_cursor", "total"], description)


def _retrieval_props(F: Fields) -> dict[str, dict]:
    return {
        "effective_mode": enum("Retrieval mode actually used for this page.", RETRIEVAL_MODES),
        "requested_mode": enum("Retrieval mode the client asked for.", RETRIEVAL_MODES),
        "ranking_version": string("Version of the ranking/fusion recipe that ordered the results.",
                                  LIMITS["ranking_version_max_length"]),
        "semantic_status": enum("State of the semantic index.", SEMANTIC_STATUSES),
    }


def _scope_in() -> dict:
    return string("Optional named corpus scope.", LIMITS["scope_max_length"], min_length=1)


def _scope_out() -> dict:
    return nullable(string("Scope the results were drawn from, or null.", LIMITS["scope_max_length"]))


def _min_score() -> dict:
    return {"description": "Drop results scoring below this value (0–1).", "type": "number",
            "minimum": 0, "maximum": 1}


def _score() -> dict:
    return {"description": "Relevance score between 0 and 1 (comparable within one response only).",
            "type": "number", "minimum": 0, "maximum": 1}


def _retrieval_mode_in() -> dict:
    return enum("legacy (MediaWiki full-text search) or hybrid_v1 (full text + semantic facets + relations). "
                "When omitted, the server's default applies: legacy, unless its administrator enabled "
                "hybrid_v1 (the development stack does); responses report requested_mode and effective_mode.",
                RETRIEVAL_MODES)


# --------------------------------------------------------------------------- read tools

def _facets(F: Fields) -> list[str]:
    """Retrieval facets in the order schema/lesson.toml's fields first name them."""
    return list(dict.fromkeys(f.facet for f in F.schema.lesson.fields if f.facet))


def _facet_in(F: Fields) -> dict:
    return enum("hybrid_v1 only: rank by the query's similarity to this one facet of each Lesson "
                "(situation = question, context, observation; approach = attempt; mechanism = "
                "interpretation, reusable_lesson, applicability) — one semantic channel, no full text, "
                "scores relative to that channel. Omitted: full text and all three facets fused. Ignored "
                "when the page is answered by legacy (effective_mode says so).", _facets(F))


def _search_fields(F: Fields) -> list[str]:
    return ["id"] + F.core_fields() + ["revision_id", "citations"]


def _search_lessons_input(F: Fields) -> dict:
    rec = F.schema.lesson
    filters = obj({
        "confidence": array("Keep Lessons with one of these confidence values.",
                            F.field(rec, "confidence"), min_items=1, unique=True),
        "record_origin": array("Keep Lessons with one of these origins.",
                               F.field(rec, "record_origin"), min_items=1, unique=True),
        "review_state": array("Keep Lessons with one of these legacy review states.",
                              F.field(rec, "review_state"), min_items=1, unique=True),
        "updated_after": F.timestamp("Keep Lessons updated at or after this UTC time."),
        "updated_before": F.timestamp("Keep Lessons updated before this UTC time."),
    }, (), "Structured filters applied to fresh snapshots.")
    return obj({
        "query": string("Natural-language or keyword query; empty lists recent Lessons.",
                        LIMITS["query_max_length"], default=""),
        "filters": filters,
        "fields": array("Fields to return per result (default: a compact view with title and citation).",
                        {"type": "string", "enum": _search_fields(F)}, min_items=1, unique=True),
        "limit": page_limit("Results per page."),
        "cursor": cursor(),
        "min_score": _min_score(),
        "retrieval_mode": _retrieval_mode_in(),
        "scope": _scope_in(),
        "facet": _facet_in(F),
    }, (), "Search Lessons.")


def _search_lessons_output(F: Fields) -> dict:
    rec = F.schema.lesson
    item = {
        "id": F.lesson_id(),
        "score": _score(),
        "basis": enum("Which retriever produced this result.", SEARCH_BASES),
    }
    for name in F.core_fields():
        item[name] = F.field(rec, name)
    item["revision_id"] = revision_id("Revision the values were read from.")
    item["citation"] = string("Short citation of the first evidence (default view).",
                              F.schema.evidence.field("citation").max_length)
    item["citations"] = array("Citations of the Lesson (compact view, first page).", _citation_item(F),
                              max_items=LIMITS["page_max"])
    result = obj(item, ["id", "score", "basis"], "One search hit.")
    props = {
        "results": array("Hits, best first.", result, max_items=LIMITS["page_max"]),
        "next_cursor": next_cursor(),
        **_retrieval_props(F),
        **scan_props(),
        "scope": _scope_out(),
        "facet": enum("The facet that ranked this page (present only when the request named a facet and "
                      "hybrid_v1 answered).", _facets(F)),
        "truncated": array("Names of fields shortened (text ends with an explicit truncation marker) to fit "
                           "the response byte cap; select fewer fields or use get_lesson for the full text.",
                           {"type": "string", "enum": _search_fields(F) + ["citation"]}, unique=True),
    }
    return obj(props, [p for p in props if p not in ("truncated", "facet")], "Search results.")


def _get_lesson_input(F: Fields) -> dict:
    return obj({
        "id": F.lesson_id(),
        "fields": array("Core fields to return (default: all).",
                        {"type": "string", "enum": F.core_fields()}, min_items=1, unique=True),
        "citation_detail": enum("compact omits note and provenance; full returns them and never truncates "
                                "silently.", ("compact", "full"), default="compact"),
        "citations_cursor": cursor("Cursor of the citations page."),
        "citations_limit": page_limit("Citations per page."),
        "verifications_cursor": cursor("Cursor of the verification records page."),
        "verifications_limit": page_limit("Verification records per page."),
        "relations_cursor": cursor("Cursor of the relations page."),
        "relations_limit": page_limit("Relations per page."),
    }, ["id"], "Read one Lesson.")


def _get_lesson_output(F: Fields) -> dict:
    rec = F.schema.lesson
    lesson = obj({n: F.field(rec, n) for n in F.core_fields()}, (),
                 "Selected core fields (legacy reviewer/review_state are never returned).")
    return obj({
        "id": F.lesson_id(),
        "revision_id": revision_id("Revision the Lesson was read from."),
        "content_digest": string("Digest of the whole Lesson content (audit_lessons compares it).", 71,
                                 pattern=DIGEST_PATTERN),
        "lesson": lesson,
        "citations": _sub_page("Evidence of the Lesson.", _citation_item(F)),
        "verifications": _sub_page("Verification records of the Lesson.", _verification_item(F)),
        "relations": _sub_page("Relations stored on or pointing at the Lesson.", _relation_item(F)),
        "truncated": array("Lesson fields shortened (text ends with an explicit truncation marker) to fit the "
                           "response byte cap; request them alone with `fields` to get more.",
                           {"type": "string", "enum": F.core_fields()}, unique=True),
    }, ["id", "revision_id", "content_digest", "lesson", "citations", "verifications", "relations"],
        "One Lesson with paged citations, verification records and relations.")


def _audit_lessons_input(F: Fields) -> dict:
    rel = F.schema.relation
    expectation = obj({
        "id": F.lesson_id(),
        "revision_id": revision_id("Expected current revision id."),
        "content_digest": string("Expected content digest.", 71, pattern=DIGEST_PATTERN),
        "evidence_ids": array("Evidence ids expected on the Lesson.", F.evidence_id(), min_items=1,
                              max_items=LIMITS["expectation_items_max"], unique=True),
        "relations": array("Relations expected on the Lesson.", obj({
            "relation": F.field(rel, "relation"),
            "to": F.field(rel, "to"),
        }, ["relation", "to"], "An expected outgoing relation."), min_items=1,
            max_items=LIMITS["expectation_items_max"], unique=True),
    }, ["id"], "What the caller expects about one Lesson.")
    return obj({
        "expectations": array("Lessons to check.", expectation, min_items=1,
                              max_items=LIMITS["audit_expectations_max"]),
        "limit": page_limit("Results per page.", default=LIMITS["audit_page_default"]),
        "cursor": cursor(),
    }, ["expectations"], "Check stored Lessons against expectations.")


def _audit_lessons_output(F: Fields) -> dict:
    failed = obj({
        "expectation": enum("Which expectation failed.", AUDIT_EXPECTATIONS),
        "index": nullable(integer("Position within evidence_ids/relations, or null for scalar expectations.", 0)),
    }, ["expectation", "index"], "One failed expectation.")
    result = obj({
        "position": integer("Index of the expectation in the request.", 0),
        "id": F.lesson_id(),
        "status": enum("ok, missing (no such Lesson) or mismatch.", AUDIT_STATUSES),
        "current_revision_id": nullable(revision_id("Current revision id, or null when missing.")),
        "failed": array("Failed expectations (empty when ok).", failed),
    }, ["position", "id", "status", "current_revision_id", "failed"], "Audit outcome of one expectation.")
    return obj({
        "results": array("Outcomes in expectation order.", result, max_items=LIMITS["page_max"]),
        "next_cursor": next_cursor(),
        **scan_props(),
    }, ["results", "next_cursor", "partial", "scanned", "scan_limit"], "Audit results.")


def _find_related_input(F: Fields) -> dict:
    return obj({
        "id": F.lesson_id(),
        "relation_types": array("Only these relation types (default: all).",
                                F.field(F.schema.relation, "relation"), min_items=1, unique=True),
        "direction": enum("Which stored edges to follow.", ("outgoing", "incoming", "both"), default="both"),
        "limit": page_limit("Results per page."),
        "cursor": cursor(),
    }, ["id"], "List Lessons linked to a Lesson by stored relations.")


def _find_related_output(F: Fields) -> dict:
    rel = F.schema.relation
    result = obj({
        "id": F.lesson_id("Id of the related Lesson."),
        "title": F.field(F.schema.lesson, "title"),
        "relation": F.field(rel, "relation"),
        "direction": enum("outgoing or incoming, seen from the requested Lesson.", DIRECTIONS),
        "from": F.field(rel, "from"),
        "to": F.field(rel, "to"),
        "note": F.field(rel, "note"),
        "symmetric": {"description": "True for relation types shown in both directions.", "type": "boolean"},
    }, ["id", "title", "relation", "direction", "from", "to", "symmetric"], "One related Lesson.")
    return obj({
        "id": F.lesson_id("The requested Lesson."),
        "results": array("Related Lessons.", result, max_items=LIMITS["page_max"]),
        "next_cursor": next_cursor(),
        **scan_props(),
    }, ["id", "results", "next_cursor", "partial", "scanned", "scan_limit"], "Related Lessons.")


def _find_analogies_input(F: Fields) -> dict:
    return obj({
        "id": F.lesson_id(),
        "limit": page_limit("Results per page."),
        "cursor": cursor(),
        "min_score": _min_score(),
        "retrieval_mode": _retrieval_mode_in(),
        "scope": _scope_in(),
    }, ["id"], "Find Lessons with a similar cause or failure shape.")


def _find_analogies_output(F: Fields) -> dict:
    result = obj({
        "id": F.lesson_id(),
        "title": F.field(F.schema.lesson, "title"),
        "score": _score(),
        "basis": enum("Which signal produced this analogy.", ANALOGY_BASES),
        "shared_terms": array("Terms shared with the source Lesson (lexical evidence).",
                              string("A shared term.", LIMITS["term_max_length"]),
                              max_items=LIMITS["shared_terms_max"]),
    }, ["id", "title", "score", "basis", "shared_terms"], "One analogous Lesson.")
    props = {
        "source_id": F.lesson_id("The requested Lesson."),
        "source_revision_id": revision_id("Revision of the source Lesson that was compared."),
        "results": array("Analogies, best first.", result, max_items=LIMITS["page_max"]),
        "next_cursor": next_cursor(),
        **_retrieval_props(F),
        **scan_props(),
        "scope": _scope_out(),
    }
    return obj(props, list(props), "Analogous Lessons.")


# --------------------------------------------------------------------------- write tools

def _new_evidence_props(F: Fields) -> dict[str, dict]:
    ev = F.schema.evidence
    props = {"id": F.evidence_id("Evidence id; derived from the request when omitted.")}
    for f in ev.fields:
        if f.client_settable and f.name != "id":
            props[f.name] = F.for_field(ev, f, "in")
    return props


def _create_lesson_draft_input(F: Fields) -> dict:
    rec = F.schema.lesson
    basis = F.schema.enum("verification_basis")
    supporting = [v for v in basis.extra.get("supporting", ()) if v not in basis.extra.get("legacy_only", ())]
    evidence_props = _new_evidence_props(F)
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


def _create_lesson_draft_output(F: Fields) -> dict:
    candidate = obj({
        "id": F.lesson_id(),
        "title": F.field(F.schema.lesson, "title"),
        "score": _score(),
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


def _link_lessons_input(F: Fields) -> dict:
    rel = F.schema.relation
    return obj({
        "operation_id": operation_id(),
        "from": F.lesson_id("Lesson the relation is stored on."),
        "relation": F.field(rel, "relation", "in"),
        "to": F.lesson_id("Existing target Lesson."),
        "note": F.field(rel, "note", "in"),
    }, ["operation_id", "from", "relation", "to"], "Add one typed relation.")


def _link_lessons_output(F: Fields) -> dict:
    rel = F.schema.relation
    return obj({
        "status": enum("created, or replayed for an exact retry.", WRITE_STATUSES),
        "from": F.field(rel, "from"),
        "relation": F.field(rel, "relation"),
        "to": F.field(rel, "to"),
        "current_revision_id": revision_id("Current revision of the from Lesson."),
    }, ["status", "from", "relation", "to", "current_revision_id"], "Outcome of link_lessons.")


def _attach_evidence_input(F: Fields) -> dict:
    ev = _new_evidence_props(F)
    props = {"operation_id": operation_id(), "lesson_id": F.lesson_id(),
             "evidence_id": ev.pop("id")}
    props.update(ev)
    required = ["operation_id", "lesson_id"] + [n for n in ev if F.schema.evidence.field(n).required]
    return obj(props, required, "Attach one evidence to an existing Lesson.")


def _attach_evidence_output(F: Fields) -> dict:
    return obj({
        "status": enum("created, or replayed for an exact retry.", WRITE_STATUSES),
        "lesson_id": F.lesson_id(),
        "evidence_id": F.evidence_id(),
        "evidence_digest": string("Digest of the stored evidence.", 71, pattern=DIGEST_PATTERN),
        "current_revision_id": revision_id("Current revision of the Lesson."),
    }, ["status", "lesson_id", "evidence_id", "evidence_digest", "current_revision_id"],
        "Outcome of attach_evidence.")


def _record_verification_input(F: Fields) -> dict:
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


def _record_verification_output(F: Fields) -> dict:
    return obj({
        "status": enum("created, or replayed for an exact retry.", WRITE_STATUSES),
        "lesson_id": F.lesson_id(),
        "verification_id": F.verification_id(),
        "evidence_id": F.evidence_id(),
        "current_revision_id": revision_id("Current revision of the Lesson."),
        "current_verdict": enum("Current verdict of the evidence after this record.", VERDICTS),
    }, ["status", "lesson_id", "verification_id", "evidence_id", "current_revision_id", "current_verdict"],
        "Outcome of record_evidence_verification.")


def _revise_lesson_input(F: Fields) -> dict:
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


def _revise_lesson_output(F: Fields) -> dict:
    return obj({
        "status": enum("revised, or replayed for an exact retry.", ("revised", "replayed")),
        "lesson_id": F.lesson_id(),
        "applied_revision_id": revision_id("Revision this request created (the original one on replay)."),
        "current_revision_id": revision_id("Latest revision of the Lesson now."),
        "changed_fields": array("Fields whose value actually changed.",
                                {"type": "string", "enum": F.changeable_fields()}, unique=True),
    }, ["status", "lesson_id", "applied_revision_id", "current_revision_id", "changed_fields"],
        "Outcome of revise_lesson.")


#: tool name → (input builder, output builder). Edit a builder to change a shape.
SHAPES: dict[str, tuple[Callable[[Fields], dict], Callable[[Fields], dict]]] = {
    "search_lessons": (_search_lessons_input, _search_lessons_output),
    "get_lesson": (_get_lesson_input, _get_lesson_output),
    "audit_lessons": (_audit_lessons_input, _audit_lessons_output),
    "find_related_lessons": (_find_related_input, _find_related_output),
    "find_analogies": (_find_analogies_input, _find_analogies_output),
    "create_lesson_draft": (_create_lesson_draft_input, _create_lesson_draft_output),
    "link_lessons": (_link_lessons_input, _link_lessons_output),
    "attach_evidence": (_attach_evidence_input, _attach_evidence_output),
    "record_evidence_verification": (_record_verification_input, _record_verification_output),
    "revise_lesson": (_revise_lesson_input, _revise_lesson_output),
}


def _document(body: dict, filename: str, title: str) -> dict:
    out = {
        "$schema": SCHEMA_DIALECT,
        "$id": ID_BASE + filename,
        "$comment": GENERATED_COMMENT,
        "title": title,
    }
    out.update(body)
    return out


def tool_schema(schema: Schema, tool: str, direction: str) -> dict:
    """The complete JSON Schema document of ``tool``'s ``"input"`` or ``"output"``.

    Raises KeyError for an unknown tool and ValueError for an unknown direction.
    """
    if direction not in ("input", "output"):
        raise ValueError(f"direction must be 'input' or 'output', not {direction!r}")
    build_in, build_out = SHAPES[tool]
    body = (build_in if direction == "input" else build_out)(Fields(schema))
    filename = f"{tool}.{direction}.schema.json"
    return _document(body, filename, f"{tool} {direction}")


def render_tool_schemas(schema: Schema) -> dict[str, dict]:
    """All tool schemas: ``"<tool>.input.schema.json"``/``"<tool>.output.schema.json"`` → schema dict.

    Keys are sorted; the dicts keep a stable insertion order (DESIGN.md §3: every
    tool publishes a closed ``inputSchema`` and ``outputSchema``).
    """
    out = {}
    for tool in TOOL_NAMES:
        for direction in ("input", "output"):
            out[f"{tool}.{direction}.schema.json"] = tool_schema(schema, tool, direction)
    return dict(sorted(out.items()))
