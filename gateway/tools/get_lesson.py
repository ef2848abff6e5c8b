"""Read tool ``get_lesson`` (DESIGN.md §3; contract in ``schema/tools/get_lesson.*.schema.json``).

The handler lives in :mod:`gateway.tools.read_lesson` (behaviour, errors and
contract sources are documented there).
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.read_lesson import handle
from gateway.tools.policy import describe

__all__ = ["SPEC"]

SPEC = ToolSpec(
    name='get_lesson',
    title='Get Lesson',
    description=describe(
        """Read one Lesson by id (without the `Lesson:` prefix): its current revision id, content digest, core fields, and its citations, verification records and relations as independent cursor pages (default 5, max 20 each). `citation_detail=full` adds note, added_by and added_at and never truncates silently: the page shrinks, or an explicit error says one item alone exceeds the response cap. Each evidence item carries its digest, the value `record_evidence_verification` expects."""
    ),
    kind='read',
    annotations=ToolAnnotations(
        title='Get Lesson',
        readOnlyHint=True,
        destructiveHint=False,
        idempotentHint=True,
        openWorldHint=False,
    ),
    handler=handle,
)
