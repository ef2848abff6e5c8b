"""``s3rm sync push|diff|check``: keep the wiki's schema, site and help pages equal to the repository.

* ``sync push [--dry-run]`` — for every page of the page set
  (:mod:`s3rm.site.pageset`) read the wiki's current text, skip pages that are
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
:func:`s3rm.site.wikisite.normalize_text`) before comparing.

The home page and the site script carry ``S3RM_MCP_PUBLIC_URL`` (see
:mod:`s3rm.site.pageset`): run push, diff and check with the same value, or they
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

import argparse
import difflib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, TextIO

from gateway.domain.repository import EditConflict, PermissionDenied, RepositoryError, WikiUnavailable
from s3rm import settings as cli_settings
from s3rm.errors import CliError
from s3rm.site.pageset import DesiredPage, build_page_set
from s3rm.site.wikisite import (
    EXTENSION_NAMESPACES,
    MissingRightsError,
    RemotePage,
    SyncError,
    TitleKey,
    WikiSite,
    connect,
    normalize_text,
    resolve_settings,
)

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


def _summary(report: PushReport, dry_run: bool) -> str:
    if dry_run:
        return (f"dry run: {report.created} to create, {report.updated} to update, "
                f"{report.unchanged} unchanged, {report.skipped} skipped; nothing was edited")
    return (f"{report.edits} edit(s): {report.created} created, {report.updated} updated, "
            f"{report.unchanged} unchanged, {report.skipped} skipped")


# --------------------------------------------------------------------------
# CLI


@dataclass
class Session:
    """A connected wiki plus the plan of the current page set."""

    wiki: WikiSite
    plans: list[PagePlan]


def open_session(args: argparse.Namespace, err: TextIO) -> Session:
    """Resolve settings, connect, describe the wiki on ``err``, build and plan the page set.

    Raises:
        SyncError: settings, connection, sources or reads failed.
    """
    settings = resolve_settings(args.api_url, env_file=cli_settings.DEV_ENV_FILE)
    if settings.from_env_file:
        err.write(f"sync: {', '.join(settings.from_env_file)} not set; using the values in {settings.env_file}\n")
    wiki = connect(settings)
    info = wiki.info
    err.write(f"sync: {settings.api_url} as {settings.username}: {info.describe()}\n")
    absent = [f"{ext} is not installed: no {ns}: pages"
              for ns, (cap, ext) in EXTENSION_NAMESPACES.items()
              if cap not in info.capabilities and ns in ("Property", "Form")]
    if absent:
        err.write("sync: " + "; ".join(absent) + " (pages use the variant for this wiki)\n")
    if "smw" in info.capabilities and "scribunto" not in info.capabilities:
        err.write("sync: Scribunto is not installed: the templates use plain #set/#subobject, so Semantic MediaWiki "
                  "stores values with the page's character references (docs/browser.md#values-in-smw)\n")
    root = Path(args.schema_dir) if getattr(args, "schema_dir", None) else None
    pages = build_page_set(info.capabilities, root=root)
    return Session(wiki, plan_sync(wiki, pages))


def _skips(plans: list[PagePlan], err: TextIO) -> None:
    for plan in plans:
        if plan.action == SKIP:
            err.write(f"sync: not pushed: {plan.page.title} — {plan.reason}\n")


def cmd_push(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``sync push``: returns 0 when every page is saved or unchanged."""
    session = open_session(args, err)
    out.write(("dry run — " if args.dry_run else "") + f"{len(session.plans)} page(s):\n")
    report = push(session.wiki, session.plans, dry_run=args.dry_run, out=out)
    out.write(_summary(report, args.dry_run) + "\n")
    for title in report.transformed:
        err.write(f"sync: warning: MediaWiki changed {title} while saving it (pre-save transform: "
                  f"signatures ~~~~, subst:, pipe trick); the next push will edit it again — fix the source\n")
    return 0


def cmd_diff(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``sync diff``: unified diffs of differing pages on ``out``; always 0 unless sync fails."""
    session = open_session(args, err)
    _skips(session.plans, err)
    out.write(render_diff(session.plans))
    return 0


def cmd_check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``sync check``: 1 and the drifting titles when the wiki differs from the repository, else 0."""
    session = open_session(args, err)
    _skips(session.plans, err)
    drifting = [p for p in session.plans if p.drifts]
    if not drifting:
        out.write(f"in sync: {sum(p.action == UNCHANGED for p in session.plans)} page(s) match the repository\n")
        return 0
    out.write(f"drift: {len(drifting)} page(s) differ from the repository (run `s3rm sync diff`, "
              f"then `s3rm sync push`):\n")
    for plan in drifting:
        state = "missing in the wiki" if plan.action == CREATE else "differs"
        shown = plan.page.title + (f" [{plan.wiki_title}]" if plan.wiki_title != plan.page.title else "")
        out.write(f"  {shown}: {state}\n")
    return 1


def exit_code(exc: SyncError | RepositoryError) -> int:
    """The CLI exit code of a failure: 2 for settings, login, rights and an unreachable wiki, else 1."""
    code = getattr(exc, "exit_code", None)
    if code is not None:
        return int(code)
    return 2 if isinstance(exc, (PermissionDenied, WikiUnavailable)) else 1


def _handler(command: Callable[[argparse.Namespace, TextIO, TextIO], int]) -> Callable[[argparse.Namespace], int]:
    """Wrap a command: streams looked up at call time, SyncError or wiki error → :class:`CliError`
    with the failure's exit code (``main`` prints it, no traceback)."""
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args, sys.stdout, sys.stderr)
        except (SyncError, RepositoryError) as exc:
            sys.stdout.flush()
            hint = " (the page changed after it was read; run `s3rm sync diff`, then push again)" \
                if isinstance(exc, EditConflict) else ""
            raise CliError(f"{exc}{hint}", exit_code(exc)) from exc
    return run


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``sync push|diff|check`` to the ``s3rm`` parser."""
    sync = subparsers.add_parser(
        "sync", help="push schema, site and help pages into the wiki; show or check drift",
        description="Keep the wiki's schema pages (Property:, Template:, Form:), MediaWiki:Common.js/.css, "
                    "the home page and the help pages equal to the repository.",
    )
    verbs = sync.add_subparsers(dest="sync_command", metavar="VERB")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--api-url", help="the wiki's api.php URL (default: $S3RM_WIKI_API_URL, "
                                         "else the dev wiki's .dev/wiki/env)")
        p.add_argument("--schema-dir", help="schema folder to read (default: $S3RM_SCHEMA_DIR or <repo>/schema)")

    p = verbs.add_parser("push", help="save every changed page (a second run makes 0 edits)",
                         description="Save every page that differs from the repository, with a fixed "
                                     "summary per kind. Login: $S3RM_SYNC_USERNAME / $S3RM_SYNC_PASSWORD "
                                     "(an account in the interface-admin group).")
    common(p)
    p.add_argument("--dry-run", action="store_true", help="show what would change; edit nothing")
    p.set_defaults(handler=_handler(cmd_push))
    p = verbs.add_parser("diff", help="print a unified diff (wiki → repository) per differing page")
    common(p)
    p.set_defaults(handler=_handler(cmd_diff))
    p = verbs.add_parser("check", help="exit 1 and name the pages when the wiki drifted from the repository")
    common(p)
    p.set_defaults(handler=_handler(cmd_check))
    sync.set_defaults(handler=lambda args: (sync.print_help(), 2)[1], error_prefix="sync: error")
