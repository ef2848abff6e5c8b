"""Write tool ``attach_evidence`` (DESIGN.md §3; contract in ``schema/tools/attach_evidence.*.schema.json``).

The handler is :func:`gateway.tools.write_common.write_handler` (validation,
operation_id replay, hooks_spec check, conditional save; see that module).
"""
from mcp.types import ToolAnnotations

from gateway.tools.base import ToolSpec
from gateway.tools.policy import describe
from gateway.tools.write_common import write_handler

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
    handler=write_handler('attach_evidence'),
)
