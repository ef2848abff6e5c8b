"""Read tool ``audit_lessons`` (DESIGN.md §3; contract in ``schema/tools/audit_lessons.*.schema.json``).

The handler lives in :mod:`gateway.tools.read_audit` (behaviour, errors and
contract sources are documented there).
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.read_audit import handle
from gateway.tools.policy import describe

__all__ = ["SPEC"]

SPEC = ToolSpec(
    name='audit_lessons',
    title='Audit Lessons',
    description=describe(
        """Check up to 50 exact expectations about Lessons you wrote or depend on (revision id, content digest, up to 8 evidence ids, up to 8 relations each) without re-reading their bodies. Returns up to 20 results per page as ok, missing or mismatch with the position of the failed expectation; a cursor is refused when any target's revision changed between pages. Use it after changing several Lessons."""
    ),
    kind='read',
    annotations=ToolAnnotations(
        title='Audit Lessons',
        readOnlyHint=True,
        destructiveHint=False,
        idempotentHint=True,
        openWorldHint=False,
    ),
    handler=handle,
)
