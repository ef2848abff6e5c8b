"""Read tool ``search_lessons`` (DESIGN.md §3; contract in ``schema/tools/search_lessons.*.schema.json``).

The handler lives in :mod:`gateway.tools.read_search` (behaviour, errors and
contract sources are documented there).
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.read_search import handle
from gateway.tools.policy import describe

__all__ = ["SPEC"]

SPEC = ToolSpec(
    name='search_lessons',
    title='Search Lessons',
    description=describe(
        """Search the lab's research Lessons. With a query, runs full-text search over every Lesson field (title weighted highest) and returns a small page of compact results: id, title, one-line reusable_lesson, record_origin, confidence and a short evidence citation. An empty query lists Lessons newest first. Narrow with filters (confidence, record_origin, review_state, updated range) or a named scope; select extra fields with `fields` (e.g. citations); page with `limit` (max 20) and the opaque `cursor` from the previous page (restart from the first page when a cursor is refused). `partial`, `scanned` and `scan_limit` tell whether the scan was complete. retrieval_mode=hybrid_v1 also matches meaning across wording and languages (situation, approach and mechanism of each Lesson) and fuses it with full text; exact identifiers and error strings still rank first. min_score: in legacy it applies to the full-text score, in hybrid_v1 to the fused 0–1 score. effective_mode and semantic_status say what answered (hybrid falls back to legacy on a first page when semantic search is unavailable). facet (hybrid_v1 only) ranks by one facet alone — situation, approach or mechanism — with no full text, so a client can search the facets separately and fuse them."""
    ),
    kind='read',
    annotations=ToolAnnotations(
        title='Search Lessons',
        readOnlyHint=True,
        destructiveHint=False,
        idempotentHint=True,
        openWorldHint=False,
    ),
    handler=handle,
)
