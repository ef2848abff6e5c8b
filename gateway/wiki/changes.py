"""Reading MediaWiki's recent changes as Lesson changes (docs/hybrid-search.md#follower).

The recent-changes follower asks the repository for ``list=recentchanges``
rows; these functions send that request over the one
:class:`~gateway.wiki.client.WikiClient` and turn each row into a
:class:`~gateway.domain.repository.RecentChange` (create, edit, delete, move,
undelete) of a Lesson, or drop it when it names none.
"""
from __future__ import annotations

from typing import Any, Callable

from gateway.domain.repository import ChangePosition, RecentChange, RecentChangesPage
from gateway.wiki.client import WikiClient

__all__ = ["RC_MAX", "change_bounds", "change_of", "read_recent_changes"]

#: Upper bound of ``rclimit`` per request (MediaWiki's maximum for ordinary accounts).
RC_MAX = 500
_RC_TYPES = "edit|new|log"
#: (logtype, logaction) → change kind; other log rows of a Lesson are ``other`` (the page is re-read).
_LOG_KINDS = {("delete", "delete"): "delete", ("delete", "restore"): "restore",
              ("move", "move"): "move", ("move", "move_redir"): "move"}

#: ``lesson_id_of(row)``: the Lesson id a row (``ns`` + ``title``) names, or None.
LessonIdOf = Callable[[dict[str, Any]], "str | None"]


def read_recent_changes(client: WikiClient, lesson_id_of: LessonIdOf, start: str | None, limit: int,
                        cursor: str | None = None) -> RecentChangesPage:
    """Lesson rows of ``list=recentchanges`` from ``start`` (ISO UTC, inclusive), oldest first.

    One request of at most ``limit`` (1..500) rows of every namespace; rows
    naming no Lesson (neither title nor move target) are dropped, so fewer
    than ``limit`` may come back while ``complete`` is False. Raises the
    repository errors of :mod:`gateway.domain.repository`.
    """
    params = {"action": "query", "list": "recentchanges", "rcdir": "newer", "rctype": _RC_TYPES,
              "rcprop": "title|ids|timestamp|loginfo", "rclimit": max(1, min(int(limit), RC_MAX))}
    if start:
        params["rcstart"] = start
    if cursor:
        params["rccontinue"] = cursor
    data = client.get(params)
    rows = data.get("query", {}).get("recentchanges", [])
    changes = [c for c in (change_of(row, lesson_id_of) for row in rows) if c is not None]
    last = ChangePosition(str(rows[-1].get("timestamp", "")), int(rows[-1].get("rcid", 0))) if rows else None
    return RecentChangesPage(changes=tuple(changes), next_cursor=data.get("continue", {}).get("rccontinue"),
                             last_position=last)


def change_bounds(client: WikiClient) -> tuple[ChangePosition | None, ChangePosition | None]:
    """(oldest, newest) kept recentchanges positions of any namespace (two one-row requests)."""
    out = []
    for direction in ("newer", "older"):
        data = client.get({"action": "query", "list": "recentchanges", "rcdir": direction,
                           "rctype": _RC_TYPES, "rcprop": "ids|timestamp", "rclimit": 1})
        rows = data.get("query", {}).get("recentchanges", [])
        out.append(ChangePosition(rows[0]["timestamp"], int(rows[0]["rcid"])) if rows else None)
    return out[0], out[1]


def change_of(row: dict[str, Any], lesson_id_of: LessonIdOf) -> RecentChange | None:
    """The Lesson change one recentchanges ``row`` records, or None when it names no Lesson."""
    position = ChangePosition(str(row.get("timestamp", "")), int(row.get("rcid", 0)))
    lesson_id = lesson_id_of(row)
    if row.get("type") in ("new", "edit"):
        return None if lesson_id is None else RecentChange(position, row["type"], lesson_id,
                                                           revision_id=int(row.get("revid") or 0))
    kind = _LOG_KINDS.get((row.get("logtype"), row.get("logaction")), "other")
    target_id = None
    if kind == "move":
        params = row.get("logparams") or {}
        target_id = lesson_id_of({"ns": params.get("target_ns"), "title": params.get("target_title", "")})
    if lesson_id is None and target_id is None:
        return None
    return RecentChange(position, kind, lesson_id, target_id=target_id)
