"""Read tool ``get_lesson``: its spec, input and output JSON Schemas, and its handler (docs/tools.md#get-lesson).

Returns the Lesson's current ``revision_id``, its ``content_digest`` (what
``audit_lessons`` compares), the selected core ``lesson`` fields (default:
all; legacy reviewer/review_state never) and three independent cursor pages —
``citations`` (each with its evidence ``digest`` and ``current_verdict``),
``verifications`` and ``relations`` (outgoing ones stored on the page plus
incoming ones stored on other Lessons, each with ``direction``; analogous_to
marked ``symmetric``, a pair stored both ways listed once) — default 5, max 20 items each, with ``total``.

Byte cap: the sub-pages shrink first (to a common size, then each grows back
while it fits); when even one item per list does not fit, long Lesson fields
are shortened with an explicit marker and listed in ``truncated``. A minimal
read is never shortened (docs/read-path.md#read-back): one field requested
alone, and the first item of each sub-list page, are sent whole even above
the cap (up to the read ceiling). ``citation_detail=full`` never shortens a
citation; a stored citation over the schema's field lengths (a browser edit)
fails with ``item_too_large`` naming the evidence.
Sub-list cursors bind the Lesson id, its revision and the detail level: after
an edit they are refused with ``invalid_cursor`` (restart from the first page).

Errors: ``not_found``, ``item_too_large``, ``invalid_cursor``,
``malformed_lesson`` and the repository mappings of :mod:`gateway.tools.read_path`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


from gateway.core.errors import ToolError
from gateway.domain.digests import content_digest
from gateway.domain.markers import GITHUB_ID, GITHUB_LOGIN, parse_summary
from gateway.tools.shaping import ItemTooLarge, truncate_text
from gateway.tools.contract import ToolContext, tool_spec, WholeRead
from gateway.tools.policy import describe
from gateway.tools.readability import short_field_chars
from gateway.retrieval.request import DEFAULT_LIMIT
from gateway.tools.read_path import Pager, read_tool, repository
from gateway.tools.read_items import (
    citation_items, CORRECTIONS, relation_item, standing_of, symmetric_relations, unmirrored, verification_item
)
from gateway.tools.schema_builders import (
    array, citation_item_schema, cursor, DIRECTIONS, enum, Fields, integer,
    next_cursor, obj, page_limit, revision_id, standing_out, STANDING_MAX, string
)
from gateway.domain.repository import snapshot_edges

__all__ = ["NAME", "SPEC"]

NAME = "get_lesson"
SUBLISTS = ("citations", "verifications", "relations")
#: Pages examined for incoming relations (link-table candidates).
INCOMING_SCAN_LIMIT = 500
_MAX_FIELD_CHARS = 20000


@dataclass
class _Sub:
    """One sub-list page: conformed window (None = invalid record, skipped) and its cursor helper."""

    pager: Pager
    offset: int
    window: list[dict[str, Any] | None]
    total: int
    count: int = field(default=0)

    def view(self, count: int) -> dict[str, Any]:
        page = self.window[:count]
        out = {"items": [x for x in page if x is not None],
               "next_cursor": self.pager.next_offset(self.offset, count, self.total), "total": self.total}
        skipped = sum(1 for x in page if x is None)
        if skipped:  # said, never silent: total still counts them
            out["skipped"] = skipped
        return out


def _too_large(name: str, index: int, record_id: str) -> ToolError:
    return ToolError("item_too_large", f"{name} item {index} ({record_id or 'no id'}) holds values longer than the "
                     "published field lengths (edited outside the gateway), so citation_detail=full cannot return it "
                     "whole; request citation_detail=compact to read it shortened.",
                     details={"list": name, "position": index, "record_id": record_id[:64]})


@read_tool
def handle(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run ``get_lesson`` (see module doc)."""
    repo = repository(ctx)
    lesson_id = arguments["id"]
    snap = repo.get_snapshot(lesson_id)
    if snap is None:
        raise ToolError("not_found", f"No Lesson with id {lesson_id!r}; use search_lessons to find ids.")
    schema = ctx.schema
    detail = arguments.get("citation_detail", "compact")
    symmetric = symmetric_relations(schema)
    incoming = repo.find_relation_edges(lesson_id, outgoing=False, incoming=True, limit=INCOMING_SCAN_LIMIT)
    outgoing = list(snapshot_edges(snap))
    standing = standing_of(snap.page, (e for e in incoming.incoming if e.relation in CORRECTIONS), STANDING_MAX)
    records = {
        "citations": citation_items(snap.page, detail, schema),
        "verifications": [verification_item(v) for v in snap.page.verifications],
        "relations": [relation_item(e, "outgoing", symmetric) for e in outgoing]
        + [relation_item(e, "incoming", symmetric) for e in unmirrored(outgoing, incoming.incoming, symmetric)],
    }
    subs: dict[str, _Sub] = {}
    for name in SUBLISTS:
        pager = Pager(ctx, f"{NAME}:{name}", {"id": lesson_id, "revision_id": snap.revision_id,
                                              "detail": detail if name == "citations" else None})
        offset = pager.offset(arguments.get(f"{name}_cursor"))
        limit = int(arguments.get(f"{name}_limit", DEFAULT_LIMIT))
        strict = name == "citations" and detail == "full"
        fix = ctx.shapes.conformer(NAME, name, "items", "[]")
        window = []
        for index, item in enumerate(records[name][offset:offset + limit], start=offset):
            try:
                window.append(fix.fix(item, allow_truncation=not strict))
            except ItemTooLarge:
                raise _too_large(name, index, str(item.get("id", ""))) from None
        subs[name] = _Sub(pager, offset, window, len(records[name]))

    lesson_fix = ctx.shapes.conformer(NAME, "lesson")
    names = list(arguments.get("fields") or lesson_fix.properties)
    cache: dict[int | None, tuple[dict[str, Any], set[str]]] = {}

    def lesson_view(cap: int | None) -> tuple[dict[str, Any], set[str]]:
        if cap not in cache:
            cut: set[str] = set()
            values = {}
            for n in names:
                value = snap.page.fields.get(n, "")
                if cap is not None and lesson_fix.max_length(n):
                    value, was_cut = truncate_text(value, cap)
                    if was_cut:
                        cut.add(n)
                values[n] = value
            cache[cap] = (lesson_fix.fix(values, truncated=cut) or {}, cut)
        return cache[cap]

    digest = content_digest(snap.page, schema)
    marker = parse_summary(snap.summary, schema)
    writer = marker.actor if marker is not None else None  # docs/tools.md#attribution
    writer_id = marker.actor_id if marker is not None else None

    def build(counts: dict[str, int], cap: int | None) -> dict[str, Any]:
        lesson, cut = lesson_view(cap)
        out = {"id": lesson_id, "revision_id": snap.revision_id, "content_digest": digest, "lesson": lesson}
        if writer:
            out["revision_github_login"] = writer
        if writer_id:
            out["revision_github_id"] = writer_id
        if standing:
            out["standing"] = standing
        out.update({name: subs[name].view(counts[name]) for name in SUBLISTS})
        if cut:
            out["truncated"] = sorted(cut)
        return out

    return _fit(ctx, subs, build, len(names) == 1)


