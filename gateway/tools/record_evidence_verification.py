"""Write tool ``record_evidence_verification`` (DESIGN.md §3; contract in ``schema/tools/record_evidence_verification.*.schema.json``).

The handler is a placeholder until its implementation lands; the tool is
listed with its full schemas and truthful annotations meanwhile.
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec, not_implemented_handler
from gateway.tools.policy import describe

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
    handler=not_implemented_handler('record_evidence_verification'),
)
