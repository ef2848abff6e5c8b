"""The tools' JSON Schema documents (draft 2020-12), built by walking the gateway's tool registry.

Each tool's shape is written once, in its module ``gateway/tools/<tool>.py``
(``input_schema(F)`` / ``output_schema(F)`` on its spec, from the shared
blocks of :mod:`gateway.tools.schema_parts`). This module moves every block
that repeats inside one document into its root ``$defs`` (``hoist_defs``) and wraps them as
documents (``$schema``, ``$id``, ``$comment``, ``title``) for
``s3rm schema generate``, which writes ``schema/tools/<tool>.input.schema.json``
and ``…output.schema.json`` (docs/tools.md#tool-list).
"""
from __future__ import annotations

from gateway.domain.schema import Schema
from gateway.tools.registry import SPECS
from gateway.tools.schema_parts import Fields, hoist_defs

__all__ = ["SCHEMA_DIALECT", "ID_BASE", "TOOL_NAMES", "render_tool_schemas", "tool_schema"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "https://s3rm.invalid/schema/tools/"
#: The ten tools in listing order (the registry's).
TOOL_NAMES = tuple(spec.name for spec in SPECS)
_SPECS = {spec.name: spec for spec in SPECS}


def _comment(tool: str) -> str:
    return f"Generated from schema/lesson.toml by `s3rm schema generate` (gateway/tools/{tool}.py); do not edit."


def tool_schema(schema: Schema, tool: str, direction: str) -> dict:
    """The complete JSON Schema document of ``tool``'s ``"input"`` or ``"output"``.

    Raises KeyError for an unknown tool and ValueError for an unknown direction.
    """
    if direction not in ("input", "output"):
        raise ValueError(f"direction must be 'input' or 'output', not {direction!r}")
    spec = _SPECS[tool]
    body = hoist_defs((spec.input_schema if direction == "input" else spec.output_schema)(Fields(schema)))
    filename = f"{tool}.{direction}.schema.json"
    out = {"$schema": SCHEMA_DIALECT, "$id": ID_BASE + filename, "$comment": _comment(tool),
           "title": f"{tool} {direction}"}
    out.update(body)
    return out


def render_tool_schemas(schema: Schema) -> dict[str, dict]:
    """All tool schemas: ``"<tool>.input.schema.json"``/``"<tool>.output.schema.json"`` → schema dict.

    Keys are sorted; the dicts keep a stable insertion order (every tool
    publishes a closed ``inputSchema`` and ``outputSchema``).
    """
    out = {}
    for tool in TOOL_NAMES:
        for direction in ("input", "output"):
            out[f"{tool}.{direction}.schema.json"] = tool_schema(schema, tool, direction)
    return dict(sorted(out.items()))
