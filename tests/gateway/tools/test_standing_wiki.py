"""``standing`` on the REAL dev wiki: written over MCP, read by every read tool, one batched read per page.

A superseded by B and C contradicted by D (link_lessons); the read tools show
the corrections, ``exclude_superseded`` drops A, and a page of search hits
asks the wiki's link tables once (``prop=linkshere`` over all titles), never
once per hit (docs/tools.md#standing). The module has its own wiki with the
generated pages pushed (``Template:Lesson relation`` renders the link the
link tables record), and waits (bounded) until the tables list both edges.
"""
from __future__ import annotations

import pytest

from support.browser import push_pages
from support.services import wait_until
from support.write_harness import WriteHarness, unique

pytestmark = pytest.mark.wiki


@pytest.fixture(scope="module")
def world(module_wiki):
    push_pages(module_wiki, "http://127.0.0.1:9/mcp")  # the templates; no gateway is needed for them
    h = WriteHarness(module_wiki)
    word = unique("quokka").replace("-", "")  # a term only these Lessons hold
    ids = {}
    for name in "abcd":
        ids[name] = h.create(fields={"title": f"{word} warmup lesson {name}"})["id"]
    for source, relation, target in (("b", "supersedes", "a"), ("d", "contradicts", "c")):
        h.ok("link_lessons", operation_id=unique("op-link"), **{"from": ids[source], "relation": relation,
                                                                "to": ids[target]})

    def linked() -> bool:
        incoming, _ = h.repo.find_incoming_edges([ids["a"], ids["c"]], ("supersedes", "contradicts"))
        return all(incoming.values())

    wait_until(linked, 120, "the job runner's link-table update")
    return h, word, ids


def _linkshere_requests(monkeypatch, client) -> list[dict]:
    seen: list[dict] = []
    real = client.get

    def get(params, *args, **kwargs):
        if params.get("prop") == "linkshere":
            seen.append(dict(params))
        return real(params, *args, **kwargs)

    monkeypatch.setattr(client, "get", get)
    return seen


def test_read_tools_show_corrections_and_read_the_link_tables_once_per_page(world, monkeypatch):
    h, word, ids = world
    seen = _linkshere_requests(monkeypatch, h.repo.client)
    results = h.ok("search_lessons", query=word, limit=10)["results"]
    standing = {r["id"]: r.get("standing") for r in results}
    assert standing == {ids["a"]: {"superseded_by": [ids["b"]]}, ids["b"]: None,
                        ids["c"]: {"contradicted_by": [ids["d"]]}, ids["d"]: None}
    assert len(seen) == 1 and set(seen[0]["titles"].split("|")) == {f"Lesson:{i}" for i in ids.values()}
    assert h.ok("get_lesson", id=ids["a"])["standing"] == {"superseded_by": [ids["b"]]}
    related = h.ok("find_related_lessons", id=ids["d"])["results"]
    assert [(r["id"], r["standing"]) for r in related] == [(ids["c"], {"contradicted_by": [ids["d"]]})]


def test_exclude_superseded_on_the_real_wiki(world):
    h, word, ids = world
    kept = {r["id"] for r in h.ok("search_lessons", query=word, limit=10, exclude_superseded=True)["results"]}
    assert kept == {ids["b"], ids["c"], ids["d"]}
