"""``s3rm import SOURCE PATH``: load a corpus as ``imported`` (or ``synthetic``) Lessons.

Records come from a mapper (``s3rm.importing.cloud_incidents``, or
``s3rm.importing.synthetic_lessons`` for the Lessons written for the retrieval
evaluation, which keep ``record_origin=synthetic``); this module
writes them through the same pieces the gateway uses — the page codec, the
hooks_spec checker (every rule a save hook would enforce) and
``MediaWikiRepository.save_page`` — logged in as the *import* account
(``S3RM_IMPORT_USERNAME``/``S3RM_IMPORT_PASSWORD``, a bot password of its own,
never the gateway's agent account).

Behaviour (issue "The main job end to end on real data"):

* New Lesson → one revision with the Lesson and its evidence; ``author`` and
  ``added_by`` = the import account, ``created_at = updated_at = added_at`` =
  now (UTC), ``record_origin`` from the record (``imported`` by default),
  ``review_state=Draft``.
* Existing Lesson whose content (client-level fields and evidence) equals the
  record → ``unchanged``, no edit. A re-run therefore makes 0 edits.
* Existing Lesson whose core fields differ → one conditional revision
  (``baserevid``) with the new values and a later ``updated_at``; provenance,
  ``created_at`` and evidence stay as they are. A changed evidence record is
  reported as failed: evidence is append-only and is never edited.
* Existing Lesson whose latest revision is not an import (someone revised it
  in the browser or over MCP) → ``kept``, no edit: an import never overwrites
  a person's or an agent's revision, and ``s3rm stack up`` (which re-imports)
  keeps working after such an edit. Re-encodings by ``s3rm migrate`` change no
  value and are looked through.
* Anything the checker refuses is reported as failed with the rule ids.

Prints a progress bar on stderr and a closing summary (created, updated,
unchanged, kept, failed with reasons). Exit 0 when nothing failed, 1 otherwise,
2 for configuration errors.
"""
from __future__ import annotations

import argparse
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from gateway.domain.codec import serialize_page
from gateway.domain.model import LessonPage, LessonSnapshot
from gateway.domain.repository import RepositoryError
from gateway.domain.timestamps import format_ts, next_updated_at
from gateway.wiki.client import WikiClient
from gateway.wiki.repository import MediaWikiRepository
from gateway.domain.checker import check_revision
from s3rm.settings import DEV_ENV_FILE, CliSettings
from s3rm.errors import S3rmError
from s3rm.errors import CliError
from s3rm.importing import synthetic_lessons
from s3rm.importing.cloud_incidents import ImportRecord, read_records
from s3rm.migrate import SUMMARY_PREFIX as MIGRATE_SUMMARY_PREFIX

SUMMARY = "S3RM import: {source} {lesson_id}"
#: How every import revision's summary starts (a revision without it was made by someone else).
SUMMARY_PREFIX = SUMMARY.split("{", 1)[0]
ENV_NAMES = ("S3RM_WIKI_API_URL", "S3RM_IMPORT_USERNAME", "S3RM_IMPORT_PASSWORD")
SOURCES = {"cloud-incidents": read_records, "synthetic-lessons": synthetic_lessons.read_records}


class ImportConfigError(S3rmError):
    """Credentials or the API URL are missing (the message says where to set them)."""


