"""The Lesson page codec against a REAL MediaWiki (the ``dev_wiki`` fixture).

What MediaWiki does on save (NFC normalisation of the request, line-end
normalisation, trailing-whitespace trim, the pre-save transform with
signatures, ``subst:`` and the pipe trick) and on render (templates, links,
categories, magic words) cannot be simulated faithfully offline, so:

* ``test_round_trip_through_mediawiki`` — hypothesis generates Lesson pages
  whose every value is arbitrary text (tests/support/codec_cases.py: any
  surrogate-free Unicode, combining marks, Hangul jamo, control characters,
  wikitext syntax); each page is saved as the agent account, its stored
  wikitext is read back (``prop=revisions``) and must parse into the very
  same values. Every page carries 42 values (16 Lesson fields + one evidence,
  one verification and one relation record), and the test asserts that at
  least 200 values made the trip.
* ``test_construct_renders_as_text`` — one case per dangerous construct: the
  saved page (rendered through the generated templates, pushed by the sync
  code) shows the value as text, and the page's link tables hold exactly what
  a page with harmless values holds — no injected template, link, category
  or external link.
* ``test_injection_adds_no_relation_category_or_link`` — values are data
  (``docs/data-contract.md#codec``): values containing ``{{Lesson relation|…}}``, ``[[Category:X]]``
  and ``[[Lesson:other]]`` add nothing (``prop=categories|links|templates|
  extlinks`` on the saved page, and the relation list the codec reads back).
"""
from __future__ import annotations

import io
import itertools
import time

import pytest
from support.codec_cases import CONSTRUCTS, SCHEMA, field_text, record, sample_page
from support.rendering import rendered_text, save, shows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.domain.codec import parse_page, serialize_page
from gateway.domain.model import LessonPage
from sync import pageset, push, wikisite

pytestmark = pytest.mark.wiki

#: Values per generated page: every field of one record of each kind.
VALUES_PER_PAGE = sum(len(r.field_names) for r in SCHEMA.records)
MIN_VALUES = 200
_ids = itertools.count()


# ---------------------------------------------------------------- wiki helpers


@pytest.fixture(scope="module")
def agent(dev_wiki):
    """mwclient.Site logged in as the gateway's least-privilege agent account."""
    return dev_wiki.site("agent")


@pytest.fixture(scope="module")
def templates(dev_wiki) -> None:
    """Push the generated schema pages for this wiki's capabilities with the sync code."""
    wiki = wikisite.connect(wikisite.ConnectionSettings(dev_wiki.api_url, dev_wiki.sync.username,
                                                        dev_wiki.sync.password))
    pages = [pageset.DesiredPage(title, text, pageset.kind_of(title))
             for title, text in pageset.generated_schema_pages(SCHEMA, wiki.info.capabilities).items()]
    push.push(wiki, push.plan_sync(wiki, pages), out=io.StringIO())


def new_id(prefix: str) -> str:
    """A Lesson id unused in this session."""
    return f"codec-{prefix}-{time.time_ns() % 10**9}-{next(_ids)}"



def stored_wikitext(site, title: str) -> str:
    """The latest revision's wikitext exactly as MediaWiki stores it."""
    data = site.get("query", prop="revisions", rvprop="content", rvslots="main", titles=title, formatversion=2)
    return data["query"]["pages"][0]["revisions"][0]["slots"]["main"]["content"]


def link_tables(site, title: str) -> dict[str, frozenset]:
    """The saved page's templates, links, categories and external links (from the link tables).

    Waits (up to 10 s) for the links update, which MediaWiki may finish
    just after answering the edit: a Lesson page always uses Template:Lesson.
    """
    deadline = time.monotonic() + 60  # the links tables are written after the edit's answer, later on a busy machine
    while True:
        page = site.get("query", titles=title, prop="templates|links|categories|extlinks", tllimit="max",
                        pllimit="max", cllimit="max", ellimit="max", formatversion=2)["query"]["pages"][0]
        if page.get("templates") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return {
        "templates": frozenset((t["ns"], t["title"]) for t in page.get("templates", [])),
        "links": frozenset((t["ns"], t["title"]) for t in page.get("links", [])),
        "categories": frozenset(c["title"] for c in page.get("categories", [])),
        "extlinks": frozenset(e.get("url", e.get("*", "")) for e in page.get("extlinks", [])),
    }


