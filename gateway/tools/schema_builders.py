"""Shared building blocks of the tools' JSON Schemas (draft 2020-12), built from the schema source.

Each tool module ``gateway/tools/<tool>.py`` writes its own ``input_schema(schema_fields)``
and ``output_schema(schema_fields)`` with these helpers; ``s3rm schema generate``
the registry runs them at start-up (:mod:`gateway.tools.tool_schemas`) and
``s3rm schema generate`` exports the result to ``schema/tools/<tool>.input.schema.json``
and ``…output.schema.json`` (docs/tools.md#tool-list).

Every string length, enum and id pattern that also exists in
``schema/lesson.toml`` is taken from the loaded
:class:`~gateway.config.schema.Schema` (:class:`Fields`), and the API limits
and value patterns from its ``[limits]`` and ``[patterns]`` tables
(docs/tools.md#output-limits), so none is typed twice.

Conventions (all enforced by tests/sync/test_generate.py):

* every object is closed (``additionalProperties: false``) and lists ``required``;
* every property carries a ``description``;
* inputs add ``minLength: 1`` to required strings; outputs never do (legacy pages
  may hold empty optional values);
* new evidence and verification records never accept the legacy-only
  ``verification_basis`` values (``not_recorded``), outputs accept all values.
"""
from __future__ import annotations

from typing import Any

from gateway.config.profiles import RANKED_FACETS
from gateway.config.schema import FieldDef, RecordDef, Schema
from gateway.retrieval.indexing.progress import MAX_BUILD_LESSONS, MAX_ETA_SECONDS  # bounds of semantic_progress

__all__ = [
    "DIRECTIONS", "Fields", "RETRIEVAL_MODES", "SEMANTIC_STATUSES", "VERDICTS", "WRITE_STATUSES", "array", "citation_item_schema", "cursor", "desc",
    "duplicate_candidates_out", "embedding_truncated_out", "enum", "hoist_defs", "integer", "min_score",
    "new_evidence_props", "next_cursor", "nullable", "obj", "operation_id", "page_limit", "standing_out",
    "DUPLICATE_BANDS", "DUPLICATE_STATUSES", "OPTIONAL_RETRIEVAL_PROPS", "STANDING_MAX",
    "retrieval_mode_in", "retrieval_props", "revision_id", "scan_props", "scope_in", "scope_out", "score", "string",
]

RETRIEVAL_MODES = ("legacy", "hybrid_v1")
SEMANTIC_STATUSES = ("disabled", "building", "ready", "stale", "degraded", "unavailable")
VERDICTS = ("supports", "contradicts", "inconclusive", "none", "ambiguous")
DIRECTIONS = ("outgoing", "incoming")
WRITE_STATUSES = ("created", "replayed")


#: Ids listed per list of a ``standing`` block (the first ones in id order).
STANDING_MAX = 10


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
    """An array schema; the items' own description is dropped (the array's says it)."""
    items = {k: v for k, v in items.items() if k != "description"}
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
    """Allow ``null`` besides ``schema``: ``{"description", "anyOf": [schema, {"type": "null"}]}``.

    The portable form: published schemas never use a ``type`` array such as
    ``["string", "null"]``, which strict clients (MCP Inspector ``--strict``) flag.
    """
    inner = dict(schema)
    description = inner.pop("description", None)
    out: dict = {"description": description} if description is not None else {}
    out["anyOf"] = [inner, {"type": "null"}]
    return out


def page_limit(schema_fields: Fields, description: str, default: int | None = None) -> dict:
    """Page size 1..``page_max`` (default ``page_default``; ``F.limits``)."""
    return integer(description, 1, schema_fields.limits["page_max"],
                   default=schema_fields.limits["page_default"] if default is None else default, **{DEF_NAME: "page_limit"})


def cursor(schema_fields: Fields, description: str = "next_cursor of the previous page.") -> dict:
    """Input cursor (opaque string, at most ``cursor_max_length``)."""
    return string(description, schema_fields.limits["cursor_max_length"], min_length=1, **{DEF_NAME: "cursor"})


def next_cursor(schema_fields: Fields, description: str = "Next page's cursor; null on the last page.") -> dict:
    """Output cursor (string or null)."""
    return {**nullable(string(description, schema_fields.limits["cursor_max_length"])), DEF_NAME: "next_cursor"}


