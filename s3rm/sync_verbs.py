"""``s3rm sync push|diff|check``: keep the wiki's schema, site and help pages equal to the repository.

* ``sync push [--dry-run]`` — for every page of the page set
  (:mod:`sync.pageset`) read the wiki's current text, skip pages that are
  already equal, and save the others with a fixed summary per kind; one line
  per page and a closing summary; ``--dry-run`` edits nothing. A second push
  makes 0 edits.
* ``sync diff`` — a unified diff per differing page.
* ``sync check`` — exit 1 and name every drifting page when the wiki differs
  from the repository; exit 0 otherwise.

What is compared, capabilities, rights and conflicts: :mod:`sync.push`. This
module resolves the settings (flags, environment, the dev wiki's and the dev
stack's files) and hands them to the ``sync`` package.

Exit codes: 0 success / in sync; 1 drift (check), a failed edit or an edit conflict;
2 settings, login or rights problems, or an unreachable wiki.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, TextIO

from gateway.domain.repository import EditConflict, PermissionDenied, RepositoryError, WikiUnavailable
from s3rm.errors import CliError
from s3rm import settings as cli_settings
from s3rm.settings import DEV_ENV_FILE, CliSettings
from sync.errors import SyncConfigError, SyncError
from sync.pageset import build_page_set, placeholder_values
from sync.push import SKIP, UNCHANGED, CREATE, PagePlan, plan_sync, push, render_diff, summary_line
from sync.wikisite import (API_URL_ENV, EXTENSION_NAMESPACES, PASSWORD_ENV, USERNAME_ENV, ConnectionSettings,
                           WikiSite, connect)

__all__ = ["register", "resolve_settings", "open_session", "cmd_push", "cmd_diff", "cmd_check", "exit_code"]


def resolve_settings(api_url: str | None = None, environ: Mapping[str, str] | None = None,
                     env_file: Path | None = DEV_ENV_FILE) -> ConnectionSettings:
    """Work out the API URL and the sync login.

    Precedence per value: the ``api_url`` argument (``--api-url``), then the
    environment (``S3RM_WIKI_API_URL``, ``S3RM_SYNC_USERNAME``,
    ``S3RM_SYNC_PASSWORD``), then ``env_file`` (the dev wiki's ``env``).

    Raises:
        SyncConfigError: a value is found nowhere (the message says where to set it).
    """
    values, from_file = CliSettings(environ, wiki_file=env_file).lookup((API_URL_ENV, USERNAME_ENV, PASSWORD_ENV))
    if api_url:
        values[API_URL_ENV] = api_url
        from_file = tuple(n for n in from_file if n != API_URL_ENV)
    missing = [n for n in (API_URL_ENV, USERNAME_ENV, PASSWORD_ENV) if n not in values]
    if missing:
        where = f" or in {env_file}" if env_file else ""
        raise SyncConfigError(
            "sync needs " + ", ".join(missing) + f" (set them in the environment{where}; "
            "`s3rm dev wiki up` writes the dev wiki's values to .dev/wiki/env)")
    return ConnectionSettings(values[API_URL_ENV], values[USERNAME_ENV], values[PASSWORD_ENV],
                              tuple(from_file), Path(env_file) if from_file and env_file else None)



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
    cli = CliSettings()
    root = Path(args.schema_dir) if getattr(args, "schema_dir", None) else cli.schema_dir
    pages = build_page_set(info.capabilities, root=root, placeholders=placeholder_values(cli.public_mcp_url))
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
    out.write(summary_line(report, args.dry_run) + "\n")
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
