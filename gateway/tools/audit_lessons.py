"""Read tool ``audit_lessons``: its spec, input and output JSON Schemas, and its handler (docs/tools.md#audit-lessons).

Input: ``expectations`` (1–50; each ``id`` plus optional ``revision_id``,
``content_digest``, ``evidence_ids`` (≤ 8) and ``relations`` (≤ 8 ``{relation,
to}`` stored on the Lesson)), ``limit`` (default and max 20), ``cursor``.

Every call reads ALL target Lessons fresh (one batch of ≤ 50) and returns the
outcomes of expectations ``[offset, offset+n)`` in request order:
``ok`` | ``missing`` (no such page) | ``mismatch`` with ``failed`` listing
each failed expectation and, for list expectations, the failing item's
``index``. A page that exists but cannot be parsed is a ``mismatch`` on every
given expectation. ``current_revision_id`` is the Lesson's latest revision.

The cursor binds the expectation list and the revision ids of ALL targets as
read for the first page: if any target changed between pages the cursor is
refused (``invalid_cursor``) so an audit never mixes two states of the wiki.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any


from gateway.config.schema import Schema
from gateway.domain.digests import content_digest
from gateway.domain.model import LessonSnapshot
from gateway.tools.cursors import invalid_cursor
from gateway.tools.contract import ToolContext, tool_spec
from gateway.tools.policy import describe
from gateway.tools.read_path import fit_page, Pager, read_tool, repository
from gateway.tools.schema_builders import (
    array, cursor, enum, Fields, integer, next_cursor, nullable, obj, page_limit,
    revision_id, scan_props, string
)

__all__ = ["NAME", "SPEC"]

NAME = "audit_lessons"
DEFAULT_AUDIT_LIMIT = 20
SCALARS = ("revision_id", "content_digest")
LISTS = ("evidence_ids", "relations")


def _failures(expect: dict[str, Any], snap: LessonSnapshot | None, schema: Schema) -> list[dict[str, Any]]:
    """Failed expectations of one target (every given expectation when ``snap`` is None; digests under ``schema``)."""
    failed: list[dict[str, Any]] = []
    page = snap.page if snap else None
    for key in SCALARS:
        if key not in expect:
            continue
        actual = None if snap is None else (snap.revision_id if key == "revision_id" else content_digest(page, schema))
        if actual != expect[key]:
            failed.append({"expectation": key, "index": None})
    if "evidence_ids" in expect:
        present = {e.get("id") for e in page.evidence} if page else set()
        failed += [{"expectation": "evidence_ids", "index": i}
                   for i, eid in enumerate(expect["evidence_ids"]) if eid not in present]
    if "relations" in expect:
        stored = {(r.get("relation"), r.get("to")) for r in page.relations} if page else set()
        failed += [{"expectation": "relations", "index": i}
                   for i, rel in enumerate(expect["relations"]) if (rel["relation"], rel["to"]) not in stored]
    return failed


def _state_digest(revisions: dict[str, int | None]) -> str:
    body = json.dumps(sorted(revisions.items()), separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


@read_tool
def handle(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run ``audit_lessons`` (see module doc)."""
    repo = repository(ctx)
    expectations = arguments["expectations"]
    limit = int(arguments.get("limit", DEFAULT_AUDIT_LIMIT))
    ids = list(dict.fromkeys(e["id"] for e in expectations))
    snaps = repo.get_snapshots(ids)
    unparsable = repo.exists([i for i in ids if i not in snaps]) if len(snaps) < len(ids) else set()
    revisions = {i: (snaps[i].revision_id if i in snaps else None) for i in ids}
    state = _state_digest({**revisions, **{i: -1 for i in unparsable}})

    pager = Pager(ctx, NAME, {"expectations": expectations, "schema": ctx.schema.meta["schema_version"]})
    position = pager.position(arguments.get("cursor"), {"o": 0, "s": state})
    offset = position.get("o") if isinstance(position, dict) else None
    if not isinstance(offset, int) or offset < 0:
        raise invalid_cursor("The cursor is malformed.")
    if position.get("s") != state:
        raise invalid_cursor("A Lesson in this audit changed since the first page was read.")

    def outcome(index: int) -> dict[str, Any]:
        expect = expectations[index]
        snap = snaps.get(expect["id"])
        if snap is None and expect["id"] not in unparsable:
            return {"position": index, "id": expect["id"], "status": "missing", "current_revision_id": None,
                    "failed": []}
        failed = _failures(expect, snap, ctx.schema)
        return {"position": index, "id": expect["id"], "status": "mismatch" if failed else "ok",
                "current_revision_id": snap.revision_id if snap else None, "failed": failed}

    window = [outcome(i) for i in range(offset, min(offset + limit, len(expectations)))]

    def build(part) -> dict[str, Any]:
        nxt = offset + len(part)
        return {"results": list(part),
                "next_cursor": pager.cursor({"o": nxt, "s": state}) if nxt < len(expectations) else None,
                "partial": False, "scanned": len(ids), "scan_limit": 50}

    result, _ = fit_page(ctx.budget, window, build)
    return result


