"""Write tool ``revise_lesson`` (DESIGN.md §3; contract in ``schema/tools/revise_lesson.*.schema.json``).

The handler is :func:`gateway.tools.write_common.write_handler` (validation,
operation_id replay, hooks_spec check, conditional save; see that module).
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.policy import describe
from gateway.tools.write_common import write_handler

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
    handler=write_handler('revise_lesson'),
)
