"""``InMemoryRepository``: a LessonRepository held in a dict — for unit tests of domain rules only.

Same contract as :class:`~gateway.wiki.repository.MediaWikiRepository`,
including the parts tests rely on:

* revisions get increasing ids across all pages; the page's latest revision
  is what reads return; timestamps come from an injectable clock;
* ``save_page`` raises PageExists / PageMissing / EditConflict (with the
  current revision id) exactly like the MediaWiki implementation, trims
  trailing whitespace like MediaWiki's pre-save transform and reports
  ``nochange`` for identical text;
* ``search_full_text`` understands the subset of MediaWiki search syntax the
  gateway sends: whitespace-separated terms, all required (AND, like
  ``SearchSqlite``/``SearchMySQL`` strict matching), a trailing ``*`` for a
  prefix; words are split the way SQLite FTS's simple tokenizer does (runs of
  ASCII letters/digits and any non-ASCII characters), case-insensitively;
  hits are returned in page-creation order (the order SQLite returns them);
* incoming relation edges are found from the stored relations (the stand-in
  for MediaWiki's link tables).

Never use it in production: it has no persistence and no access control.
"""
from __future__ import annotations

import html
import re
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Sequence

from support.schema_dirs import SCHEMA
from gateway.domain.codec import PageFormatError, parse_page, serialize_page
from gateway.domain.model import LessonPage, LessonSnapshot
from gateway.domain.repository import (
    ChangePosition,
    EdgesResult,
    EditConflict,
    FullTextHit,
    FullTextResult,
    LessonRepository,
    PageExists,
    PageMissing,
    RecentChange,
    RecentChangesPage,
    relation_edges,
    RevisionInfo,
    RevisionPage,
    SNAPSHOT_BATCH,
    SaveResult,
    ScanPage,
)
from gateway.config.schema import Schema

__all__ = ["InMemoryRepository"]

_FTS_WORD = re.compile(r"(?:[A-Za-z0-9]|[^\x00-\x7f])+")


