"""The ``LessonRepository`` boundary (``docs/read-path.md#layers``).

Tools receive a repository through their context and never see MediaWiki
details (tokens, continuation, API error codes). Two implementations exist:
``gateway.wiki.repository.MediaWikiRepository`` (the real one) and
``InMemoryRepository`` in ``tests/support/memory.py`` (unit tests of domain rules only).

Every list operation is bounded and reports ``partial``/``scanned``/
``scan_limit`` so callers can tell an incomplete answer from an empty one.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Collection, Sequence

from gateway.config.schema import Schema
from gateway.core.errors import GatewayError
from gateway.domain.model import LessonSnapshot

#: MediaWiki returns at most this many page contents per request (docs/retrieval.md#legacy-search).
SNAPSHOT_BATCH = 50
#: Batches the default :meth:`LessonRepository.ids_by_prefix` walk may read.
PREFIX_SCAN_BATCHES = 10


class RepositoryError(GatewayError):
    """Base class of repository failures. ``retryable`` tells callers whether a retry may help.

    The ONE error tree of MediaWiki failures, raised by
    :class:`gateway.wiki.client.WikiClient` for the gateway and for every
    ``s3rm`` command (sync, import, audit, dev-wiki readiness)::

        RepositoryError
        ├── WikiUnavailable        unreachable, timeouts, HTTP 5xx/429, maxlag, read-only (retryable)
        ├── PermissionDenied       a right is missing (protected page or namespace, blocked, …)
        │   ├── LoginFailed        the bot password was refused at login
        │   └── AssertUserFailed   the session was lost and logging in again did not restore it
        ├── EditConflict           the page's latest revision is not the base of the save
        ├── PageExists             a create-only save found the page
        ├── PageMissing            the page to update does not exist
        └── WikiApiError           any other API refusal (bad value, invalid title, …)

    ``wiki_code`` keeps the MediaWiki API error code (e.g. ``"maxlag"``,
    ``"protectedpage"``, ``"http-503"``) when the failure came from the wiki,
    else None. ``maybe_applied`` is True only for a write whose outcome is
    unknown (the request may have reached MediaWiki before the connection
    failed); callers must re-read before retrying such a write.
    """

    retryable = False
    wiki_code: str | None = None
    maybe_applied = False


class WikiUnavailable(RepositoryError):
    """MediaWiki could not be reached or kept failing (timeouts, 5xx, maxlag)."""

    retryable = True


class EditConflict(RepositoryError):
    """The page's latest revision is not the expected base revision.

    Attributes:
        current_revision_id: the page's latest revision id (None when the page vanished).
    """

    def __init__(self, message: str, current_revision_id: int | None):
        super().__init__(message)
        self.current_revision_id = current_revision_id


class PageExists(RepositoryError):
    """A create-only save found the page already there."""

    def __init__(self, message: str, current_revision_id: int | None):
        super().__init__(message)
        self.current_revision_id = current_revision_id


class PageMissing(RepositoryError):
    """The page to update does not exist."""


class PermissionDenied(RepositoryError):
    """The wiki account lacks a right needed for the operation (message names it).

    Also raised when the configured bot password is refused at login
    (``wiki_code`` = the login result, e.g. ``"Failed"``).
    """


class LoginFailed(PermissionDenied):
    """The wiki refused the bot-password login; ``wiki_code`` is MediaWiki's login result
    (``"Failed"``, ``"WrongToken"``, ``"Aborted"``, …)."""


class AssertUserFailed(PermissionDenied):
    """A request asserted a logged-in user (``assert=user``) and the session was gone
    even after one fresh login (``wiki_code`` ``assertuserfailed``, ``assertbotfailed``
    or ``notloggedin``)."""


class WikiApiError(RepositoryError):
    """MediaWiki rejected a request for a reason none of the classes above covers.

    ``wiki_code`` holds the API error code (e.g. ``"badvalue"``, ``"invalidtitle"``).
    """


@dataclass(frozen=True)
class ScanPage:
    """One bounded page of a snapshot scan.

    Attributes:
        snapshots: Lessons in scan order.
        next_cursor: opaque continuation, None at the end.
        scanned: pages examined for this page of results.
        scan_limit: the cap that applied.
        partial: True when the cap stopped the scan before the end.
        item_cursors: for ``list_recent``, one continuation per snapshot that
            resumes the walk AT that snapshot (so a caller that returns only a
            prefix can continue exactly after it); empty for other scans.
    """

    snapshots: tuple[LessonSnapshot, ...]
    next_cursor: str | None
    scanned: int
    scan_limit: int
    partial: bool = False
    item_cursors: tuple[str, ...] = ()


@dataclass(frozen=True)
class FullTextHit:
    """A full-text candidate: Lesson id and 0-based rank in MediaWiki's ranking."""

    id: str
    rank: int


