"""Importer: cloud-incident records become imported Lessons on the real wiki; re-runs make 0 edits."""
from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from pathlib import Path

from support.schema_dirs import SCHEMA
import pytest

from gateway.domain.codec import serialize_page
from gateway.domain.timestamps import next_updated_at
from gateway.wiki.client import WikiClient
from gateway.wiki.repository import MediaWikiRepository
from gateway.domain.checker import check_revision
from s3rm.importing import Importer, build_new_page
from s3rm.importing.cloud_incidents import NOT_RECORDED, map_row, read_records
from s3rm.migrate import migrate

CSV = Path(__file__).resolve().parents[3] / "data" / "cloud-incidents" / "cloud_incidents.csv"


@pytest.fixture(scope="module")
def records():
    recs, failures = read_records(CSV)
    assert failures == []
    return recs


def test_every_row_maps_to_a_valid_unique_lesson(records):
    schema = SCHEMA
    assert len(records) == 356
    assert len({r.lesson_id for r in records}) == 356
    for rec in records:
        page = build_new_page(rec, "S3Import", "2026-01-01T00:00:00Z", schema)
        for f in schema.lesson.fields:
            if f.required:
                assert page.fields[f.name].strip(), (rec.lesson_id, f.name)
        assert page.fields["record_origin"] == "imported"
        assert page.evidence[0]["verification_basis"] == "partial_source"
        assert page.evidence[0]["url"].startswith("http")


def test_missing_values_are_said_plainly_not_invented():
    row = {"id": "x-1", "provider": "AWS", "date": "", "title": "T", "duration_minutes": "",
           "services_affected": "", "impact_symptoms": "availability", "root_cause_l1": "unknown",
           "root_cause_l2": "", "human_error": "False", "mitigation_actions": "", "url": "https://e.x/1",
           "summary": "S"}
    rec = map_row(row, "x-1")
    assert NOT_RECORDED in rec.fields["context"]
    assert NOT_RECORDED in rec.fields["attempt"]
    assert "does not identify" in rec.fields["reusable_lesson"]


def test_duplicate_source_id_gets_stable_distinct_ids(records):
    dup = [r.lesson_id for r in records if r.lesson_id.startswith("azure-20180904-1")]
    assert len(dup) == 2 and len(set(dup)) == 2
    again, _ = read_records(CSV)
    assert [r.lesson_id for r in again] == [r.lesson_id for r in records]


def test_import_creates_then_reruns_with_zero_edits_then_updates(dev_wiki, records):
    acct = dev_wiki.importer
    repo = MediaWikiRepository(WikiClient(dev_wiki.api_url, acct.username, acct.password), SCHEMA)
    user = acct.username.split("@")[0]
    subset = records[:12]
    first = Importer(repo, user, "cloud-incidents").run(subset)
    # other tests in this session may have imported some of these already
    assert first.failed == [] and len(first.created) + len(first.unchanged) == 12 and first.created
    second = Importer(repo, user, "cloud-incidents").run(subset)
    assert second.edits == 0 and len(second.unchanged) == 12

    snap = repo.get_snapshot(first.created[0])
    assert snap.page.fields["author"] == user
    assert snap.page.evidence[0]["added_by"] == user
    assert snap.page.fields["created_at"] == snap.page.fields["updated_at"]

    fresh = next(r for r in subset if r.lesson_id == first.created[0])
    changed = dataclasses.replace(fresh, fields={**fresh.fields, "title": fresh.fields["title"] + " (rev)"})
    third = Importer(repo, user, "cloud-incidents").run([changed])
    assert third.updated == [changed.lesson_id]
    after = repo.get_snapshot(changed.lesson_id)
    assert after.page.fields["title"].endswith("(rev)")
    assert after.page.fields["created_at"] == snap.page.fields["created_at"]
    assert after.page.fields["updated_at"] > snap.page.fields["updated_at"]
    assert check_revision(snap.wikitext, after.wikitext, user, after.timestamp, "S3RM import",
                          lesson_id=changed.lesson_id, schema=SCHEMA) == []

    moved = dataclasses.replace(fresh, evidence={**fresh.evidence, "url": "https://example.org/other"})
    fourth = Importer(repo, user, "cloud-incidents").run([moved])
    assert fourth.edits == 0 and fourth.failed and "append-only" in fourth.failed[0][1]


