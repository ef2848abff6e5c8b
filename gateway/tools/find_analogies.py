"""Read tool ``find_analogies`` (DESIGN.md §3; contract in ``schema/tools/find_analogies.*.schema.json``).

The handler lives in :mod:`gateway.tools.read_analogies` (behaviour, errors and
contract sources are documented there).
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.read_analogies import handle
from gateway.tools.policy import describe

__all__ = ["SPEC"]

SPEC = ToolSpec(
    name='find_analogies',
    title='Find analogous Lessons',
    description=describe(
        """Find Lessons analogous to a source Lesson: stored analogous_to relations (score 1.0) plus lexical candidates ranked by Jaccard similarity of normalised words and Korean 2- and 3-character n-grams, each with its shared_terms. Candidates are suggestions only; record a real analogy with link_lessons. retrieval_mode=hybrid_v1 adds Lessons whose situation or mechanism is close in meaning (the same failure in another field) and fuses all signals into a 0–1 score; stored relations keep score 1.0 and come first. min_score applies to the Jaccard score in legacy and to the fused score in hybrid_v1."""
    ),
    kind='read',
    annotations=ToolAnnotations(
        title='Find analogous Lessons',
        readOnlyHint=True,
        destructiveHint=False,
        idempotentHint=True,
        openWorldHint=False,
    ),
    handler=handle,
)
