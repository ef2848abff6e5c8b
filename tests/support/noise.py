"""The noise corpus (``data/noise/lessons.jsonl``) for tests: Lessons that answer nothing.

Emoji runs, random code points in several scripts, one character repeated up to
the field limit, placeholders ("test", "asdf", "테스트", lorem ipsum), word salad
of domain terms and one-word drafts — what a real wiki collects. They are
synthetic-lesson lines (``s3rm.importing.synthetic_lessons``) and reach a
wiki only through :class:`s3rm.importing.Importer`, the path of ``s3rm import``.

``noise_records()`` maps the file (offline); ``import_noise(wiki)`` writes them
into a dev/test wiki (``tests/conftest.py`` ``dev_wiki``) with its import account.
"""
from __future__ import annotations

from pathlib import Path

from support.schema_dirs import SCHEMA

from gateway.wiki.client import WikiClient
from gateway.wiki.repository import MediaWikiRepository
from s3rm.importing import SOURCES, Importer, ImportReport
from s3rm.importing.cloud_incidents import ImportRecord

NOISE_FILE = Path(__file__).resolve().parents[2] / "data" / "noise" / "lessons.jsonl"
#: The importer source whose format the file follows.
NOISE_SOURCE = "synthetic-lessons"
#: Every noise Lesson id starts with this.
NOISE_PREFIX = "noise-"


def noise_records() -> list[ImportRecord]:
    """The noise Lessons as import records; raises ``ValueError`` when a line does not map."""
    records, failures = SOURCES[NOISE_SOURCE](NOISE_FILE)
    if failures:
        raise ValueError(f"noise corpus lines do not map: {failures[:3]}")
    return records


def is_noise(lesson_id: str) -> bool:
    return lesson_id.startswith(NOISE_PREFIX)


def import_noise(wiki, *, workers: int = 4) -> ImportReport:
    """Import every noise Lesson into ``wiki`` (a re-run makes 0 edits); raises when any fails."""
    repo = MediaWikiRepository(WikiClient(wiki.api_url, wiki.importer.username, wiki.importer.password), SCHEMA)
    report = Importer(repo, wiki.importer.username.split("@", 1)[0], NOISE_SOURCE).run(noise_records(),
                                                                                     workers=workers)
    if report.failed:
        raise AssertionError(f"noise import failed: {report.failed[:3]}")
    return report
