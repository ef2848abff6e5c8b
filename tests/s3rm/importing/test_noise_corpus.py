"""The noise corpus (data/noise) maps through the synthetic-lesson importer and passes its validation."""
from __future__ import annotations

from collections import Counter

from gateway.domain.codec import serialize_page
from gateway.domain.checker import check_revision
from s3rm.importing import SUMMARY, build_new_page
from support.schema_dirs import SCHEMA
from support.noise import NOISE_FILE, NOISE_PREFIX, noise_records

TS = "2026-01-01T00:00:00Z"


def test_noise_corpus_holds_every_kind_and_passes_the_importers_checks():
    records = noise_records()
    assert len(records) >= 30
    assert len({r.lesson_id for r in records}) == len(records)
    assert all(r.lesson_id.startswith(NOISE_PREFIX) and r.record_origin == "synthetic" for r in records)
    kinds = Counter(r.lesson_id.split("-")[1] for r in records)
    assert {"emoji", "unicode", "repeat", "placeholder", "lorem", "salad", "draft", "mojibake"} <= set(kinds)
    schema = SCHEMA
    limits = {f.name: f.max_length for f in schema.lesson.fields}
    at_limit = 0
    for rec in records:
        page = build_new_page(rec, "S3Import", TS, schema)
        violations = check_revision(None, serialize_page(page, schema), "S3Import", TS,
                                    SUMMARY.format(source="synthetic-lessons", lesson_id=rec.lesson_id),
                                    lesson_id=rec.lesson_id, schema=SCHEMA)
        assert not violations, (rec.lesson_id, sorted({v.rule_id for v in violations}))
        assert all(len(rec.fields[name]) <= limits[name] for name in rec.fields if limits.get(name))
        at_limit += all(len(rec.fields[name]) == limits[name] for name in ("title", "question", "reusable_lesson"))
    assert at_limit >= 2  # one repeated character up to every field's limit
    assert NOISE_FILE.read_text(encoding="utf-8").count("\n") == len(records)
