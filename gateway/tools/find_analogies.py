"""Read tool ``find_analogies``: its spec, input and output JSON Schemas, and its handler (docs/tools.md#find-analogies).

Input: ``id``, ``limit``, ``cursor``, ``min_score``, ``retrieval_mode``, ``scope``.

Results: stored ``analogous_to`` partners in either direction (score 1.0,
basis ``stored_relation``), then lexical candidates scored by Jaccard
similarity of NFKC word / Korean stem / Korean 2- and 3-gram features, each
with ``shared_terms`` (:func:`gateway.retrieval.legacy.search.analogies`). Scope
filters apply to every result. ``hybrid_v1`` is answered in legacy mode
(``effective_mode=legacy``, ``semantic_status=disabled``).

The cursor fingerprint binds the source id, the source revision and the hash
of the source's analogy projection (docs/retrieval.md#legacy-analogies) besides the request
(min_score, scope, modes, ranking version, generation): after the source
Lesson changes, old cursors are refused.
"""
from __future__ import annotations

from typing import Any


from gateway.core.errors import ToolError
from gateway.retrieval.legacy import search as legacy
from gateway.tools.contract import ToolContext, tool_spec
from gateway.tools.policy import describe
from gateway.tools.read_path import (
    DEFAULT_LIMIT, fit_page, Pager, rank_page, read_tool, repository, retrieval_state, scope_filters
)
from gateway.tools.schema_builders import (
    array, cursor, enum, Fields, min_score, next_cursor, obj, OPTIONAL_RETRIEVAL_PROPS, page_limit,
    retrieval_mode_in, retrieval_props, revision_id, scan_props, scope_in, scope_out, score, standing_out,
    STANDING_MAX, string
)
from gateway.tools.read_items import standings
from gateway.domain.repository import snapshot_edges

__all__ = ["NAME", "SPEC"]

NAME = "find_analogies"
GENERATION = "legacy"


@read_tool
def handle(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run ``find_analogies`` (see module doc)."""
    repo = repository(ctx)
    source_id = arguments["id"]
    limit = int(arguments.get("limit", DEFAULT_LIMIT))
    min_score = float(arguments.get("min_score", 0.0))
    scope = arguments.get("scope")
    filters = scope_filters(arguments, ctx)
    modes = retrieval_state(arguments, ctx)
    source = repo.get_snapshot(source_id)
    if source is None:
        raise ToolError("not_found", f"No Lesson with id {source_id!r}; use search_lessons to find ids.")
    request = {
        "source_id": source_id, "source_revision_id": source.revision_id,
        "source_projection_hash": legacy.projection_hash(source.page), "min_score": min_score, "scope": scope,
        "filters": filters.canonical(), "effective_mode": modes["effective_mode"],
        "ranking_version": legacy.ANALOGY_RANKING_VERSION, "generation": GENERATION,
    }
    pager = Pager(ctx, NAME, request)
    edges = repo.find_relation_edges(source_id, outgoing=False, incoming=True, limit=500)
    stored = [e.target for e in snapshot_edges(source) if e.relation == "analogous_to"]
    stored += [e.source for e in edges.incoming if e.relation == "analogous_to"]
    retrieval = ctx.retrieval
    # hybrid_v1 (docs/tools.md#cursors): the hybrid fingerprint also binds the generation's projection hash of the source
    ranked, ranking_version, pager, offset, modes = rank_page(
        ctx, modes, pager, arguments.get("cursor"),
        hybrid_pager=lambda mode, version, generation: Pager(ctx, NAME, {
            **request, "effective_mode": mode, "ranking_version": version, "generation": generation,
            **({"semantic_projection_hash": retrieval.projection(source_id, source).retrieval_hash}
               if mode == "hybrid_v1" else {})}),
        legacy_version=legacy.ANALOGY_RANKING_VERSION,
        run_hybrid=lambda continuing: retrieval.find_analogies(
            repo, source=source, stored_ids=stored, filters=filters, min_score=min_score, continuation=continuing),
        run_legacy=lambda: legacy.analogies(repo, source, stored, filters, min_score))
    fix = ctx.shapes.conformer(NAME, "results", "[]")
    page = ranked.items[offset:offset + limit]
    corrections = standings(repo, {r.snapshot.id: r.snapshot for r in page}, STANDING_MAX)
    window = [fix.fix({"id": r.snapshot.id, "title": r.snapshot.page.fields.get("title", ""), "score": r.score,
                       "basis": r.basis, "shared_terms": list(r.shared_terms),
                       **({"standing": corrections[r.snapshot.id]} if r.snapshot.id in corrections else {})})
              for r in page]

    def build(part) -> dict[str, Any]:
        return {"source_id": source_id, "source_revision_id": source.revision_id,
                "results": [i for i in part if i is not None],
                "next_cursor": pager.next_offset(offset, len(part), len(ranked.items)),
                **modes, "ranking_version": ranking_version,
                "partial": ranked.partial or edges.partial, "scanned": ranked.scanned + edges.scanned,
                "scan_limit": ranked.scan_limit + edges.scan_limit, "scope": scope}

    result, _ = fit_page(ctx.budget, window, build)
    return result


# ------------------------------------------------------------------ schemas
ANALOGY_BASES = ("stored_relation", "lexical", "semantic_similarity", "hybrid")


def input_schema(F: Fields) -> dict:
    return obj({
        "id": F.lesson_id(),
        "limit": page_limit(F, "Results per page."),
        "cursor": cursor(F),
        "min_score": min_score(),
        "retrieval_mode": retrieval_mode_in(),
        "scope": scope_in(F),
    }, ["id"], "Find Lessons with a similar cause or failure shape.")


def output_schema(F: Fields) -> dict:
    result = obj({
        "id": F.lesson_id(),
        "title": F.field(F.schema.lesson, "title"),
        "score": score(),
        "basis": enum("Which signal produced this analogy.", ANALOGY_BASES),
        "shared_terms": array("Terms shared with the source Lesson (lexical evidence).",
                              string("A shared term.", F.limits["term_max_length"]),
                              max_items=F.limits["shared_terms_max"]),
        "standing": standing_out(F),
    }, ["id", "title", "score", "basis", "shared_terms"], "One analogous Lesson.")
    props = {
        "source_id": F.lesson_id("The requested Lesson."),
        "source_revision_id": revision_id("Revision of the source Lesson that was compared."),
        "results": array("Analogies, best first.", result, max_items=F.limits["page_max"]),
        "next_cursor": next_cursor(F),
        **retrieval_props(F),
        **scan_props(),
        "scope": scope_out(F),
    }
    return obj(props, [p for p in props if p not in OPTIONAL_RETRIEVAL_PROPS], "Analogous Lessons.")


SPEC = tool_spec(NAME, 'Find analogous Lessons', describe(
        """Find Lessons analogous to one Lesson: stored analogous_to relations (score 1.0, first), lexical candidates with shared_terms, and with hybrid_v1 Lessons close in meaning. Candidates are suggestions: record a real analogy with link_lessons."""
    ), 'read', handle, input_schema, output_schema)