@dataclass
class ImportReport:
    """Counts and failure reasons of one import run."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    #: revised since the import by someone else; left as they are
    kept: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    @property
    def edits(self) -> int:
        """Number of revisions this run made."""
        return len(self.created) + len(self.updated)


def resolve_import_settings(environ=None, env_file: Path | None = DEV_ENV_FILE) -> tuple[str, str, str]:
    """(api_url, username, password) from the environment, else the dev wiki's env file.

    Raises:
        ImportConfigError: a value is found nowhere.
    """
    found, _ = CliSettings(environ, wiki_file=env_file).lookup(ENV_NAMES)
    missing = [n for n in ENV_NAMES if n not in found]
    if missing:
        raise ImportConfigError(
            "import needs " + ", ".join(missing) + " (set them in the environment; "
            "`s3rm dev wiki up` writes the dev wiki's values to .dev/wiki/env)")
    return found[ENV_NAMES[0]], found[ENV_NAMES[1]], found[ENV_NAMES[2]]


def _client_view(page: LessonPage, schema) -> tuple:
    """The parts of a page an import record determines (no provenance or time)."""
    lesson = tuple((f.name, page.fields.get(f.name, "")) for f in schema.lesson.fields if f.settable == "client")
    evidence = tuple(tuple((f.name, e.get(f.name, "")) for f in schema.evidence.fields if f.settable == "client")
                     for e in page.evidence)
    return lesson, evidence


def build_new_page(record: ImportRecord, account: str, now: str, schema) -> LessonPage:
    """The page a first import of ``record`` writes (see module doc for provenance)."""
    fields = {name: "" for name in schema.lesson.field_names}
    fields.update(record.fields)
    fields.update(record_origin=record.record_origin, author=account, reviewer="", review_state="Draft",
                  created_at=now, updated_at=now)
    evidence = {name: "" for name in schema.evidence.field_names}
    evidence.update(record.evidence)
    evidence.update(added_by=account, added_at=now)
    return LessonPage(fields=fields, evidence=(evidence,))


class Importer:
    """Writes import records into the wiki, one Lesson per record (thread-safe)."""

    def __init__(self, repository: MediaWikiRepository, account: str, source: str, *, clock=None):
        self.repo = repository
        self.account = account
        self.source = source
        self.schema = repository.schema
        self.clock = clock or (lambda: datetime.now(timezone.utc))

    def plan(self, record: ImportRecord, current: LessonSnapshot | None) -> tuple[str, LessonPage | None]:
        """Decide ``("create"|"update"|"unchanged"|"kept"|"failed: why", page)`` for one record."""
        now_dt = self.clock()
        now = format_ts(now_dt)
        desired = build_new_page(record, self.account, now, self.schema)
        if current is None:
            return "create", desired
        have_lesson, have_evidence = _client_view(current.page, self.schema)
        want_lesson, want_evidence = _client_view(desired, self.schema)
        if have_evidence[:len(want_evidence)] != want_evidence:
            return "failed: the stored evidence differs and evidence is append-only", None
        if have_lesson == want_lesson:
            return "unchanged", None
        if not self._imported_last(current):
            return "kept", None
        fields = dict(current.page.fields)
        fields.update(record.fields)
        fields["updated_at"] = next_updated_at(now_dt, current.page.fields.get("updated_at"))
        return "update", current.page.evolve(fields=fields)

    def _imported_last(self, current: LessonSnapshot) -> bool:
        """Whether the latest revision that changed anything is an import's; re-encodings by
        ``s3rm migrate`` (values unchanged, docs/operations.md#migrate) are looked through."""
        summary = current.summary
        if summary.startswith(MIGRATE_SUMMARY_PREFIX):
            history = self.repo.list_revisions(current.id, None, 50).revisions
            summary = next((r.comment for r in history if not r.comment.startswith(MIGRATE_SUMMARY_PREFIX)), "")
        return summary.startswith(SUMMARY_PREFIX)

    def apply(self, record: ImportRecord, current: LessonSnapshot | None) -> tuple[str, str]:
        """Plan and, when needed, save one record; returns ``(outcome, reason)``."""
        action, page = self.plan(record, current)
        if page is None:
            return (action, "") if action in ("unchanged", "kept") else ("failed", action.split(": ", 1)[1])
        text = serialize_page(page, self.schema)
        summary = SUMMARY.format(source=self.source, lesson_id=record.lesson_id)
        previous = current.wikitext if current else None
        violations = check_revision(previous, text, self.account, page.fields["updated_at"], summary,
                                    lesson_id=record.lesson_id, schema=self.schema)
        if violations:
            return "failed", "refused by " + ", ".join(sorted({v.rule_id for v in violations}))
        try:
            self.repo.save_page(record.lesson_id, text, summary,
                                base_revision_id=current.revision_id if current else None)
        except RepositoryError as exc:
            return "failed", f"{type(exc).__name__}: {exc}"
        return ("created" if current is None else "updated"), ""

    def run(self, records: list[ImportRecord], *, workers: int = 4, progress=None) -> ImportReport:
        """Import ``records`` with ``workers`` threads; ``progress(done, total, report)`` after each."""
        report = ImportReport()
        lock = threading.Lock()
        current = self.repo.get_snapshots([r.lesson_id for r in records])
        done = 0

        def one(record: ImportRecord) -> None:
            nonlocal done
            outcome, reason = self.apply(record, current.get(record.lesson_id))
            with lock:
                if outcome == "failed":
                    report.failed.append((record.lesson_id, reason))
                else:
                    getattr(report, outcome).append(record.lesson_id)
                done += 1
                if progress:
                    progress(done, len(records), report)

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            list(pool.map(one, records))
        return report


def _bar(done: int, total: int, report: ImportReport) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
                     f"created {len(report.created)} updated {len(report.updated)} "
                     f"unchanged {len(report.unchanged)} kept {len(report.kept)} failed {len(report.failed)}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _run(args: argparse.Namespace) -> int:
    try:
        api_url, username, password = resolve_import_settings()
    except ImportConfigError as exc:
        raise CliError(f"{exc}", 2)
    try:
        records, mapping_failures = SOURCES[args.source](Path(args.path))
    except OSError as exc:
        raise CliError(f"cannot read {args.path}: {exc.strerror or exc}", 2)
    if args.limit:
        records = records[: args.limit]
    repo = MediaWikiRepository(WikiClient(api_url, username, password, timeout=30.0), CliSettings().schema)
    importer = Importer(repo, username.split("@", 1)[0], args.source)
    try:
        report = importer.run(records, workers=args.workers, progress=None if args.quiet else _bar)
    except RepositoryError as exc:
        raise CliError(f"the wiki failed: {exc}", 1)
    report.failed.extend(mapping_failures)
    print(f"import {args.source}: created {len(report.created)}, updated {len(report.updated)}, "
          f"unchanged {len(report.unchanged)}, kept {len(report.kept)} (revised in the wiki since the import), failed {len(report.failed)}")
    for lesson_id, reason in sorted(report.failed):
        print(f"  failed {lesson_id}: {reason}")
    return 1 if report.failed else 0


def register(subparsers) -> None:
    """Add ``import SOURCE PATH``."""
    parser = subparsers.add_parser(
        "import", help="import a corpus as 'imported' Lessons (re-runs make 0 edits)",
        description="Import a data set into the wiki as imported Lessons, logged in as the import "
                    "account (S3RM_IMPORT_USERNAME / S3RM_IMPORT_PASSWORD, else .dev/wiki/env).")
    parser.add_argument("source", choices=sorted(SOURCES), help="data set kind")
    parser.add_argument("path", help="path of the data file, e.g. data/cloud-incidents/cloud_incidents.csv")
    parser.add_argument("--workers", type=int, default=4, help="parallel saves (default 4)")
    parser.add_argument("--limit", type=int, default=0, help="import only the first N records")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=_run, error_prefix="s3rm import")