@pytest.fixture(scope="module")
def baseline(agent, templates) -> dict[str, frozenset]:
    """Link tables of a page with harmless values: all any Lesson page may have."""
    lesson_id = new_id("baseline")
    save(agent, f"Lesson:{lesson_id}", serialize_page(sample_page(lesson_id), SCHEMA))
    tables = link_tables(agent, f"Lesson:{lesson_id}")
    assert tables["templates"], "the baseline page uses no template: were the templates pushed?"
    return tables


# ---------------------------------------------------------------- round trip


def test_round_trip_through_mediawiki(agent, templates) -> None:
    values_checked: list[str] = []
    lesson_id = new_id("roundtrip")
    title = f"Lesson:{lesson_id}"
    one_of_each = st.builds(
        LessonPage,
        fields=record(SCHEMA.lesson, field_text(60)),
        evidence=st.tuples(record(SCHEMA.evidence, field_text(60))),
        verifications=st.tuples(record(SCHEMA.verification, field_text(60))),
        relations=st.tuples(record(SCHEMA.relation, field_text(60))),
    )
    examples = -(-MIN_VALUES // VALUES_PER_PAGE) + 2

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(page=one_of_each)
    def check(page: LessonPage) -> None:
        save(agent, title, serialize_page(page, SCHEMA))
        assert parse_page(stored_wikitext(agent, title), SCHEMA) == page
        for rec in (page.fields, *page.evidence, *page.verifications, *page.relations):
            values_checked.extend(rec.values())

    check()
    assert len(values_checked) >= MIN_VALUES, f"only {len(values_checked)} values went through the wiki"


# ---------------------------------------------------------------- rendering and injection


@pytest.mark.parametrize("name", sorted(CONSTRUCTS))
def test_construct_renders_as_text(name: str, agent, baseline) -> None:
    value = CONSTRUCTS[name]
    lesson_id = new_id(name.replace("_", "-"))
    title = f"Lesson:{lesson_id}"
    page = sample_page(lesson_id, value)
    save(agent, title, serialize_page(page, SCHEMA))
    assert parse_page(stored_wikitext(agent, title), SCHEMA) == page
    assert shows(rendered_text(agent, title), value), f"{name!r} is not shown as text"
    assert link_tables(agent, title) == baseline


INJECTIONS = (
    "{{Lesson relation|from=codec-x|relation=supports|to=codec-victim}}",
    "[[Category:X]]",
    "[[Lesson:other]]",
    "{{Lesson relation|from=a|relation=contradicts|to=b}} [[Category:X]] [[Lesson:other]] "
    "[[분류:Y]] {{#set:Relation to=Lesson:other}} https://evil.example/x",
)


@pytest.mark.parametrize("value", INJECTIONS)
def test_injection_adds_no_relation_category_or_link(value: str, agent, baseline) -> None:
    lesson_id = new_id("injection")
    title = f"Lesson:{lesson_id}"
    page = sample_page(lesson_id, value)
    save(agent, title, serialize_page(page, SCHEMA))
    tables = link_tables(agent, title)
    assert tables["categories"] == baseline["categories"]
    assert tables["links"] == baseline["links"]
    assert tables["templates"] == baseline["templates"]
    assert tables["extlinks"] == baseline["extlinks"]
    stored = parse_page(stored_wikitext(agent, title), SCHEMA)
    assert stored.relations == page.relations and len(stored.relations) == 1
    assert shows(rendered_text(agent, title), value)
