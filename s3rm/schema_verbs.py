"""``s3rm schema generate [--check] [--schema PATH]``: write or check the files generated from the schema source.

From ``schema/lesson.toml`` (or PATH / ``$S3RM_SCHEMA_DIR/lesson.toml``) the
:mod:`sync.generate` files are written next to the source. ``--check`` writes
nothing and exits 1 listing stale, missing and extra files, with a unified diff
(committed file → generated) for each stale one (docs/data-contract.md#schema-source);
exit 0 when up to date, 2 when the source cannot be loaded.
"""
from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

from gateway.config.schema import SchemaError
from gateway.tools.registry import SchemaLoadError
from s3rm.errors import CliError
from s3rm.settings import CliSettings
from sync.generate import check_output, read_schema, render_generated_files, stale_diff, write_output

__all__ = ["register", "run"]


def _source_path(arg: str | None) -> Path:
    if arg:
        p = Path(arg)
        return p / "lesson.toml" if p.is_dir() else p
    return CliSettings().schema_dir / "lesson.toml"


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
