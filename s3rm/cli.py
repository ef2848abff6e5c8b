"""The ``s3rm`` command: the admin's verbs in one place.

Each feature module contributes its own sub-commands through a
``register(subparsers)`` function; this module only wires them together, so
adding a verb never means editing another verb's code.

Exit codes: 0 success, 1 a check failed (drift, stale output, audit finding),
2 usage or configuration error. A verb stops by raising
:class:`~s3rm.errors.CliError`; :func:`main` alone prints it (after the verb's
``error_prefix``) and returns its exit code, or the verb's
``error_exit_code`` when the verb sets one.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from s3rm.errors import CliError

#: Modules that contribute sub-commands, in the order ``--help`` lists them.
COMMAND_MODULES = (
    "s3rm.schema_verbs",
    "s3rm.devstack.devwiki",
    "s3rm.sync_verbs",
    "s3rm.devstack.serve",
    "s3rm.evaluate",
    "s3rm.importing",
    "s3rm.migrate",
    "s3rm.audit",
    "s3rm.devstack.stack",
    "s3rm.collect",
    "s3rm.research",
    "s3rm.index",
    "s3rm.auth",
    "s3rm.doctor",
)


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every available sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="s3rm",
        description="S3 Research Memory: schema generator, wiki sync, dev wiki and gateway tools.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a verb still being built
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``s3rm`` console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(args) or 0)
    except CliError as exc:
        print(f"{getattr(args, 'error_prefix', 's3rm')}: {exc}", file=sys.stderr)
        return getattr(args, "error_exit_code", None) or exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
