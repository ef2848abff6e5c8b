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


from gateway.retrieval.legacy import search as legacy
from gateway.tools.contract import ToolContext, tool_spec
from gateway.tools.policy import describe
from gateway.retrieval.request import AnalogyRequest
from gateway.tools.read_path import fit_page, Pager, rank_page, read_tool, repository, retrieval_state
from gateway.tools.schema_builders import (
    array, cursor, enum, Fields, min_score, next_cursor, obj, OPTIONAL_RETRIEVAL_PROPS, page_limit,
    retrieval_mode_in, retrieval_props, revision_id, scan_props, scope_in, scope_out, score, standing_out,
    STANDING_MAX, string
)
from gateway.tools.read_items import standings

__all__ = ["NAME", "SPEC"]

NAME = "find_analogies"
GENERATION = "legacy"


@read_tool
def handle(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run ``find_analogies`` (see module doc): the arguments, the source Lesson and its stored partners
    become one :class:`~gateway.retrieval.request.AnalogyRequest`, which legacy or hybrid ranking receives."""
    repo = repository(ctx)
    request = AnalogyRequest.from_arguments(arguments, ctx.config, ctx.principal, repo)
    source, source_id, limit, scope = request.source, request.source.id, request.limit, request.scope
    modes = retrieval_state(request.mode, ctx)
    bound = {  # what the cursor fingerprint binds (docs/tools.md#cursors)
        "source_id": source_id, "source_revision_id": source.revision_id,
        "source_projection_hash": legacy.projection_hash(source.page), "min_score": request.min_score,
        "scope": scope, "filters": request.filters.canonical(), "effective_mode": modes["effective_mode"],
        "ranking_version": legacy.ANALOGY_RANKING_VERSION, "generation": GENERATION,
    }
    pager = Pager(ctx, NAME, bound)
    edges = request.partners
    retrieval = ctx.retrieval
    # hybrid_v1 (docs/tools.md#cursors): the hybrid fingerprint also binds the generation's projection hash of the source
    ranked, ranking_version, pager, offset, modes = rank_page(
        ctx, modes, pager, request.cursor,
        hybrid_pager=lambda mode, version, generation: Pager(ctx, NAME, {
            **bound, "effective_mode": mode, "ranking_version": version, "generation": generation,
            **({"semantic_projection_hash": retrieval.projection(source_id, source).retrieval_hash}
               if mode == "hybrid_v1" else {})}),
        legacy_version=legacy.ANALOGY_RANKING_VERSION,
        run_hybrid=lambda continuing: retrieval.find_analogies(repo, request, continuation=continuing),
        run_legacy=lambda: legacy.analogies(repo, request))
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


def input_schema(schema_fields: Fields) -> dict:
    return obj({
        "id": schema_fields.lesson_id(),
        "limit": page_limit(schema_fields, "Results per page."),
        "cursor": cursor(schema_fields),
        "min_score": min_score(),
        "retrieval_mode": retrieval_mode_in(),
        "scope": scope_in(schema_fields),
    }, ["id"], "Find Lessons with a similar cause or failure shape.")


def output_schema(schema_fields: Fields) -> dict:
    result = obj({
        "id": schema_fields.lesson_id(),
        "title": schema_fields.field(schema_fields.schema.lesson, "title"),
        "score": score(),
        "basis": enum("Which signal produced this analogy.", ANALOGY_BASES),
        "shared_terms": array("Terms shared with the source Lesson (lexical evidence).",
                              string("A shared term.", schema_fields.limits["term_max_length"]),
                              max_items=schema_fields.limits["shared_terms_max"]),
        "standing": standing_out(schema_fields),
    }, ["id", "title", "score", "basis", "shared_terms"], "One analogous Lesson.")
    props = {
        "source_id": schema_fields.lesson_id("The requested Lesson."),
        "source_revision_id": revision_id("Revision of the source Lesson that was compared."),
        "results": array("Analogies, best first.", result, max_items=schema_fields.limits["page_max"]),
        "next_cursor": next_cursor(schema_fields),
        **retrieval_props(schema_fields),
        **scan_props(),
        "scope": scope_out(schema_fields),
    }
    return obj(props, [p for p in props if p not in OPTIONAL_RETRIEVAL_PROPS], "Analogous Lessons.")


SPEC = tool_spec(NAME, 'Find analogous Lessons', describe(
        """Find Lessons analogous to one Lesson: stored analogous_to relations (score 1.0, first), lexical candidates with shared_terms, and with hybrid_v1 Lessons close in meaning. Candidates are suggestions: record a real analogy with link_lessons."""
    ), 'read', handle, input_schema, output_schema)
