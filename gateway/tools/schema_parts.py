"""Shared building blocks of the tools' JSON Schemas (draft 2020-12), built from the schema source.

Each tool module ``gateway/tools/<tool>.py`` writes its own ``input_schema(F)``
and ``output_schema(F)`` with these helpers; ``s3rm schema generate``
(:mod:`sync.schema.toolschemas`) walks the tool registry and writes them to
``schema/tools/<tool>.input.schema.json`` and ``…output.schema.json``, which
the registry loads at start-up (docs/tools.md#tool-list).

Every string length, enum and id pattern that also exists in
``schema/lesson.toml`` is taken from the loaded
:class:`~gateway.domain.schema.Schema` (:class:`Fields`), and the API limits
and value patterns from its ``[limits]`` and ``[patterns]`` tables
(docs/tools.md#output-limits), so none is typed twice.

Conventions (all enforced by tests/sync/schema/test_generate.py):

* every object is closed (``additionalProperties: false``) and lists ``required``;
* every property carries a ``description``;
* inputs add ``minLength: 1`` to required strings; outputs never do (legacy pages
  may hold empty optional values);
* new evidence and verification records never accept the legacy-only
  ``verification_basis`` values (``not_recorded``), outputs accept all values.
"""
from __future__ import annotations

from typing import Any

from gateway.domain.schema import FieldDef, RecordDef, Schema, load_schema
from gateway.retrieval.progress import MAX_BUILD_LESSONS, MAX_ETA_SECONDS  # bounds of semantic_progress

__all__ = [
    "DIGEST_PATTERN", "DIRECTIONS", "Fields", "LIMITS", "OPERATION_ID_PATTERN", "RETRIEVAL_MODES", "SEMANTIC_STATUSES",
    "SHA256_PATTERN", "VERDICTS", "WRITE_STATUSES", "array", "citation_item_schema", "cursor", "desc", "enum",
    "integer", "min_score", "new_evidence_props", "next_cursor", "nullable", "obj", "operation_id", "page_limit",
    "retrieval_mode_in", "retrieval_props", "revision_id", "scan_props", "scope_in", "scope_out", "score", "string",
]

#: API limits and value patterns: ``[limits]`` / ``[patterns]`` of schema/lesson.toml (docs/tools.md#output-limits).
LIMITS: dict[str, int] = load_schema().limits
OPERATION_ID_PATTERN = load_schema().patterns["operation_id"]
DIGEST_PATTERN = load_schema().patterns["digest"]
SHA256_PATTERN = load_schema().patterns["sha256"]

RETRIEVAL_MODES = ("legacy", "hybrid_v1")
SEMANTIC_STATUSES = ("disabled", "building", "ready", "stale", "degraded", "unavailable")
VERDICTS = ("supports", "contradicts", "inconclusive", "none", "ambiguous")
DIRECTIONS = ("outgoing", "incoming")
WRITE_STATUSES = ("created", "replayed")


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
    """Idempotency key of a write (docs/tools.md#operation-id)."""
    return string("Client-chosen idempotency key; retrying the same request with the same id replays it.",
                  128, pattern=OPERATION_ID_PATTERN)


def revision_id(description: str, minimum: int = 1) -> dict:
    """A MediaWiki revision id."""
    return integer(description, minimum)


def scan_props() -> dict[str, dict]:
    """``partial``/``scanned``/``scan_limit`` of bounded scans (docs/tools.md#output-limits)."""
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
        """Lesson fields a reader may select: everything except legacy fields (docs/data-contract.md#legacy-fields)."""
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


def citation_item_schema(F: Fields) -> dict:
    """One evidence as read tools return it (citations of get_lesson and search_lessons)."""
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


def retrieval_props(F: Fields) -> dict[str, dict]:
    """``effective_mode``/``requested_mode``/``ranking_version``/``semantic_status`` of ranked reads."""
    return {
        "effective_mode": enum("Retrieval mode actually used for this page.", RETRIEVAL_MODES),
        "requested_mode": enum("Retrieval mode the client asked for.", RETRIEVAL_MODES),
        "ranking_version": string("Version of the ranking/fusion recipe that ordered the results.",
                                  LIMITS["ranking_version_max_length"]),
        "semantic_status": enum("State of the semantic index.", SEMANTIC_STATUSES),
        "semantic_progress": obj({
            "indexed": integer("Lessons of the build whose vectors are ready.", 0, MAX_BUILD_LESSONS),
            "total": integer("Lessons the build examined.", 0, MAX_BUILD_LESSONS),
            "eta_seconds": nullable(integer("Estimated seconds left (null until the model has answered once).",
                                            0, MAX_ETA_SECONDS)),
        }, ["indexed", "total", "eta_seconds"],
            "Present while semantic_status is building: how far the first build of the semantic index is."),
    }


def scope_in() -> dict:
    """Input ``scope``: a named corpus scope."""
    return string("Optional named corpus scope.", LIMITS["scope_max_length"], min_length=1)


def scope_out() -> dict:
    """Output ``scope``: the scope the results came from, or null."""
    return nullable(string("Scope the results were drawn from, or null.", LIMITS["scope_max_length"]))


def min_score() -> dict:
    """Input ``min_score`` (0–1)."""
    return {"description": "Drop results scoring below this value (0–1).", "type": "number",
            "minimum": 0, "maximum": 1}


def score() -> dict:
    """A result's relevance score (0–1)."""
    return {"description": "Relevance score between 0 and 1 (comparable within one response only).",
            "type": "number", "minimum": 0, "maximum": 1}


def retrieval_mode_in() -> dict:
    """Input ``retrieval_mode`` (legacy or hybrid_v1)."""
    return enum("legacy (MediaWiki full-text search) or hybrid_v1 (full text + semantic facets + relations). "
                "When omitted, the server's default applies: legacy, unless its administrator enabled "
                "hybrid_v1 (the development stack does); responses report requested_mode and effective_mode.",
                RETRIEVAL_MODES)


def new_evidence_props(F: Fields) -> dict[str, dict]:
    """Client-settable fields of a new evidence (create_lesson_draft's initial_evidence, attach_evidence)."""
    ev = F.schema.evidence
    props = {"id": F.evidence_id("Evidence id; derived from the request when omitted.")}
    for f in ev.fields:
        if f.client_settable and f.name != "id":
            props[f.name] = F.for_field(ev, f, "in")
    return props
