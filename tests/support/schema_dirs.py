"""Shared helpers for the gateway tests: schema folders and tool specs with known shapes.

:data:`SCHEMA` is the committed ``schema/lesson.toml``, loaded by its path.
``minimal_schema_dir(tmp)`` writes a schema folder holding copies of the
committed ``lesson.toml`` and migration help page (a configuration may name
any such folder).
``minimal_specs(**handlers)`` returns the Lesson tools with minimal closed
draft-2020-12 schemas (transport tests use them so their test tools have known
output shapes) and the given handlers in place of the real ones.
"""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from gateway.config import DEFAULT_SCHEMA_DIR
from gateway.config.schema import load_schema
from gateway.tools.contract import Handler, ToolSpec
from gateway.tools.registry import READ_TOOLS, WRITE_TOOLS, load_specs

#: The committed schema source: tests name it explicitly (product code gets it from its configuration).
SCHEMA = load_schema(DEFAULT_SCHEMA_DIR / "lesson.toml")
DRAFT = "https://json-schema.org/draft/2020-12/schema"
ALL_TOOLS = READ_TOOLS + WRITE_TOOLS


def _input_schema(name: str) -> dict:
    props: dict = {}
    required: list[str] = []
    if name == "search_lessons":
        props = {
            "query": {"type": "string", "maxLength": 500},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20},
            "filters": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"confidence": {"enum": ["low", "medium", "high"]}},
            },
        }
    elif name in READ_TOOLS:
        props = {"id": {"type": "string", "pattern": "^[a-z0-9_-]+$"}}
    else:
        props = {"operation_id": {"type": "string", "minLength": 1}, "id": {"type": "string"}}
        required = ["operation_id"]
    return {
        "$schema": DRAFT,
        "type": "object",
        "additionalProperties": False,
        "properties": props,
        "required": required,
    }


def _output_schema(name: str) -> dict:
    return {
        "$schema": DRAFT,
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "results": {"type": "array", "items": {"type": "string"}},
            "next_cursor": {"type": ["string", "null"]},
        },
        "required": ["results"],
    }


def minimal_specs(**handlers: Handler) -> tuple[ToolSpec, ...]:
    """The Lesson tools in listing order with minimal closed schemas; a tool named in ``handlers`` runs that handler."""
    return tuple(
        dataclasses.replace(spec, handler=handlers.get(spec.name, spec.handler),
                            input_schema=lambda _fields, name=spec.name: _input_schema(name),
                            output_schema=lambda _fields, name=spec.name: _output_schema(name))
        for spec in load_specs()
    )


def minimal_schema_dir(root: Path) -> Path:
    """Write a schema folder at ``root`` with what the gateway reads there (copies of the committed
    ``lesson.toml`` and the help page holding the migration prompt); return ``root``."""
    for rel in ("lesson.toml", "pages/help/migration.wiki"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DEFAULT_SCHEMA_DIR / rel, root / rel)
    return root
