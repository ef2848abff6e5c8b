"""Noise Lessons stay findable by their id and by exact words (docs/hybrid-search.md#quality).

The noise corpus (``data/noise``) is imported into this module's own wiki
through the importer; a content-quality signal may demote such Lessons in
ranking, never hide them: ``get_lesson`` reads each by id, and a search for a
phrase one of them holds returns it.
"""
from __future__ import annotations

import pytest

from support.noise import import_noise, noise_records
from support.write_harness import WriteHarness

pytestmark = pytest.mark.wiki


@pytest.fixture(scope="module")
def h(module_wiki):
    import_noise(module_wiki)
    return WriteHarness(module_wiki)


def test_every_noise_lesson_reads_by_its_id(h):
    for record in noise_records():
        got = h.ok("get_lesson", id=record.lesson_id, fields=["title"])
        assert got["id"] == record.lesson_id


@pytest.mark.parametrize("lesson_id, phrase", [
    ("noise-lorem-ipsum", "consectetur adipiscing"),
    ("noise-placeholder-asdf", "asdf"),
])
def test_a_noise_lesson_is_found_by_an_exact_phrase_it_holds(h, lesson_id, phrase):
    results = h.ok("search_lessons", query=phrase, limit=10)["results"]
    assert lesson_id in [r["id"] for r in results]
