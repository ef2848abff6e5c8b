"""Content quality (docs/hybrid-search.md#content-quality): one rule, computed from the page, for both modes.

Offline: the shipped corpora (cloud incidents, Korean synthetic Lessons, the
noise corpus) through the importers' own record mapping, and the projection
that stores the value with each index row.
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from gateway.retrieval.indexing.projection import V1_LAYOUT, ProjectionBuilder
from gateway.retrieval.legacy import search as legacy
from gateway.retrieval.quality import QUALITY_FIELDS, lesson_quality, text_quality
from s3rm.importing import SOURCES, build_new_page
from support.noise import noise_records
from support.schema_dirs import SCHEMA

DATA = Path(__file__).resolve().parents[3] / "data"
#: Below this a Lesson counts as noise in these tests (legacy keeps its whole score from FULL_QUALITY).
NOISE_CEILING = 0.2


def _records(source: str, path: Path):
    records, failures = SOURCES[source](path)
    assert not failures
    return records


def test_every_noise_lesson_scores_as_noise_and_every_shipped_lesson_as_language():
    for record in noise_records():
        assert lesson_quality(record.fields) <= NOISE_CEILING, record.lesson_id
    real = (_records("cloud-incidents", DATA / "cloud-incidents" / "cloud_incidents.csv")
            + _records("synthetic-lessons", DATA / "synthetic-ko" / "lessons.jsonl"))
    low = [(r.lesson_id, lesson_quality(r.fields)) for r in real if lesson_quality(r.fields) < legacy.FULL_QUALITY]
    assert not low


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252", "cp949"])
def test_mojibake_of_a_korean_sentence_scores_as_noise(encoding):
    korean = ("추론 서버를 배포한 뒤 첫 요청의 지연이 길었다. 모델 가중치를 요청이 올 때 읽었기 때문이고, "
              "준비 상태 검사를 가중치 적재 뒤로 옮기니 해결되었다. 같은 구조의 서비스에도 적용된다.")
    assert text_quality(korean) == 1.0
    broken = korean.encode("utf-8").decode(encoding, errors="replace")
    assert text_quality(broken) <= NOISE_CEILING


def test_random_unicode_with_a_few_real_words_scores_as_noise():
    rng = random.Random(7)
    chars = [chr(rng.randint(0x20, 0x2FFFF)) for _ in range(4000)]
    text = "".join(c for c in chars if c.isprintable())
    mixed = " cold start ".join(text[i:i + 40] for i in range(0, len(text), 40))
    assert text_quality(mixed) <= NOISE_CEILING


def test_a_lesson_quoting_a_few_foreign_characters_keeps_full_quality():
    text = ("The p95 latency rose from 40 μs to 3 ms after the upgrade because the allocator returned "
            "memory to the kernel on every request; pinning the arena size fixed it. σ of the runs was "
            "small, so the effect is real; 東京 and 서울 regions were both affected by the same release.")
    assert text_quality(text) == 1.0


def test_the_index_stores_the_value_legacy_computes_from_the_same_page():
    builder = ProjectionBuilder(SCHEMA)
    assert set(QUALITY_FIELDS) == {"title", *(n for names in V1_LAYOUT.values() for n in names)}
    for record in noise_records()[:5] + _records("synthetic-lessons", DATA / "synthetic-ko" / "lessons.jsonl")[:3]:
        page = build_new_page(record, "S3Import", "2026-01-01T00:00:00Z", SCHEMA)
        assert builder.build(record.lesson_id, page).quality == lesson_quality(page.fields)