# ------------------------------------------------------------------ schemas
AUDIT_STATUSES = ("ok", "missing", "mismatch")
AUDIT_EXPECTATIONS = ("revision_id", "content_digest", "evidence_ids", "relations")


def input_schema(schema_fields: Fields) -> dict:
    rel = schema_fields.schema.relation
    expectation = obj({
        "id": schema_fields.lesson_id(),
        "revision_id": revision_id("Expected current revision id."),
        "content_digest": string("Expected content digest.", 71, pattern=schema_fields.patterns["digest"]),
        "evidence_ids": array("Evidence ids expected on the Lesson.", schema_fields.evidence_id(), min_items=1,
                              max_items=schema_fields.limits["expectation_items_max"], unique=True),
        "relations": array("Relations expected on the Lesson.", obj({
            "relation": schema_fields.field(rel, "relation", "in"),
            "to": schema_fields.field(rel, "to", "in"),
        }, ["relation", "to"], "An expected outgoing relation."), min_items=1,
            max_items=schema_fields.limits["expectation_items_max"], unique=True),
    }, ["id"], "What the caller expects about one Lesson.")
    return obj({
        "expectations": array("Lessons to check.", expectation, min_items=1,
                              max_items=schema_fields.limits["audit_expectations_max"]),
        "limit": page_limit(schema_fields, "Results per page.", default=schema_fields.limits["audit_page_default"]),
        "cursor": cursor(schema_fields),
    }, ["expectations"], "Check stored Lessons against expectations.")


def output_schema(schema_fields: Fields) -> dict:
    failed = obj({
        "expectation": enum("Which expectation failed.", AUDIT_EXPECTATIONS),
        "index": nullable(integer("Position within evidence_ids/relations, or null for scalar expectations.", 0)),
    }, ["expectation", "index"], "One failed expectation.")
    result = obj({
        "position": integer("Index of the expectation in the request.", 0),
        "id": schema_fields.lesson_id(),
        "status": enum("ok, missing (no such Lesson) or mismatch.", AUDIT_STATUSES),
        "current_revision_id": nullable(revision_id("Current revision id, or null when missing.")),
        "failed": array("Failed expectations (empty when ok).", failed),
    }, ["position", "id", "status", "current_revision_id", "failed"], "Audit outcome of one expectation.")
    return obj({
        "results": array("Outcomes in expectation order.", result, max_items=schema_fields.limits["page_max"]),
        "next_cursor": next_cursor(schema_fields),
        **scan_props(),
    }, ["results", "next_cursor", "partial", "scanned", "scan_limit"], "Audit results.")


SPEC = tool_spec(NAME, 'Audit Lessons', describe(
        """Check up to 50 expectations about Lessons without reading their bodies: ok, missing, or mismatch naming what failed. Use it after changing several Lessons."""
    ), 'read', handle, input_schema, output_schema)
