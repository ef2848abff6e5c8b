"""The generated templates on a wiki that treats ``&#124;`` as Semantic MediaWiki does.

SMW's in-text annotation parser runs on every parsed page after templates are
expanded and before MediaWiki splits table cells (hook ``InternalParseBeforeLinks``),
and ends with ``LinksEncoder::removeLinkObfuscation``, which turns every literal
``&#124;`` back into ``|`` (and ``&#x005B;`` / ``&#x005D;`` into brackets) — the
same in SMW 5.1.0, 6.0.1 and 7.2.1 (``docs/browser.md#smw-page-forms-behaviours``).
CI's wiki has no SMW, so this module's own wiki copy gets exactly that
replacement at exactly that hook (``S3RM.local.php``, :data:`SMW_PIPE_REWRITE`),
and then renders real pages through the generated templates:

* ``test_the_simulation_is_live`` — a table cell holding ``&#124;`` splits on
  this wiki and one holding ``&#x7C;`` does not (so the rest can fail);
* ``test_every_template_shows_a_piped_value_whole`` — a page using all four
  record templates, with a value holding ``|`` (the reported question, the
  reported full-page ``style=`` overlay, ``||`` and ``!!``) in every free-text
  field and in the evidence URL, shows every value whole, and its table cells
  carry exactly the attributes of a page with harmless values — no ``style``;
* ``test_shipped_records_with_a_pipe_show_whole`` — the cloud-incident records
  holding ``|`` (``azure-20161223-1``'s citation among them), imported as
  ``s3rm import`` does, show every value;
* ``test_no_synced_wikitext_page_writes_the_decimal_pipe`` — no page ``sync``
  writes in any variant (templates, form, help and home pages, messages) holds
  ``&#124;``;
* ``test_migrate_rewrites_old_pages_once`` — a page saved in the old encoding
  (``&#124;``) is broken here; ``s3rm migrate`` rewrites it so it shows
  whole, the save rules accept that revision (values unchanged, HS15), and a
  second run makes no edit.
"""
from __future__ import annotations

import html.parser
import io
import itertools
import time

import pytest
from support.browser import corpus_records, import_client
from support.codec_cases import SCHEMA, sample_page
from support.rendering import rendered_text, save, shows

from gateway.domain.codec import serialize_page
from gateway.wiki.client import WikiClient
from gateway.wiki.repository import MediaWikiRepository
from gateway.domain.checker import check_revision
from s3rm import cli
from s3rm.importing import Importer
from s3rm.migrate import SUMMARY, migrate
from sync import pageset, push, wikisite

pytestmark = pytest.mark.wiki

#: LocalSettings addition: SMW's removeLinkObfuscation at SMW's hook, for page parses only
#: (SMW skips interface messages, InternalParseBeforeLinks::canPerformUpdate).
SMW_PIPE_REWRITE = """<?php
// Test only: what Semantic MediaWiki does to every parsed page (InTextAnnotationParser::parse ->
// LinksEncoder::removeLinkObfuscation), at the same point of the parse.
$wgHooks['InternalParseBeforeLinks'][] = static function ( $parser, &$text ) {
	if ( $text === '' || $parser->getOptions()->getInterfaceMessage() ) {
		return;
	}
	$text = str_replace( [ '&#x005B;', '&#x005D;', '&#124;' ], [ '[', ']', '|' ], $text );
};
"""

#: Values holding a pipe: the two reported ones and the table's own separators.
PIPED = {
    "question": "질문 앞부분 | 질문 뒷부분",
    "overlay": 'style="position:fixed;top:0;left:0;width:100%;height:100%;background:rgba(255,0,0,.6);'
               'z-index:9999" title="공지" | 관측 값',
    "separators": "셀 하나 || 셀 둘 !! 셀 셋 |- 줄",
}
PIPED_URL = "https://example.org/runs/a|b?x=1|2"
_ids = itertools.count()


@pytest.fixture(scope="module")
def wiki(module_wiki):
    """This module's wiki copy with SMW's ``&#124;`` rewrite, the generated templates pushed."""
    (module_wiki.dir / "S3RM.local.php").write_text(SMW_PIPE_REWRITE, encoding="utf-8")
    site = wikisite.connect(wikisite.ConnectionSettings(module_wiki.api_url, module_wiki.sync.username,
                                                        module_wiki.sync.password))
    pages = [pageset.DesiredPage(title, text, pageset.kind_of(title))
             for title, text in pageset.generated_schema_pages(SCHEMA, site.info.capabilities).items()]
    push.push(site, push.plan_sync(site, pages), out=io.StringIO())
    return module_wiki


@pytest.fixture(scope="module")
def agent(wiki):
    return wiki.site("agent")


def new_id(prefix: str) -> str:
    return f"smw-{prefix}-{time.time_ns() % 10**9}-{next(_ids)}"



def parsed_html(site, *, title: str | None = None, text: str | None = None) -> str:
    params = {"page": title} if title else {"text": text, "contentmodel": "wikitext"}
    return site.post("parse", prop="text", disablelimitreport=1, formatversion=2, **params)["parse"]["text"]


class _Elements(html.parser.HTMLParser):
    """Every start tag as ``(tag, {attribute: value})``, and the text of each table cell."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.cells: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        if tag in ("td", "th"):
            self._cell = []
            self.cells.append("")

    def handle_endtag(self, tag) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.cells[-1] = "".join(self._cell).strip()
            self._cell = None

    def handle_data(self, data) -> None:
        if self._cell is not None:
            self._cell.append(data)


def elements(markup: str) -> _Elements:
    parser = _Elements()
    parser.feed(markup)
    parser.close()
    return parser


def cell_attributes(markup: str) -> list[tuple[str, tuple[str, ...]]]:
    """Each table cell's tag and attribute names, in page order."""
    return [(tag, tuple(sorted(attrs))) for tag, attrs in elements(markup).tags if tag in ("td", "th")]


