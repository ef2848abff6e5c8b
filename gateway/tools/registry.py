"""The MCP tools and their JSON Schemas (docs/tools.md#tool-list).

:data:`SPECS` holds the :class:`~gateway.tools.contract.ToolSpec` values, one
per tool module ``gateway/tools/<tool>.py``, in the order tools/list returns
them; :data:`READ_TOOLS` / :data:`WRITE_TOOLS` follow from each spec's
``kind``. :meth:`ToolRegistry.load` builds each tool's closed draft-2020-12
schemas from its own module's builders (:func:`gateway.tools.tool_schemas.tool_documents`),
checks them and precompiles validators; ``s3rm schema generate`` exports the
same objects to ``schema/tools/<name>.{input,output}.schema.json`` and its
``--check`` compares the committed files with them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
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
from gateway.config.schema import Schema
from gateway.tools.contract import ToolSpec
from gateway.tools.schema_builders import Fields
from gateway.tools.tool_schemas import schema_filename, tool_documents

__all__ = ["FILE_ONLY_KEYS", "READ_TOOLS", "WRITE_TOOLS", "SPECS", "SchemaLoadError", "ToolEntry", "ToolRegistry", "check_tool_schema", "load_specs",
           "published"]

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
    """A tool's built schema is not a valid draft-2020-12 schema, not an object schema, or not closed.

    The message names the tool module and the schema file it is exported to;
    the server refuses to start rather than serve an unvalidated tool.
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


def check_tool_schema(schema: dict[str, Any], tool: str, direction: str) -> dict[str, Any]:
    """Return ``schema`` when it is a valid draft-2020-12, closed, ``"type": "object"`` tool schema.

    Raises :class:`SchemaLoadError` naming the tool module and the file the
    schema is exported to (docs/tools.md#tool-list).
    """
    where = f"gateway/tools/{tool}.py {direction} schema (schema/tools/{schema_filename(tool, direction)})"
    declared = schema.get("$schema")
    if declared is not None and "2020-12" not in str(declared):
        raise SchemaLoadError(f"{where}: $schema must be draft 2020-12")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise SchemaLoadError(f"{where}: invalid JSON Schema ({exc.message})") from None
    if schema.get("type") != "object":
        raise SchemaLoadError(f'{where}: MCP tool schemas must have "type": "object" at the top level')
    if schema.get("additionalProperties") is not False and schema.get("unevaluatedProperties") is not False:
        raise SchemaLoadError(f"{where}: schema must be closed (additionalProperties: false)")
    return schema


def _entry(spec: ToolSpec, input_schema: dict[str, Any], output_schema: dict[str, Any]) -> ToolEntry:
    check_tool_schema(input_schema, spec.name, "input")
    check_tool_schema(output_schema, spec.name, "output")
    return ToolEntry(spec=spec, input_schema=input_schema, output_schema=output_schema,
                     input_validator=Draft202012Validator(input_schema, format_checker=_FORMATS),
                     output_validator=Draft202012Validator(output_schema, format_checker=_FORMATS))


class ToolRegistry:
    """The served tools by name. Build with :meth:`load`; immutable afterwards."""

    def __init__(self, entries: list[ToolEntry]):
        self._entries = {entry.spec.name: entry for entry in entries}

    @classmethod
    def load(cls, schema: Schema, specs: tuple[ToolSpec, ...] | None = None) -> "ToolRegistry":
        """Build every tool's schemas from its module's builders over ``schema`` and check them.

        ``specs`` defaults to :func:`load_specs` (the Lesson tools). The schemas
        are :func:`~gateway.tools.tool_schemas.tool_documents`, the objects
        ``s3rm schema generate`` writes to ``schema/tools/``. Raises
        :class:`SchemaLoadError` naming the first bad schema.
        """
        specs = specs if specs is not None else load_specs()
        documents = tool_documents(specs, schema)
        return cls([_entry(spec, *documents[spec.name]) for spec in specs])

    def with_builtin(self, specs: tuple[ToolSpec, ...], schema: Schema) -> "ToolRegistry":
        """This registry plus ``specs`` whose schemas are their own builders' output as they are
        (the ChatGPT tools, whose shapes OpenAI fixes: gateway/tools/chatgpt.py); listed after the rest."""
        fields = Fields(schema)
        extra = [_entry(spec, spec.input_schema(fields), spec.output_schema(fields)) for spec in specs]
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
