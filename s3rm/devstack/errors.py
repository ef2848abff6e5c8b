"""What every dev-wiki module shares: its error type and three small helpers.

:class:`DevWikiError` carries the CLI exit code (1: an operation failed, 2: bad
configuration or usage) and a message for humans; it is a
:class:`~sync.errors.CliError`, so ``s3rm`` prints it without a traceback.
"""
from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from gateway.domain.timestamps import format_ts
from s3rm.errors import CliError


class DevWikiError(CliError):
    """A dev-wiki operation failed; ``str(exc)`` is a message for humans.

    ``exit_code`` is what the CLI returns: 1 for a failed operation, 2 for bad
    configuration or usage (port, directory, environment variable).
    """


def now_iso() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return format_ts(datetime.now(timezone.utc))


def say(msg: str, quiet: bool = False) -> None:
    """Print one progress line (flushed) unless ``quiet``."""
    if not quiet:
        print(msg, flush=True)


def write_private(path: Path, text: str) -> None:
    """Atomically write ``text`` to ``path`` with mode 600 (state and credential files)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file ("" when it cannot be read)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
