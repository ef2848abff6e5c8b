"""The SQLite search-index merge (s3rm/devstack/searchindex.py) on a real FTS3 table.

The dev wiki's job runner calling it is tested in test_devwiki.py
(``test_job_runner_merges_the_fragmented_search_index``).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from s3rm.devstack.searchindex import SEGMENT_LIMIT, merge_if_fragmented, segment_count


def _index(path: Path, rows: int) -> None:
    """A MediaWiki-shaped FTS3 ``searchindex`` with one committed save per row (one segment each)."""
    con = sqlite3.connect(path)
    con.execute("CREATE VIRTUAL TABLE searchindex USING FTS3(si_title, si_text)")
    for n in range(rows):
        with con:
            con.execute("INSERT INTO searchindex(rowid, si_title, si_text) VALUES (?, ?, ?)",
                        (n + 1, f"lesson {n}", f"storage outage number {n} {'typo' if n % 3 == 0 else 'fix'}"))
    con.close()


def _hits(path: Path, query: str) -> list[int]:
    con = sqlite3.connect(path)
    try:
        return [r[0] for r in con.execute("SELECT rowid FROM searchindex WHERE si_text MATCH ? ORDER BY rowid",
                                          (query,))]
    finally:
        con.close()


def test_a_fragmented_index_is_merged_into_one_segment_with_the_same_hits(tmp_path: Path) -> None:
    db = tmp_path / "s3rm.sqlite"
    _index(db, SEGMENT_LIMIT + 4)
    before = segment_count(db)
    assert before > SEGMENT_LIMIT
    hits = {q: _hits(db, q) for q in ("storage", "typo", "storage typo", "outage fix")}
    assert hits["typo"] == [1, 4, 7, 10]

    assert merge_if_fragmented(db) == before
    assert segment_count(db) == 1
    assert {q: _hits(db, q) for q in hits} == hits
    assert merge_if_fragmented(db) is None  # nothing to merge: nothing written


def test_a_compact_index_is_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "s3rm.sqlite"
    _index(db, SEGMENT_LIMIT)
    mtime = db.stat().st_mtime_ns
    assert merge_if_fragmented(db) is None
    assert segment_count(db) == SEGMENT_LIMIT and db.stat().st_mtime_ns == mtime


def test_a_missing_database_or_table_is_reported(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no wiki database"):
        merge_if_fragmented(tmp_path / "absent.sqlite")
    plain = tmp_path / "plain.sqlite"
    sqlite3.connect(plain).close()
    with pytest.raises(sqlite3.OperationalError, match="searchindex_segdir"):
        segment_count(plain)
