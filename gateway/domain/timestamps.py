"""UTC ISO-8601 timestamps of the Lesson contract (``YYYY-MM-DDTHH:MM:SSZ``).

Every stored time (created_at, updated_at, added_at, relation created_at,
verified_at) uses this exact form, second precision, always UTC
(:data:`TIMESTAMP_PATTERN`, which ``meta.timestamp_pattern`` in
``schema/lesson.toml`` states for the wiki side; a test keeps them equal).
MediaWiki revision timestamps use the same form.

Contract: ``docs/data-contract.md#provenance-and-time`` (UTC ISO-8601, the
±5-minute window, monotonic ``updated_at``).
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from gateway.config.schema import Schema

__all__ = ["TIMESTAMP_PATTERN", "format_ts", "parse_ts", "next_updated_at", "within_window", "window_seconds"]

#: The one stored form, the one :func:`format_ts` writes (``meta.timestamp_pattern`` of the schema source).
TIMESTAMP_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"
_PATTERN = re.compile(TIMESTAMP_PATTERN)


def format_ts(moment: datetime) -> str:
    """Format an aware datetime as ``YYYY-MM-DDTHH:MM:SSZ`` (UTC, microseconds dropped).

    Raises ValueError for a naive datetime (its zone would be a guess).
    """
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_ts(value: str) -> datetime | None:
    """Parse a contract timestamp into an aware UTC datetime; None when malformed or impossible."""
    if not isinstance(value, str) or not _PATTERN.match(value):
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:  # e.g. 2024-02-30
        return None


def window_seconds(schema: Schema) -> int:
    """Allowed distance between a new stored time and the revision time (``meta.timestamp_window_seconds``)."""
    return int(schema.meta["timestamp_window_seconds"])


def within_window(value: str, revision_time: datetime, schema: Schema) -> bool:
    """True when ``value`` parses and lies within ± :func:`window_seconds` of ``revision_time``."""
    moment = parse_ts(value)
    if moment is None:
        return False
    return abs((moment - revision_time).total_seconds()) <= window_seconds(schema)


def next_updated_at(now: datetime, previous: str | None) -> str:
    """The ``updated_at`` of a new revision: ``now``, or one second after ``previous`` when that is later.

    ``updated_at`` must strictly increase (second precision), so two saves in
    the same second get consecutive values. ``previous`` may be None (a new
    Lesson) or unparseable (then ``now`` is used and the hooks checker judges).
    """
    candidate = now.astimezone(timezone.utc).replace(microsecond=0)
    prev = parse_ts(previous) if previous else None
    if prev is not None and candidate <= prev:
        candidate = prev + timedelta(seconds=1)
    return format_ts(candidate)
