"""``MediaWikiRepository``: the real :class:`~gateway.domain.repository.LessonRepository`.

Reads and writes ``Lesson:<id>`` pages through :class:`~gateway.wiki.client.WikiClient`
(Action API, ``formatversion=2``). Contract: ``docs/read-path.md#layers``,
``docs/retrieval.md#revalidation``, ``docs/data-contract.md#page``.

Namespace handling: requests always use the canonical English prefix
``Lesson:``; responses are recognised by namespace id 3000 (from the schema
source) and whatever prefix the wiki returns (the content language is Korean
and a localised namespace name or alias is possible) is stripped after the
first colon.

How each operation stays bounded:

* ``get_snapshots`` — ``prop=revisions`` (``ids|timestamp|content|user|comment|sha1``,
  ``rvslots=main``) for at most :data:`SNAPSHOT_BATCH` titles per request,
  following ``rvcontinue`` when MediaWiki caps a large result; Lessons whose
  last read revision is remembered are asked for without content first
  (docs/read-path.md#revision-memory).
* ``scan_snapshots`` — ``list=allpages`` in the Lesson namespace (``apcontinue``
  is the cursor), then one ``get_snapshots`` batch.
* ``list_recent`` — ``list=allrevisions`` (``arvnamespace=3000``, newest first,
  which reads ``rev_timestamp`` index order — no full scan) and keeps a page
  only at the revision that is still its latest, so every Lesson appears once
  in a walk, ordered by its last edit. ``recentchanges`` was rejected: it
  forgets edits older than ``$wgRCMaxAge`` (90 days by default). The cursor is
  the ``arvcontinue`` value of the next revision to examine
  (``<YYYYMMDDHHMMSS>|<rev id>``), so pages that stop mid-batch resume exactly.
* ``recent_changes`` — ``list=recentchanges`` (``rcdir=newer``,
  ``rctype=edit|new|log``, ``rcprop=title|ids|timestamp|loginfo``) from a
  start timestamp, every namespace (a move INTO the Lesson namespace is
  logged under its old title), keeping rows that name a Lesson; delete,
  restore and move come from log rows (docs/hybrid-search.md#follower).
  Here recentchanges is right: the follower only needs the tail since its
  checkpoint, and a checkpoint older than the oldest kept row is a gap
  that triggers a full rebuild. The request and the row decoding live in
  :mod:`gateway.wiki.changes`, the revision memory in :mod:`gateway.wiki.revision_memory`.
* ``search_full_text`` — ``list=search`` with ``srwhat=text`` (the page-title
  default would miss every field) in namespace 3000; the query string is
  MediaWiki search syntax built by :mod:`gateway.retrieval.legacy.lexical`.
* ``search_snapshots`` — the same search as ``generator=search`` with
  ``prop=revisions`` (content), so the hits come with their wikitext;
  ``search_full_text_many`` sends several searches at once as
  ``generator=search`` with ``prop=revisions`` WITHOUT content: each hit's
  latest revision id and sha1 come back, and a hit whose revision this
  process has already read (same id, same sha1) is served from memory —
  revision ids are immutable, so that is the page as it is now
  (docs/read-path.md#revision-memory).
* ``find_relation_edges`` — outgoing edges from the page's own wikitext;
  incoming edges from the link tables (``list=backlinks`` in namespace 3000:
  ``Template:Lesson relation`` renders ``[[Lesson:<to>]]``) or, when siteinfo
  lists SemanticMediaWiki, ``action=ask`` on ``Relation to``; the candidate
  pages are then read in batches of 50 and only their relations that really
  point at the Lesson are kept. ``limit`` caps the candidate pages read
  (``partial`` when more exist). ``find_incoming_edges`` does the same for a
  page of Lessons at once (``prop=linkshere`` over 50 titles, or one ``ask``
  with ``||`` values), so a read tool's corrections cost two requests, not
  two per hit.

Errors: every method raises the classes of :mod:`gateway.domain.repository`
(WikiUnavailable, PermissionDenied, EditConflict, PageExists, PageMissing,
WikiApiError) with the MediaWiki code in ``wiki_code``.
"""
from __future__ import annotations

