"""The tools' JSON Schema documents as ``s3rm schema generate`` writes them: exactly the registry's.

The gateway builds each tool's schemas from its module at start-up
(:meth:`gateway.tools.registry.ToolRegistry.load`); this module takes those
very objects, so ``schema/tools/<tool>.input.schema.json`` and
``…output.schema.json`` are an export of what ``tools/list`` serves
(docs/tools.md#tool-list).
"""
from __future__ import annotations

from gateway.config.schema import Schema
from gateway.tools.registry import SPECS, ToolRegistry
from gateway.tools.tool_schemas import schema_filename

__all__ = ["TOOL_NAMES", "render_tool_schemas"]

#: The Lesson tools in listing order (the registry's).
TOOL_NAMES = tuple(spec.name for spec in SPECS)


def render_tool_schemas(schema: Schema) -> dict[str, dict]:
    """All tool schemas the registry serves: ``"<tool>.input.schema.json"``/``"<tool>.output.schema.json"`` →
    schema dict, keys sorted. Raises :class:`~gateway.tools.registry.SchemaLoadError` for a bad schema."""
    out = {}
    for entry in ToolRegistry.load(schema):
        out[schema_filename(entry.spec.name, "input")] = entry.input_schema
        out[schema_filename(entry.spec.name, "output")] = entry.output_schema
    return dict(sorted(out.items()))
