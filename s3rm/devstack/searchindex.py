"""The dev wiki's SQLite full-text index, kept merged (docs/operations.md#sqlite-search-index).

MediaWiki's SQLite backend stores its search index in an FTS3 table
(``searchindex``). Every saved revision adds a small b-tree segment, and FTS3
merges segments only 16 at a time, so an imported wiki answers each search by
reading every segment: on 398 imported Lessons one single-term search took
50 ms of SQL before a merge and 9 ms after it (each API search runs its query
twice: the hits, then ``totalhits``). FTS3's ``optimize`` command merges all
segments into one. The dev job runner (:mod:`s3rm.devstack.jobrunner`) calls
:func:`merge_if_fragmented` after each ``runJobs.php`` run. Production's
MariaDB has no FTS3 segments and no such step.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from s3rm.devstack.accounts import DB_NAME

__all__ = ["SEGMENT_LIMIT", "database", "segment_count", "merge_if_fragmented"]

#: Merge once the index holds more segments than this (each later save adds one).
SEGMENT_LIMIT = 8


def database(wiki_dir: Path) -> Path:
    """The wiki's main SQLite database file (``<dir>/data/s3rm.sqlite``)."""
    return Path(wiki_dir) / "data" / f"{DB_NAME}.sqlite"


def _connect(db: Path, timeout: float) -> sqlite3.Connection:
    if not db.is_file():
        raise FileNotFoundError(f"no wiki database at {db}")
    return sqlite3.connect(db, timeout=timeout)


def _segments(con: sqlite3.Connection) -> int:
    return int(con.execute("SELECT COUNT(*) FROM searchindex_segdir").fetchone()[0])


def segment_count(db: Path, timeout: float = 10.0) -> int:
    """Number of FTS3 segments of ``searchindex`` in ``db`` (0 for an empty index).

    Raises FileNotFoundError when ``db`` does not exist, ``sqlite3.Error`` when it
    has no FTS3 ``searchindex`` table.
    """
    con = _connect(db, timeout)
    try:
        return _segments(con)
    finally:
        con.close()


def merge_if_fragmented(db: Path, limit: int = SEGMENT_LIMIT, timeout: float = 10.0) -> int | None:
    """Merge ``searchindex`` into one segment when it holds more than ``limit``.

    Returns the segment count found before merging, or ``None`` when it was at
    most ``limit`` (nothing written). The merge is one write transaction; a
    wiki request writing at the same time waits for it (``timeout`` seconds of
    SQLite busy wait on this side). Raises FileNotFoundError / ``sqlite3.Error``
    as :func:`segment_count`.
    """
    con = _connect(db, timeout)
    try:
        before = _segments(con)
        if before <= limit:
            return None
        with con:
            con.execute("INSERT INTO searchindex(searchindex) VALUES('optimize')")
        return before
    finally:
        con.close()
