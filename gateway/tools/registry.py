"""The MCP tools and their JSON Schemas (docs/tools.md#tool-list).

:data:`SPECS` holds the :class:`~gateway.tools.contract.ToolSpec` values, one
per tool module ``gateway/tools/<tool>.py``, in the order tools/list returns
them; :data:`READ_TOOLS` / :data:`WRITE_TOOLS` follow from each spec's
``kind``. :meth:`ToolRegistry.load` attaches the generated, closed
draft-2020-12 schemas from ``<schema_dir>/tools/<name>.input.schema.json`` and
``<schema_dir>/tools/<name>.output.schema.json`` (written from the specs'
schema builders by ``s3rm schema generate``) and precompiles validators.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from mcp_types import Tool

from gateway.core.errors import GatewayError
from gateway.tools import (
    attach_evidence,
    audit_lessons,
    create_lesson_draft,
    find_analogies,
    find_related_lessons,
    get_lesson,
    link_lessons,
    record_evidence_verification,
    revise_lesson,
    search_lessons,
)
from gateway.domain.schema import load_schema
from gateway.tools.contract import ToolSpec
from gateway.tools.schema_builders import Fields

__all__ = ["FILE_ONLY_KEYS", "READ_TOOLS", "WRITE_TOOLS", "SPECS", "SchemaLoadError", "ToolEntry", "ToolRegistry", "load_specs", "published"]

#: The Lesson tools in listing order: the reads, then the writes.
SPECS: tuple[ToolSpec, ...] = (
    search_lessons.SPEC, get_lesson.SPEC, audit_lessons.SPEC, find_related_lessons.SPEC, find_analogies.SPEC,
    create_lesson_draft.SPEC, link_lessons.SPEC, attach_evidence.SPEC, record_evidence_verification.SPEC,
    revise_lesson.SPEC,
)
#: The read tools, public in token mode.
READ_TOOLS = tuple(spec.name for spec in SPECS if spec.kind == "read")
#: The write tools, which need the write token in token mode.
WRITE_TOOLS = tuple(spec.name for spec in SPECS if spec.kind == "write")


#: Format assertions (date-time, email, ...) checked on inputs and outputs.
_FORMATS = Draft202012Validator.FORMAT_CHECKER


class SchemaLoadError(GatewayError, RuntimeError):
    """A tool's schema file is missing, not JSON, not a valid draft-2020-12 schema, or not closed.

    The message names the file; the server refuses to start rather than serve
    an unvalidated tool.
    """


@dataclass(frozen=True)
class ToolEntry:
    """A tool ready to serve: its spec, both schemas and their compiled validators."""

    spec: ToolSpec
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    input_validator: Draft202012Validator = field(compare=False, repr=False)
    output_validator: Draft202012Validator = field(compare=False, repr=False)

    def to_mcp(self) -> Tool:
        """The tool as listed by tools/list (``mcp_types.Tool``): the schemas without their file-only
        keys (:data:`FILE_ONLY_KEYS`)."""
        return Tool(
            name=self.spec.name,
            title=self.spec.title,
            description=self.spec.description,
            inputSchema=published(self.input_schema),
            outputSchema=published(self.output_schema),
            annotations=self.spec.annotations,
        )


#: Keys of a schema file that only document the file (its dialect, URL, provenance comment, title and a
#: top-level description the tool's own description already gives): tools/list leaves them out. MCP
#: reads a tool schema without ``$schema`` as draft 2020-12, and every ``$ref`` is a local ``#/$defs/…``
#: that resolves without ``$id``.
FILE_ONLY_KEYS = ("$schema", "$id", "$comment", "title", "description")


def published(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as tools/list publishes it: without :data:`FILE_ONLY_KEYS`."""
    return {k: v for k, v in schema.items() if k not in FILE_ONLY_KEYS}


def load_specs() -> tuple[ToolSpec, ...]:
    """The tool specs in listing order (:data:`SPECS`)."""
    return SPECS


def _load_schema(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SchemaLoadError(f"{path}: schema file is missing (run the schema generator)") from None
    except OSError as exc:
        raise SchemaLoadError(f"{path}: cannot read schema ({type(exc).__name__})") from None
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise SchemaLoadError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(schema, dict):
        raise SchemaLoadError(f"{path}: a schema must be a JSON object")
    declared = schema.get("$schema")
    if declared is not None and "2020-12" not in str(declared):
        raise SchemaLoadError(f"{path}: $schema must be draft 2020-12")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise SchemaLoadError(f"{path}: invalid JSON Schema ({exc.message})") from None
    if schema.get("type") != "object":
        raise SchemaLoadError(f'{path}: MCP tool schemas must have "type": "object" at the top level')
    if schema.get("additionalProperties") is not False and schema.get("unevaluatedProperties") is not False:
        raise SchemaLoadError(f"{path}: schema must be closed (additionalProperties: false)")
    return schema


class ToolRegistry:
    """The served tools by name. Build with :meth:`load`; immutable afterwards."""

    def __init__(self, entries: list[ToolEntry]):
        self._entries = {entry.spec.name: entry for entry in entries}

    @classmethod
    def load(cls, schema_dir: Path, specs: tuple[ToolSpec, ...] | None = None) -> "ToolRegistry":
        """Attach ``schema_dir/tools/<name>.{input,output}.schema.json`` to each spec.

        ``specs`` defaults to :func:`load_specs` (the Lesson tools). Raises
        :class:`SchemaLoadError` naming the first bad file.
        """
        tools_dir = Path(schema_dir) / "tools"
        entries = []
        for spec in specs if specs is not None else load_specs():
            input_schema = _load_schema(tools_dir / f"{spec.name}.input.schema.json")
            output_schema = _load_schema(tools_dir / f"{spec.name}.output.schema.json")
            entries.append(
                ToolEntry(
                    spec=spec,
                    input_schema=input_schema,
                    output_schema=output_schema,
                    input_validator=Draft202012Validator(input_schema, format_checker=_FORMATS),
                    output_validator=Draft202012Validator(output_schema, format_checker=_FORMATS),
                )
            )
        return cls(entries)

    def with_builtin(self, specs: tuple[ToolSpec, ...], schema_dir: Path) -> "ToolRegistry":
        """This registry plus ``specs`` whose schemas are built from their own builders, not files
        (the ChatGPT tools, whose shapes OpenAI fixes: gateway/tools/chatgpt.py); listed after the rest."""
        fields = Fields(load_schema(Path(schema_dir) / "lesson.toml"))
        extra = [ToolEntry(spec=spec, input_schema=(i := spec.input_schema(fields)),
                           output_schema=(o := spec.output_schema(fields)),
                           input_validator=Draft202012Validator(i, format_checker=_FORMATS),
                           output_validator=Draft202012Validator(o, format_checker=_FORMATS)) for spec in specs]
        return ToolRegistry(list(self._entries.values()) + extra)

    def get(self, name: str) -> ToolEntry | None:
        """The entry for tool ``name``, or ``None`` when no such tool is served."""
        return self._entries.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        """Tool names in listing order."""
        return tuple(self._entries)

    def __iter__(self) -> Iterator[ToolEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def list_tools(self) -> list[Tool]:
        """All tools as ``mcp_types.Tool`` values, in listing order."""
        return [entry.to_mcp() for entry in self]
