"""Read tool ``find_related_lessons`` (DESIGN.md §3; contract in ``schema/tools/find_related_lessons.*.schema.json``).

The handler lives in :mod:`gateway.tools.read_related` (behaviour, errors and
contract sources are documented there).
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.read_related import handle
from gateway.tools.policy import describe

__all__ = ["SPEC"]

SPEC = ToolSpec(
    name='find_related_lessons',
    title='Find related Lessons',
    description=describe(
        """List the stored relations of one Lesson (supports, contradicts, analogous_to, failed_because, works_when, suggests, supersedes), filtered by relation type and direction (outgoing, incoming or both), as a bounded cursor page. analogous_to is shown as symmetric on read while the stored endpoints stay explicit."""
    ),
    kind='read',
    annotations=ToolAnnotations(
        title='Find related Lessons',
        readOnlyHint=True,
        destructiveHint=False,
        idempotentHint=True,
        openWorldHint=False,
    ),
    handler=handle,
)
