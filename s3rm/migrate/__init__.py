"""``s3rm migrate``: bring stored Lesson pages to the current page encoding.

The page codec once wrote ``|`` as the decimal reference ``&#124;``. Semantic
MediaWiki turns every ``&#124;`` of a parsed page back into ``|`` before
MediaWiki splits table cells, so on an SMW wiki such a value lost the text
before its pipe on the Lesson page and could style the page
(``docs/browser.md#smw-page-forms-behaviours``). The codec now writes ``&#x7C;``;
this command rewrites the pages saved before:

1. lists every Lesson (``list=allpages`` in the Lesson namespace, 50 at a time)
   and reads its latest revision;
2. a page holding ``&#124;`` is saved once more with every ``&#124;`` written
   ``&#x7C;`` — nothing else changes, so the page decodes to the very same
   values (checked before saving) and ``updated_at`` stays, which the save
   rules accept for a re-encoding (``hooks_spec/rules.md`` HS15);
   the save is conditional on the revision read, so a concurrent edit is
   reported, never overwritten;
3. with ``--purge``, every Lesson page is re-parsed (``action=purge`` with
   ``forcelinkupdate``), so SMW stores its values again under the current
   property types (``Evidence URL`` became Text, ``docs/browser.md#values-in-smw``).
   Purges are not edits.

Idempotent: a second run finds no ``&#124;`` and makes 0 edits. Logs in with
the sync account (``S3RM_WIKI_API_URL``, ``S3RM_SYNC_USERNAME``,
``S3RM_SYNC_PASSWORD``, else the dev wiki's ``env``), like ``s3rm sync``.
Exit 0 when every page is current, 1 when a page could not be rewritten, 2 for
configuration errors. Operator notes: ``docs/operations.md#migrate``.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from gateway.config.schema import Schema
from gateway.domain.codec import PageFormatError, parse_page
from gateway.domain.repository import RepositoryError
from gateway.wiki.client import WikiClient
from gateway.wiki.repository import MediaWikiRepository
from s3rm.errors import CliError
from s3rm.settings import CliSettings
from s3rm.sync_verbs import resolve_settings
from sync.errors import SyncConfigError

#: The spelling SMW undoes, and the one the codec writes instead.
OLD_PIPE, NEW_PIPE = "&#124;", "&#x7C;"
SUMMARY = "S3RM migrate: page encoding, every &#124; written &#x7C; (values unchanged)"
#: How every migration revision's summary starts (``s3rm import`` looks through such revisions).
SUMMARY_PREFIX = "S3RM migrate:"
_BATCH = 50


@dataclass
class MigrationReport:
    """What one run did: Lesson ids per outcome, and ``failed`` as ``(id, reason)``."""

    scanned: int = 0
    rewritten: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    purged: int = 0


def reencode(wikitext: str) -> str:
    """``wikitext`` with every ``&#124;`` written ``&#x7C;`` (both are the character ``|``)."""
    return wikitext.replace(OLD_PIPE, NEW_PIPE)


def _same_values(old: str, new: str, schema: Schema) -> bool:
    try:
        return parse_page(old, schema) == parse_page(new, schema)
    except (PageFormatError, ValueError):
        return False


def migrate(repo: MediaWikiRepository, *, purge: bool = False) -> MigrationReport:
    """Rewrite every Lesson page that holds ``&#124;`` (see the module doc); ``purge`` re-parses all of them.

    Pages that do not read as a Lesson are left alone (the gateway does not see them either).
    """
    report = MigrationReport()
    cursor: str | None = None
    while True:
        batch = repo.scan_snapshots(cursor, _BATCH)
        report.scanned += len(batch.snapshots)
        for snap in batch.snapshots:
            if OLD_PIPE not in snap.wikitext:
                continue
            new = reencode(snap.wikitext)
            if not _same_values(snap.wikitext, new, repo.schema):
                report.failed.append((snap.id, "the re-encoded page would read differently; fix it by hand"))
                continue
            try:
                repo.save_page(snap.id, new, SUMMARY, base_revision_id=snap.revision_id)
            except RepositoryError as exc:
                report.failed.append((snap.id, f"{type(exc).__name__}: {exc}"))
                continue
            report.rewritten.append(snap.id)
        if purge and batch.snapshots:
            repo.client.post({"action": "purge", "forcelinkupdate": 1,
                              "titles": "|".join(repo.title(s.id) for s in batch.snapshots)})
            report.purged += len(batch.snapshots)
        cursor = batch.next_cursor
        if not cursor:
            return report


def _run(args: argparse.Namespace) -> int:
    try:
        settings = resolve_settings(args.api_url)
    except SyncConfigError as exc:
        raise CliError(str(exc), 2) from None
    client = WikiClient(settings.api_url, settings.username, settings.password, timeout=30.0)
    repo = MediaWikiRepository(client, CliSettings().schema)
    try:
        report = migrate(repo, purge=args.purge)
    except RepositoryError as exc:
        raise CliError(f"the wiki failed: {type(exc).__name__}: {exc}", 2) from None
    print(f"migrate: {report.scanned} Lessons read, {len(report.rewritten)} rewritten, "
          f"{len(report.failed)} failed" + (f", {report.purged} purged" if args.purge else ""))
    for lesson_id, reason in sorted(report.failed):
        print(f"  failed {lesson_id}: {reason}")
    return 1 if report.failed else 0


def register(subparsers) -> None:
    """Add ``migrate``."""
    parser = subparsers.add_parser(
        "migrate", help="rewrite stored Lesson pages into the current page encoding (re-runs make 0 edits)",
        description="Rewrite every Lesson page that still writes '|' as &#124; (which Semantic MediaWiki "
                    "turns back into a pipe) with &#x7C;, values unchanged; --purge also re-parses every "
                    "Lesson so SMW re-stores its values. Logs in as the sync account.")
    parser.add_argument("--purge", action="store_true",
                        help="also purge every Lesson page (forcelinkupdate), so SMW stores its values again")
    parser.add_argument("--api-url", help="the wiki's api.php URL (default: $S3RM_WIKI_API_URL)")
    parser.set_defaults(handler=_run, error_prefix="migrate")
