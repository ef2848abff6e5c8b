"""The tools' JSON Schema documents (draft 2020-12), built from the tool modules' own schema builders.

Each tool's shape is written once, in its module ``gateway/tools/<tool>.py``
(``input_schema(schema_fields)`` / ``output_schema(schema_fields)`` on its spec, from the shared blocks
of :mod:`gateway.tools.schema_builders`). :func:`tool_documents` turns the specs
into the documents the registry serves at start-up and ``s3rm schema generate``
exports to ``schema/tools/<tool>.{input,output}.schema.json``
(docs/tools.md#tool-list): it leaves out an output property's description when
tools/list has already said it, moves every block that
repeats inside one document into its root ``$defs`` (``hoist_defs``) and wraps
the result as a document (``$schema``, ``$id``, ``$comment``, ``title``).
"""
from __future__ import annotations

import copy
import json
from typing import Any, Sequence

from gateway.config.schema import Schema
from gateway.tools.contract import ToolSpec
from gateway.tools.schema_builders import Fields, hoist_defs

__all__ = ["DIRECTIONS", "ID_BASE", "SCHEMA_DIALECT", "schema_filename", "tool_documents"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "https://s3rm.invalid/schema/tools/"
#: A tool's two documents, in file order.
DIRECTIONS = ("input", "output")


def schema_filename(tool: str, direction: str) -> str:
    """``<tool>.<direction>.schema.json``, the document's file name under ``schema/tools/``."""
    return f"{tool}.{direction}.schema.json"


def _comment(tool: str) -> str:
    return f"Generated from schema/lesson.toml by `s3rm schema generate` (gateway/tools/{tool}.py); do not edit."


def _document(tool: str, direction: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` hoisted and wrapped as a document, in the plain JSON values a file reads back as."""
    out = {"$schema": SCHEMA_DIALECT, "$id": ID_BASE + schema_filename(tool, direction), "$comment": _comment(tool),
           "title": f"{tool} {direction}"}
    out.update(hoist_defs(body))
    return json.loads(json.dumps(out, ensure_ascii=False))


def tool_documents(specs: Sequence[ToolSpec], schema: Schema) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Tool name → (input document, output document), in the listing order of ``specs``.

    An output property whose (name, description) tools/list has stated before
    it goes without its description: every inputSchema up to and including the
    tool's and the outputSchemas of the tools listed before it said it, so an
    agent has read it already (docs/tools.md#tool-list). The documents are
    plain JSON values (lists, dicts, no shared sub-objects), equal to what the
    generated files read back as.
    """
    fields = Fields(schema)
    said: set[tuple[str, str]] = set()
    out = {}
    for spec in specs:
        body_in = spec.input_schema(fields)
        said |= _described(body_in)
        body_out = spec.output_schema(fields)
        out[spec.name] = (_document(spec.name, "input", body_in),
                          _document(spec.name, "output", _without_said(body_out, said)))
        said |= _described(body_out)
    return out


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
