"""``find_analogies``' ``shared_terms`` are words a reader finds in both Lessons (docs/tools.md#find_analogies).

Over the shipped corpora (the synthetic Korean Lessons and cloud incidents, as the importers build
them), for 5 Lessons of each language: every shared term starts a word, as written, in the source
Lesson and in the analogous one — never a character n-gram cut across syllables (``심한다``,
``치마다``) or an ending (``으면``, ``에서``).
"""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from support.lessons import TS
from support.memory import InMemoryRepository
from support.read_harness import Harness
from support.schema_dirs import SCHEMA

from gateway.domain.codec import serialize_page
from gateway.retrieval.language import has_hangul
from gateway.retrieval.legacy.search import ANALOGY_FIELDS
from s3rm.importing import build_new_page, cloud_incidents, synthetic_lessons

DATA = Path(__file__).resolve().parents[3] / "data"


def _corpus() -> dict:
    korean, _ = synthetic_lessons.read_records(DATA / "synthetic-ko" / "lessons.jsonl")
    english, _ = cloud_incidents.read_records(DATA / "cloud-incidents" / "cloud_incidents.csv")
    return {r.lesson_id: build_new_page(r, "S3Import", TS, SCHEMA) for r in [*korean, *english[:60]]}


def _starts_a_word(term: str, text: str) -> bool:
    text = unicodedata.normalize("NFKC", text).casefold()
    return re.search(r"(?<![^\W_])" + re.escape(term), text) is not None


def test_every_shared_term_starts_a_word_in_both_lessons():
    pages = _corpus()
    repo = InMemoryRepository()
    for lesson_id, page in pages.items():
        repo.put_page(lesson_id, serialize_page(page, SCHEMA))
    harness = Harness(repo)
    korean = [i for i, p in pages.items() if has_hangul(p.fields["title"])][:5]
    english = [i for i, p in pages.items() if not has_hangul(p.fields["title"])][:5]
    assert len(korean) == len(english) == 5
    checked = 0
    for source in korean + english:
        out = harness.call("find_analogies", id=source, limit=5)
        assert "error" not in out, out
        for hit in out["results"]:
            for term in hit["shared_terms"]:
                for lesson_id in (source, hit["id"]):
                    text = "\n".join(pages[lesson_id].fields.get(f, "") for f in ANALOGY_FIELDS)
                    assert _starts_a_word(term, text), (source, hit["id"], term, lesson_id)
                checked += 1
    assert checked >= 50  # the rule was exercised, in both languages
