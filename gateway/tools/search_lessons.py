"""Read tool ``search_lessons``: its spec, input and output JSON Schemas, and its handler (docs/tools.md#search-lessons).

Input (validated by ``schema/tools/search_lessons.input.schema.json``):
``query`` (empty → newest-first listing without calling search), ``filters``,
``fields``, ``limit`` (default 5, max 20), ``cursor``, ``min_score``,
``retrieval_mode``, ``scope``, ``facet`` (hybrid_v1: rank by one facet's channel only,
docs/retrieval.md#facet-selector; echoed in the output when hybrid_v1 answered).

Output: ``results`` (best first), ``next_cursor``, ``requested_mode`` /
``effective_mode`` / ``ranking_version`` / ``semantic_status``, ``partial`` /
``scanned`` / ``scan_limit``, ``scope``, and ``truncated`` when a field was
shortened. Default result view: ``id, score, basis, title``, a one-line
``reusable_lesson``, ``record_origin``, ``confidence`` and a short
``citation`` (first evidence); ``fields`` replaces the view (``id``,
``score`` and ``basis`` always come). Legacy scoring and ``min_score``:
:mod:`gateway.retrieval.legacy`.

Pagination: the cursor binds a fingerprint of (query, effective filters,
fields, min_score, modes, ranking version, generation, scope); positions are
offsets into the freshly recomputed ranking (search) or the repository's
recency walk (listing). Pages shrink to the byte cap and the cursor advances
only past what was returned.

Errors: ``invalid_cursor``, ``unknown_scope``, ``invalid_argument``, plus the
repository mappings of :mod:`gateway.tools.read_common`.
"""
from __future__ import annotations

from typing import Any


from gateway.domain.model import LessonSnapshot
from gateway.domain.schema import load_schema
from gateway.retrieval import legacy
from gateway.retrieval.cursors import invalid_cursor
from gateway.retrieval.filters import SearchFilters
from gateway.retrieval.shaping import conformer, one_line, truncate_text
from gateway.tools.base import ToolContext, tool_spec
from gateway.tools.policy import describe
from gateway.tools.read_common import (
    DEFAULT_LIMIT, fit_page, Pager, rank_page, read_tool, repository, retrieval_state, scope_filters
)
from gateway.tools.read_items import citation_items
from gateway.tools.schema_parts import (
    array, citation_item_schema, cursor, enum, Fields, LIMITS, min_score, next_cursor, obj, page_limit,
    retrieval_mode_in, retrieval_props, revision_id, scan_props, scope_in, scope_out, score, string
)

__all__ = ["NAME", "SPEC"]

NAME = "search_lessons"
#: Legacy has no semantic index; its "generation" is the ranking recipe itself.
GENERATION = "legacy"
#: Fields of the default compact view (besides id, score and basis).
DEFAULT_VIEW = ("title", "reusable_lesson", "record_origin", "confidence", "citation")
ONE_LINE_CHARS = 240
SHORT_CITATION_CHARS = 160
CITATIONS_IN_HIT = 5


def _hit(ranked: legacy.Ranked, fields: tuple[str, ...] | None, cap: int | None) -> tuple[dict[str, Any], set[str]]:
    """The result object of one hit and the names of fields it shortened (``cap``: per-field char cap)."""
    snap: LessonSnapshot = ranked.snapshot
    page = snap.page
    cut: set[str] = set()
    item: dict[str, Any] = {"id": snap.id, "score": min(1.0, max(0.0, ranked.score)), "basis": ranked.basis}

    def text(name: str, value: str, limit: int | None) -> str:
        if limit is not None:
            value, was_cut = truncate_text(value, limit)
            if was_cut:
                cut.add(name)
        return value

    if fields is None:
        item["title"] = text("title", page.fields.get("title", ""), cap)
        summary, was_cut = one_line(page.fields.get("reusable_lesson", ""), ONE_LINE_CHARS)
        if was_cut:
            cut.add("reusable_lesson")
        item["reusable_lesson"] = text("reusable_lesson", summary, cap)
        item["record_origin"] = page.fields.get("record_origin", "")
        item["confidence"] = page.fields.get("confidence", "")
        if page.evidence:
            short, was_cut = one_line(page.evidence[0].get("citation", ""), SHORT_CITATION_CHARS)
            if was_cut:
                cut.add("citation")
            item["citation"] = text("citation", short, cap)
    else:
        for name in fields:
            if name == "id":
                continue
            if name == "revision_id":
                item["revision_id"] = snap.revision_id
            elif name == "citations":
                item["citations"] = citation_items(page)[:CITATIONS_IN_HIT]
            else:
                item[name] = text(name, page.fields.get(name, ""), cap)
    return item, cut


