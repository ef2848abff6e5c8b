"""What an agent needs to trust a hit (docs/tools.md#standing, #explain, #search-habits).

Domain rules through the real dispatcher over the in-memory repository (fast);
``test_standing_wiki.py`` runs the same reads against the real wiki and counts
its requests.
"""
from __future__ import annotations

import pytest

from gateway.domain.codec import serialize_page
from support.schema_dirs import SCHEMA
from support.memory import InMemoryRepository
from support.lessons import evidence, lesson, relation, verification
from support.read_harness import Harness


def add(repo: InMemoryRepository, lesson_id: str, **kwargs) -> int:
    return repo.put_page(lesson_id, serialize_page(lesson(lesson_id, **kwargs), SCHEMA))


@pytest.fixture
def h() -> Harness:
    """A superseded by B, C contradicted by D, E with a contradicted evidence, F clean."""
    repo = InMemoryRepository()
    add(repo, "a", title="cache warmup old advice", reusable_lesson="warm the cache first",
        relations=[relation("a", "analogous_to", "c")])
    add(repo, "b", title="cache warmup new advice", relations=[relation("b", "supersedes", "a")])
    add(repo, "c", title="cache warmup claim")
    add(repo, "d", title="cache warmup counter claim", relations=[relation("d", "contradicts", "c")])
    add(repo, "e", title="cache warmup measured", evidence_items=[evidence("e1"), evidence("e2")],
        verifications=[verification("v1", "e1", "contradicts"), verification("v2", "e2", "supports")])
    add(repo, "f", title="cache warmup clean")
    return Harness(repo)


EXPECTED = {"a": {"superseded_by": ["b"]}, "c": {"contradicted_by": ["d"]}, "e": {"evidence_contradicted": ["e1"]}}


def test_search_results_carry_standing_only_when_corrected(h):
    results = h.call("search_lessons", query="cache warmup", limit=10)["results"]
    assert {r["id"]: r.get("standing") for r in results} == {i: EXPECTED.get(i) for i in "abcdef"}


def test_get_lesson_related_and_analogies_carry_standing(h):
    assert h.call("get_lesson", id="a")["standing"] == EXPECTED["a"]
    assert "standing" not in h.call("get_lesson", id="f")
    related = h.call("find_related_lessons", id="a")["results"]
    assert {r["id"]: r.get("standing") for r in related} == {"b": None, "c": EXPECTED["c"]}
    analogies = h.call("find_analogies", id="a")["results"]
    stored = next(r for r in analogies if r["id"] == "c")
    assert stored["standing"] == EXPECTED["c"]


def test_exclude_superseded_drops_superseded_lessons_and_pages_consistently(h):
    everything = [r["id"] for r in h.call("search_lessons", query="cache warmup", limit=10)["results"]]
    kept = [r["id"] for r in h.call("search_lessons", query="cache warmup", limit=10,
                                    exclude_superseded=True)["results"]]
    assert kept == [i for i in everything if i != "a"]
    walked = [r["id"] for r in h.walk("search_lessons", query="cache warmup", limit=2, exclude_superseded=True)]
    assert walked == kept
    listing = [r["id"] for r in h.call("search_lessons", limit=10, exclude_superseded=True)["results"]]
    assert "a" not in listing and set(listing) == set("bcdef")


def test_explain_names_the_channel_and_rank_of_every_hit(h):
    out = h.call("search_lessons", query="cache warmup", limit=3, explain=True)
    for position, hit in enumerate(out["results"], 1):
        assert hit["explain"]["tier"] == "rest"
        assert hit["explain"]["channels"] == [{"channel": "full_text", "rank": position, "score": hit["score"]}]
    assert all("explain" not in r for r in h.call("search_lessons", query="cache warmup")["results"])


def test_hints_on_empty_pages_and_none_on_a_full_page(h):
    assert "hint" not in h.call("search_lessons", query="cache warmup")
    assert "other language" in h.call("search_lessons", query="zebra crossings")["hint"]
    assert "get_lesson" in h.call("search_lessons", query="ERR_CONN_RESET_0x7f")["hint"]
    korean = h.call("search_lessons", query="결제 실패 알림 오발송", retrieval_mode="legacy")["hint"]
    assert "other language" in korean and "get_lesson" not in korean  # a phrase is not an identifier
    assert "hint" not in h.call("search_lessons")  # a listing is never a search that found nothing