@dataclass(frozen=True)
class _Rev:
    revision_id: int
    parent_id: int
    timestamp: str
    user: str
    comment: str
    text: str


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class InMemoryRepository(LessonRepository):
    """Lesson pages in memory (thread-safe).

    Args:
        schema: schema source (defaults to the committed one, support.schema_dirs.SCHEMA).
        clock: ``() -> aware datetime`` used for revision timestamps.
        user: account name recorded on saved revisions.
    """

    def __init__(self, schema: Schema | None = None, clock: Callable[[], datetime] = _utc_now,
                 user: str = "S3Agent"):
        self.schema = schema or SCHEMA
        self._clock = clock
        self._user = user
        self._lock = threading.RLock()
        self._pages: dict[str, list[_Rev]] = {}   # insertion order = page creation order
        self._next_rev = 1
        self._changes: list[RecentChange] = []   # the recent-changes stream, oldest first
        self.search_calls: list[str] = []        # queries seen (tests assert on them)

    # ------------------------------------------------------------ reads
    def get_snapshot(self, lesson_id: str) -> LessonSnapshot | None:
        with self._lock:
            revs = self._pages.get(lesson_id)
            if not revs:
                return None
            return self._snapshot(lesson_id, revs[-1])

    def get_snapshots(self, lesson_ids: Sequence[str]) -> dict[str, LessonSnapshot]:
        out = {}
        for lesson_id in dict.fromkeys(lesson_ids):
            try:
                snap = self.get_snapshot(lesson_id)
            except PageFormatError:
                continue
            if snap is not None:
                out[lesson_id] = snap
        return out

    def scan_snapshots(self, cursor: str | None, limit: int) -> ScanPage:
        limit = max(1, min(int(limit), SNAPSHOT_BATCH))
        with self._lock:
            ids = sorted(i for i in self._pages if cursor is None or i >= cursor)
        batch, rest = ids[:limit], ids[limit:]
        snaps = self.get_snapshots(batch)
        return ScanPage(snapshots=tuple(snaps[i] for i in batch if i in snaps),
                        next_cursor=rest[0] if rest else None, scanned=len(batch), scan_limit=limit)

    def ids_by_prefix(self, prefix: str, limit: int) -> list[str]:
        with self._lock:
            return sorted(i for i in self._pages if i.startswith(prefix))[:max(0, int(limit))]

    def list_recent(self, cursor: str | None, limit: int) -> ScanPage:
        """Newest first by latest revision id; cursor = ``"<revid>"`` resumes at that revision."""
        limit = max(1, min(int(limit), SNAPSHOT_BATCH))
        with self._lock:
            latest = sorted(((revs[-1].timestamp, revs[-1].revision_id, i) for i, revs in self._pages.items()),
                            key=lambda row: row[1], reverse=True)  # revision ids grow with time here
        if cursor is not None:
            below = int(cursor)
            latest = [row for row in latest if row[1] <= below]
        batch, rest = latest[:limit], latest[limit:]
        snaps = self.get_snapshots([row[2] for row in batch])
        kept = [row for row in batch if row[2] in snaps]
        return ScanPage(snapshots=tuple(snaps[row[2]] for row in kept),
                        next_cursor=str(rest[0][1]) if rest else None, scanned=len(batch), scan_limit=limit,
                        item_cursors=tuple(str(row[1]) for row in kept))

    def search_full_text(self, query: str, limit: int) -> FullTextResult:
        limit = max(1, min(int(limit), 500))
        self.search_calls.append(query)
        terms = [t.lower() for t in query.split() if t.strip("*")]
        with self._lock:
            texts = [(i, html.unescape(revs[-1].text).lower()) for i, revs in self._pages.items()]
        hits = []
        for lesson_id, text in texts:
            words = set(_FTS_WORD.findall(text))
            if terms and all(_term_matches(term, words) for term in terms):
                hits.append(lesson_id)
        shown = hits[:limit]
        return FullTextResult(hits=tuple(FullTextHit(i, rank) for rank, i in enumerate(shown)),
                              scanned=len(shown), scan_limit=limit, partial=len(hits) > limit)

    def find_relation_edges(self, lesson_id: str, *, outgoing: bool = True, incoming: bool = True,
                            limit: int = 500) -> EdgesResult:
        own = self._safe_snapshot(lesson_id) if outgoing else None
        sources = []
        if incoming:
            with self._lock:
                others = [i for i in self._pages if i != lesson_id]
            for other in others:
                snap = self._safe_snapshot(other)
                if snap is not None and any(r.get("to") == lesson_id for r in snap.page.relations):
                    sources.append(snap)
        return relation_edges(lesson_id, own, sources[:limit], outgoing=outgoing, incoming=incoming, limit=limit,
                              scanned_sources=min(len(sources), limit), partial=len(sources) > limit)

    def list_revisions(self, lesson_id: str, cursor: str | None, limit: int) -> RevisionPage:
        limit = max(1, min(int(limit), 500))
        with self._lock:
            revs = list(reversed(self._pages.get(lesson_id, [])))
        start = int(cursor) if cursor else 0
        chunk = revs[start:start + limit]
        nxt = str(start + limit) if start + limit < len(revs) else None
        return RevisionPage(revisions=tuple(RevisionInfo(r.revision_id, r.parent_id, r.user, r.timestamp, r.comment)
                                            for r in chunk), next_cursor=nxt, scanned=len(chunk))

    def get_revision_text(self, revision_id: int) -> str | None:
        with self._lock:
            for revs in self._pages.values():
                for rev in revs:
                    if rev.revision_id == revision_id:
                        return rev.text
        return None

    def exists(self, lesson_ids: Sequence[str]) -> set[str]:
        with self._lock:
            return {i for i in lesson_ids if i in self._pages}

    # ------------------------------------------------------------ write
    def save_page(self, lesson_id: str, wikitext: str, summary: str, *,
                  base_revision_id: int | None) -> SaveResult:
        wikitext = wikitext.rstrip(" \t\n\r\0\x0b")  # MediaWiki's pre-save transform trims the end
        with self._lock:
            revs = self._pages.get(lesson_id)
            if base_revision_id is None:
                if revs:
                    raise PageExists(f"Lesson {lesson_id} already exists", revs[-1].revision_id)
                parent = 0
            else:
                if not revs:
                    raise PageMissing(f"Lesson {lesson_id} does not exist")
                if revs[-1].revision_id != base_revision_id:
                    raise EditConflict(f"Lesson {lesson_id} changed since revision {base_revision_id}",
                                       revs[-1].revision_id)
                if revs[-1].text == wikitext:
                    return SaveResult(revision_id=base_revision_id, timestamp=revs[-1].timestamp, nochange=True,
                                      parent_revision_id=base_revision_id)
                parent = base_revision_id
            ts = self._clock().astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            rev = _Rev(self._next_rev, parent, ts, self._user, summary, wikitext)
            self._next_rev += 1
            self._pages.setdefault(lesson_id, []).append(rev)
            self._record_change("edit" if parent else "new", lesson_id, ts, rev.revision_id)
            return SaveResult(revision_id=rev.revision_id, timestamp=ts, parent_revision_id=parent or None)

    def put_page(self, lesson_id: str, wikitext: str, summary: str = "test") -> int:
        """Test helper: create or overwrite a page unconditionally; returns the new revision id."""
        with self._lock:
            revs = self._pages.get(lesson_id)
            base = revs[-1].revision_id if revs else None
            return self.save_page(lesson_id, wikitext, summary, base_revision_id=base).revision_id

    def delete_page(self, lesson_id: str) -> None:
        """Test helper: remove a page and its history."""
        with self._lock:
            if self._pages.pop(lesson_id, None) is not None:
                ts = self._clock().astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                self._record_change("delete", lesson_id, ts, 0)

    def forget_changes_before(self, position: ChangePosition) -> None:
        """Test helper: drop stream rows before ``position`` (MediaWiki's ``$wgRCMaxAge`` purge)."""
        with self._lock:
            self._changes = [c for c in self._changes if c.position >= position]

    def recent_changes(self, start: str | None, limit: int, cursor: str | None = None) -> RecentChangesPage:
        """The stream from ``start``; ``cursor`` = ``"<rcid>"`` of the next row to examine."""
        limit = max(1, min(int(limit), 500))
        with self._lock:
            rows = [c for c in self._changes if (start is None or c.position.timestamp >= start)
                    and (cursor is None or c.position.rcid >= int(cursor))]
        page, rest = rows[:limit], rows[limit:]
        return RecentChangesPage(changes=tuple(page), next_cursor=str(rest[0].position.rcid) if rest else None,
                                 last_position=page[-1].position if page else None)

    def recent_change_bounds(self) -> tuple[ChangePosition | None, ChangePosition | None]:
        with self._lock:
            if not self._changes:
                return None, None
            return self._changes[0].position, self._changes[-1].position

    def _record_change(self, kind: str, lesson_id: str, ts: str, revision_id: int) -> None:
        rcid = self._changes[-1].position.rcid + 1 if self._changes else 1
        self._changes.append(RecentChange(ChangePosition(ts, rcid), kind, lesson_id, revision_id=revision_id))

    # ----------------------------------------------------------- health
    def check_login(self) -> bool:
        return True

    # -------------------------------------------------------- internals
    def _snapshot(self, lesson_id: str, rev: _Rev) -> LessonSnapshot:
        return LessonSnapshot(id=lesson_id, revision_id=rev.revision_id, timestamp=rev.timestamp,
                              page=parse_page(rev.text, self.schema), wikitext=rev.text, summary=rev.comment)

    def _safe_snapshot(self, lesson_id: str) -> LessonSnapshot | None:
        try:
            return self.get_snapshot(lesson_id)
        except PageFormatError:
            return None


def _term_matches(term: str, words: set[str]) -> bool:
    if term.endswith("*"):
        stem = term.rstrip("*")
        return any(w.startswith(stem) for w in words)
    return term in words


def repository_with(pages: dict[str, LessonPage], schema=None) -> InMemoryRepository:
    """An :class:`InMemoryRepository` holding ``pages`` (id → :class:`LessonPage`), one revision each."""
    repo = InMemoryRepository(schema)
    for lesson_id, page in pages.items():
        repo.put_page(lesson_id, serialize_page(page, repo.schema))
    return repo
