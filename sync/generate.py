"""The files generated from the schema source, rendered, written or checked (``s3rm schema generate``).

From ``schema/lesson.toml`` this writes, next to the source file:

* ``Properties/<name>.wiki``, ``Templates/<name>.wiki``, ``Forms/<name>.wiki``, ``Modules/<name>.lua`` —
  the FULL variant (SMW + Page Forms + Scribunto) of :func:`sync.pages.render_schema_pages`;
* ``tools/<tool>.input.schema.json`` / ``tools/<tool>.output.schema.json`` —
  :func:`sync.toolschemas.render_tool_schemas`, the very objects the
  gateway's tool registry builds from the tool modules and serves.

Output is deterministic: sorted, UTF-8, LF line ends, one trailing newline;
JSON with ``indent=2, ensure_ascii=False`` in the builders' stable key order.
Files in those folders that the generator no longer produces are deleted.

:func:`check_output` writes nothing and lists stale, missing and extra files;
:func:`stale_diff` is the unified diff (committed file → generated) of a stale one
(docs/data-contract.md#schema-source: a check fails when they are stale).
The verb itself (exit codes, printing) is s3rm/schema_verbs.py.
"""
from __future__ import annotations

import difflib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gateway.config.schema import Schema, parse_schema
from sync.pages import PAGE_DIRS, WikiCapabilities, page_relpath, render_schema_pages
from sync.toolschemas import render_tool_schemas

__all__ = ["GENERATED_DIRS", "CheckResult", "WikiCapabilities", "check_output", "read_schema", "render_generated_files",
           "render_schema_pages", "render_tool_schemas", "stale_diff", "write_output"]

#: Folders (relative to the schema folder) owned by the generator.
GENERATED_DIRS = tuple(sorted(set(PAGE_DIRS.values()) | {"tools"}))


def render_generated_files(schema: Schema) -> dict[str, str]:
    """Relative path (under the schema folder) → exact file content, sorted by path."""
    files: dict[str, str] = {}
    for title, text in render_schema_pages(schema, WikiCapabilities.full()).items():
        files[page_relpath(title)] = text + "\n"
    for filename, doc in render_tool_schemas(schema).items():
        files[f"tools/{filename}"] = json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    return dict(sorted(files.items()))


@dataclass
class CheckResult:
    """Differences between the expected output and a folder (relative paths, sorted)."""

    stale: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing differs."""
        return not (self.stale or self.missing or self.extra)


def _existing(root: Path) -> dict[str, Path]:
    out = {}
    for folder in GENERATED_DIRS:
        base = root / folder
        if not base.is_dir():
            continue
        for path in base.rglob("*"):
            if path.is_file() and not path.name.startswith("."):
                out[path.relative_to(root).as_posix()] = path
    return out


def check_output(root: Path, expected: dict[str, str]) -> CheckResult:
    """Compare ``expected`` (relpath → content) with the files under ``root`` (no writes)."""
    result = CheckResult()
    existing = _existing(root)
    for rel, content in expected.items():
        path = existing.get(rel)
        if path is None:
            result.missing.append(rel)
        elif path.read_bytes() != content.encode("utf-8"):
            result.stale.append(rel)
    result.extra = sorted(set(existing) - set(expected))
    return result


def stale_diff(root: Path, rel: str, expected: str) -> str:
    """Unified diff from the committed file ``root/rel`` to the ``expected`` content, both named by ``rel``."""
    committed = (root / rel).read_text(encoding="utf-8").splitlines(keepends=True)
    lines = difflib.unified_diff(committed, expected.splitlines(keepends=True),
                                 fromfile=f"{rel} (committed)", tofile=f"{rel} (generated)")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def write_output(root: Path, expected: dict[str, str]) -> CheckResult:
    """Write changed/missing files and delete extra ones under ``root``; returns what changed."""
    result = check_output(root, expected)
    for rel in result.stale + result.missing:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="\n") as fh:
            fh.write(expected[rel])
    for rel in result.extra:
        (root / rel).unlink()
    return result


def read_schema(source: Path) -> Schema:
    """Load the schema source fresh from disk (bypassing ``load_schema``'s cache).

    Raises OSError when unreadable, SchemaError (or tomllib.TOMLDecodeError) when malformed.
    """
    with source.open("rb") as fh:
        return parse_schema(tomllib.load(fh), source)
