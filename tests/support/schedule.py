"""Slowest test files first (tests/conftest.py ``pytest_collection_modifyitems``).

With ``-n 4 --dist loadfile --no-loadscope-reorder`` (pyproject.toml) pytest-xdist hands whole files to
workers in collection order, the next file to whichever worker is about to run out. A long file handed
out last sets the end of the run, so the files are ordered by the committed table
``tests/durations.json`` (seconds per file, from one full run: ``scripts/test_durations.py``), slowest
first. A file missing from the table (a new one) counts as the table's median. Only the order of whole
files changes: each file's tests keep their order, and no test reads the table.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Sequence, TypeVar

__all__ = ["TABLE", "load_table", "slowest_files_first"]

TABLE = Path(__file__).resolve().parents[1] / "durations.json"

T = TypeVar("T")


def load_table(path: Path = TABLE) -> dict[str, float]:
    """``{"tests/…/test_x.py": seconds}`` from ``path``; {} when it is missing or unreadable (order unchanged)."""
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {str(k): float(v) for k, v in table.items() if isinstance(v, (int, float))}


def slowest_files_first(items: Sequence[T], table: dict[str, float], file_of=lambda item: item.nodeid.split("::")[0]
                        ) -> list[T]:
    """``items`` grouped by file (``file_of``), the files slowest first by ``table``; ties and unknown files
    (the median) keep their collection order, and so do the items of one file."""
    if not table:
        return list(items)
    default = statistics.median(table.values())
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(file_of(item), len(first_seen))
    return sorted(items, key=lambda item: (-table.get(file_of(item), default), first_seen[file_of(item)]))
