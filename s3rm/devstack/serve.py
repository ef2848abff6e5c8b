"""``s3rm serve``: run the MCP gateway under gunicorn (one worker process, threads).

Validates the configuration first (exit 2 with the variable's name on error),
then replaces this process with
``python -m gunicorn -c gateway/serving/gunicorn.conf.py gateway.serving.wsgi:app``.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from s3rm.errors import CliError

__all__ = ["register", "gunicorn_argv", "check_config", "GUNICORN_CONF"]

#: The gunicorn configuration file shipped with the gateway.
GUNICORN_CONF = Path(__file__).resolve().parents[2] / "gateway" / "serving" / "gunicorn.conf.py"


def gunicorn_argv() -> list[str]:
    """The command ``s3rm serve`` executes."""
    return [sys.executable, "-m", "gunicorn", "-c", str(GUNICORN_CONF), "gateway.serving.wsgi:app"]


def check_config(env: dict[str, str]) -> None:
    """Validate the gateway configuration in ``env`` and the tool schemas, in this process.

    Raises :class:`~s3rm.errors.CliError` (exit 2) naming the bad variable or schema.
    """
    from gateway.config import ConfigError, GatewayConfig
    from gateway.tools.registry import SchemaLoadError, ToolRegistry

    try:
        config = GatewayConfig.from_env(env)
        ToolRegistry.load(config.schema)
    except (ConfigError, SchemaLoadError) as exc:
        raise CliError(f"{exc}", 2)


def _serve(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    if args.bind:
        env["S3RM_BIND"] = args.bind
    if args.threads:
        env["S3RM_GUNICORN_THREADS"] = str(args.threads)
    check_config(env)
    if args.check:
        print(f"s3rm serve: configuration OK; would run: {' '.join(gunicorn_argv())}")
        return 0
    argv = gunicorn_argv()
    os.execve(argv[0], argv, env)
    return 0  # pragma: no cover - execve does not return


def register(subparsers) -> None:
    """Add the ``serve`` sub-command."""
    parser = subparsers.add_parser(
        "serve",
        help="run the MCP gateway (gunicorn, one worker process with threads)",
        description="Run the MCP gateway on S3RM_BIND (default 127.0.0.1:8080), endpoint /mcp. "
        "Configuration comes from S3RM_* environment variables (see docs/transport.md).",
    )
    parser.add_argument("--bind", help="HOST:PORT to listen on (overrides S3RM_BIND)")
    parser.add_argument("--threads", type=int, help="worker threads (overrides S3RM_GUNICORN_THREADS)")
    parser.add_argument("--check", action="store_true", help="validate configuration and schemas, then exit")
    parser.set_defaults(handler=_serve, error_prefix="s3rm serve")
