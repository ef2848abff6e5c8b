"""Conditional page saves on MediaWiki 1.39: exactly one of two racing writers wins, never a merge.

This is the ONE edit and conflict policy of the repository: the gateway's
Lesson writes (``MediaWikiRepository.save_page``) and ``s3rm sync push``
(``sync/wikisite.py``) both save through :func:`conditional_save`, with
the revision id they read as the base. A save whose base is no longer the
page's latest revision raises EditConflict; nothing is overwritten silently,
whoever made the concurrent edit (another account, a browser, or the same
account in another process). Nothing in the repository sends ``basetimestamp``.

What MediaWiki 1.39 does with ``action=edit`` (read from ``ApiEditPage.php`` and
``EditPage::internalAttemptSave``, confirmed against the dev wiki):

* ``baserevid=B`` sets ``editRevId``. If the page's latest revision is not B,
  EditPage declares a conflict and then **tries a three-way merge**
  (``mergeChangesIntoContent`` → ``TextContentHandler::merge3`` →
  ``wfMerge``, i.e. GNU ``diff3 --merge`` with ``$wgDiff3``). If the two
  changes touch different, non-adjacent lines — or make *identical* changes
  to the same line — the merge succeeds and the edit is saved as a NEW
  revision whose parent is the concurrent one. No error, no warning: the
  response only differs in ``oldrevid`` (which is the latest revision id
  MediaWiki saw when the request started, not necessarily the parent).
* ``basetimestamp`` is worse: with it, EditPage suppresses the conflict
  entirely when the same user made every edit since that time
  (``userWasLastToEdit``) — two gateway threads share one account, so the
  second write would silently overwrite the first. This module NEVER sends
  ``basetimestamp`` (``ApiEditPage`` then leaves ``wpEdittime`` unset).
* Overlapping changes fail the merge → API error ``editconflict``.
* The final write is a compare-and-swap on ``page_latest`` inside one DB
  transaction, so two saves that both passed the conflict check still cannot
  both land on the same parent: the loser gets ``edit-conflict``.
* ``createonly`` fails with ``articleexists`` when the page exists.
* ``$wgDiff3 = false`` (LocalSettings) disables the merge entirely: every
  base mismatch becomes ``editconflict``. Recommended for every wiki the
  gateway writes to (docs/consistency.md).

Every gateway write changes the ``updated_at`` line, so two gateway writes
from one base normally conflict — but NOT when both picked the same second
(identical line) or when the concurrent writer (a raw API or browser edit)
left ``updated_at`` alone. Hence the design of :func:`conditional_save`:

1. an in-process lock per page serialises the gateway's own threads;
2. a pre-check: the latest revision must be the base (else EditConflict);
3. ``action=edit`` with ``baserevid`` (never ``basetimestamp``) and
   ``nocreate`` (or ``createonly`` for a new page);
4. post-check: the new revision's ``parentid`` (authoritative, unlike
   ``oldrevid``) must be the base. If MediaWiki merged, the merged revision
   is immediately undone by saving the concurrent revision's exact content on
   top of it with an ``[S3U v1 r=<restored> p=<merged>]`` summary, and
   EditConflict is raised (``merged_revision_id`` set). The merged revision's
   marker declares a parent it does not have, so it never counts as a replay
   (hooks_spec HS42) and the auditor reports it.

Raises the :mod:`gateway.domain.repository` errors: EditConflict (with
``current_revision_id``), PageExists, PageMissing, PermissionDenied,
WikiUnavailable (``maybe_applied`` when MediaWiki may have saved).
Never logs page text or summaries.
"""
from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from gateway.domain.markers import undo_summary
from gateway.domain.repository import EditConflict, PageExists, PageMissing, RepositoryError, SaveResult

__all__ = ["conditional_save", "save_lesson", "page_lock", "latest_revision", "revision_parent", "account_name"]

log = logging.getLogger(__name__)

_locks: "weakref.WeakValueDictionary[tuple[str, str], threading.Lock]" = weakref.WeakValueDictionary()
_locks_guard = threading.Lock()
_account_names: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


def page_lock(api_url: str, title: str) -> threading.Lock:
    """The process-wide lock of one page (created on demand, dropped when unused)."""
    key = (api_url, title)
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = threading.Lock()
            _locks[key] = lock
        return lock


def latest_revision(client, title: str) -> int | None:
    """The page's latest revision id (``prop=info``), None when the page does not exist."""
    data = client.get({"action": "query", "prop": "info", "titles": title})
    for page in data.get("query", {}).get("pages", []):
        if not page.get("missing") and page.get("lastrevid"):
            return int(page["lastrevid"])
    return None


def revision_parent(client, revision_id: int) -> int | None:
    """MediaWiki's ``parentid`` of a revision (0 for a page creation), None when unknown."""
    data = client.get({"action": "query", "prop": "revisions", "revids": int(revision_id), "rvprop": "ids"})
    for page in data.get("query", {}).get("pages", []):
        for rev in page.get("revisions", []):
            return int(rev.get("parentid", 0))
    return None


def _revision_text(client, revision_id: int) -> str | None:
    data = client.get({"action": "query", "prop": "revisions", "revids": int(revision_id),
                       "rvprop": "content", "rvslots": "main"})
    for page in data.get("query", {}).get("pages", []):
        for rev in page.get("revisions", []):
            main = rev.get("slots", {}).get("main", {})
            if "content" in main:
                return main["content"]
    return None


def account_name(client) -> str:
    """The MediaWiki user name the client's saves are recorded under (``meta=userinfo``, cached)."""
    cached = _account_names.get(client)
    if cached:
        return cached
    data = client.get({"action": "query", "meta": "userinfo"})
    info = data.get("query", {}).get("userinfo", {})
    name = "" if info.get("anon") else str(info.get("name", ""))
    if name:
        _account_names[client] = name
    return name


