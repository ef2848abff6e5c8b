"""Plan, show and apply the edits that keep the wiki's schema, site and help pages equal to the repository
(the engine of ``s3rm sync push|diff|check``; the verbs are s3rm/sync_verbs.py).

* ``sync push [--dry-run]`` — for every page of the page set
  (:mod:`sync.pageset`) read the wiki's current text, skip pages that are
  already equal, and save the others with a fixed summary per kind
  (``S3RM sync: template``, ``S3RM sync: site script``, …). One line per page
  (``created`` / ``updated`` / ``unchanged`` / ``skipped``) and a closing
  summary. ``--dry-run`` shows the same lines (``would create`` / ``would
  update``) and edits nothing. A second push makes 0 edits.
* ``sync diff`` — a unified diff per differing page (``--- wiki/<title>``,
  ``+++ repo/<title>``); nothing for equal pages.
* ``sync check`` — exit 1 and name every drifting page when the wiki differs
  from the repository; exit 0 otherwise.

Equality is judged on what MediaWiki *stores*: our text is normalised the way
the save path does (NFC, LF line ends, trailing whitespace stripped — see
:func:`sync.wikisite.normalize_text`) before comparing.

The home page and the site script carry ``S3RM_MCP_PUBLIC_URL`` (see
:mod:`sync.pageset`): run push, diff and check with the same value, or they
report those two pages as changed.

Capabilities: the wiki's siteinfo decides the variant (Semantic MediaWiki,
Page Forms). Pages in a namespace the wiki does not have (``Property:``
without SMW, ``Form:`` without Page Forms) are never sent — they would land
in the main namespace as ``Property:…`` articles — and the output says so.

Rights: before the first edit, the account's rights are checked against what
each changed page needs (``editsitejs`` for ``MediaWiki:Common.js``,
``editsitecss`` for ``MediaWiki:Common.css``, ``editinterface`` for other
``MediaWiki:`` pages); a missing right stops the push before any edit with a
message naming the right and the group that has it. A refusal from the API is
reported the same way.

Conflicts: every save is conditional on the revision read when the push was
planned (the repository's one edit policy, docs/consistency.md; never
``basetimestamp``). A page someone edited in between — another account, a
browser, or this same account from another process — is not overwritten:
the push stops with an edit conflict (exit 1) and the next push plans afresh.

Exit codes: 0 success / in sync; 1 drift (check), a failed edit or an edit conflict;
2 settings, login or rights problems, or an unreachable wiki.
"""
from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass
from typing import Iterable, TextIO

from sync.pageset import DesiredPage
from sync.errors import SyncError
from sync.wikisite import EXTENSION_NAMESPACES, MissingRightsError, RemotePage, TitleKey, WikiSite, normalize_text

#: Plan actions.
CREATE, UPDATE, UNCHANGED, SKIP = "create", "update", "unchanged", "skip"
_DONE = {CREATE: "created", UPDATE: "updated", UNCHANGED: "unchanged", SKIP: "skipped"}
_WOULD = {CREATE: "would create", UPDATE: "would update", UNCHANGED: "unchanged", SKIP: "skipped"}


@dataclass(frozen=True)
class PagePlan:
    """What sync will do with one page.

    Attributes:
        page: the desired page.
        action: ``create`` | ``update`` | ``unchanged`` | ``skip``.
        text: the desired text as MediaWiki will store it (normalised).
        key: the page's identity on the wiki (None when skipped).
        remote: the wiki's current page (None when skipped).
        reason: why a page is skipped.
    """

    page: DesiredPage
    action: str
    text: str
    key: TitleKey | None = None
    remote: RemotePage | None = None
    reason: str = ""

    @property
    def drifts(self) -> bool:
        """True when the wiki differs from the repository (missing or changed)."""
        return self.action in (CREATE, UPDATE)

    @property
    def wiki_title(self) -> str:
        """The title as the wiki shows it (localized namespace)."""
        return self.remote.title if self.remote else self.page.title


