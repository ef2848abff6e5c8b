"""How the dev wiki writes its state and credential files: private, atomic, UTC-stamped."""
from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from gateway.domain.timestamps import format_ts


def now_iso() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return format_ts(datetime.now(timezone.utc))


def write_private(path: Path, text: str) -> None:
    """Atomically write ``text`` to ``path`` with mode 600 (state and credential files)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