def operation_id(schema_fields: Fields) -> dict:
    """Idempotency key of a write (``[patterns] operation_id``; docs/tools.md#operation-id)."""
    return string("Idempotency key: a retry with it replays.",
                  128, pattern=schema_fields.patterns["operation_id"])


def revision_id(description: str, minimum: int = 1) -> dict:
    """A MediaWiki revision id."""
    return integer(description, minimum)


def scan_props() -> dict[str, dict]:
    """``partial``/``scanned``/``scan_limit`` of bounded scans (docs/tools.md#output-limits)."""
    return {
        "partial": {"description": "True when the scan stopped at scan_limit.",
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
        #: API limits and value patterns: ``[limits]`` / ``[patterns]`` of the schema source (docs/tools.md#output-limits)
        self.limits: dict[str, int] = schema.limits
        self.patterns: dict[str, str] = schema.patterns

    # ids -----------------------------------------------------------------
    def lesson_id(self, description: str = "Lesson id (no Lesson: prefix).") -> dict:
        """A Lesson id (``meta.id_pattern``, ``meta.id_max_length``)."""
        return string(description, int(self.meta["id_max_length"]), pattern=self.meta["id_pattern"],
                      **{DEF_NAME: "lesson_id"})

    def evidence_id(self, description: str = "Evidence id, unique within its Lesson.") -> dict:
        """An evidence id (pattern and length from the evidence ``id`` field)."""
        return string(description, self.schema.evidence.field("id").max_length,
                      pattern=self.meta["evidence_id_pattern"], **{DEF_NAME: "evidence_id"})

    def verification_id(self, description: str = "Verification record id, unique within its Lesson.") -> dict:
        """A verification record id."""
        return string(description, self.schema.verification.field("id").max_length,
                      pattern=self.meta["evidence_id_pattern"])

    def timestamp(self, description: str) -> dict:
        """UTC ISO-8601 timestamp ``YYYY-MM-DDTHH:MM:SSZ``."""
        return string(description, 20, pattern=self.meta["timestamp_pattern"], **{DEF_NAME: "timestamp"})

    def enum_values(self, name: str, direction: str = "out") -> list[str]:
        """Values of enum ``name``; for ``direction="in"`` without its legacy-only values."""
        e = self.schema.enum(name)
        drop = set(e.extra.get("legacy_only", ())) if direction == "in" else set()
        return [v for v in e.values if v not in drop]

    def field(self, rec: RecordDef, name: str, direction: str = "out", *, required: bool | None = None) -> dict:
        """Schema of field ``name`` of record ``rec`` (type, length, pattern, enum, its English ``describe``)."""
        f = rec.field(name)
        return self.for_field(rec, f, direction, required=required)

    def for_field(self, rec: RecordDef, f: FieldDef, direction: str = "out", *, required: bool | None = None) -> dict:
        """Schema of one :class:`FieldDef` (see :meth:`field`).

        Only inputs carry the field's ``describe`` text: an output field of a stored
        record means what the same input field (and docs/data-contract.md) says, so
        results repeat no description per field.
        """
        out = self._for_field(rec, f, direction, required=required)
        if direction != "in":
            out.pop("description", None)
        return out

    def _for_field(self, rec: RecordDef, f: FieldDef, direction: str, *, required: bool | None) -> dict:
        help_text = f.describe
        req = f.required if required is None else required
        min_len = 1 if (direction == "in" and req) else None
        if f.type == "enum":
            return enum(help_text, self.enum_values(f.enum, direction))
        if f.type == "enum_list":
            values = self.enum_values(f.enum, direction)
            return array(f"{help_text} A JSON array, not a comma list.",
                         {"type": "string", "enum": values},
                         min_items=1 if direction == "in" else None, max_items=len(values), unique=True)
        if f.type == "timestamp":
            return self.timestamp(help_text)
        if f.type == "id":
            lesson_ref = rec.kind == "relation"
            pattern = self.meta["id_pattern"] if lesson_ref else self.meta["evidence_id_pattern"]
            max_len = int(self.meta["id_max_length"]) if lesson_ref else f.max_length
            return string(help_text, max_len, pattern=pattern)
        if f.type == "digest":
            return string(help_text, f.max_length, pattern=self.patterns["digest"], **{DEF_NAME: "digest"})
        if f.type == "sha256":
            return string(help_text, f.max_length, pattern=self.patterns["sha256"])
        if f.type == "url":
            extra = {"format": "uri", "pattern": "^https?://"}
            if direction == "out":
                extra = {}
            return string(help_text, f.max_length, min_length=min_len, **extra)
        return string(help_text, f.max_length, min_length=min_len)

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
                props[f.name] = enum(f.describe, basis_values)
            else:
                props[f.name] = self.for_field(rec, f, "in")
        return props


def citation_item_schema(schema_fields: Fields) -> dict:
    """One evidence as read tools return it (citations of get_lesson and search_lessons)."""
    ev = schema_fields.schema.evidence
    props = {
        "id": schema_fields.evidence_id(),
        "citation": schema_fields.field(ev, "citation"),
        "url": schema_fields.field(ev, "url"),
        "kind": schema_fields.field(ev, "kind"),
        "verification_basis": schema_fields.field(ev, "verification_basis"),
        "digest": string("Evidence digest; send it as expected_evidence_digest.", 71, pattern=schema_fields.patterns["digest"]),
        "current_verdict": enum("Outcome of its latest verification record; none without one, ambiguous when "
                                "unordered.", VERDICTS),
        "note": schema_fields.field(ev, "note"),
        "added_by": schema_fields.field(ev, "added_by"),
        "added_at": schema_fields.field(ev, "added_at"),
    }
    return obj(props, ["id", "citation", "kind", "verification_basis", "digest", "current_verdict"],
               "One evidence (citation) of a Lesson.", **{DEF_NAME: "citation"})


#: Members of :func:`retrieval_props` that are not always present.
OPTIONAL_RETRIEVAL_PROPS = ("semantic_quarantined", "index_as_of", "index_lag_seconds", "semantic_progress")


def retrieval_props(schema_fields: Fields) -> dict[str, dict]:
    """``effective_mode``/``requested_mode``/``ranking_version``/``semantic_status`` (and the optional
    ``semantic_quarantined`` count, docs/hybrid-search.md#quarantine) of ranked reads."""
    return {
        "effective_mode": enum("Retrieval mode actually used for this page.", RETRIEVAL_MODES),
        "requested_mode": enum("Retrieval mode the client asked for.", RETRIEVAL_MODES),
        "ranking_version": string("Version of the ranking/fusion recipe that ordered the results.",
                                  schema_fields.limits["ranking_version_max_length"]),
        "semantic_status": enum("State of the semantic index.", SEMANTIC_STATUSES),
        "semantic_quarantined": integer("Lessons found by full text only while their embedding fails (absent when "
                                        "none).", 1),
        "index_as_of": schema_fields.timestamp("hybrid_v1: newest change the index has applied (UTC)."),
        "index_lag_seconds": {"description": "hybrid_v1: seconds since the index caught up.", "type": "number",
                              "minimum": 0},
        "semantic_progress": obj({
            "indexed": integer("Lessons of the build whose vectors are ready.", 0, MAX_BUILD_LESSONS),
            "total": integer("Lessons the build examined.", 0, MAX_BUILD_LESSONS),
            "eta_seconds": nullable(integer("Estimated seconds left (null until the model has answered once).",
                                            0, MAX_ETA_SECONDS)),
        }, ["indexed", "total", "eta_seconds"],
            "While semantic_status is building: how far the index's first build is."),
    }


def scope_in(schema_fields: Fields) -> dict:
    """Input ``scope``: a named corpus scope."""
    return string("Optional named corpus scope.", schema_fields.limits["scope_max_length"], min_length=1)


def scope_out(schema_fields: Fields) -> dict:
    """Output ``scope``: the scope the results came from, or null."""
    return nullable(string("Scope the results were drawn from, or null.", schema_fields.limits["scope_max_length"]))


def min_score(description: str = "Drop results scoring below this value (0–1).") -> dict:
    """Input ``min_score`` (0–1); a tool may say what its score is in ``description``."""
    return {"description": description, "type": "number", "minimum": 0, "maximum": 1}


def score(description: str = "Relevance 0-1, comparable within one response.") -> dict:
    """A result's relevance score (0–1); a tool may say how it is computed in ``description``."""
    return {"description": description, "type": "number", "minimum": 0, "maximum": 1}


def embedding_truncated_out(schema_fields: Fields) -> dict:
    """Optional write output ``embedding_truncated``: facets cut for embedding (docs/hybrid-search.md#truncation-report)."""
    names = ["title", *(f.name for f in schema_fields.schema.lesson.fields if f.facet)]
    cut = obj({
        "fields": array("Fields whose text lies at least partly in the dropped middle.", enum("Field.", names),
                        min_items=1, unique=True),
        "kept": {"description": "Share of the facet's characters the embedded text still holds (0-1).",
                 "type": "number", "minimum": 0, "maximum": 1},
    }, ["fields", "kept"], "One facet cut to the embedding window (head and tail kept).", **{DEF_NAME: "facet_cut"})
    return obj({facet: cut for facet in RANKED_FACETS}, (),
               "Facets too long to embed whole: their middle is not found by meaning; shorten or split them. Absent "
               "when nothing was cut.",
               minProperties=1)


DUPLICATE_STATUSES = ("ok", "skipped", "not_ready", "disabled", "timeout", "saturated", "error")
DUPLICATE_BANDS = ("near_identical", "same_topic")


def duplicate_candidates_out(schema_fields: Fields) -> dict:
    """Write output ``duplicate_candidates`` (create, and a revise of embedded text; docs/tools.md#create-lesson-draft)."""
    candidate = obj({
        "id": schema_fields.lesson_id(),
        "title": schema_fields.field(schema_fields.schema.lesson, "title"),
        "score": score(),
        "band": enum("How close the existing Lesson is.", DUPLICATE_BANDS),
    }, ["id", "title", "score", "band"], "An existing Lesson that may say the same thing.")
    return obj({
        "status": enum("Whether the duplicate check ran.", DUPLICATE_STATUSES),
        "items": array("Possible duplicates, best first.", candidate, max_items=schema_fields.limits["duplicate_candidates_max"]),
    }, ["status", "items"], "Existing Lessons that look like duplicates (advisory).")


def standing_out(schema_fields: Fields) -> dict:
    """Optional ``standing``: corrections of a Lesson read from the fresh revision (docs/tools.md#standing)."""
    ids = schema_fields.lesson_id("Lesson id.")
    return obj({
        "superseded_by": array("Lessons superseding it.", ids, max_items=STANDING_MAX, unique=True,
                               **{DEF_NAME: "lesson_ids"}),
        "contradicted_by": array("Lessons contradicting it.", ids, max_items=STANDING_MAX, unique=True,
                                 **{DEF_NAME: "lesson_ids"}),
        "evidence_contradicted": array("Its evidence whose current verdict is contradicts.",
                                       schema_fields.evidence_id("Evidence id."), max_items=STANDING_MAX, unique=True),
    }, (), "Corrections: read these before trusting it (absent when none).", minProperties=1)


def retrieval_mode_in() -> dict:
    """Input ``retrieval_mode`` (legacy or hybrid_v1)."""
    return enum("legacy: full text; hybrid_v1: also meaning and relations. Omitted: the server's default.",
                RETRIEVAL_MODES)


def new_evidence_props(schema_fields: Fields) -> dict[str, dict]:
    """Client-settable fields of a new evidence (create_lesson_draft's initial_evidence, attach_evidence)."""
    ev = schema_fields.schema.evidence
    props = {"id": schema_fields.evidence_id("Derived from the request when omitted.")}
    for f in ev.fields:
        if f.client_settable and f.name != "id":
            props[f.name] = schema_fields.for_field(ev, f, "in")
    return props


# --------------------------------------------------------------------------- shared definitions

#: Private key naming a block's shared definition (``hoist_defs`` uses and removes it; never published).
DEF_NAME = "x-def"

#: Keywords whose value is one subschema, or a list / map of subschemas (where ``hoist_defs`` looks).
_SUB_ONE = ("items", "additionalProperties", "not", "contains")
_SUB_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUB_MAP = ("properties", "$defs")


def _children(node: dict):
    """(name hint, child subschema) pairs of ``node``, in document order."""
    for key, value in node.items():
        if key in _SUB_ONE and isinstance(value, dict):
            yield "item" if key == "items" else key, value
        elif key in _SUB_LIST and isinstance(value, list):
            for child in value:
                if isinstance(child, dict):
                    yield "", child
        elif key in _SUB_MAP and isinstance(value, dict):
            for name, child in value.items():
                if isinstance(child, dict):
                    yield name, child


def _shape(node: dict) -> str:
    """Canonical JSON of ``node`` without its own ``description`` and :data:`DEF_NAME` tag (what two uses
    must share)."""
    return _compact({k: v for k, v in node.items() if k not in ("description", DEF_NAME)}, sort_keys=True)


def _compact(value: Any, sort_keys: bool = False) -> str:
    """``value`` as compact JSON, non-ASCII kept (the form tools/list sends)."""
    import json
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)


def _size(value: Any) -> int:
    """UTF-8 bytes of ``value`` as tools/list sends it (tags a published schema drops not counted)."""
    if isinstance(value, dict) and DEF_NAME in value:
        value = {k: v for k, v in value.items() if k != DEF_NAME}
    return len(_compact(value).encode())


def _ref(name: str, description: str | None) -> dict:
    return {"$ref": f"#/$defs/{name}"} if description is None else {"description": description,
                                                                     "$ref": f"#/$defs/{name}"}


def hoist_defs(schema: dict) -> dict:
    """``schema`` with every subschema that repeats inside it moved once into the root ``$defs``.

    Two uses share a definition when they are equal apart from their own
    ``description``, which stays beside the ``$ref`` (``{"description": …,
    "$ref": "#/$defs/<name>"}``), so each property keeps what it says; uses that
    are equal description and all share a definition that holds it, and each
    becomes a bare ``{"$ref": …}``. A block is hoisted only when that makes the
    document shorter; the biggest saving goes first, and blocks inside a
    definition may be hoisted in turn. ``<name>`` is the block's :data:`DEF_NAME`
    tag (``timestamp``, ``lesson_id``, ``citation``, ``next_cursor``, …), else
    ``text<maxLength>`` for a plain bounded string without description, else the
    property name of its first use (``<parent>_item`` for array items). The
    result validates exactly the same instances.
    """
    import copy
    import json

    doc = copy.deepcopy(schema)
    defs: dict[str, dict] = doc.pop("$defs", {})
    while True:
        uses: dict[tuple[str, str | None], list[tuple[dict, str]]] = {}

        def walk(node: dict, hint: str, top: bool = False) -> None:
            if not top and "$ref" not in node:
                shape = _shape(node)
                uses.setdefault((shape, None), []).append((node, hint))
                if isinstance(node.get("description"), str):
                    uses.setdefault((shape, node["description"]), []).append((node, hint))
            for name, child in _children(node):
                walk(child, f"{hint}_item" if name == "item" else (name or hint))

        walk(doc, "root", top=True)
        for name, body in defs.items():
            walk(body, name, top=True)
        best, best_gain = None, 0
        for (shape, description), found in uses.items():
            if len(found) < 2:
                continue
            body = json.loads(shape) if description is None else {"description": description, **json.loads(shape)}
            name = _block_name(body, found)
            after = _size(name) + 1 + _size(body) + 1 + sum(
                _size(_ref(name, None if description is not None else node.get("description"))) for node, _ in found)
            gain = sum(_size(node) for node, _ in found) - after
            if gain > best_gain:
                best, best_gain = (found, name, description, body), gain
        if best is None:
            break
        found, base, description, body = best
        name, n = base, 2
        while name in defs:
            name, n = f"{base}_{n}", n + 1
        defs[name] = body
        for node, _ in found:
            own = None if description is not None else node.get("description")
            node.clear()
            node.update(_ref(name, own))
    if defs:
        doc["$defs"] = dict(sorted(defs.items()))
    _drop_def_names(doc)
    return doc


def _block_name(body: dict, found: list[tuple[dict, str]]) -> str:
    """The definition name of ``body`` used at ``found`` (see :func:`hoist_defs`)."""
    import re
    tag = next((node[DEF_NAME] for node, _ in found if node.get(DEF_NAME)), None)
    return re.sub(r"[^A-Za-z0-9_]", "_", tag or _def_name(body) or found[0][1]) or "def"


def _def_name(block: dict) -> str | None:
    """The name of a shared block: its :data:`DEF_NAME` tag, ``text<maxLength>`` for a plain bounded
    string, or None (then the first use names it)."""
    if block.get(DEF_NAME):
        return block[DEF_NAME]
    if block.get("type") == "string" and set(block) <= {"type", "maxLength", "minLength"} and "maxLength" in block:
        return f"text{block['maxLength']}"
    return None


def _drop_def_names(node: Any) -> None:
    if isinstance(node, dict):
        node.pop(DEF_NAME, None)
        for value in node.values():
            _drop_def_names(value)
    elif isinstance(node, list):
        for value in node:
            _drop_def_names(value)

