"""Read tool ``get_lesson`` (DESIGN.md §3; contract in ``schema/tools/get_lesson.*.schema.json``).

The handler is a placeholder until its implementation lands; the tool is
listed with its full schemas and truthful annotations meanwhile.
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec, not_implemented_handler
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
    handler=not_implemented_handler('get_lesson'),
)