@dataclass(frozen=True)
class FullTextResult:
    """Ranked full-text candidates (bounded)."""

    hits: tuple[FullTextHit, ...]
    scanned: int
    scan_limit: int
    partial: bool = False


@dataclass(frozen=True)
class RelationEdge:
    """A stored relation: ``source`` --relation--> ``target`` (ids without namespace)."""

    source: str
    relation: str
    target: str
    note: str = ""
    created_by: str = ""
    created_at: str = ""


@dataclass(frozen=True)
class EdgesResult:
    """Relation edges touching one Lesson, both directions as requested (bounded)."""

    outgoing: tuple[RelationEdge, ...]
    incoming: tuple[RelationEdge, ...]
    scanned: int
    scan_limit: int
    partial: bool = False


def snapshot_edges(snap: LessonSnapshot) -> list[RelationEdge]:
    """The relations stored on ``snap`` as edges; ``source`` is the page's own id (the storing page)."""
    return [RelationEdge(source=snap.id, relation=r.get("relation", ""), target=r.get("to", ""),
                         note=r.get("note", ""), created_by=r.get("created_by", ""),
                         created_at=r.get("created_at", "")) for r in snap.page.relations]


def relation_edges(lesson_id: str, own: LessonSnapshot | None, sources: Sequence[LessonSnapshot], *,
                   outgoing: bool, incoming: bool, limit: int, scanned_sources: int,
                   partial: bool) -> EdgesResult:
    """The :class:`EdgesResult` of ``lesson_id`` from snapshots a repository has read.

    ``own`` is the Lesson's own snapshot (read only when ``outgoing``; None when
    missing), ``sources`` the snapshots of pages that may store an edge to it
    (read only when ``incoming``), ``scanned_sources`` how many candidate pages
    were examined and ``partial`` whether candidates were cut at ``limit``. Both
    repositories share this so their answers have one shape
    (docs/tools.md#get-lesson, docs/tools.md#find-related-lessons).
    """
    out_edges = tuple(snapshot_edges(own)) if outgoing and own is not None else ()
    in_edges = tuple(e for snap in sources for e in snapshot_edges(snap) if e.target == lesson_id) if incoming else ()
    scanned = (1 if outgoing and own is not None else 0) + (scanned_sources if incoming else 0)
    return EdgesResult(outgoing=out_edges, incoming=in_edges, scanned=scanned,
                       scan_limit=(limit if incoming else 0) + (1 if outgoing else 0),
                       partial=partial and incoming)


@dataclass(frozen=True)
class RevisionInfo:
    """Metadata of one revision of a Lesson page (content not included)."""

    revision_id: int
    parent_id: int
    user: str
    timestamp: str
    comment: str
    sha1: str = ""


@dataclass(frozen=True)
class SaveResult:
    """Outcome of a page save.

    Attributes:
        revision_id: the page's latest revision id after the call.
        timestamp: that revision's timestamp (UTC ISO-8601).
        nochange: True when MediaWiki saw identical content and made no revision.
        parent_revision_id: the revision MediaWiki based the save on.
    """

    revision_id: int
    timestamp: str
    nochange: bool = False
    parent_revision_id: int | None = None


@dataclass(frozen=True)
class RevisionPage:
    """One bounded page of a Lesson's revision history, newest first."""

    revisions: tuple[RevisionInfo, ...]
    next_cursor: str | None
    scanned: int = 0
    extra: dict = field(default_factory=dict)


