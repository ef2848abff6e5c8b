"""Typed view of the one schema source, ``schema/lesson.toml``.

Every other part (generator, page codec, hooks_spec checker, gateway
validators) reads field definitions from here instead of repeating them.

Usage::

    schema = load_schema(folder / "lesson.toml")   # cached per path; the gateway loads it in
                                                   # load_config (``GatewayConfig.schema``), the CLI
                                                   # from its settings (``CliSettings.schema``)
    schema.lesson.field("title").max_length   # -> 200
    schema.enum("relation").values            # -> ("supports", ...)
    schema.limits["page_max"]                 # -> 20 (tool limits, [limits])
    schema.patterns["operation_id"]           # -> "^[A-Za-z0-9]..." ([patterns])

Contract: ``docs/data-contract.md#schema-source``.
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gateway.core.errors import GatewayError

#: Repository root (the folder holding ``schema/``) for an editable install.
REPO_ROOT = Path(__file__).resolve().parents[2]

FIELD_TYPES = frozenset(
    {"text", "longtext", "enum", "enum_list", "timestamp", "url", "account", "id", "digest", "sha256"}
)
SETTABLE = frozenset({"client", "server", "origin", "legacy"})
RECORD_KINDS = ("lesson", "evidence", "verification", "relation")


class SchemaError(GatewayError, ValueError):
    """The schema source is malformed (unknown type, missing enum, bad key)."""


@dataclass(frozen=True)
class EnumDef:
    """A closed vocabulary: machine ``values`` plus Korean ``labels``."""

    name: str
    values: tuple[str, ...]
    labels: dict[str, str]
    extra: dict

    def label(self, value: str) -> str:
        """Korean label of ``value`` (the value itself when unlabelled)."""
        return self.labels.get(value, value)


@dataclass(frozen=True)
class FieldDef:
    """One template parameter of a record, in page order."""

    name: str
    type: str
    required: bool
    settable: str
    property: str
    smw_type: str
    label: str
    help: str
    describe: str
    max_length: int | None = None
    enum: str | None = None
    facet: str | None = None

    @property
    def client_settable(self) -> bool:
        """True when an MCP client may send this field."""
        return self.settable == "client"


@dataclass(frozen=True)
class RecordDef:
    """A record kind (lesson, evidence, verification, relation) and its template."""

    kind: str
    template: str
    label: str
    fields: tuple[FieldDef, ...]
    subobject_prefix: str | None = None

    @property
    def field_names(self) -> tuple[str, ...]:
        """Parameter names in canonical page order."""
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> FieldDef:
        """The field called ``name``; raises KeyError when absent."""
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.kind} has no field {name!r}")


@dataclass(frozen=True)
class Schema:
    """The whole schema source: meta settings, enums, the four records, tool limits and value patterns.

    ``limits`` maps a limit name (``page_max``, ``reason_max_length``, …) to an
    int; ``patterns`` maps ``operation_id``, ``digest`` and ``sha256`` to
    regular expressions (docs/tools.md#output-limits).
    """

    meta: dict
    enums: dict[str, EnumDef]
    lesson: RecordDef
    evidence: RecordDef
    verification: RecordDef
    relation: RecordDef
    source_path: Path
    limits: dict[str, int] = field(default_factory=dict)
    patterns: dict[str, str] = field(default_factory=dict)

    @property
    def records(self) -> tuple[RecordDef, ...]:
        """The four records in canonical order: lesson, evidence, verification, relation."""
        return (self.lesson, self.evidence, self.verification, self.relation)

    def record(self, kind: str) -> RecordDef:
        """Record definition by kind name; raises KeyError for unknown kinds."""
        return {r.kind: r for r in self.records}[kind]

    def record_by_template(self, template: str) -> RecordDef | None:
        """Record whose template name equals ``template`` (exact), else None."""
        for r in self.records:
            if r.template == template:
                return r
        return None

    def enum(self, name: str) -> EnumDef:
        """Enum by name; raises KeyError for unknown names."""
        return self.enums[name]

    def properties(self) -> dict[str, tuple[str, list[FieldDef]]]:
        """SMW property name → (datatype, fields using it), in first-use order.

        Raises SchemaError when two fields share a property with different types.
        """
        out: dict[str, tuple[str, list[FieldDef]]] = {}
        for rec in self.records:
            for f in rec.fields:
                smw_type, users = out.setdefault(f.property, (f.smw_type, []))
                if smw_type != f.smw_type:
                    raise SchemaError(f"property {f.property!r} used with types {smw_type} and {f.smw_type}")
                users.append(f)
        return out

    @property
    def namespace(self) -> str:
        """Canonical (English) name of the Lesson namespace."""
        return self.meta["namespace"]

    @property
    def namespace_id(self) -> int:
        """Numeric id of the Lesson namespace."""
        return int(self.meta["namespace_id"])


def _field(raw: dict, enums: dict[str, EnumDef], where: str) -> FieldDef:
    known = {"name", "type", "required", "settable", "property", "smw_type", "label", "help",
             "describe", "max_length", "enum", "facet"}
    unknown = set(raw) - known
    if unknown:
        raise SchemaError(f"{where}: unknown keys {sorted(unknown)}")
    if raw.get("type") not in FIELD_TYPES:
        raise SchemaError(f"{where}: type {raw.get('type')!r} is not one of {sorted(FIELD_TYPES)}")
    if raw.get("settable") not in SETTABLE:
        raise SchemaError(f"{where}: settable {raw.get('settable')!r} is not one of {sorted(SETTABLE)}")
    if raw["type"] in ("enum", "enum_list") and raw.get("enum") not in enums:
        raise SchemaError(f"{where}: enum {raw.get('enum')!r} is not defined")
    try:
        return FieldDef(
            name=raw["name"], type=raw["type"], required=bool(raw["required"]),
            settable=raw["settable"], property=raw["property"], smw_type=raw["smw_type"],
            label=raw["label"], help=raw["help"], describe=raw["describe"], max_length=raw.get("max_length"),
            enum=raw.get("enum"), facet=raw.get("facet"),
        )
    except KeyError as exc:
        raise SchemaError(f"{where}: missing key {exc.args[0]!r}") from None


def parse_schema(data: dict, source_path: Path) -> Schema:
    """Build a Schema from the decoded TOML mapping; raises SchemaError when malformed."""
    enums = {}
    for name, raw in data.get("enums", {}).items():
        values = tuple(raw["values"])
        extra = {k: v for k, v in raw.items() if k not in ("values", "labels")}
        enums[name] = EnumDef(name=name, values=values, labels=dict(raw.get("labels", {})), extra=extra)
    records = {}
    for kind in RECORD_KINDS:
        raw = data.get(kind)
        if raw is None:
            raise SchemaError(f"missing [{kind}] table")
        fields = tuple(_field(f, enums, f"{kind}.{f.get('name', '?')}") for f in raw["fields"])
        records[kind] = RecordDef(kind=kind, template=raw["template"], label=raw["label"], fields=fields,
                                  subobject_prefix=raw.get("subobject_prefix"))
    limits = dict(data.get("limits", {}))
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in limits.values()):
        raise SchemaError("[limits]: every limit must be a positive integer")
    patterns = dict(data.get("patterns", {}))
    if not all(isinstance(v, str) for v in patterns.values()):
        raise SchemaError("[patterns]: every pattern must be a string")
    schema = Schema(meta=dict(data["meta"]), enums=enums, source_path=source_path, limits=limits,
                    patterns=patterns, **records)
    schema.properties()  # type consistency check
    return schema


@functools.lru_cache(maxsize=4)
def _load(path: Path) -> Schema:
    with path.open("rb") as fh:
        return parse_schema(tomllib.load(fh), path)


def load_schema(path: Path | str) -> Schema:
    """Load (and cache, keyed by path) the schema source at ``path`` (a ``lesson.toml``).

    There is no default: the configuration readers (``gateway.config.loader.load_config``,
    ``s3rm.settings.CliSettings``) choose the folder (docs/data-contract.md#schema-source).
    Raises SchemaError for a malformed source and OSError when the file is missing.
    """
    return _load(Path(path))
