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

import html.parser
import io
import itertools
import time

import pytest
from support.codec_cases import CONSTRUCTS, SCHEMA, field_text, record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.domain.codec import parse_page, serialize_page
from gateway.domain.model import LessonPage
from s3rm.site import pageset, push, wikisite

pytestmark = pytest.mark.wiki

#: Values per generated page: every field of one record of each kind.
VALUES_PER_PAGE = sum(len(r.field_names) for r in SCHEMA.records)
MIN_VALUES = 200
TS = "2026-01-02T03:04:05Z"
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


def save(site, title: str, text: str) -> None:
    """Save ``text`` as the agent; fails the test on any API error."""
    result = site.post("edit", title=title, text=text, summary="codec test", token=site.get_token("csrf"),
                       formatversion=2)
    assert result["edit"]["result"] == "Success", result


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


class _TextOf(html.parser.HTMLParser):
    """Collects the text content of an HTML fragment (character references decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def rendered_text(site, title: str) -> str:
    """What a reader sees: the text content of ``action=parse`` for the saved page."""
    out = site.post("parse", page=title, prop="text", disablelimitreport=1, formatversion=2)["parse"]["text"]
    collector = _TextOf()
    collector.feed(out)
    collector.close()
    return "".join(collector.parts)


def _html_safe(cp: int) -> bool:
    """Code points MediaWiki lets a character reference produce (Sanitizer::validateCodepoint)."""
    return (cp in (0x09, 0x0A) or 0x20 <= cp <= 0x7E or 0xA0 <= cp <= 0xD7FF or 0xE000 <= cp <= 0xFFFD
            or 0x10000 <= cp <= 0x10FFFF)


def displayed(value: str) -> str:
    """The text a reader sees for ``value``.

    Two things are MediaWiki's rendering, not the codec's encoding:

    * characters HTML cannot carry (C0 controls other than tab and LF —
      including CR —, DEL, C1 controls, U+FFFE/U+FFFF) are shown as their
      reference, e.g. ``&#13;``;
    * a space before ``? : ; ! % » ›`` (or after ``« ‹``) becomes a no-break
      space (Sanitizer::armorFrenchSpaces runs on the final HTML text, so no
      wikitext encoding can prevent it); :func:`shows` treats both spaces as equal.
    """
    return "".join(ch if _html_safe(ord(ch)) else f"&#{ord(ch)};" for ch in value)


def shows(rendered: str, value: str) -> bool:
    """True when ``value`` appears as text in ``rendered`` (see :func:`displayed`)."""
    return displayed(value).replace("\xa0", " ") in rendered.replace("\xa0", " ")


def sample_page(lesson_id: str, value: str = "plain text") -> LessonPage:
    """A complete page with one evidence and one relation (to ``codec-target``);
    ``value`` goes into every free-text field (title, the long fields, notes)."""
    free = {f.name for rec in SCHEMA.records for f in rec.fields if f.type in ("text", "longtext")}

    def values(rec, fixed: dict[str, str]) -> dict[str, str]:
        return {n: (value if n in free else fixed.get(n, "")) for n in rec.field_names}

    return LessonPage(
        fields=values(SCHEMA.lesson, {"confidence": "medium", "record_origin": "lab", "author": "S3Agent",
                                      "review_state": "Draft", "created_at": TS, "updated_at": TS}),
        evidence=(values(SCHEMA.evidence, {"id": "e1", "kind": "paper", "verification_basis": "full_text",
                                           "added_by": "S3Agent", "added_at": TS}),),
        relations=(values(SCHEMA.relation, {"from": lesson_id, "relation": "supports", "to": "codec-target",
                                            "created_by": "S3Agent", "created_at": TS}),),
    )


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