def _fit(ctx: ToolContext, subs: dict[str, _Sub], build, single_field: bool) -> dict[str, Any]:
    """Largest sub-pages (then longest Lesson text) that fit the byte cap; see module doc.

    When even one item per list does not fit: a read of one field returns it
    and the items whole (:class:`WholeRead`, up to the read ceiling); a read of
    several fields shortens the long ones (never below the longest short
    field, so titles, accounts and times stay whole) and returns the items
    whole if they alone are over the cap.
    """
    fits = ctx.budget.fits
    full = {name: len(sub.window) for name, sub in subs.items()}
    if fits(build(full, None)):
        return build(full, None)

    def common(k: int) -> dict[str, int]:
        return {name: min(k, n) for name, n in full.items()}

    lo, hi, best = 1, max(full.values()), None
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(build(common(mid), None)):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    cap: int | None = None
    if best is None:
        counts = common(1)
        if single_field:
            return WholeRead(build(counts, None))
        floor = short_field_chars(ctx.schema)
        lo, hi = floor, _MAX_FIELD_CHARS
        while lo <= hi:
            mid = (lo + hi) // 2
            if fits(build(counts, mid)):
                cap, lo = mid, mid + 1
            else:
                hi = mid - 1
        if cap is None:
            return WholeRead(build(counts, floor))
    else:
        counts = common(best)
    for name in SUBLISTS:  # let each list grow back while the page still fits
        while counts[name] < full[name] and fits(build({**counts, name: counts[name] + 1}, cap)):
            counts[name] += 1
    return build(counts, cap)