#: Kinds of :class:`RecentChange` (docs/hybrid-search.md#follower).
CHANGE_KINDS = ("new", "edit", "delete", "restore", "move", "other")


@dataclass(frozen=True, order=True)
class ChangePosition:
    """A point in the recent-changes stream: ``(timestamp, rcid)``, ordered as MediaWiki lists them.

    ``timestamp`` is UTC ``YYYY-MM-DDTHH:MM:SSZ`` (string order = time order);
    ``rcid`` the recentchanges row id (docs/hybrid-search.md#follower).
    """

    timestamp: str
    rcid: int


@dataclass(frozen=True)
class RecentChange:
    """One recent-changes row that concerns a Lesson (docs/hybrid-search.md#follower).

    Attributes:
        position: where the row sits in the stream.
        kind: one of :data:`CHANGE_KINDS` (``delete``/``restore``/``move`` come from log rows).
        lesson_id: the Lesson the row names (for a move: the OLD title), None when that title is no Lesson.
        target_id: for ``move``, the Lesson id of the new title (None when it left the namespace).
        revision_id: the new revision of an edit/create (0 for log rows).
    """

    position: ChangePosition
    kind: str
    lesson_id: str | None
    target_id: str | None = None
    revision_id: int = 0


@dataclass(frozen=True)
class RecentChangesPage:
    """Rows at or after a start timestamp, oldest first.

    Attributes:
        changes: the rows that name a Lesson.
        next_cursor: opaque continuation of the same walk (MediaWiki ``rccontinue``), None at the end.
        last_position: position of the last row examined, Lesson or not (None when no row came back).
    """

    changes: tuple[RecentChange, ...]
    next_cursor: str | None = None
    last_position: ChangePosition | None = None

    @property
    def complete(self) -> bool:
        """True when no more rows follow."""
        return self.next_cursor is None


