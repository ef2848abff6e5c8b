"""Write tool ``record_evidence_verification`` (DESIGN.md §3; contract in ``schema/tools/record_evidence_verification.*.schema.json``).

The handler is :func:`gateway.tools.write_common.write_handler` (validation,
operation_id replay, hooks_spec check, conditional save; see that module).
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.policy import describe
from gateway.tools.write_common import write_handler

__all__ = ["SPEC"]

SPEC = ToolSpec(
    name='record_evidence_verification',
    title='Record evidence verification',
    description=describe(
        """Append one verification record for an evidence item of a Lesson: what source was checked (identity, SHA-256, locator, coverage), the outcome (supports, contradicts, inconclusive) and which claim fields it covers. Needs the write token in token mode, expected_revision_id and expected_evidence_digest (from get_lesson); records are append-only and the latest one per evidence is its current verdict. Carries an operation_id. Returns current_revision_id."""
    ),
    kind='write',
    annotations=ToolAnnotations(
        title='Record evidence verification',
        readOnlyHint=False,
        destructiveHint=False,
        idempotentHint=True,
        openWorldHint=False,
    ),
    handler=write_handler('record_evidence_verification'),
)
