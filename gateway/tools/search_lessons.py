"""Read tool ``search_lessons``: its spec, input and output JSON Schemas, and its handler (docs/tools.md#search-lessons).

Its fields are :func:`input_schema` and :func:`output_schema` below (exported to
``schema/tools/search_lessons.{input,output}.schema.json``). An empty ``query``
lists the newest Lessons without calling search; ``facet`` makes hybrid_v1 rank
by one facet's channel only (docs/retrieval.md#facet-selector). Default result
view: ``id, score, basis, title``, a one-line ``reusable_lesson``,
``record_origin``, ``confidence`` and a short ``citation`` (first evidence);
``fields`` replaces the view (``id``, ``score`` and ``basis`` always come).
Legacy scoring and ``min_score``: :mod:`gateway.retrieval.legacy.search`.

``also_phrased_as`` adds other phrasings of the same question, ranked with
``query`` (docs/retrieval.md#phrasings). Pagination: the cursor binds a
fingerprint of (query, its other phrasings, effective filters,
fields, min_score, modes, ranking version, generation, scope); positions are
offsets into the freshly recomputed ranking (search) or the repository's
recency walk (listing). Pages shrink to the byte cap and the cursor advances
only past what was returned.

Errors: ``invalid_cursor``, ``unknown_scope``, ``invalid_argument``, plus the
repository mappings of :mod:`gateway.tools.read_path`.
"""
from __future__ import annotations

import math
from typing import Any, Sequence


