"""Shared helpers for the gateway tests: schema directories and environments.

``schema_dir_for_tests(tmp)`` returns the real generated ``schema/`` tree when
all twenty tool schemas exist, otherwise writes minimal closed draft-2020-12
schemas for the Lesson tools under ``tmp`` and returns that directory.
``minimal_schema_dir(tmp)`` always writes the minimal ones (transport tests use
them so their test tools have known output shapes).
"""
from __future__ import annotations

import json
from pathlib import Path

from gateway.config import DEFAULT_SCHEMA_DIR
from gateway.tools.registry import READ_TOOLS, WRITE_TOOLS

DRAFT = "https://json-schema.org/draft/2020-12/schema"
ALL_TOOLS = READ_TOOLS + WRITE_TOOLS


def real_schemas_present(schema_dir: Path = DEFAULT_SCHEMA_DIR) -> bool:
    """True when every tool has both generated schema files."""
    tools = schema_dir / "tools"
    return all(
        (tools / f"{name}.{kind}.schema.json").is_file() for name in ALL_TOOLS for kind in ("input", "output")
    )


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


def minimal_schema_dir(root: Path) -> Path:
    """Write minimal closed schemas for the Lesson tools under ``root/tools`` and return ``root``."""
    tools = root / "tools"
    tools.mkdir(parents=True, exist_ok=True)
    for name in ALL_TOOLS:
        (tools / f"{name}.input.schema.json").write_text(json.dumps(_input_schema(name)), encoding="utf-8")
        (tools / f"{name}.output.schema.json").write_text(json.dumps(_output_schema(name)), encoding="utf-8")
    return root


def schema_dir_for_tests(root: Path) -> Path:
    """The real ``schema/`` when it has all tool schemas, else minimal ones under ``root``."""
    if real_schemas_present():
        return DEFAULT_SCHEMA_DIR
    return minimal_schema_dir(root)