def cells_showing(markup: str, value: str) -> int:
    """How many table cells hold ``value`` whole (no-break spaces read as spaces)."""
    return sum(value in cell.replace("\xa0", " ") for cell in elements(markup).cells)


def test_the_simulation_is_live(agent) -> None:
    old = elements(parsed_html(agent, text="{|\n| 앞&#124;뒤\n|}"))
    assert old.cells == ["뒤"], "the wiki does not rewrite &#124; the way SMW does"
    new = elements(parsed_html(agent, text="{|\n| 앞&#x7C;뒤\n|}"))
    assert new.cells == ["앞|뒤"]


@pytest.fixture(scope="module")
def baseline_cells(agent) -> list[tuple[str, tuple[str, ...]]]:
    lesson_id = new_id("baseline")
    save(agent, f"Lesson:{lesson_id}", serialize_page(
        sample_page(lesson_id, url="https://example.org/run", verification=True), SCHEMA))
    cells = cell_attributes(parsed_html(agent, title=f"Lesson:{lesson_id}"))
    assert len(cells) >= 20, cells  # the four templates' tables are there
    return cells


@pytest.mark.parametrize("name", sorted(PIPED))
def test_every_template_shows_a_piped_value_whole(name: str, agent, baseline_cells) -> None:
    value = PIPED[name]
    lesson_id = new_id(name)
    title = f"Lesson:{lesson_id}"
    save(agent, title, serialize_page(sample_page(lesson_id, value, url=PIPED_URL, verification=True), SCHEMA))
    markup = parsed_html(agent, title=title)
    text = rendered_text(agent, title)
    assert shows(text, value), f"{name!r} is not shown whole"
    # MediaWiki shows a free link's "|" as "%7C" (its own URL normalisation, with or without SMW)
    assert shows(text, PIPED_URL.replace("|", "%7C")), "the evidence URL is not shown whole"
    # every free-text field of the four templates shows the value in its own cell
    assert cells_showing(markup, value) >= 10
    assert cell_attributes(markup) == baseline_cells, "a value changed the table cells' attributes"
    assert not [attrs for _, attrs in elements(markup).tags if "style" in attrs], "a value styled the page"


def test_shipped_records_with_a_pipe_show_whole(wiki, agent) -> None:
    records = [r for r in corpus_records()
               if any("|" in v for v in (*r.fields.values(), *r.evidence.values()))]
    assert any(r.lesson_id == "azure-20161223-1" for r in records)
    report = Importer(MediaWikiRepository(import_client(wiki), SCHEMA), wiki.importer.username.split("@", 1)[0],
                      "cloud-incidents").run(records)
    assert not report.failed, report.failed
    for record in records:
        text = rendered_text(agent, f"Lesson:{record.lesson_id}")
        for key, value in (*record.fields.items(), *record.evidence.items()):
            if "|" in value:
                assert shows(text, value), f"{record.lesson_id}: {key} is not shown whole"


@pytest.mark.parametrize("caps", [set(), {"scribunto"}, {"smw", "pageforms", "scribunto"}], ids=["plain", "lua", "full"])
def test_no_synced_wikitext_page_writes_the_decimal_pipe(caps) -> None:
    pages = pageset.build_page_set(caps, placeholders={})
    wikitext = [p for p in pages if p.kind not in ("site-script", "site-style", "module")]  # not parsed as pages
    assert len(wikitext) > 20
    assert [p.title for p in wikitext if "&#124;" in p.text] == []


def test_migrate_rewrites_old_pages_once(wiki, agent, monkeypatch, capsys) -> None:
    value = PIPED["question"]
    lesson_id = new_id("migrate")
    title = f"Lesson:{lesson_id}"
    new_text = serialize_page(sample_page(lesson_id, value, account="S3Agent"), SCHEMA)
    old_text = new_text.replace("&#x7C;", "&#124;")
    assert old_text != new_text
    save(agent, title, old_text)
    assert cells_showing(parsed_html(agent, title=title), value) == 0, "the old encoding should break under SMW"

    sync_client = WikiClient(wiki.api_url, wiki.sync.username, wiki.sync.password, timeout=30.0)
    repo = MediaWikiRepository(sync_client, SCHEMA)
    report = migrate(repo, purge=True)
    assert lesson_id in report.rewritten and not report.failed, report
    assert report.purged >= report.scanned > 0
    snap = repo.get_snapshot(lesson_id)
    assert snap.wikitext.rstrip() == new_text.rstrip()
    assert cells_showing(parsed_html(agent, title=title), value) >= 8
    violations = check_revision(old_text, snap.wikitext, wiki.sync.username.split("@", 1)[0], snap.timestamp,
                                SUMMARY, lesson_id=lesson_id, schema=SCHEMA)
    assert violations == []

    again = migrate(repo)
    assert again.rewritten == [] and again.failed == []
    assert repo.get_snapshot(lesson_id).revision_id == snap.revision_id

    # the command itself, as an operator runs it (sync account from the environment)
    monkeypatch.setenv("S3RM_SYNC_USERNAME", wiki.sync.username)
    monkeypatch.setenv("S3RM_SYNC_PASSWORD", wiki.sync.password)
    capsys.readouterr()
    assert cli.main(["migrate", "--api-url", wiki.api_url]) == 0
    assert " 0 rewritten, 0 failed" in capsys.readouterr().out
    assert repo.get_snapshot(lesson_id).revision_id == snap.revision_id