from gateway.domain.model import LessonSnapshot
from gateway.config.schema import Schema
from gateway.retrieval.legacy import search as legacy
from gateway.tools.cursors import invalid_cursor
from gateway.retrieval.request import SearchRequest
from gateway.tools.shaping import one_line, truncate_text
from gateway.tools.contract import ToolContext, tool_spec
from gateway.tools.policy import describe
from gateway.tools.read_path import fit_page, Pager, rank_page, read_tool, repository, retrieval_state
from gateway.retrieval.hybrid.fusion import best_votes, is_identifier_query
from gateway.tools.read_items import citation_items, CORRECTIONS, IncomingAhead, standings
from gateway.tools.schema_builders import (
    array, citation_item_schema, cursor, enum, Fields, integer, min_score, next_cursor, obj,
    OPTIONAL_RETRIEVAL_PROPS, page_limit, retrieval_mode_in, retrieval_props, revision_id, scan_props, scope_in,
    scope_out, score, standing_out, STANDING_MAX, string
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


TIERS = {2: "relation", 1: "exact", 0: "rest"}


def explain_of(ranked: Any, position: int) -> dict[str, Any]:
    """The ``explain`` block of one hit (docs/tools.md#explain): each channel's best rank and own score.

    ``ranked`` is a hybrid result (its fusion votes and tier) or a legacy one (its
    full-text rank ``position``, 1-based, and score).
    """
    votes = getattr(ranked, "votes", None)
    if not votes:
        return {"channels": [{"channel": "full_text", "rank": position, "score": round(float(ranked.score), 6)}],
                "tier": "rest"}
    channels = []
    for vote in sorted(best_votes(votes).values(), key=lambda v: (v.rank, v.channel)):
        entry: dict[str, Any] = {"channel": vote.channel, "rank": vote.rank}
        if vote.source_score is not None and math.isfinite(vote.source_score):
            entry["score"] = round(float(vote.source_score), 6)
        channels.append(entry)
    out: dict[str, Any] = {"channels": channels, "tier": TIERS.get(getattr(ranked, "tier", 0), "rest")}
    slot_from = getattr(ranked, "slot_from", None)
    if slot_from is not None:  # moved by the language slots (docs/hybrid-search.md#language-slots)
        out["slot"] = {"fusion_rank": int(slot_from)}
    return out


def _hit(ranked: legacy.Ranked, fields: tuple[str, ...] | None, cap: int | None, schema: Schema,
         extra: dict[str, Any] | None = None) -> tuple[dict[str, Any], set[str]]:
    """The result object of one hit and the names of fields it shortened (``cap``: per-field char cap;
    citation digests under ``schema``).

    ``extra``: ``standing`` / ``explain`` members added after the fields.
    """
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
                item["citations"] = citation_items(page, "compact", schema)[:CITATIONS_IN_HIT]
            else:
                item[name] = text(name, page.fields.get(name, ""), cap)
    item.update(extra or {})
    return item, cut


class _Hits:
    """Projects hits once per cap and tracks truncation for the returned prefix."""

    def __init__(self, ctx: ToolContext, fields: tuple[str, ...] | None):
        self.fields = fields
        self.schema = ctx.schema
        self.conform = ctx.shapes.conformer(NAME, "results", "[]")
        self.cite_conform = ctx.shapes.conformer(NAME, "results", "[]", "citations", "[]")
        #: lesson id → ``standing`` / ``explain`` members of its result
        self.extra: dict[str, dict[str, Any]] = {}

    def view(self, ranked: legacy.Ranked, cap: int | None = None) -> tuple[dict[str, Any] | None, frozenset[str]]:
        """(result object or None when the record cannot conform, shortened field names)."""
        item, cut = _hit(ranked, self.fields, cap, self.schema, self.extra.get(ranked.snapshot.id))
        if "citations" in item:
            item["citations"] = [c for c in (self.cite_conform.fix(c, truncated=cut) for c in item["citations"]) if c]
        return self.conform.fix(item, truncated=cut), frozenset(cut)


@read_tool
def handle(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run ``search_lessons`` (see module doc): the arguments become one
    :class:`~gateway.retrieval.request.SearchRequest`, which legacy or hybrid ranking receives."""
    repo = repository(ctx)
    request = SearchRequest.from_arguments(arguments, ctx.config, ctx.principal)
    query, limit, scope, facet, listing = request.query, request.limit, request.scope, request.facet, request.listing
    fields = tuple(arguments["fields"]) if arguments.get("fields") else None
    explain = bool(arguments.get("explain"))
    exclude_superseded = bool(arguments.get("exclude_superseded"))
    modes = retrieval_state(request.mode, ctx)
    bound = {  # what the cursor fingerprint binds (docs/tools.md#cursors)
        "query": query, **({"also_phrased_as": list(request.phrasings)} if request.phrasings else {}),
        "filters": request.filters.canonical(), "fields": list(fields) if fields else None,
        "min_score": request.min_score, "effective_mode": modes["effective_mode"],
        "ranking_version": legacy.RANKING_VERSION,
        "generation": GENERATION, "scope": scope, "listing": listing, "schema": ctx.schema.meta["schema_version"],
        **({"facet": facet} if facet else {}), **({"exclude_superseded": True} if exclude_superseded else {}),
    }
    pager = Pager(ctx, NAME, bound)
    ranking_version = legacy.RANKING_VERSION
    hits = _Hits(ctx, fields)

    if listing:
        position = pager.position(request.cursor, {"rc": None})
        resume = position.get("rc") if isinstance(position, dict) else 0
        if resume is not None and not isinstance(resume, str):
            raise invalid_cursor("The cursor is malformed.")
        ranked = legacy.listing(repo, request, resume, limit + 1)
        items, incoming = (_without_superseded(repo, ranked.items) if exclude_superseded
                           else (list(ranked.items), None))
        window = items[:limit]

        def next_cursor(n: int) -> str | None:
            if n < len(items):
                return pager.cursor({"rc": items[n].resume})
            return pager.cursor({"rc": ranked.next_resume}) if ranked.next_resume else None
    else:
        ahead = IncomingAhead(repo)  # the page's standing read, sent while hybrid still ranks
        ranked, ranking_version, pager, offset, modes = rank_page(
            ctx, modes, pager, request.cursor,
            hybrid_pager=lambda mode, version, generation: Pager(ctx, NAME, {
                **bound, "effective_mode": mode, "ranking_version": version, "generation": generation}),
            legacy_version=legacy.RANKING_VERSION,
            run_hybrid=lambda continuing: ctx.retrieval.search_lessons(
                repo, request, continuation=continuing, beside=None if exclude_superseded else ahead),
            run_legacy=lambda: legacy.search(repo, request))
        items, incoming = (_without_superseded(repo, ranked.items) if exclude_superseded
                           else (list(ranked.items), None))
        window = items[offset:offset + limit]
        if incoming is None:
            incoming = ahead.covering(r.snapshot.id for r in window)

        def next_cursor(n: int) -> str | None:
            return pager.next_offset(offset, n, len(items))

    base = {**modes, "ranking_version": ranking_version, "partial": ranked.partial,
            "scanned": ranked.scanned, "scan_limit": ranked.scan_limit, "scope": scope}
    if facet and base["effective_mode"] == "hybrid_v1":
        base["facet"] = facet
    hint = _hint(query, window, ranked.partial, base)
    if hint:
        base["hint"] = hint
    corrections = standings(repo, {r.snapshot.id: r.snapshot for r in window}, STANDING_MAX, incoming)
    first = (0 if listing else offset) + 1
    for n, r in enumerate(window):
        extra = {"standing": corrections[r.snapshot.id]} if r.snapshot.id in corrections else {}
        if explain and not listing:
            extra["explain"] = explain_of(r, first + n)
        hits.extra[r.snapshot.id] = extra
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


def _without_superseded(repo: Any, items: Sequence[Any]) -> tuple[list[Any], dict[str, list[Any]]]:
    """``items`` minus Lessons another Lesson supersedes, and the incoming corrections of every item
    (one batched read; the page's ``standing`` reuses it)."""
    incoming, _ = repo.find_incoming_edges([r.snapshot.id for r in items], CORRECTIONS)
    kept = [r for r in items if not any(e.relation == "supersedes" for e in incoming.get(r.snapshot.id, ()))]
    return kept, incoming


def _hint(query: str, window: Sequence[Any], partial: bool, base: dict[str, Any]) -> str | None:
    """A short next step when a page is empty or partial (docs/tools.md#search-habits); None otherwise."""
    if not query.strip():
        return None
    if not window:
        if base.get("requested_mode") == "hybrid_v1" and base.get("effective_mode") != "hybrid_v1":
            return ("No match in full text, and the semantic index is not serving yet (semantic_status): "
                    "retry shortly, or rephrase.")
        if is_identifier_query(query):
            return ("No exact match for this identifier-like query: if it is a Lesson id, try get_lesson; "
                    "else search its words or the title.")
        return ("Nothing matched: rephrase, try the title's words or the other language (Korean/English) "
                "before concluding that no Lesson exists.")
    if partial:
        return ("The scan stopped at scan_limit: results beyond it were not examined; a more specific "
                "query or filters narrow it.")
    return None


# ------------------------------------------------------------------ schemas
SEARCH_BASES = ("full_text", "lexical", "stored_relation", "semantic_similarity", "hybrid", "listing")


def _facets(schema_fields: Fields) -> list[str]:
    """Retrieval facets in the order schema/lesson.toml's fields first name them."""
    return list(dict.fromkeys(f.facet for f in schema_fields.schema.lesson.fields if f.facet))


def _facet_in(schema_fields: Fields) -> dict:
    return enum("hybrid_v1 only: rank by this facet alone, no full text (situation: question, context, observation; "
                "approach: attempt; mechanism: the rest).", _facets(schema_fields))


def _search_fields(schema_fields: Fields) -> list[str]:
    return ["id"] + schema_fields.core_fields() + ["revision_id", "citations"]


def input_schema(schema_fields: Fields) -> dict:
    rec = schema_fields.schema.lesson
    filters = obj({
        "confidence": array("Confidence values to keep.",
                            schema_fields.field(rec, "confidence"), min_items=1, unique=True),
        "record_origin": array("Origins to keep.",
                               schema_fields.field(rec, "record_origin"), min_items=1, unique=True),
        "review_state": array("Legacy review states to keep.",
                              schema_fields.field(rec, "review_state"), min_items=1, unique=True),
        "updated_after": schema_fields.timestamp("Updated at or after (UTC)."),
        "updated_before": schema_fields.timestamp("Updated before (UTC)."),
    }, (), "Keep only matching Lessons.")
    return obj({
        "query": string("Keywords or natural language; empty lists newest first.",
                        schema_fields.limits["query_max_length"], default=""),
        "also_phrased_as": array("The same question in other words, e.g. in the other language (Korean/English); "
                                 "ranked together with query, query first.",
                                 string("", schema_fields.limits["query_max_length"], min_length=1),
                                 min_items=1, max_items=schema_fields.limits["query_phrasings_max"], unique=True),
        "filters": filters,
        "fields": array("Fields per result (default: a compact view).",
                        {"type": "string", "enum": _search_fields(schema_fields)}, min_items=1, unique=True),
        "limit": page_limit(schema_fields, "Results per page."),
        "cursor": cursor(schema_fields),
        "min_score": min_score(MIN_SCORE_TEXT),
        "retrieval_mode": retrieval_mode_in(),
        "scope": scope_in(schema_fields),
        "facet": _facet_in(schema_fields),
        "exclude_superseded": {"description": "Leave out superseded Lessons.", "type": "boolean", "default": False},
        "explain": {"description": "Add why each hit was returned.", "type": "boolean", "default": False},
    }, (), "Search Lessons.")


#: What ``score`` is per mode (docs/retrieval.md#min-score); shown to agents in the schemas.
SCORE_TEXT = ("0-1, comparable within this response only. legacy: full-text score, in order. hybrid_v1: fused rank "
              "tiers, so a lower score can be listed above a higher one.")
#: How to choose ``min_score``.
MIN_SCORE_TEXT = ("Drop hits below this score (default 0). Scores are relative to the query: prefer limit, or just under "
                  "the weakest useful score seen for this query and mode.")


def output_schema(schema_fields: Fields) -> dict:
    rec = schema_fields.schema.lesson
    item = {
        "id": schema_fields.lesson_id(),
        "score": score(SCORE_TEXT),
        "basis": enum("Which retriever produced this result.", SEARCH_BASES),
    }
    for name in schema_fields.core_fields():
        item[name] = schema_fields.field(rec, name)
    item["revision_id"] = revision_id("Revision the values were read from.")
    item["citation"] = string("Short citation of the first evidence (default view).",
                              schema_fields.schema.evidence.field("citation").max_length)
    item["citations"] = array("Citations of the Lesson (compact view, first page).", citation_item_schema(schema_fields),
                              max_items=schema_fields.limits["page_max"])
    item["standing"] = standing_out(schema_fields)
    item["explain"] = obj({
        "channels": array("Channels that found it, best rank first.", obj({
            "channel": string("full_text, bm25, semantic:<facet>, ...", 32),
            "rank": integer("Rank in the channel.", 1),
            "score": {"description": "The channel's own score.", "type": "number"},
        }, ["channel", "rank"], "One vote."), max_items=16),
        "tier": enum("Fusion tier.", tuple(TIERS.values())),
        "slot": obj({
            "fusion_rank": integer("Its rank in the fused list before the language slots moved it.", 1),
        }, ["fusion_rank"], "Present when the language slots moved this hit."),
    }, ["channels", "tier"], "Why it was returned (explain: true).")
    result = obj(item, ["id", "score", "basis"], "One search hit.")
    props = {
        "results": array("Hits in ranking order (not always score order in hybrid_v1: see score).", result, max_items=schema_fields.limits["page_max"]),
        "next_cursor": next_cursor(schema_fields),
        **retrieval_props(schema_fields),
        **scan_props(),
        "scope": scope_out(schema_fields),
        "facet": enum("Facet that ranked this page (when requested and hybrid_v1 answered).", _facets(schema_fields)),
        "hint": string("Next step when the page is empty or partial.", 300),
        "truncated": array("Fields shortened to fit the byte cap (marked in the text); select fewer or use get_lesson.",
                           {"type": "string", "enum": _search_fields(schema_fields) + ["citation"]}, unique=True),
    }
    optional = ("truncated", "facet", "hint", *OPTIONAL_RETRIEVAL_PROPS)
    return obj(props, [p for p in props if p not in optional], "Search results.")


SPEC = tool_spec(NAME, 'Search Lessons', describe(
        """Search the lab's research Lessons: full text over all fields; an empty query lists newest first. Hits are compact (id, title, one-line reusable_lesson, confidence, short citation); `fields` picks others. hybrid_v1 also matches meaning across wording and languages; effective_mode says what answered. Lessons are written in Korean and in English, so also send your question translated into the other language in `also_phrased_as`: it finds more. Search well: exact id or title words first; rephrase before concluding nothing exists; check semantic_status, partial and hint before trusting an empty page. A hit with standing was superseded or contradicted: read those Lessons first."""
    ), 'read', handle, input_schema, output_schema)