class LessonRepository(abc.ABC):
    """Abstract store of Lesson pages. All ids are bare Lesson ids (``[a-z0-9_-]+``)."""

    #: the schema source its pages are decoded and written with (set by each implementation's constructor)
    schema: Schema

    # ---- reads ---------------------------------------------------------
    @abc.abstractmethod
    def get_snapshot(self, lesson_id: str) -> LessonSnapshot | None:
        """Latest revision of ``Lesson:<id>`` decoded, or None when absent.

        Raises WikiUnavailable; a page that does not parse raises
        ``gateway.domain.codec.PageFormatError``.
        """

    @abc.abstractmethod
    def get_snapshots(self, lesson_ids: Sequence[str]) -> dict[str, LessonSnapshot]:
        """Latest snapshots for many ids, fetched in batches of SNAPSHOT_BATCH; absent ids omitted.

        Pages that do not parse are omitted too (they are reported by the auditor).
        """

    @abc.abstractmethod
    def scan_snapshots(self, cursor: str | None, limit: int) -> ScanPage:
        """Bounded scan of all Lessons in a stable order (``limit`` ≤ SNAPSHOT_BATCH)."""

    @abc.abstractmethod
    def list_recent(self, cursor: str | None, limit: int) -> ScanPage:
        """Lessons newest first by last edit, bounded; used for empty-query listings."""

    def ids_by_prefix(self, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` Lesson ids starting with ``prefix``, in title order (argument completion).

        The default walks :meth:`scan_snapshots`, at most ``PREFIX_SCAN_BATCHES``
        batches (bounded, possibly incomplete); MediaWiki answers it with one
        ``list=allpages&apprefix=`` request.
        """
        found: list[str] = []
        cursor: str | None = None
        for _ in range(PREFIX_SCAN_BATCHES):
            page = self.scan_snapshots(cursor, SNAPSHOT_BATCH)
            found.extend(s.id for s in page.snapshots if s.id.startswith(prefix))
            cursor = page.next_cursor
            if cursor is None or len(found) >= limit:
                break
        return found[:limit]

    @abc.abstractmethod
    def search_full_text(self, query: str, limit: int) -> FullTextResult:
        """MediaWiki full-text candidates (``list=search``, ``srwhat=text``, Lesson namespace)."""

    def search_snapshots(self, query: str, limit: int) -> tuple[FullTextResult, dict[str, LessonSnapshot]]:
        """Full-text candidates AND their latest snapshots (``docs/read-path.md``: fewest round trips).

        Same hits, order and ``partial`` as :meth:`search_full_text`; the dict
        holds the snapshots of the hits that exist and parse. The default
        composes the two reads; MediaWiki answers both in one request
        (``generator=search`` + ``prop=revisions``).
        """
        hits = self.search_full_text(query, limit)
        return hits, self.get_snapshots([h.id for h in hits.hits])

    def search_full_text_many(self, queries: Sequence[str], limit: int
                              ) -> list[tuple[FullTextResult, dict[str, LessonSnapshot]]]:
        """:meth:`search_full_text` of each query (same order), each with the snapshots of the hits the
        repository can give without reading their text again (docs/read-path.md#revision-memory).

        A hit without a snapshot must be read with :meth:`get_snapshots`; a snapshot given is the
        hit's latest revision at the time of the search. The default reads no snapshots and runs the
        searches one after another; over MediaWiki they are sent together.
        """
        return [(self.search_full_text(q, limit), {}) for q in queries]

    @abc.abstractmethod
    def find_relation_edges(self, lesson_id: str, *, outgoing: bool = True, incoming: bool = True,
                            limit: int = 500) -> EdgesResult:
        """Stored relation edges of one Lesson without reading every Lesson."""

    def find_incoming_edges(self, lesson_ids: Sequence[str], relations: Collection[str], *,
                            limit: int = 500) -> tuple[dict[str, list[RelationEdge]], bool]:
        """Incoming edges of the types ``relations`` for several Lessons at once.

        Returns (target id → its incoming edges of those types, source pages in
        id order; ``partial``: more than ``limit`` candidate pages existed). The
        default asks :meth:`find_relation_edges` per Lesson; the MediaWiki
        repository sends one batched link-table (or ``ask``) request per 50 ids
        and one snapshot batch for the candidate pages.
        """
        wanted = set(relations)
        out: dict[str, list[RelationEdge]] = {}
        partial = False
        for lesson_id in dict.fromkeys(lesson_ids):
            edges = self.find_relation_edges(lesson_id, outgoing=False, incoming=True, limit=limit)
            partial |= edges.partial
            out[lesson_id] = sorted((e for e in edges.incoming if e.relation in wanted), key=lambda e: e.source)
        return out, partial

    @abc.abstractmethod
    def list_revisions(self, lesson_id: str, cursor: str | None, limit: int) -> RevisionPage:
        """Revision metadata of one Lesson page, newest first, bounded."""

    @abc.abstractmethod
    def get_revision_text(self, revision_id: int) -> str | None:
        """Raw wikitext of one revision, None when it does not exist."""

    @abc.abstractmethod
    def exists(self, lesson_ids: Sequence[str]) -> set[str]:
        """The subset of ``lesson_ids`` whose pages exist."""

    @abc.abstractmethod
    def recent_changes(self, start: str | None, limit: int, cursor: str | None = None) -> RecentChangesPage:
        """Lesson-related recent changes at or after timestamp ``start`` (None: the oldest kept), oldest first.

        At most ``limit`` (1..500) rows examined; ``cursor`` (a previous
        page's ``next_cursor``) continues the same walk. A caller skips
        positions it already applied. Contract: docs/hybrid-search.md#follower.
        """

    @abc.abstractmethod
    def recent_change_bounds(self) -> tuple[ChangePosition | None, ChangePosition | None]:
        """(oldest, newest) position still kept in the recent-changes stream; (None, None) when empty."""

    # ---- writes --------------------------------------------------------
    @abc.abstractmethod
    def save_page(self, lesson_id: str, wikitext: str, summary: str, *,
                  base_revision_id: int | None) -> SaveResult:
        """Save ``Lesson:<id>``.

        ``base_revision_id=None`` creates the page and raises PageExists when it
        is already there. Otherwise the save must apply ONLY if the page's latest
        revision is still ``base_revision_id``: any concurrent change raises
        EditConflict with the current revision id, never a merged revision.
        """

    # ---- health --------------------------------------------------------
    @abc.abstractmethod
    def check_login(self) -> bool:
        """True when the configured account can log in right now (bounded time)."""
