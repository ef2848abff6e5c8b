"""Value rules of single fields, shared by the hooks_spec checker and the write tools.

Each field of ``schema/lesson.toml`` is judged by its definition:

* HS03 — a ``required`` field is non-empty;
* HS04 — ``enum`` fields hold one of the enum's values (empty allowed only when
  not required); ``enum_list`` (``claim_fields``) is a comma-separated list of
  distinct enum values;
* HS05 — formats: ``timestamp`` is ``YYYY-MM-DDTHH:MM:SSZ`` and a real date;
  ``id`` matches ``meta.evidence_id_pattern`` (record ids) or
  ``meta.id_pattern`` (relation endpoints, at most ``meta.id_max_length``);
  ``url`` is an absolute ``http``/``https`` URL with a host and no spaces;
  ``sha256`` is 64 lowercase hex digits; ``digest`` is ``sha256:`` + 64 hex;
* HS06 — at most ``max_length`` Unicode code points.

The functions return :class:`ValueProblem` values (rule id + message naming
the field, never its content) so callers decide how to report them.
Contract: ``docs/data-contract.md#lesson-fields`` and the record sections after it;
rule ids in ``hooks_spec/rules.md#structure-and-values``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from gateway.config.schema import FieldDef, RecordDef, Schema
from gateway.domain.timestamps import parse_ts

__all__ = ["ValueProblem", "value_problems", "record_problems", "split_list", "join_list", "is_http_url",
           "URL_SCHEMES"]

#: The schemes a ``url`` field accepts (HS05; the browser form checks the same list, docs/browser.md#form-rules).
URL_SCHEMES = ("http", "https")

_SHA256 = re.compile(r"\A[0-9a-f]{64}\Z")
_DIGEST = re.compile(r"\Asha256:[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class ValueProblem:
    """One broken value rule: hooks_spec ``rule`` id, the ``field`` path and a content-free ``message``."""

    rule: str
    field: str
    message: str


def split_list(raw: str) -> list[str]:
    """Items of a comma-separated list value (whitespace around items ignored, empty items dropped)."""
    return [part.strip() for part in (raw or "").split(",") if part.strip()]


def join_list(items, enum_name: str, schema: Schema) -> str:
    """Canonical stored form of a list: distinct items in ``schema``'s enum order, joined by ``,``."""
    order = schema.enum(enum_name).values
    chosen = set(items)
    return ",".join(v for v in order if v in chosen)


def is_http_url(value: str) -> bool:
    """True for an absolute http(s) URL with a host and no whitespace or control characters."""
    if not value or any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return False
    try:
        parts = urlsplit(value)
        return parts.scheme.lower() in URL_SCHEMES and bool(parts.hostname)
    except ValueError:
        return False


def value_problems(rec: RecordDef, f: FieldDef, value: str, where: str | None = None, *,
                   schema: Schema) -> list[ValueProblem]:
    """Problems of one field value (empty list when it is fine); ``where`` prefixes the field path;
    enums and id patterns come from ``schema``."""
    path = f"{where}.{f.name}" if where else f.name
    value = value if isinstance(value, str) else ""
    if not value:
        if f.required:
            return [ValueProblem("HS03", path, f"{path} is required and must not be empty")]
        return []
    out: list[ValueProblem] = []
    if f.max_length is not None and len(value) > f.max_length:
        out.append(ValueProblem("HS06", path, f"{path} is longer than {f.max_length} characters"))
    if f.type == "enum":
        if value not in schema.enum(f.enum).values:
            out.append(ValueProblem("HS04", path, f"{path} is not one of the {f.enum} values"))
    elif f.type == "enum_list":
        items = split_list(value)
        allowed = schema.enum(f.enum).values
        if not items and f.required:
            out.append(ValueProblem("HS03", path, f"{path} must list at least one value"))
        if any(i not in allowed for i in items):
            out.append(ValueProblem("HS04", path, f"{path} lists a value that is not a {f.enum}"))
        if len(set(items)) != len(items):
            out.append(ValueProblem("HS04", path, f"{path} lists a value twice"))
    elif f.type == "timestamp":
        if parse_ts(value) is None:
            out.append(ValueProblem("HS05", path, f"{path} is not a UTC timestamp YYYY-MM-DDTHH:MM:SSZ"))
    elif f.type == "id":
        if rec.kind == "relation":
            ok = re.fullmatch(schema.meta["id_pattern"], value) and len(value) <= int(schema.meta["id_max_length"])
        else:
            ok = re.fullmatch(schema.meta["evidence_id_pattern"], value)
        if not ok:
            out.append(ValueProblem("HS05", path, f"{path} is not a valid id ([a-z0-9_-])"))
    elif f.type == "url":
        if not is_http_url(value):
            out.append(ValueProblem("HS05", path, f"{path} must be an absolute http or https URL"))
    elif f.type == "sha256":
        if not _SHA256.match(value):
            out.append(ValueProblem("HS05", path, f"{path} must be 64 lowercase hex digits"))
    elif f.type == "digest":
        if not _DIGEST.match(value):
            out.append(ValueProblem("HS05", path, f"{path} must be sha256: followed by 64 lowercase hex digits"))
    return out


def record_problems(rec: RecordDef, values: dict[str, str], where: str | None = None,
                    only: set[str] | None = None, *, schema: Schema) -> list[ValueProblem]:
    """Problems of every field of one record (or only the names in ``only``), by ``schema``."""
    out: list[ValueProblem] = []
    for f in rec.fields:
        if only is not None and f.name not in only:
            continue
        out.extend(value_problems(rec, f, values.get(f.name, ""), where, schema=schema))
    return out