import logging
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Collection, Iterable, Sequence

from gateway.domain.codec import PageFormatError, parse_page
from gateway.domain.model import LessonPage, LessonSnapshot
from gateway.domain.repository import (
    ChangePosition,
    EdgesResult,
    FullTextHit,
    FullTextResult,
    LessonRepository,
    RecentChangesPage,
    RelationEdge,
    relation_edges,
    snapshot_edges,
    RevisionInfo,
    RevisionPage,
    SNAPSHOT_BATCH,
    SaveResult,
    ScanPage,
    WikiApiError,
)
from gateway.config.schema import Schema
from gateway.wiki.changes import change_bounds, read_recent_changes
from gateway.wiki.client import WikiClient
from gateway.wiki.revision_memory import RevisionMemory

__all__ = ["MediaWikiRepository", "repository_factory"]

log = logging.getLogger(__name__)

_ARV_CURSOR = re.compile(r"^[0-9]{14}\|[0-9]+$")
#: Revisions ``list_recent`` may examine per call for every Lesson it returns (bounded walk).
RECENT_SCAN_FACTOR = 4
#: Upper bound of ``srlimit`` (MediaWiki's own maximum for ordinary accounts).
SEARCH_MAX = 500
#: Revision properties of every page read (``sha1`` lets a later read without content recognise the text).
RV_META = "ids|timestamp|user|comment|sha1"
RV_CONTENT = RV_META + "|content"