# ------------------------------------------------------------------ schemas
def _verification_item(schema_fields: Fields) -> dict:
    rec = schema_fields.schema.verification
    props = {f.name: schema_fields.for_field(rec, f, "out") for f in rec.fields}
    props["id"] = schema_fields.verification_id()
    props["evidence_id"] = schema_fields.evidence_id("Id of the evidence this record checked.")
    return obj(props, list(props), "One append-only verification record.")


def _relation_item(schema_fields: Fields) -> dict:
    rec = schema_fields.schema.relation
    props = {f.name: schema_fields.for_field(rec, f, "out") for f in rec.fields}
    props["direction"] = enum("outgoing: stored on this Lesson; incoming: stored on another Lesson pointing here.",
                              DIRECTIONS)
    props["symmetric"] = {"description": "True for relation types shown in both directions (analogous_to).",
                          "type": "boolean"}
    required = [n for n in props if n != "note"]
    return obj(props, required, "One typed relation between two Lessons.")


def _sub_page(schema_fields: Fields, description: str, item: dict) -> dict:
    return obj({
        "items": array("This page of records.", item, max_items=schema_fields.limits["page_max"]),
        "next_cursor": next_cursor(schema_fields),
        "total": integer("Total number of records of this kind on the Lesson.", 0),
        "skipped": integer("Records of this page left out because a value breaks this schema (edited outside the "
                           "gateway); total still counts them, s3rm audit names them.", 1),
    }, ["items", "next_cursor", "total"], description)


#: What each list's ``<list>_cursor`` and ``<list>_limit`` mean (one text each, shared by the three lists).
PAGE_CURSOR_TEXT = "That list's next_cursor from the previous answer."
PAGE_LIMIT_TEXT = "Items per page of that list."


def input_schema(schema_fields: Fields) -> dict:
    return obj({
        "id": schema_fields.lesson_id(),
        "fields": array("Fields to return (default: all); id and revision_id always come.",
                        {"type": "string", "enum": schema_fields.core_fields() + ["revision_id"]}, min_items=1, unique=True),
        "citation_detail": enum("full adds note and provenance and never truncates.", ("compact", "full"), default="compact"),
        "citations_cursor": cursor(schema_fields, PAGE_CURSOR_TEXT),
        "citations_limit": page_limit(schema_fields, PAGE_LIMIT_TEXT),
        "verifications_cursor": cursor(schema_fields, PAGE_CURSOR_TEXT),
        "verifications_limit": page_limit(schema_fields, PAGE_LIMIT_TEXT),
        "relations_cursor": cursor(schema_fields, PAGE_CURSOR_TEXT),
        "relations_limit": page_limit(schema_fields, PAGE_LIMIT_TEXT),
    }, ["id"], "Read one Lesson.")


def output_schema(schema_fields: Fields) -> dict:
    rec = schema_fields.schema.lesson
    lesson = obj({n: schema_fields.field(rec, n) for n in schema_fields.core_fields()}, (),
                 "Selected core fields (legacy reviewer/review_state are never returned).")
    return obj({
        "id": schema_fields.lesson_id(),
        "revision_id": revision_id("Revision the Lesson was read from."),
        "content_digest": string("Digest of the whole Lesson content (audit_lessons compares it).", 71,
                                 pattern=schema_fields.patterns["digest"]),
        "revision_github_login": string(
            "GitHub login github mode verified for the write that made this revision; absent otherwise.", 39,
            pattern=f"^{GITHUB_LOGIN}$"),
        "revision_github_id": string(
            "That person's numeric GitHub id (a rename keeps it); absent for revisions written before it was "
            "recorded.", 20, pattern=f"^{GITHUB_ID}$"),
        "lesson": lesson,
        "standing": standing_out(schema_fields),
        "citations": _sub_page(schema_fields, "Evidence of the Lesson.", citation_item_schema(schema_fields)),
        "verifications": _sub_page(schema_fields, "Verification records of the Lesson.", _verification_item(schema_fields)),
        "relations": _sub_page(schema_fields, "Relations stored on or pointing at the Lesson.", _relation_item(schema_fields)),
        "truncated": array("Fields shortened to fit the byte cap (marked in the text); request one alone to get "
                           "it whole.",
                           {"type": "string", "enum": schema_fields.core_fields()}, unique=True),
    }, ["id", "revision_id", "content_digest", "lesson", "citations", "verifications", "relations"],
        "One Lesson with paged citations, verification records and relations.")


SPEC = tool_spec(NAME, 'Get Lesson', describe(
        """Read one Lesson by id: revision id, content digest, fields, and cursor pages of its citations, verification records and relations. Each evidence carries the digest record_evidence_verification expects."""
    ), 'read', handle, input_schema, output_schema)