def test_a_lesson_revised_in_the_wiki_since_its_import_is_kept_not_overwritten(dev_wiki, records):
    acct = dev_wiki.importer
    repo = MediaWikiRepository(WikiClient(dev_wiki.api_url, acct.username, acct.password), SCHEMA)
    user = acct.username.split("@")[0]
    record = records[20]
    first = Importer(repo, user, "cloud-incidents").run([record])
    assert first.failed == []
    snap = repo.get_snapshot(record.lesson_id)
    # a person fixes the title in the browser (an ordinary summary, not an import's)
    fields = {**snap.page.fields, "title": snap.page.fields["title"] + " (fixed by hand)"}
    fields["updated_at"] = next_updated_at(datetime.now(timezone.utc), snap.page.fields["updated_at"])
    edited = snap.page.evolve(fields=fields)
    repo.save_page(record.lesson_id, serialize_page(edited, SCHEMA), "typo in the title",
                   base_revision_id=snap.revision_id)
    again = Importer(repo, user, "cloud-incidents").run([record])
    assert again.kept == [record.lesson_id] and again.edits == 0 and again.failed == []
    assert repo.get_snapshot(record.lesson_id).page.fields["title"].endswith("(fixed by hand)")


def test_a_migration_revision_is_looked_through(dev_wiki, records):
    """``s3rm migrate`` re-encodes a page without changing a value: a later import still updates an
    imported Lesson, and a Lesson a person revised before the migration is still kept."""
    acct, sync = dev_wiki.importer, dev_wiki.sync
    repo = MediaWikiRepository(WikiClient(dev_wiki.api_url, acct.username, acct.password), SCHEMA)
    admin = MediaWikiRepository(WikiClient(dev_wiki.api_url, sync.username, sync.password), SCHEMA)
    user = acct.username.split("@")[0]
    imported = next(r for r in records if any("|" in v for v in (*r.fields.values(), *r.evidence.values())))
    revised = records[31]
    assert Importer(repo, user, "cloud-incidents").run([imported, revised]).failed == []
    snap = repo.get_snapshot(revised.lesson_id)
    fields = {**snap.page.fields, "title": snap.page.fields["title"] + " | by hand"}
    fields["updated_at"] = next_updated_at(datetime.now(timezone.utc), snap.page.fields["updated_at"])
    repo.save_page(revised.lesson_id, serialize_page(snap.page.evolve(fields=fields), SCHEMA), "typo",
                   base_revision_id=snap.revision_id)
    for lesson_id, summary in ((imported.lesson_id, f"S3RM import: cloud-incidents {imported.lesson_id}"),
                               (revised.lesson_id, "typo")):
        # the page as a pre-upgrade save wrote it (a decimal pipe), then the migration
        snap = repo.get_snapshot(lesson_id)
        old = serialize_page(snap.page, SCHEMA).replace("&#x7C;", "&#124;") + "\n<!-- old encoding -->"
        repo.save_page(lesson_id, old, summary, base_revision_id=snap.revision_id)
    report = migrate(admin)
    assert {imported.lesson_id, revised.lesson_id} <= set(report.rewritten) and report.failed == []

    changed = [dataclasses.replace(r, fields={**r.fields, "title": r.fields["title"] + " (rev)"})
               for r in (imported, revised)]
    after = Importer(repo, user, "cloud-incidents").run(changed)
    assert after.updated == [imported.lesson_id] and after.kept == [revised.lesson_id], after
