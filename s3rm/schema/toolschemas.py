"""The tools' JSON Schema documents (draft 2020-12), built by walking the gateway's tool registry.

Each tool's shape is written once, in its module ``gateway/tools/<tool>.py``
(``input_schema(F)`` / ``output_schema(F)`` on its spec, from the shared
blocks of :mod:`gateway.tools.schema_builders`). This module leaves out an output
property's description when tools/list has already said it (:func:`said_before`), moves every block
that repeats inside one document into its root ``$defs`` (``hoist_defs``) and wraps them as
documents (``$schema``, ``$id``, ``$comment``, ``title``) for
``s3rm schema generate``, which writes ``schema/tools/<tool>.input.schema.json``
and ``…output.schema.json`` (docs/tools.md#tool-list).
"""
from __future__ import annotations

import copy

from gateway.domain.schema import Schema
from gateway.tools.registry import SPECS
from gateway.tools.schema_builders import Fields, hoist_defs

__all__ = ["SCHEMA_DIALECT", "ID_BASE", "TOOL_NAMES", "render_tool_schemas", "said_before", "tool_schema"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "https://s3rm.invalid/schema/tools/"
#: The Lesson tools in listing order (the registry's).
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
    fields = Fields(schema)
    if direction == "input":
        body = hoist_defs(spec.input_schema(fields))
    else:
        body = hoist_defs(_without_said(spec.output_schema(fields), said_before(schema, tool)))
    filename = f"{tool}.{direction}.schema.json"
    out = {"$schema": SCHEMA_DIALECT, "$id": ID_BASE + filename, "$comment": _comment(tool),
           "title": f"{tool} {direction}"}
    out.update(body)
    return out


def said_before(schema: Schema, tool: str) -> set[tuple[str, str]]:
    """(property name, description) pairs tools/list states before ``tool``'s outputSchema: in every
    inputSchema up to and including ``tool``'s and in the outputSchemas of the tools listed before it.

    An output property with such a pair goes without its description (docs/tools.md#tool-list): an
    agent has read it already, and the tool's own input or an earlier result says what it means.
    """
    fields = Fields(schema)
    said: set[tuple[str, str]] = set()
    for name in TOOL_NAMES:
        said |= _described(_SPECS[name].input_schema(fields))
        if name == tool:
            return said
        said |= _described(_SPECS[name].output_schema(fields))
    raise KeyError(tool)


def _properties(node):
    """Every (name, subschema) of a ``properties`` map in ``node``, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    if isinstance(sub, dict):
                        yield name, sub
            yield from _properties(value)
    elif isinstance(node, list):
        for value in node:
            yield from _properties(value)


def _described(node) -> set[tuple[str, str]]:
    return {(name, sub["description"]) for name, sub in _properties(node) if isinstance(sub.get("description"), str)}


def _without_said(body: dict, said: set[tuple[str, str]]) -> dict:
    """A copy of ``body`` without the descriptions of properties whose (name, description) is in ``said``."""
    body = copy.deepcopy(body)  # a builder may share one block between places or calls
    for name, sub in _properties(body):
        if (name, sub.get("description")) in said:
            del sub["description"]
    return body


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
