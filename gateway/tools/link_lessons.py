"""Write tool ``link_lessons`` (DESIGN.md §3; contract in ``schema/tools/link_lessons.*.schema.json``).

The handler is :func:`gateway.tools.write_common.write_handler` (validation,
operation_id replay, hooks_spec check, conditional save; see that module).
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.policy import describe
from gateway.tools.write_common import write_handler

__all__ = ["SPEC"]

SPEC = ToolSpec(
    name='link_lessons',
    title='Link Lessons',
    description=describe(
        """Add one directed relation between two existing Lessons (supports, contradicts, analogous_to, failed_because, works_when, suggests, supersedes) with an optional note. Needs the write token in token mode. The target must exist and duplicate edges are refused. Carries an operation_id so retries never add the edge twice. Returns current_revision_id."""
    ),
    kind='write',
    annotations=ToolAnnotations(
        title='Link Lessons',
        readOnlyHint=False,
        destructiveHint=False,
        idempotentHint=True,
        openWorldHint=False,
    ),
    handler=write_handler('link_lessons'),
)