@dataclass
class PushReport:
    """Counts of a push: pages per outcome, plus titles whose stored text differs from ours
    after saving (MediaWiki's pre-save transform changed them)."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0
    transformed: tuple[str, ...] = ()

    @property
    def edits(self) -> int:
        """Edits made (created + updated)."""
        return self.created + self.updated


def plan_sync(wiki: WikiSite, pages: Iterable[DesiredPage]) -> list[PagePlan]:
    """Compare ``pages`` with the wiki and decide an action for each (reads only).

    Raises:
        SyncError: two desired titles are the same page on this wiki, or a read fails.
    """
    pages = list(pages)
    plans: list[PagePlan | None] = []
    wanted: dict[TitleKey, int] = {}
    for index, page in enumerate(pages):
        reason = _namespace_problem(wiki, page)
        if reason:
            plans.append(PagePlan(page, SKIP, normalize_text(page.text), reason=reason))
            continue
        key = wiki.info.key(page.title)
        if key in wanted:
            raise SyncError(f"{pages[wanted[key]].title} and {page.title} are the same page on this wiki")
        wanted[key] = index
        plans.append(None)
    remote = wiki.fetch(pages[i].title for i in wanted.values())
    for key, index in wanted.items():
        page = pages[index]
        current = remote.get(key)
        if current is None:
            raise SyncError(f"the wiki did not report on {page.title}")
        text = normalize_text(page.text)
        if not current.exists:
            action = CREATE
        elif current.text == text:
            action = UNCHANGED
        else:
            action = UPDATE
        plans[index] = PagePlan(page, action, text, key, current)
    return [p for p in plans if p is not None]


def _namespace_problem(wiki: WikiSite, page: DesiredPage) -> str:
    """Why ``page`` cannot be pushed to this wiki's namespaces ("" when it can)."""
    ns = page.namespace
    if not ns or wiki.info.namespace_by_canonical(ns) is not None:
        return ""
    _, extension = EXTENSION_NAMESPACES.get(ns, (None, None))
    if extension:
        return f"the wiki has no {ns}: namespace ({extension} is not installed)"
    return f"the wiki has no {ns}: namespace"


def check_rights(wiki: WikiSite, plans: Iterable[PagePlan]) -> None:
    """Raise :class:`MissingRightsError` if the account lacks a right any planned edit needs."""
    have = wiki.rights()
    missing: dict[str, list[str]] = {}
    for plan in plans:
        if plan.drifts and plan.key is not None:
            for right in sorted(wiki.required_rights(plan.key, plan.action == CREATE) - have):
                missing.setdefault(right, []).append(plan.page.title)
    if missing:
        raise MissingRightsError(wiki.username, missing)


def _line(out: TextIO, status: str, plan: PagePlan, note: str = "") -> None:
    shown = plan.page.title
    if plan.remote is not None and plan.remote.title != plan.page.title:
        shown += f"  [{plan.remote.title}]"
    out.write(f"  {status:<13} {shown}{'  — ' + note if note else ''}\n")
    out.flush()


def push(wiki: WikiSite, plans: list[PagePlan], *, dry_run: bool = False,
         out: TextIO | None = None) -> PushReport:
    """Apply ``plans``: edit every created/updated page, print one line per page.

    Raises:
        MissingRightsError: the account lacks a needed right (checked before any edit).
        EditConflict: a page changed after it was planned (by anyone); it is
            left as it is and earlier edits stay — run push again.
        RepositoryError: the wiki refused an edit or failed (earlier edits stay).
    """
    out = out or sys.stdout
    if not dry_run:
        check_rights(wiki, plans)
    counts = dict.fromkeys((CREATE, UPDATE, UNCHANGED, SKIP), 0)
    edited: list[PagePlan] = []
    words = _WOULD if dry_run else _DONE
    for plan in plans:
        action = plan.action
        if action in (CREATE, UPDATE) and not dry_run:
            result = wiki.edit(plan.page.title, plan.text, plan.page.summary,
                               base=plan.remote if action == UPDATE else None)
            if result.changed:
                edited.append(plan)
            else:  # the wiki already stores our text (saved by someone meanwhile)
                action = UNCHANGED
        counts[action] += 1
        _line(out, words[action], plan, plan.reason)
    if edited:
        # re-render everything pushed (and what links to it) once all pages exist: no stale red links
        wiki.purge(p.page.title for p in plans if p.action != SKIP)
    return PushReport(created=counts[CREATE], updated=counts[UPDATE], unchanged=counts[UNCHANGED],
                      skipped=counts[SKIP], transformed=_transformed(wiki, edited) if edited else ())


def _transformed(wiki: WikiSite, edited: list[PagePlan]) -> tuple[str, ...]:
    """Titles whose stored text differs from what we sent (pre-save transform at work)."""
    stored = wiki.fetch(p.page.title for p in edited)
    return tuple(p.page.title for p in edited if p.key in stored and stored[p.key].text != p.text)


def render_diff(plans: Iterable[PagePlan]) -> str:
    """Unified diffs (wiki → repository) of every drifting page, concatenated; "" when none."""
    chunks = []
    for plan in plans:
        if not plan.drifts:
            continue
        old = plan.remote.text if plan.remote and plan.remote.exists else ""
        from_name = f"wiki/{plan.page.title}" + ("" if plan.remote and plan.remote.exists else " (missing)")
        lines = difflib.unified_diff(old.splitlines(), plan.text.splitlines(), fromfile=from_name,
                                     tofile=f"repo/{plan.page.title}", lineterm="")
        chunks.append("\n".join(lines) + "\n")
    return "".join(chunks)


def summary_line(report: PushReport, dry_run: bool) -> str:
    if dry_run:
        return (f"dry run: {report.created} to create, {report.updated} to update, "
                f"{report.unchanged} unchanged, {report.skipped} skipped; nothing was edited")
    return (f"{report.edits} edit(s): {report.created} created, {report.updated} updated, "
            f"{report.unchanged} unchanged, {report.skipped} skipped")


# --------------------------------------------------------------------------
# CLI
