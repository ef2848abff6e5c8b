"""Write tool ``attach_evidence`` (DESIGN.md §3; contract in ``schema/tools/attach_evidence.*.schema.json``).

The handler is a placeholder until its implementation lands; the tool is
listed with its full schemas and truthful annotations meanwhile.
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec, not_implemented_handler
from gateway.tools.policy import describe

__all__ = ["SPEC"]

SPEC = ToolSpec(
    name='attach_evidence',
    title='Attach evidence',
    description=describe(
        """Append one evidence item (citation, optional url, kind, verification_basis, note) to an existing Lesson. Needs the write token in token mode. Evidence ids derive from the request, and the operation_id makes a retried call a no-op. Returns the evidence id, its digest and current_revision_id."""
    ),
    kind='write',
    annotations=ToolAnnotations(
        title='Attach evidence',
        readOnlyHint=False,
        destructiveHint=False,
        idempotentHint=True,
        openWorldHint=False,
    ),
    handler=not_implemented_handler('attach_evidence'),
)