def _conflict(message: str, current: int | None, code: str, merged: int | None = None) -> EditConflict:
    exc = EditConflict(message, current_revision_id=current)
    exc.wiki_code = code
    exc.merged_revision_id = merged
    return exc


def _post_edit(client, params: dict[str, Any]) -> dict[str, Any]:
    try:
        data = client.post(params, token="csrf")
    except (EditConflict, PageExists, PageMissing):
        raise
    except RepositoryError as exc:
        # Codes of the page_latest compare-and-swap in PageUpdater (not in the client's tables).
        code = getattr(exc, "wiki_code", "")
        if code == "edit-already-exists":
            raise PageExists(str(exc), None) from None
        if code == "edit-gone-missing":
            missing = PageMissing(str(exc))
            missing.wiki_code = code
            raise missing from None
        raise
    edit = data.get("edit", {})
    if edit.get("result") != "Success":
        exc = RepositoryError("MediaWiki did not accept the edit")
        exc.wiki_code = str(edit.get("result") or "editfailed")
        raise exc
    return edit


def conditional_save(client, title: str, wikitext: str, summary: str, *,
                     base_revision_id: int | None, content_model: str | None = "wikitext",
                     bot: bool = False) -> SaveResult:
    """Save ``title`` only if its latest revision is ``base_revision_id`` (None = create only).

    ``content_model`` is sent as ``contentmodel`` (None: the page keeps its
    model, a new page gets the one its title implies, e.g. ``javascript`` for
    ``MediaWiki:Common.js``); ``bot`` marks the edit as a bot edit.
    Returns the SaveResult of the new revision (``parent_revision_id`` = base).
    ``nochange=True`` means MediaWiki already held exactly this text (a
    concurrent identical write); Lesson writers treat it as a conflict.
    See the module docstring for the guarantees and raised errors.
    """
    lock = page_lock(getattr(client, "api_url", ""), title)
    with lock:
        params: dict[str, Any] = {"action": "edit", "title": title, "text": wikitext, "summary": summary,
                                  "contentmodel": content_model, "watchlist": "nochange", "notminor": True,
                                  "bot": bot}
        if base_revision_id is None:
            params["createonly"] = True
            try:
                edit = _post_edit(client, params)
            except PageExists as exc:
                raise PageExists(str(exc), latest_revision(client, title)) from None
            return SaveResult(revision_id=int(edit["newrevid"]), timestamp=str(edit.get("newtimestamp", "")),
                              parent_revision_id=None)

        current = latest_revision(client, title)
        if current is None:
            exc = PageMissing(f"{title} does not exist")
            exc.wiki_code = "missingtitle"
            raise exc
        if current != base_revision_id:
            raise _conflict(f"{title} changed since revision {base_revision_id}", current, "editconflict")
        params["nocreate"] = True
        params["baserevid"] = int(base_revision_id)
        try:
            edit = _post_edit(client, params)
        except EditConflict:
            raise _conflict(f"{title} changed since revision {base_revision_id}", latest_revision(client, title),
                            "editconflict") from None
        if edit.get("nochange"):
            return SaveResult(revision_id=latest_revision(client, title) or int(base_revision_id),
                              timestamp="", nochange=True, parent_revision_id=base_revision_id)
        new_id = int(edit["newrevid"])
        parent = revision_parent(client, new_id)
        if parent == base_revision_id:
            return SaveResult(revision_id=new_id, timestamp=str(edit.get("newtimestamp", "")),
                              parent_revision_id=parent)
        return _undo_merge(client, title, merged=new_id, restored=parent, base=base_revision_id,
                           content_model=content_model)


def _undo_merge(client, title: str, *, merged: int, restored: int | None, base: int,
                content_model: str | None) -> SaveResult:
    """MediaWiki merged our save (revision ``merged``) into ``restored``: put ``restored``'s content back."""
    log.warning("MediaWiki auto-merged a conditional save; undoing it merged_rev=%s parent=%s base=%s",
                merged, restored, base)
    undo_rev: int | None = None
    try:
        text = _revision_text(client, restored) if restored else None
        if text is not None and latest_revision(client, title) == merged:
            summary = undo_summary(f"MCP: undo automatic merge of revision {merged} into revision {restored}",
                                   merged, restored)
            edit = _post_edit(client, {"action": "edit", "title": title, "text": text, "summary": summary,
                                       "contentmodel": content_model, "watchlist": "nochange", "notminor": True,
                                       "nocreate": True, "baserevid": merged})
            if not edit.get("nochange"):
                undo_rev = int(edit["newrevid"])
                if revision_parent(client, undo_rev) != merged:
                    log.error("undo of an auto-merged save was itself merged undo_rev=%s merged_rev=%s",
                              undo_rev, merged)
    except RepositoryError as exc:
        log.error("undo of an auto-merged save failed merged_rev=%s error=%s", merged,
                  getattr(exc, "wiki_code", type(exc).__name__))
    if undo_rev is None:
        log.error("auto-merged revision left in place (another write followed it) merged_rev=%s", merged)
    raise _conflict(f"{title} changed since revision {base}; MediaWiki merged the write, which was undone",
                    latest_revision(client, title), "editconflict-merged", merged)


def save_lesson(repository, lesson_id: str, wikitext: str, summary: str, *,
                base_revision_id: int | None) -> SaveResult:
    """Save a Lesson through ``repository.save_page``.

    ``MediaWikiRepository.save_page`` delegates to :func:`conditional_save`;
    ``InMemoryRepository.save_page`` is an exact compare-and-swap already.
    """
    return repository.save_page(lesson_id, wikitext, summary, base_revision_id=base_revision_id)
