"""Page Forms' "could not save" message, as a reader sees it in Chromium.

On an edit conflict Page Forms (``PFAutoeditAPI::doStore``) throws its message
``pf_autoedit_fail`` already parsed to HTML (``->parse()``), ``execute`` parses
that HTML once more as wikitext (``recursiveTagParseFully``) and ``Special:FormEdit``
puts the result into ``<div class="error">`` above the re-shown form. The shipped
Korean text links the page (``[[$1]]``), so the second parse escaped the link and
readers saw ``<a class="mw-selflink selflink">Lesson:…</a>을(를) 수정하는 데 실패했습니다.``

``sync`` now overrides the message with plain Korean text
(``schema/pages/messages.toml``, ``docs/browser.md#smw-page-forms-behaviours``).
CI's wiki has no Page Forms, so the test runs Page Forms' two parses on this
module's real wiki (``action=parse`` of ``{{int:pf_autoedit_fail|…}}``, then of
its HTML) and shows the result in Chromium inside the same ``div.error`` on a
wiki page:

* ``test_the_two_parses_reproduce_the_reported_text`` — Page Forms' own text
  through the same steps shows the raw ``<a …>`` the re-run reported;
* ``test_save_failure_says_another_edit_happened_and_nothing_is_lost`` — the
  pushed message reads as plain Korean: another edit was saved first, what was
  typed is still in the form; no markup shows.
"""
from __future__ import annotations

import io
import re

import pytest
from playwright import sync_api as playwright_api
from support import browser as bh

from sync import pageset, push, wikisite

pytestmark = pytest.mark.wiki

TARGET = "Lesson:nccl timeout fix"
#: Page Forms 5.9.1's Korean pf_autoedit_fail, as the re-run saw it (i18n/ko.json).
PAGE_FORMS_KO = "[[$1]]을(를) 수정하는 데 실패했습니다."


@pytest.fixture(scope="module")
def wiki(module_wiki):
    """This module's wiki with the interface messages sync pushes on a Page Forms wiki."""
    site = wikisite.connect(wikisite.ConnectionSettings(module_wiki.api_url, module_wiki.sync.username,
                                                        module_wiki.sync.password))
    messages = [p for p in pageset.build_page_set(site.info.capabilities | {"pageforms"}, placeholders={})
                if p.kind == "interface" and p.title != pageset.MAIN_PAGE_MESSAGE]
    assert "MediaWiki:Pf_autoedit_fail" in {p.title for p in messages}
    push.push(site, push.plan_sync(site, messages), out=io.StringIO())
    return module_wiki


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    with playwright_api.sync_playwright() as p:
        context = bh.launch_chromium(p, tmp_path_factory.mktemp("chromium-conflict"))
        try:
            yield context.new_page()
        finally:
            context.close()


def _parse(site, text: str) -> str:
    """``action=parse`` of ``text`` on the wiki, the ``mw-parser-output`` wrapper removed."""
    out = site.post("parse", text=text, contentmodel="wikitext", prop="text", disablelimitreport=1,
                    uselang="content", title=TARGET, formatversion=2)["parse"]["text"]
    out = re.sub(r'^<div class="mw-parser-output">', "", out.strip())
    return re.sub(r"</div>$", "", out).strip()


def page_forms_error_html(site, message_wikitext: str) -> str:
    """What ``PFAutoeditAPI`` hands ``Special:FormEdit``: the message parsed, then that HTML parsed again."""
    first = _parse(site, message_wikitext)
    first = re.sub(r"^<p>(.*)</p>$", r"\1", first, flags=re.S).strip()  # Message::parse() adds no paragraph
    return _parse(site, first)


def shown_in_chromium(page, wiki, html: str) -> str:
    """The visible text of ``html`` inside ``<div class="error">`` on a wiki page, as Chromium renders it."""
    page.goto(bh.wiki_url(wiki, "Special:BlankPage"), wait_until="domcontentloaded")
    page.evaluate("""html => {
        const box = document.createElement('div');
        box.className = 'error';
        box.id = 's3rm-test-error';
        box.innerHTML = html;
        document.getElementById('mw-content-text').prepend(box);
    }""", html)
    return page.inner_text("#s3rm-test-error")


def test_the_two_parses_reproduce_the_reported_text(wiki, page) -> None:
    site = wiki.site("agent")
    shown = shown_in_chromium(page, wiki, page_forms_error_html(site, PAGE_FORMS_KO.replace("$1", TARGET)))
    assert '<a class="mw-selflink selflink">' in shown and "수정하는 데 실패했습니다" in shown, shown


def test_save_failure_says_another_edit_happened_and_nothing_is_lost(wiki, page) -> None:
    site = wiki.site("agent")
    shown = shown_in_chromium(page, wiki, page_forms_error_html(site, "{{int:pf_autoedit_fail|" + TARGET + "}}"))
    assert "다른 편집" in shown and "먼저 저장" in shown, shown  # another edit was saved first
    assert "사라지지 않았" in shown and "양식에 그대로" in shown, shown  # nothing typed is lost
    assert "<" not in shown and ">" not in shown and "⧼" not in shown, shown