class _Hits:
    """Projects hits once per cap and tracks truncation for the returned prefix."""

    def __init__(self, ctx: ToolContext, fields: tuple[str, ...] | None):
        self.fields = fields
        self.conform = conformer(str(ctx.config.schema_dir), NAME, "results", "[]")
        self.cite_conform = conformer(str(ctx.config.schema_dir), NAME, "results", "[]", "citations", "[]")

    def view(self, ranked: legacy.Ranked, cap: int | None = None) -> tuple[dict[str, Any] | None, frozenset[str]]:
        """(result object or None when the record cannot conform, shortened field names)."""
        item, cut = _hit(ranked, self.fields, cap)
        if "citations" in item:
            item["citations"] = [c for c in (self.cite_conform.fix(c, truncated=cut) for c in item["citations"]) if c]
        return self.conform.fix(item, truncated=cut), frozenset(cut)


@read_tool
def handle(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run ``search_lessons`` (see module doc)."""
    repo = repository(ctx)
    query = arguments.get("query", "") or ""
    limit = int(arguments.get("limit", DEFAULT_LIMIT))
    fields = tuple(arguments["fields"]) if arguments.get("fields") else None
    scope = arguments.get("scope")
    filters = SearchFilters.from_mapping(arguments.get("filters")).intersect(scope_filters(arguments, ctx))
    min_score = float(arguments.get("min_score", 0.0))
    facet = arguments.get("facet")
    modes = retrieval_state(arguments, ctx)
    listing = not query.strip()
    request = {
        "query": query, "filters": filters.canonical(), "fields": list(fields) if fields else None,
        "min_score": min_score, "effective_mode": modes["effective_mode"], "ranking_version": legacy.RANKING_VERSION,
        "generation": GENERATION, "scope": scope, "listing": listing, "schema": load_schema().meta["schema_version"],
        **({"facet": facet} if facet else {}),
    }
    pager = Pager(ctx, NAME, request)
    ranking_version = legacy.RANKING_VERSION
    hits = _Hits(ctx, fields)

    if listing:
        position = pager.position(arguments.get("cursor"), {"rc": None})
        resume = position.get("rc") if isinstance(position, dict) else 0
        if resume is not None and not isinstance(resume, str):
            raise invalid_cursor("The cursor is malformed.")
        ranked = legacy.listing(repo, filters, resume, limit + 1)
        window = list(ranked.items[:limit])

        def next_cursor(n: int) -> str | None:
            if n < len(ranked.items):
                return pager.cursor({"rc": ranked.items[n].resume})
            return pager.cursor({"rc": ranked.next_resume}) if ranked.next_resume else None
    else:
        ranked, ranking_version, pager, offset, modes = rank_page(
            ctx, modes, pager, arguments.get("cursor"),
            hybrid_pager=lambda mode, version, generation: Pager(ctx, NAME, {
                **request, "effective_mode": mode, "ranking_version": version, "generation": generation}),
            legacy_version=legacy.RANKING_VERSION,
            run_hybrid=lambda continuing: ctx.retrieval.search_lessons(
                repo, query=query, filters=filters, min_score=min_score, continuation=continuing, facet=facet),
            run_legacy=lambda: legacy.search(repo, query, filters, min_score))
        window = list(ranked.items[offset:offset + limit])

        def next_cursor(n: int) -> str | None:
            return pager.next_offset(offset, n, len(ranked.items))

    base = {**modes, "ranking_version": ranking_version, "partial": ranked.partial,
            "scanned": ranked.scanned, "scan_limit": ranked.scan_limit, "scope": scope}
    if facet and base["effective_mode"] == "hybrid_v1":
        base["facet"] = facet
    views = [hits.view(r) for r in window]

    def build(part) -> dict[str, Any]:
        out = {"results": [v for v, _ in part if v is not None], "next_cursor": next_cursor(len(part)), **base}
        cut = sorted(set().union(*(c for _, c in part))) if part else []
        if cut:
            out["truncated"] = cut
        return out

    # fit_page only ever shortens the first item of the page
    result, _ = fit_page(ctx.budget, views, build, lambda _view, cap: hits.view(window[0], cap))
    return result


# ------------------------------------------------------------------ schemas
SEARCH_BASES = ("full_text", "lexical", "stored_relation", "semantic_similarity", "hybrid", "listing")


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


def input_schema(F: Fields) -> dict:
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
        "min_score": min_score(),
        "retrieval_mode": retrieval_mode_in(),
        "scope": scope_in(),
        "facet": _facet_in(F),
    }, (), "Search Lessons.")


def output_schema(F: Fields) -> dict:
    rec = F.schema.lesson
    item = {
        "id": F.lesson_id(),
        "score": score(),
        "basis": enum("Which retriever produced this result.", SEARCH_BASES),
    }
    for name in F.core_fields():
        item[name] = F.field(rec, name)
    item["revision_id"] = revision_id("Revision the values were read from.")
    item["citation"] = string("Short citation of the first evidence (default view).",
                              F.schema.evidence.field("citation").max_length)
    item["citations"] = array("Citations of the Lesson (compact view, first page).", citation_item_schema(F),
                              max_items=LIMITS["page_max"])
    result = obj(item, ["id", "score", "basis"], "One search hit.")
    props = {
        "results": array("Hits, best first.", result, max_items=LIMITS["page_max"]),
        "next_cursor": next_cursor(),
        **retrieval_props(F),
        **scan_props(),
        "scope": scope_out(),
        "facet": enum("The facet that ranked this page (present only when the request named a facet and "
                      "hybrid_v1 answered).", _facets(F)),
        "truncated": array("Names of fields shortened (text ends with an explicit truncation marker) to fit "
                           "the response byte cap; select fewer fields or use get_lesson for the full text.",
                           {"type": "string", "enum": _search_fields(F) + ["citation"]}, unique=True),
    }
    return obj(props, [p for p in props if p not in ("truncated", "facet", "semantic_progress")], "Search results.")


SPEC = tool_spec(NAME, 'Search Lessons', describe(
        """Search the lab's research Lessons. A query runs full-text search over all fields (title weighted highest); an empty query lists Lessons newest first. Results are compact (id, title, one-line reusable_lesson, record_origin, confidence, a short citation); add fields with `fields`. Filter by confidence, record_origin, review_state, updated range or a named scope. Page with `limit` (max 20) and the opaque `cursor` (restart from the first page when a cursor is refused); `partial`, `scanned` and `scan_limit` tell whether the scan was complete. retrieval_mode=hybrid_v1 also matches meaning across wording and languages and fuses it with full text (exact identifiers and error strings still rank first). min_score applies to the full-text score in legacy and to the fused 0-1 score in hybrid_v1. effective_mode and semantic_status say what answered (a first page falls back to legacy when semantic search is unavailable). facet (hybrid_v1 only) ranks by one facet alone (situation, approach or mechanism) with no full text, so a client can search the facets separately and fuse them."""
    ), 'read', handle, input_schema, output_schema)
