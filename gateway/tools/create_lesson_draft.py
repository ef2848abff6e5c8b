"""Write tool ``create_lesson_draft`` (DESIGN.md §3; contract in ``schema/tools/create_lesson_draft.*.schema.json``).

The handler is :func:`gateway.tools.write_common.write_handler` (validation,
operation_id replay, hooks_spec check, conditional save; see that module).
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.policy import describe
from gateway.tools.write_common import write_handler

__all__ = ["SPEC"]

SPEC = ToolSpec(
    name='create_lesson_draft',
    title='Create Lesson draft',
    description=describe(
        """Create a new Lesson with its initial evidence in one revision (title, question, attempt, context, observation, interpretation, reusable_lesson, applicability, confidence, initial_evidence). Needs the write token in token mode. Server-managed fields (author, timestamps, record_origin=lab, review fields) are set by the server. Every call carries an operation_id: repeating the identical request replays the first result instead of creating a second Lesson; reusing the id for a different request is an idempotency_conflict. Returns the Lesson id and current_revision_id."""
    ),
    kind='write',
    annotations=ToolAnnotations(
        title='Create Lesson draft',
        readOnlyHint=False,
        destructiveHint=False,
        idempotentHint=True,
        openWorldHint=False,
    ),
    handler=write_handler('create_lesson_draft'),
)
