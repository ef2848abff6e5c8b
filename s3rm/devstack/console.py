"""What the dev-wiki commands show a person: progress lines and the tail of a log."""
from __future__ import annotations

from pathlib import Path


def say(msg: str, quiet: bool = False) -> None:
    """Print one progress line (flushed) unless ``quiet``."""
    if not quiet:
        print(msg, flush=True)


def tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file ("" when it cannot be read)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
