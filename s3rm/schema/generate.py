"""``s3rm schema generate [--check] [--schema PATH]``: write or check the generated schema files.

From ``schema/lesson.toml`` (or PATH / ``$S3RM_SCHEMA_DIR/lesson.toml``) this
writes, next to the source file:

* ``Properties/<name>.wiki``, ``Templates/<name>.wiki``, ``Forms/<name>.wiki``, ``Modules/<name>.lua`` —
  the FULL variant (SMW + Page Forms + Scribunto) of :func:`s3rm.schema.pages.render_schema_pages`;
* ``tools/<tool>.input.schema.json`` / ``tools/<tool>.output.schema.json`` —
  :func:`s3rm.schema.toolschemas.render_tool_schemas`, the very objects the
  gateway's tool registry builds from the tool modules and serves.

Output is deterministic: sorted, UTF-8, LF line ends, one trailing newline;
JSON with ``indent=2, ensure_ascii=False`` in the builders' stable key order.
Files in those folders that the generator no longer produces are deleted.

``--check`` writes nothing and exits 1 listing stale, missing and extra files,
with a unified diff (committed file → generated) for each stale one
(docs/data-contract.md#schema-source: a check fails when they are stale); exit 0 when up to date,
2 when the source cannot be loaded.
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gateway.config.schema import Schema, SchemaError, parse_schema
from gateway.tools.registry import SchemaLoadError
from s3rm.errors import CliError
from s3rm.settings import CliSettings
from s3rm.schema.pages import PAGE_DIRS, WikiCapabilities, page_relpath, render_schema_pages
from s3rm.schema.toolschemas import render_tool_schemas

__all__ = ["GENERATED_DIRS", "CheckResult", "WikiCapabilities", "check_output", "register", "render_generated_files",
           "render_schema_pages", "render_tool_schemas", "run", "stale_diff", "write_output"]

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


def _source_path(arg: str | None) -> Path:
    if arg:
        p = Path(arg)
        return p / "lesson.toml" if p.is_dir() else p
    return CliSettings().schema_dir / "lesson.toml"


def read_schema(source: Path) -> Schema:
    """Load the schema source fresh from disk (bypassing ``load_schema``'s cache).

    Raises OSError when unreadable, SchemaError (or tomllib.TOMLDecodeError) when malformed.
    """
    with source.open("rb") as fh:
        return parse_schema(tomllib.load(fh), source)


def run(args: argparse.Namespace) -> int:
    """Handler of ``s3rm schema generate``; returns the exit code."""
    source = _source_path(getattr(args, "schema", None))
    try:
        schema = read_schema(source)
    except (OSError, SchemaError, tomllib.TOMLDecodeError, KeyError) as exc:
        raise CliError(f"cannot load {source}: {exc}", 2)
    root = source.parent
    try:
        expected = render_generated_files(schema)
    except SchemaLoadError as exc:
        raise CliError(f"cannot build the tool schemas: {exc}", 2)
    if args.check:
        result = check_output(root, expected)
        if result.ok:
            print(f"schema output is up to date ({len(expected)} files)")
            return 0
        for label, items in (("stale", result.stale), ("missing", result.missing), ("extra", result.extra)):
            for rel in items:
                print(f"{label}: {rel}")
        for rel in result.stale:
            print(stale_diff(root, rel, expected[rel]), end="")
        print("generated schema files are out of date: run `s3rm schema generate`", file=sys.stderr)
        return 1
    result = write_output(root, expected)
    changed = len(result.stale) + len(result.missing) + len(result.extra)
    print(f"wrote {len(result.stale) + len(result.missing)} file(s), deleted {len(result.extra)}; "
          f"{len(expected) - len(result.stale) - len(result.missing)} unchanged" if changed
          else f"schema output already up to date ({len(expected)} files)")
    return 0


def register(subparsers) -> None:
    """Add ``schema generate [--check] [--schema PATH]`` to the ``s3rm`` parser."""
    schema_p = subparsers.add_parser("schema", help="schema source tools")
    sub = schema_p.add_subparsers(dest="schema_command", metavar="SUBCOMMAND")
    gen = sub.add_parser("generate", help="write (or --check) the files generated from schema/lesson.toml")
    gen.add_argument("--check", action="store_true", help="write nothing; exit 1 when output is stale")
    gen.add_argument("--schema", metavar="PATH",
                     help="schema source file or folder (default: $S3RM_SCHEMA_DIR or <repo>/schema)")
    gen.set_defaults(handler=run, error_prefix="s3rm schema generate")