#: Threads of the process-wide pool that sends legacy's single-term searches alongside the
#: all-terms search (legacy asks for at most 6 at once).
SEARCH_POOL_WORKERS = 8
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _search_pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=SEARCH_POOL_WORKERS, thread_name_prefix="s3rm-wiki-search")
        return _POOL


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _unique(ids: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for i in ids:
        seen.setdefault(i, None)
    return list(seen)


class MediaWikiRepository(LessonRepository):
    """Lesson pages on a MediaWiki (plain or with SMW).

    Args:
        client: the shared :class:`WikiClient` (logged in as the ``agent`` bot password).
        schema: the schema source (namespace id/name, record templates).
    """

    def __init__(self, client: WikiClient, schema: Schema):
        self.client = client
        self.schema = schema
        self.ns_id = self.schema.namespace_id
        self.prefix = self.schema.namespace + ":"
        self._parsed = RevisionMemory()
        self._id_pattern = re.compile(self.schema.meta["id_pattern"])

    @classmethod
    def from_config(cls, config) -> "MediaWikiRepository":
        """Build from a :class:`~gateway.config.GatewayConfig` (wiki URL, bot password, timeout, schema)."""
        client = WikiClient(config.wiki_api_url, config.wiki_username, config.wiki_password,
                            timeout=config.wiki_timeout_seconds)
        return cls(client, config.schema)

    # ------------------------------------------------------------ titles
    def title(self, lesson_id: str) -> str:
        """``Lesson:<id>`` (canonical English prefix)."""
        return self.prefix + lesson_id

    def lesson_id(self, page: dict[str, Any]) -> str | None:
        """Lesson id of an API page/row object (``ns`` + ``title``).

        None outside the Lesson namespace and for titles that are not valid
        Lesson ids (``meta.id_pattern``; e.g. a page a person created by hand
        as ``Lesson:My notes``) — such pages are not Lessons to the gateway.
        """
        if page.get("ns") != self.ns_id:
            return None
        title = str(page.get("title", ""))
        # MediaWiki shows underscores as spaces; ids never contain spaces, so map them back
        lesson_id = (title.split(":", 1)[1] if ":" in title else title).replace(" ", "_")
        return lesson_id if self._id_pattern.match(lesson_id) else None

    # ------------------------------------------------------------- reads
    def get_snapshot(self, lesson_id: str) -> LessonSnapshot | None:
        """Latest revision of ``Lesson:<id>`` decoded; None when absent; PageFormatError when malformed."""
        pages = self._fetch_latest([lesson_id])
        page = pages.get(lesson_id)
        if page is None:
            return None
        return self._snapshot(lesson_id, page)

    def get_snapshots(self, lesson_ids: Sequence[str]) -> dict[str, LessonSnapshot]:
        """Latest snapshots for ``lesson_ids`` (batches of 50); absent or malformed pages are omitted."""
        out: dict[str, LessonSnapshot] = {}
        for lesson_id, page in self._fetch_latest(_unique(lesson_ids)).items():
            try:
                out[lesson_id] = self._snapshot(lesson_id, page)
            except PageFormatError:
                log.info("skipping a Lesson page that does not parse")
        return out

    def scan_snapshots(self, cursor: str | None, limit: int) -> ScanPage:
        """All Lessons in title order, ``limit`` (≤ 50) per call; cursor = MediaWiki ``apcontinue``."""
        limit = max(1, min(int(limit), SNAPSHOT_BATCH))
        params = {"action": "query", "list": "allpages", "apnamespace": self.ns_id, "aplimit": limit}
        if cursor:
            params["apcontinue"] = cursor
        data = self.client.get(params)
        ids = [i for i in (self.lesson_id(p) for p in data.get("query", {}).get("allpages", [])) if i]
        snaps = self.get_snapshots(ids)
        next_cursor = data.get("continue", {}).get("apcontinue")
        return ScanPage(snapshots=tuple(snaps[i] for i in ids if i in snaps), next_cursor=next_cursor,
                        scanned=len(ids), scan_limit=limit, partial=False)

    def ids_by_prefix(self, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` (≤ 100) Lesson ids starting with ``prefix``: one ``list=allpages&apprefix=`` request."""
        params = {"action": "query", "list": "allpages", "apnamespace": self.ns_id,
                  "aplimit": max(1, min(int(limit), 100))}
        if prefix:
            params["apprefix"] = prefix
        data = self.client.get(params)
        return [i for i in (self.lesson_id(p) for p in data.get("query", {}).get("allpages", [])) if i]

    def list_recent(self, cursor: str | None, limit: int) -> ScanPage:
        """Up to ``limit`` Lessons newest first by last edit, examining ≤ RECENT_SCAN_FACTOR×limit revisions.

        ``partial`` is True when the revision budget ran out before ``limit``
        Lessons were found (the cursor still continues the walk).
        Raises WikiApiError (``badcontinue``) for a malformed cursor.
        """
        limit = max(1, min(int(limit), SNAPSHOT_BATCH))
        budget = limit * RECENT_SCAN_FACTOR
        if cursor is not None and not _ARV_CURSOR.match(cursor):
            exc = WikiApiError("list_recent: malformed continuation")
            exc.wiki_code = "badcontinue"
            raise exc
        found: list[LessonSnapshot] = []
        resume: list[str] = []
        scanned = 0
        next_cursor = cursor
        exhausted = False
        while len(found) < limit and scanned < budget and not exhausted:
            params = {"action": "query", "list": "allrevisions", "arvnamespace": self.ns_id,
                      "arvdir": "older", "arvprop": "ids|timestamp", "arvlimit": min(SNAPSHOT_BATCH, budget - scanned)}
            if next_cursor:
                params["arvcontinue"] = next_cursor
            data = self.client.get(params)
            revs = []
            for page in data.get("query", {}).get("allrevisions", []):
                lesson_id = self.lesson_id(page)
                for rev in page.get("revisions", []):
                    if lesson_id:
                        revs.append((rev.get("timestamp", ""), int(rev["revid"]), lesson_id))
            revs.sort(key=lambda r: (r[0], r[1]), reverse=True)
            if not revs:
                exhausted = True
                next_cursor = None
                break
            snaps = self.get_snapshots([r[2] for r in revs])
            for index, (ts, revid, lesson_id) in enumerate(revs):
                snap = snaps.get(lesson_id)
                scanned += 1
                if snap is not None and snap.revision_id == revid:
                    found.append(snap)
                    resume.append(_arv_cursor(ts, revid))
                if len(found) >= limit:
                    nxt = revs[index + 1] if index + 1 < len(revs) else None
                    next_cursor = _arv_cursor(nxt[0], nxt[1]) if nxt else data.get("continue", {}).get("arvcontinue")
                    break
            else:
                next_cursor = data.get("continue", {}).get("arvcontinue")
                if next_cursor is None:
                    exhausted = True
        partial = len(found) < limit and not exhausted
        return ScanPage(snapshots=tuple(found), next_cursor=None if exhausted else next_cursor,
                        scanned=scanned, scan_limit=budget, partial=partial, item_cursors=tuple(resume))

    def recent_changes(self, start: str | None, limit: int, cursor: str | None = None) -> RecentChangesPage:
        """Lesson rows of ``list=recentchanges`` (:func:`gateway.wiki.changes.read_recent_changes`)."""
        return read_recent_changes(self.client, self.lesson_id, start, limit, cursor)

    def recent_change_bounds(self) -> tuple[ChangePosition | None, ChangePosition | None]:
        """(oldest, newest) kept recentchanges positions (:func:`gateway.wiki.changes.change_bounds`)."""
        return change_bounds(self.client)

    def search_full_text(self, query: str, limit: int) -> FullTextResult:
        """Ranked ids for MediaWiki search syntax ``query`` (``list=search``, ``srwhat=text``, ns 3000).

        ``limit`` (1..500) caps the hits read; ``partial`` is True when
        MediaWiki reports more hits than were read.
        """
        limit = max(1, min(int(limit), SEARCH_MAX))
        data = self.client.get({"action": "query", "list": "search", "srsearch": query, "srwhat": "text",
                                "srnamespace": self.ns_id, "srlimit": limit, "srprop": "",
                                "srinfo": "totalhits"})
        query_data = data.get("query", {})
        ids = _unique(i for i in (self.lesson_id(h) for h in query_data.get("search", [])) if i)
        total = query_data.get("searchinfo", {}).get("totalhits")
        more = "continue" in data or (isinstance(total, int) and total > len(ids))
        return FullTextResult(hits=tuple(FullTextHit(i, rank) for rank, i in enumerate(ids)),
                              scanned=len(ids), scan_limit=limit, partial=bool(more))

    def search_snapshots(self, query: str, limit: int) -> tuple[FullTextResult, dict[str, LessonSnapshot]]:
        """:meth:`search_full_text` and the hits' latest snapshots in ONE ``generator=search`` request.

        ``prop=revisions`` carries the wikitext of up to 50 of the hits per
        response (MediaWiki's content limit); the rest follow ``rvcontinue``
        with the same generator (so up to 50 hits cost one round trip, 100
        cost two). Order is the search rank (``index``); ``partial`` is True
        when MediaWiki offers more hits (``gsroffset``). Raises WikiUnavailable.
        """
        ids, revs, more, _ = self._search_revisions(query, limit, RV_CONTENT)
        snaps: dict[str, LessonSnapshot] = {}
        for lesson_id in ids:
            rev = revs.get(lesson_id)
            if rev is None or _content(rev) is None:
                continue
            try:
                snaps[lesson_id] = self._snapshot(lesson_id, rev)
            except PageFormatError:
                continue  # reported by the auditor, never served
        hits = FullTextResult(hits=tuple(FullTextHit(i, rank) for rank, i in enumerate(ids)), scanned=len(ids),
                              scan_limit=limit, partial=more)
        return hits, snaps

    def search_full_text_many(self, queries: Sequence[str], limit: int
                              ) -> list[tuple[FullTextResult, dict[str, LessonSnapshot]]]:
        """:meth:`search_full_text` of every query, all sent at once, plus the hits known without their text.

        Each search is ``generator=search`` + ``prop=revisions`` without content
        (``ids|timestamp|user|comment|sha1``, up to 500 hits per response), sent
        on the shared search pool; hits, order and ``partial`` are those of
        ``list=search`` (``gsrinfo=totalhits``). A hit whose latest revision this
        repository has read before (same revision id and sha1) comes with its
        snapshot; the others are only ids (read them with :meth:`get_snapshots`).
        Contract: docs/read-path.md#revision-memory. Raises the first failure (WikiUnavailable…).
        """
        futures = [_search_pool().submit(self._search_known, q, limit) for q in queries]
        return [f.result() for f in futures]

    def _search_known(self, query: str, limit: int) -> tuple[FullTextResult, dict[str, LessonSnapshot]]:
        ids, revs, more, total = self._search_revisions(query, limit, RV_META, info="totalhits")
        snaps: dict[str, LessonSnapshot] = {}
        for lesson_id in ids:
            rev = revs.get(lesson_id)
            known = self._parsed.known(int(rev["revid"]), rev.get("sha1")) if rev and not rev.get("sha1hidden") else None
            if known is not None:
                snaps[lesson_id] = self._as_snapshot(lesson_id, rev, *known)
        more = more or (isinstance(total, int) and total > len(ids))
        hits = FullTextResult(hits=tuple(FullTextHit(i, rank) for rank, i in enumerate(ids)), scanned=len(ids),
                              scan_limit=limit, partial=more)
        return hits, snaps

    def _search_revisions(self, query: str, limit: int, rvprop: str, info: str | None = None
                          ) -> tuple[list[str], dict[str, dict[str, Any]], bool, Any]:
        """One ``generator=search`` walk: (ids in rank order, id → latest revision object, more hits, totalhits)."""
        limit = max(1, min(int(limit), SEARCH_MAX))
        params: dict[str, Any] = {"action": "query", "generator": "search", "gsrsearch": query, "gsrwhat": "text",
                                  "gsrnamespace": self.ns_id, "gsrlimit": limit, "gsrprop": "",
                                  "prop": "revisions", "rvprop": rvprop, "rvslots": "main"}
        if info is not None:
            params["gsrinfo"] = info
        ranked: dict[str, int] = {}
        revs: dict[str, dict[str, Any]] = {}
        more = False
        total = None
        while True:
            data = self.client.get(params)
            total = data.get("query", {}).get("searchinfo", {}).get("totalhits", total)
            for page in data.get("query", {}).get("pages", []):
                lesson_id = self.lesson_id(page)
                if not lesson_id:
                    continue
                ranked.setdefault(lesson_id, int(page.get("index", len(ranked) + 1)))
                page_revs = page.get("revisions") or []
                if page_revs and not page.get("missing"):
                    revs[lesson_id] = page_revs[0]
            cont = data.get("continue", {})
            more = more or "gsroffset" in cont
            if "rvcontinue" not in cont:
                break
            params = {**params, "rvcontinue": cont["rvcontinue"], "continue": cont.get("continue", "")}
        return sorted(ranked, key=lambda i: (ranked[i], i)), revs, more, total

    def find_relation_edges(self, lesson_id: str, *, outgoing: bool = True, incoming: bool = True,
                            limit: int = 500) -> EdgesResult:
        """Stored relation edges of ``lesson_id`` (see module doc); ``limit`` caps incoming candidates."""
        own = self.get_snapshot(lesson_id) if outgoing else None
        sources: list[str] = []
        partial = False
        snaps: dict = {}
        if incoming:
            sources, partial = self._incoming_candidates(lesson_id, limit)
            snaps = self.get_snapshots(sources)
        return relation_edges(lesson_id, own, [snaps[s] for s in sources if snaps.get(s) is not None],
                              outgoing=outgoing, incoming=incoming, limit=limit,
                              scanned_sources=len(sources), partial=partial)

    def find_incoming_edges(self, lesson_ids: Sequence[str], relations: Collection[str], *,
                            limit: int = 500) -> tuple[dict[str, list[RelationEdge]], bool]:
        """See :meth:`LessonRepository.find_incoming_edges`: one link-table (or ``ask``) request per
        :data:`SNAPSHOT_BATCH` targets, then the candidate pages in snapshot batches."""
        targets = _unique(lesson_ids)
        wanted = set(relations)
        sources: list[str] = []
        for chunk in _chunks(targets, SNAPSHOT_BATCH):
            found = (self._incoming_via_ask_many(chunk, limit) if self.client.has_extension("SemanticMediaWiki")
                     else self._linkshere_many(chunk, limit))
            sources.extend(s for s in found if s not in sources)
        partial = len(sources) > limit
        snaps = self.get_snapshots(sources[:limit])
        out: dict[str, list[RelationEdge]] = {t: [] for t in targets}
        for source in sorted(snaps):
            for edge in snapshot_edges(snaps[source]):
                if edge.relation in wanted and edge.target in out and edge.target != source:
                    out[edge.target].append(edge)
        return out, partial

    def _linkshere_many(self, targets: Sequence[str], limit: int) -> list[str]:
        """Lesson pages linking to any of ``targets`` (``prop=linkshere``, one request plus continuations)."""
        sources: list[str] = []
        params: dict[str, Any] = {"action": "query", "prop": "linkshere",
                                  "titles": "|".join(self.title(t) for t in targets),
                                  "lhnamespace": self.ns_id, "lhprop": "title", "lhlimit": "max"}
        while True:
            data = self.client.get(params)
            for page in data.get("query", {}).get("pages", []):
                for row in page.get("linkshere", []):
                    source = self.lesson_id(row)
                    if source and source not in sources:
                        sources.append(source)
            cont = data.get("continue", {})
            if len(sources) > limit or "lhcontinue" not in cont:
                return sources
            params = {**params, **cont}

    def _incoming_via_ask_many(self, targets: Sequence[str], limit: int) -> list[str]:
        relation_to = self.schema.relation.field("to").property
        values = "||".join(self.title(t) for t in targets)
        data = self.client.get({"action": "ask", "query": f"[[{relation_to}::{values}]]|limit={limit + 1}"})
        sources: list[str] = []
        for key in (data.get("query", {}).get("results") or {}):
            title = key.split("#", 1)[0]  # subobjects are "Lesson:x#relation-…"
            source = self.lesson_id({"ns": self.ns_id, "title": title}) if ":" in title else None
            if source and source not in sources:
                sources.append(source)
        return sources

    def list_revisions(self, lesson_id: str, cursor: str | None, limit: int) -> RevisionPage:
        """Revision metadata newest first (``rvlimit`` ≤ 500); cursor = MediaWiki ``rvcontinue``."""
        params = {"action": "query", "prop": "revisions", "titles": self.title(lesson_id),
                  "rvprop": "ids|timestamp|user|comment|sha1", "rvlimit": max(1, min(int(limit), 500)),
                  "rvdir": "older"}
        if cursor:
            params["rvcontinue"] = cursor
        data = self.client.get(params)
        revisions: list[RevisionInfo] = []
        for page in data.get("query", {}).get("pages", []):
            for rev in page.get("revisions", []):
                revisions.append(RevisionInfo(
                    revision_id=int(rev["revid"]), parent_id=int(rev.get("parentid", 0)),
                    user=str(rev.get("user", "")), timestamp=str(rev.get("timestamp", "")),
                    comment=str(rev.get("comment", "")), sha1=str(rev.get("sha1", ""))))
        return RevisionPage(revisions=tuple(revisions), next_cursor=data.get("continue", {}).get("rvcontinue"),
                            scanned=len(revisions))

    def get_revision_text(self, revision_id: int) -> str | None:
        """Wikitext of one revision (any page), None when MediaWiki does not know it."""
        data = self.client.get({"action": "query", "prop": "revisions", "revids": int(revision_id),
                                "rvprop": "content", "rvslots": "main"})
        for page in data.get("query", {}).get("pages", []):
            for rev in page.get("revisions", []):
                return _content(rev)
        return None

    def exists(self, lesson_ids: Sequence[str]) -> set[str]:
        """Ids whose pages exist (``prop=info``, 50 titles per request)."""
        found: set[str] = set()
        for chunk in _chunks(_unique(lesson_ids), SNAPSHOT_BATCH):
            data = self.client.get({"action": "query", "prop": "info",
                                    "titles": "|".join(self.title(i) for i in chunk)})
            for page in data.get("query", {}).get("pages", []):
                lesson_id = self.lesson_id(page)
                if lesson_id and not page.get("missing") and not page.get("invalid"):
                    found.add(lesson_id)
        return found

    # ------------------------------------------------------------- write
    def save_page(self, lesson_id: str, wikitext: str, summary: str, *,
                  base_revision_id: int | None) -> SaveResult:
        """Save ``Lesson:<id>`` — the ONE place that writes pages.

        Delegates to :func:`gateway.wiki.edit.conditional_save` (per-Lesson lock,
        ``createonly``/``nocreate`` + ``baserevid``, a conflict salt so
        MediaWiki never three-way merges, and an undo when a merge slipped
        through). ``base_revision_id=None`` creates the page (PageExists when
        it is there); otherwise any concurrent change raises EditConflict with
        the current revision id. Identical content gives ``nochange=True``.

        Raises PageMissing, PageExists, EditConflict, PermissionDenied,
        WikiUnavailable (``maybe_applied`` when the outcome is unknown).
        """
        from gateway.wiki.edit import conditional_save  # edit builds on this module's client

        try:
            return conditional_save(self.client, self.title(lesson_id), wikitext, summary,
                                    base_revision_id=base_revision_id)
        finally:
            self._parsed.forget(lesson_id)  # the next read asks for the text at once

    # ------------------------------------------------------------ health
    def check_login(self) -> bool:
        """True when the bot password logs in right now (bounded by the client timeout, ≤ 5 s)."""
        return self.client.check_login()

    # --------------------------------------------------------- internals
    def _fetch_latest(self, lesson_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """id → latest revision object (with content) for existing pages, 50 titles per request.

        Ids whose last read revision is in memory are asked for WITHOUT content
        (revision id and sha1, docs/read-path.md#revision-memory): an unchanged
        revision takes its text from memory, a changed one is read by revision id
        afterwards. All batches are sent at the same time (the search pool), so
        100 ids cost one round-trip time (two when remembered ones changed).
        """
        ids = list(lesson_ids)
        remembered = [i for i in ids if self._parsed.remembers(i)]
        others = [i for i in ids if not self._parsed.remembers(i)]
        jobs = [(chunk, RV_META) for chunk in _chunks(remembered, SNAPSHOT_BATCH)]
        jobs += [(chunk, RV_CONTENT) for chunk in _chunks(others, SNAPSHOT_BATCH)]
        out: dict[str, dict[str, Any]] = {}
        for part in self._concurrently(self._fetch_chunk, jobs):
            out.update(part)
        changed: dict[int, str] = {}
        for lesson_id, rev in list(out.items()):
            if "slots" in rev:
                continue
            known = None if rev.get("sha1hidden") else self._parsed.known(int(rev["revid"]), rev.get("sha1"))
            if known is None:
                del out[lesson_id]
                changed[int(rev["revid"])] = lesson_id
            else:
                out[lesson_id] = {**rev, "slots": {"main": {"content": known[0]}}}
        jobs = [(chunk, RV_CONTENT, "revids") for chunk in _chunks([str(r) for r in changed], SNAPSHOT_BATCH)]
        for part in self._concurrently(self._fetch_chunk, jobs):
            out.update(part)
        return out

    @staticmethod
    def _concurrently(fn, jobs: list[tuple]) -> list[Any]:
        """``fn(*job)`` for every job, all but the first on the search pool; results in job order."""
        if not jobs:
            return []
        futures = [_search_pool().submit(fn, *job) for job in jobs[1:]]
        try:
            first = fn(*jobs[0])
        finally:
            rest = [f.result() for f in futures]
        return [first, *rest]

    def _fetch_chunk(self, chunk: Sequence[str], rvprop: str = RV_CONTENT, by: str = "titles"
                     ) -> dict[str, dict[str, Any]]:
        """id → latest revision object of one batch of ids (``by="titles"``) or revision ids (``"revids"``);
        without content in ``rvprop`` the objects carry no ``slots``."""
        out: dict[str, dict[str, Any]] = {}
        names = "|".join(self.title(i) for i in chunk) if by == "titles" else "|".join(chunk)
        params: dict[str, Any] = {"action": "query", "prop": "revisions", by: names, "rvprop": rvprop}
        if "content" in rvprop:
            params["rvslots"] = "main"
        while True:
            data = self.client.get(params)
            for page in data.get("query", {}).get("pages", []):
                lesson_id = self.lesson_id(page)
                revs = page.get("revisions") or []
                if not lesson_id or not revs or page.get("missing"):
                    continue
                if "content" not in rvprop or _content(revs[0]) is not None:
                    out[lesson_id] = revs[0]
            cont = data.get("continue", {})
            if "rvcontinue" not in cont:
                break
            params = {**params, **cont}  # MediaWiki capped the result size: fetch the rest
        return out

    def _snapshot(self, lesson_id: str, rev: dict[str, Any]) -> LessonSnapshot:
        text = _content(rev) or ""
        revid = int(rev["revid"])
        page = self._parsed.get(revid, text)
        if page is None:
            page = self._parsed.put(revid, text, parse_page(text, self.schema), str(rev.get("sha1") or ""))
        self._parsed.note(lesson_id, revid)
        return self._as_snapshot(lesson_id, rev, text, page)

    @staticmethod
    def _as_snapshot(lesson_id: str, rev: dict[str, Any], text: str, page: LessonPage) -> LessonSnapshot:
        return LessonSnapshot(id=lesson_id, revision_id=int(rev["revid"]), timestamp=str(rev.get("timestamp", "")),
                              page=page, wikitext=text, summary=str(rev.get("comment", "")))

    def _incoming_candidates(self, lesson_id: str, limit: int) -> tuple[list[str], bool]:
        """Ids of pages that may store a relation to ``lesson_id`` (at most ``limit``) and whether more exist."""
        if self.client.has_extension("SemanticMediaWiki"):
            return self._incoming_via_ask(lesson_id, limit)
        sources: list[str] = []
        params: dict[str, Any] = {"action": "query", "list": "backlinks", "bltitle": self.title(lesson_id),
                                  "blnamespace": self.ns_id, "bllimit": min(500, limit + 1)}
        while True:
            data = self.client.get(params)
            for row in data.get("query", {}).get("backlinks", []):
                source = self.lesson_id(row)
                if source and source != lesson_id and source not in sources:
                    sources.append(source)
            cont = data.get("continue", {})
            if len(sources) > limit or "blcontinue" not in cont:
                break
            params = {**params, **cont}
        return sources[:limit], len(sources) > limit

    def _incoming_via_ask(self, lesson_id: str, limit: int) -> tuple[list[str], bool]:
        sources = [s for s in self._incoming_via_ask_many([lesson_id], limit) if s != lesson_id]
        return sources[:limit], len(sources) > limit


def _content(rev: dict[str, Any]) -> str | None:
    main = (rev.get("slots") or {}).get("main") or {}
    if main.get("texthidden") or main.get("missing"):
        return None
    content = main.get("content", rev.get("content"))
    return content if isinstance(content, str) else None


def _arv_cursor(timestamp: str, revid: int) -> str:
    """``arvcontinue`` value for a revision: ``YYYYMMDDHHMMSS|revid`` from an ISO-8601 timestamp."""
    ts = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").strftime("%Y%m%d%H%M%S")
    return f"{ts}|{revid}"


def repository_factory(config) -> MediaWikiRepository:
    """``create_app(repository_factory=...)`` hook: the process-wide MediaWiki repository."""
    return MediaWikiRepository.from_config(config)
