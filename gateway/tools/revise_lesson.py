"""Write tool ``revise_lesson`` (DESIGN.md §3; contract in ``schema/tools/revise_lesson.*.schema.json``).

The handler is a placeholder until its implementation lands; the tool is
listed with its full schemas and truthful annotations meanwhile.
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec, not_implemented_handler
from gateway.tools.policy import describe

__all__ = ["SPEC"]

SPEC = ToolSpec(
    name='revise_lesson',
    title='Revise Lesson',
    description=describe(
        """Conditionally revise the core fields of an existing Lesson, overwriting their previous values in a new revision. Needs the write token in token mode, expected_revision_id (the revision you read; a changed Lesson is refused, never auto-merged) and 1-8 basis_evidence_ids already on the Lesson; raising confidence needs supporting verification records. Carries an operation_id: an identical retry returns the applied revision instead of revising twice. Returns current_revision_id."""
    ),
    kind='write',
    annotations=ToolAnnotations(
        title='Revise Lesson',
        readOnlyHint=False,
        destructiveHint=True,
        idempotentHint=True,
        openWorldHint=False,
    ),
    handler=not_implemented_handler('revise_lesson'),
)
