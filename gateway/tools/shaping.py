"""Shaping Lesson data into tool results: truncation markers and schema conformance.

Every read result is checked against the tool's published output schema
(the one the registry serves, :class:`OutputShapes`) record by record, so a
browser-edited page holding an out-of-vocabulary or over-long value can never
turn a read into a server error:

* a string longer than its ``maxLength`` is shortened and ends with the
  explicit marker :func:`marker` (``…[truncated: N more characters]``); the
  field name is reported so tools can list it in ``truncated`` — unless the
  caller asked for no truncation (``citation_detail=full``), then
  :class:`ItemTooLarge` is raised;
* an optional property whose value still violates its schema is dropped;
* a record whose required property violates its schema is skipped (None).

Schemas share repeated blocks through their root ``$defs`` (``#/$defs/<name>``
references, docs/tools.md#tool-list): :func:`resolve` follows them, and each
property validator carries the root's ``$defs``.
"""
from __future__ import annotations

from typing import Any, Mapping

from jsonschema import Draft202012Validator

from gateway.core.errors import GatewayError

__all__ = ["ItemTooLarge", "Conformer", "OutputShapes", "marker", "resolve", "truncate_text", "one_line"]

_FORMATS = Draft202012Validator.FORMAT_CHECKER


class ItemTooLarge(GatewayError):
    """A value exceeds its schema's maxLength and truncation was not allowed (``field`` names it)."""

    def __init__(self, field: str):
        super().__init__(field)
        self.field = field


def marker(omitted: int) -> str:
    """The explicit truncation marker appended to shortened text."""
    return f" …[truncated: {omitted} more characters]"


def truncate_text(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` cut to at most ``max_chars`` characters including the marker; (value, was_truncated)."""
    if len(text) <= max_chars:
        return text, False
    keep = max(0, max_chars - len(marker(len(text))))
    return text[:keep] + marker(len(text) - keep), True


def one_line(text: str, max_chars: int = 240) -> tuple[str, bool]:
    """First non-empty line of ``text``, whitespace collapsed, at most ``max_chars`` (marker included)."""
    lines = [line for line in text.splitlines() if line.strip()]
    first = " ".join(lines[0].split()) if lines else ""
    short, cut = truncate_text(first, max_chars)
    return short, cut or len(lines) > 1


def resolve(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with a local ``$ref`` (``#/$defs/<name>`` of ``root``) followed, its sibling keywords
    (a use's own ``description``) kept; any other node as it is. KeyError for a dangling reference."""
    while isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/$defs/"):
        target = root["$defs"][node["$ref"][len("#/$defs/"):]]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


class Conformer:
    """Conforms records to one object schema (see module doc); ``root`` is the document holding
    the ``$defs`` its references name (default: ``schema`` itself)."""

    def __init__(self, schema: dict[str, Any], root: dict[str, Any] | None = None):
        root = schema if root is None else root
        self.root = root
        self.schema = schema = resolve(root, schema)
        self.properties: dict[str, dict] = {name: resolve(root, sub)
                                            for name, sub in schema.get("properties", {}).items()}
        self.required = set(schema.get("required", ()))
        defs = {"$defs": root["$defs"]} if "$defs" in root else {}
        self._validators = {name: Draft202012Validator({**sub, **defs}, format_checker=_FORMATS)
                            for name, sub in self.properties.items()}

    def max_length(self, name: str) -> int | None:
        """``maxLength`` of string property ``name`` (None when unbounded or not a string); a
        nullable property (``anyOf`` [string, null]) has its string branch's."""
        prop = self.properties.get(name, {})
        for branch in [prop, *(resolve(self.root, b) for b in prop.get("anyOf", ()))]:
            if "maxLength" in branch:
                return branch["maxLength"]
        return None

    def fix(self, record: dict[str, Any], *, allow_truncation: bool = True,
            truncated: set[str] | None = None) -> dict[str, Any] | None:
        """A conforming copy of ``record`` (unknown keys dropped), or None when a required value is invalid.

        Shortened field names are added to ``truncated``. Raises ItemTooLarge
        when ``allow_truncation`` is False and a string exceeds its maxLength.
        """
        out: dict[str, Any] = {}
        for name, value in record.items():
            if name not in self.properties:
                continue
            limit = self.max_length(name)
            if isinstance(value, str) and limit is not None and len(value) > limit:
                if not allow_truncation:
                    raise ItemTooLarge(name)
                value, _ = truncate_text(value, limit)
                if truncated is not None:
                    truncated.add(name)
            if self._validators[name].is_valid(value):
                out[name] = value
            elif name in self.required:
                return None
        if not self.required.issubset(out):
            return None
        return out


class OutputShapes:
    """The served output schemas by tool name (the registry's) and the conformers of their parts.

    Built once per dispatcher; :meth:`conformer` memoises, so each part is
    compiled once per process.
    """

    def __init__(self, schemas: Mapping[str, dict[str, Any]]):
        self._schemas = dict(schemas)
        self._made: dict[tuple[str, tuple[str, ...]], Conformer] = {}

    def conformer(self, tool: str, *pointer: str) -> Conformer:
        """Conformer for the object at ``pointer`` inside ``tool``'s output schema.

        ``pointer`` is a path of property names; ``"[]"`` steps into array items,
        e.g. ``shapes.conformer("search_lessons", "results", "[]")``. Raises
        KeyError for a tool or property the schema does not have.
        """
        key = (tool, pointer)
        made = self._made.get(key)
        if made is None:
            root = node = self._schemas[tool]
            for step in pointer:
                node = resolve(root, node)
                node = node["items"] if step == "[]" else node["properties"][step]
            made = self._made.setdefault(key, Conformer(node, root))
        return made
