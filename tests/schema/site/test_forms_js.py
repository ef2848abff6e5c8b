"""Common.js fills Page Forms' hidden provenance/time inputs, and cuts graph labels between graphemes — in a
real Chromium.

Contract: docs/data-contract.md#browser-forms.

The dev wiki has no Page Forms, so the form markup is the shape Page Forms
renders for ``schema/Forms/Lesson.wiki`` (``form#pfForm`` with
``Template[field]`` / ``Template[n][field]`` inputs, a ``[num]`` starter
instance); ``mw`` and ``$`` are minimal stand-ins for what ResourceLoader
provides. The script under test is the real ``schema/site/Common.js``.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from urllib.parse import parse_qs, urlsplit
from pathlib import Path

import pytest

from playwright.sync_api import expect
from playwright import sync_api as playwright  # noqa: E402  (test extra; Debian chromium)

COMMON_JS = Path(__file__).resolve().parents[3] / "schema" / "site" / "Common.js"
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync"]

FORM = """
<form id="pfForm" onsubmit="return false">
  <select name="Lesson[record_origin]" class="s3rm-lock-after-create">
    <option value="lab">lab</option><option value="imported" selected>imported</option></select>
  <input type="hidden" name="Lesson[created_at]" class="s3rm-lock-after-create" value="{created}">
  <input type="hidden" name="Lesson[updated_at]" value="{updated}">
  <input type="hidden" name="Lesson evidence[1][added_at]" value="2020-01-01T00:00:00Z">
  <input type="hidden" name="Lesson evidence[2][added_at]" value="">
  <input type="hidden" name="Lesson evidence[num][added_at]" value="">
  <input type="hidden" name="Lesson evidence verification[1][id]" value="">
  <input type="hidden" name="Lesson evidence verification[1][verified_at]" value="">
  <input type="hidden" name="Lesson relation[1][from]" value="">
  <input type="hidden" name="Lesson relation[1][created_at]" value="">
  <!-- Page Forms 6 combobox (PF_ComboBoxInput.js): a hidden input carries the name and the value,
       the visible OOUI input shows the label; "values from namespace" gives page names with spaces -->
  <input type="hidden" id="input_21-hidden" name="Lesson relation[1][to]" value="{to1}">
  <div class="s3rm-form-section s3rm-form-relation"><div class="oo-ui-comboBoxInputWidget">
  <input type="text" id="input_21" class="oo-ui-inputWidget-input"
       value="{to1}" data-label="{to1}" autocompletesettings="Lesson" autocompletedatatype="namespace"></div></div>
  <input type="hidden" name="Lesson relation[2][to]" value="gpu_oom_high">
  <!-- an older select-based combobox submits the selected option -->
  <select name="Lesson relation[3][to]"><option value="Lesson:Kv cache  reuse" selected>Kv cache reuse</option></select>
  <input type="hidden" name="Lesson relation[num][to]" value="">
  <button type="submit" name="wpSave">save</button>
</form>
"""

STUBS = """
window.RLQ = [];
window.$ = function (fn) { fn(); };
window.mw = {
  config: { get: function (k) { return ({wgPageName: %(page)r, wgNamespaceNumber: %(ns)d,
                                          wgArticleId: %(article)d, wgAction: 'formedit'})[k]; } },
  loader: { using: function () { return { then: function (f) { f(); } }; } },
  util: { getUrl: function (t, q) { return '/index.php/' + encodeURIComponent(t) + (q ? '?' + new URLSearchParams(q) : ''); } },
  // the wiki API as far as the launcher asks it: which of window.__existing pages exist
  Api: function () { this.get = function (q) { return Promise.resolve({query: {pages: [
    {title: q.titles, missing: (window.__existing || []).indexOf(q.titles) === -1}]}}); }; }
};
"""


@contextmanager
def _common_js_page(body: str, page_name: str, ns: int, article: int):
    """A Chromium page holding ``body``, the ``mw``/``$`` stand-ins and the real Common.js; yields
    ``(page, errors)`` with the page's uncaught errors."""
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=LAUNCH_ARGS, headless=True)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            # served from an http origin (not about:blank), so form submission works as on a wiki
            page.route("http://s3rm.test/**", lambda route: route.fulfill(
                status=200, content_type="text/html; charset=utf-8", body="<html><body>" + body + "</body></html>"))
            page.goto("http://s3rm.test/index.php")
            page.add_script_tag(content=STUBS % {"page": page_name, "ns": ns, "article": article})
            page.add_script_tag(content=COMMON_JS.read_text(encoding="utf-8"))
            yield page, errors
        finally:
            browser.close()


def _run(page_name: str, ns: int, article: int, created: str, updated: str, to1: str = "",
         clicks: int = 1) -> dict:
    with _common_js_page(FORM.format(created=created, updated=updated, to1=to1), page_name, ns, article) as (page,
                                                                                                       errors):
        for i in range(clicks):
            if i:  # the next click is in a later second (of the page's clock)
                second = page.evaluate("() => Math.floor(Date.now() / 1000)")
                page.wait_for_function("s => Math.floor(Date.now() / 1000) > s", arg=second, timeout=60_000)
            page.click("[name=wpSave]")
        values = page.evaluate("""() => Object.fromEntries(Array.from(
            document.querySelectorAll('#pfForm [name]')).map(e => [e.name, e.value]))""")
        values["__origin_options"] = page.evaluate(
            "() => Array.from(document.querySelector('[name=\"Lesson[record_origin]\"]').options)"
            ".map(o => o.disabled)")
        values["__errors"] = errors
        return values


def test_new_lesson_gets_equal_utc_created_and_updated_and_item_times():
    v = _run("Special:FormEdit/Lesson/Lesson:gpu_frag", -1, 0, "", "")
    assert v["__errors"] == []
    assert ISO.match(v["Lesson[created_at]"]) and v["Lesson[created_at]"] == v["Lesson[updated_at]"]
    assert v["Lesson evidence[1][added_at]"] == "2020-01-01T00:00:00Z"  # existing item untouched
    assert v["Lesson evidence[2][added_at]"] == v["Lesson[updated_at]"]  # new item: the new updated_at
    assert v["Lesson evidence[num][added_at]"] == ""  # blank starter instance untouched
    assert v["Lesson evidence verification[1][verified_at]"] == v["Lesson[updated_at]"]
    assert re.match(r"^[a-z0-9_-]+$", v["Lesson evidence verification[1][id]"])
    assert v["Lesson relation[1][from]"] == "gpu_frag"
    assert v["__origin_options"] == [False, False]  # new page: record_origin still choosable


def test_existing_lesson_keeps_created_at_advances_updated_at_and_locks_origin():
    future = "2999-01-01T00:00:00Z"
    v = _run("Lesson:gpu_frag", 3000, 42, "2024-05-01T10:00:00Z", future)
    assert v["__errors"] == []
    assert v["Lesson[created_at]"] == "2024-05-01T10:00:00Z"
    assert v["Lesson[updated_at]"] == "2999-01-01T00:00:01Z"  # strictly later than the loaded value
    assert v["__origin_options"] == [True, False]  # only the stored value can be submitted


def test_relation_target_picked_as_page_name_is_submitted_as_the_id():
    """Page Forms' namespace picker holds ``gpu oom high`` for ``Lesson:gpu_oom_high``; the saved
    ``to`` is the id (docs/browser.md#page-forms)."""
    v = _run("Lesson:gpu_frag", 3000, 42, "2024-05-01T10:00:00Z", "2024-05-01T10:00:00Z", to1="gpu oom high")
    assert v["__errors"] == []
    assert v["Lesson relation[1][to]"] == "gpu_oom_high"
    assert v["Lesson relation[2][to]"] == "gpu_oom_high"  # an id stays as it is
    assert v["Lesson relation[3][to]"] == "Kv_cache_reuse"  # the selected option's value
    assert v["Lesson relation[num][to]"] == ""


def test_id_typed_into_the_relation_picker_is_searched_as_a_page_name():
    """Page Forms matches the typed text against page names (``gpu oom high``); ``gpu_oom`` typed
    by a reader who knows the id is searched as ``gpu oom``."""
    with _common_js_page(FORM.format(created="", updated="", to1=""), "Lesson:gpu_frag", 3000, 42) as (page, errors):
        page.type("#input_21", "gpu_oom")
        assert page.input_value("#input_21") == "gpu oom"
        assert errors == []


def test_page_name_with_prefix_and_runs_of_blanks_becomes_the_id():
    v = _run("Lesson:gpu_frag", 3000, 42, "2024-05-01T10:00:00Z", "2024-05-01T10:00:00Z",
             to1="Lesson: gpu  oom_ high ")
    assert v["Lesson relation[1][to]"] == "gpu_oom_high"


def test_second_click_after_a_refused_save_keeps_created_equal_to_updated():
    """Page Forms may refuse the first click (a mandatory field is empty); the stamps the script
    filled on that click follow the second click, so a new Lesson still has created_at = updated_at."""
    v = _run("Special:FormEdit/Lesson/Lesson:gpu_frag", -1, 0, "", "", clicks=2)
    assert v["__errors"] == []
    assert ISO.match(v["Lesson[created_at]"]) and v["Lesson[created_at]"] == v["Lesson[updated_at]"]
    assert v["Lesson evidence[2][added_at]"] == v["Lesson[updated_at]"]
    assert v["Lesson relation[1][created_at]"] == v["Lesson[updated_at]"]
    assert v["Lesson evidence[1][added_at]"] == "2020-01-01T00:00:00Z"


# ---------------------------------------------------------------- #forminput launcher
#: What {{#forminput:form=Lesson|query string=namespace=Lesson}} renders once PF_formInput.js ran
#: (PFFormInputParserFunction: form.pfFormInput with hidden "form"/"namespace"; pf.AutocompleteWidget
#: named "page_name"; an OOUI submit button).
FORMINPUT = """
<div class="s3rm-form-launcher" style="width:320px">
<form name="createbox" action="/index.php/Special:FormStart" method="get" class="pfFormInput">
<p><input type="hidden" name="form" value="Lesson"><input type="hidden" name="namespace" value="Lesson">
<div class="pfFormInputWrapper" data-size="40"><div class="oo-ui-fieldsetLayout"><div class="oo-ui-horizontalLayout">
<div class="oo-ui-widget oo-ui-inputWidget oo-ui-textInputWidget pfPageNameWithoutNamespace" style="max-width:50em">
<input type="text" name="page_name" size="40" class="oo-ui-inputWidget-input"></div>
<span class="oo-ui-widget oo-ui-buttonElement oo-ui-buttonInputWidget pfCreateOrEditButton">
<button type="submit" class="oo-ui-inputWidget-input oo-ui-buttonElement-button" value="Submit">쓰기 시작</button></span>
</div></div></div></p></form></div>
<script>window.__submitted = [];  /* a submission the launcher let through to Page Forms' own handling */
document.addEventListener('submit', function (e) { window.__submitted.push(e.target.page_name.value); e.preventDefault(); });
</script>
"""


@pytest.mark.parametrize("typed, allowed", [
    ("Bad ID!", False), ("UPPER_case", False), ("Lesson:gpu_oom", False), ("", False),
    ("gpu_oom_high", True), (" kv-cache_2 ", True),
])
def test_forminput_launcher_checks_the_id(typed: str, allowed: bool):
    with _common_js_page(FORMINPUT, "연구_메모리", 0, 1) as (page, errors):
        page.fill("[name=page_name]", typed)
        page.click(".pfCreateOrEditButton button")
        if allowed:  # checked for an existing Lesson, then on to Special:FormStart
            page.wait_for_url("**/Special:FormStart?**")
            assert parse_qs(urlsplit(page.url).query)["page_name"] == [typed.strip()] and errors == []
            return
        submitted = page.evaluate("() => window.__submitted")
        message = page.text_content(".pfFormInput .s3rm-create-message") or ""
        assert errors == []
        assert submitted == [] and message.strip()
        assert page.get_attribute("[name=page_name]", "aria-invalid") == "true"


def test_forminput_launcher_says_an_existing_id_exists_and_offers_it():
    """an id that names an existing Lesson does not open that Lesson's form as if it were
    new; the box says it exists and links the Lesson and its form."""
    with _common_js_page(FORMINPUT, "연구_메모리", 0, 1) as (page, errors):
        page.evaluate("() => { window.__existing = ['Lesson:gpu_oom_high']; }")
        page.fill("[name=page_name]", "gpu_oom_high")
        page.click(".pfCreateOrEditButton button")
        page.wait_for_function("() => document.querySelector('.pfFormInput').dataset.state === 'exists'")
        assert page.evaluate("() => window.__submitted") == []
        message = page.text_content(".pfFormInput .s3rm-create-message")
        assert "이미 같은 ID의 메모가 있습니다" in message and "Lesson:gpu_oom_high" in message
        assert page.get_attribute(".s3rm-exists-open", "href") == "/index.php/Lesson%3Agpu_oom_high"
        assert page.get_attribute(".s3rm-exists-edit", "href") == "/index.php/Lesson%3Agpu_oom_high?action=formedit"
        assert errors == []
        page.fill("[name=page_name]", "gpu_oom_new")  # a free id still goes through
        page.click(".pfCreateOrEditButton button")
        page.wait_for_url("**/Special:FormStart?**")
        assert parse_qs(urlsplit(page.url).query)["page_name"] == ["gpu_oom_new"]


def test_forminput_launcher_fits_its_panel():
    css = (Path(__file__).resolve().parents[3] / "schema" / "site" / "Common.css").read_text(encoding="utf-8")
    with _common_js_page(FORMINPUT, "연구_메모리", 0, 1) as (page, errors):
        page.add_style_tag(content=css)
        panel = page.eval_on_selector(".s3rm-form-launcher", "e => e.getBoundingClientRect().right")
        rights = page.eval_on_selector_all(".pfFormInput input, .pfFormInput button",
                                           "els => els.map(e => e.getBoundingClientRect().right)")
        assert errors == [] and rights and max(rights) <= panel + 0.5


# ---------------------------------------------------------------- home recent list
INJECTED = '<span style="color:red;font-size:40px">BIG</span> \'\'\'B\'\'\' <u>u</u> {{SITENAME}} [[x]]'
RECENT = """
<div id="s3rm-recent-list" class="s3rm-recent-list" data-limit="6"></div>
<script>
window.fetch = function (url, init) {
  var req = JSON.parse(init.body);
  var content = {results: [{id: "gpu_oom_high", title: %(title)s, confidence: "high",
                             updated_at: "2026-12-02T03:31:51Z"}]};
  var body = JSON.stringify({jsonrpc: "2.0", id: req.id, result: {structuredContent: content,
                             content: [{type: "text", text: JSON.stringify(content)}]}});
  return Promise.resolve(new Response(body, {status: 200, headers: {"Content-Type": "application/json"}}));
};
</script>
"""


def test_recent_list_shows_values_as_text_with_id_and_local_time():
    """The home page's recent list (every wiki, SMW too) draws gateway values as DOM text: an HTML or
    wikitext title shows literally, the id is under it and the UTC time is a <time> element."""
    import json
    with _common_js_page(RECENT % {"title": json.dumps(INJECTED)}, "연구_메모리", 0, 1) as (page, errors):
        page.wait_for_selector("#s3rm-recent-list[data-state=ready] li")
        row = page.locator("#s3rm-recent-list li[data-id]").first
        assert errors == []
        assert row.get_attribute("data-id") == "gpu_oom_high"
        assert INJECTED in row.inner_text()
        assert page.locator("#s3rm-recent-list span[style], #s3rm-recent-list u, #s3rm-recent-list b").count() == 0
        assert "gpu_oom_high" in page.locator("#s3rm-recent-list .s3rm-lesson-id").first.inner_text()
        assert page.get_attribute("#s3rm-recent-list time", "datetime") == "2026-12-02T03:31:51Z"


# ---------------------------------------------------------------- graph labels
LABELS = ["🔥" * 30, "Lesson about GPU memory 🔥🔥 and more text here",
          "가족 👨\u200d👩\u200d👧\u200d👦 " * 6, "e\u0301" * 30, "👍🏽" * 30, "short 🔥"]


def _clipped(without_segmenter: bool) -> list[str]:
    """``mw.s3rm.clip(label, 26)`` (the graph's label cut) of each of :data:`LABELS` in Chromium."""
    with _common_js_page("", "Main_Page", 0, 1) as (page, errors):
        out = page.evaluate("""([labels, drop]) => {
            const kept = Intl.Segmenter;
            if (drop) { Intl.Segmenter = undefined; }
            try { return labels.map(l => mw.s3rm.clip(l, 26)); } finally { Intl.Segmenter = kept; }
        }""", [LABELS, without_segmenter])
        assert errors == []
        return out


@pytest.mark.parametrize("without_segmenter", [False, True])
def test_graph_labels_are_cut_between_graphemes(without_segmenter):
    """A label cut never leaves a lone surrogate or half an emoji (ZWJ family, skin tone, combining
    accent); at most 26 characters as a reader counts them, the last an ellipsis."""
    out = _clipped(without_segmenter)
    assert out[0] == "🔥" * 25 + "…"
    assert out[1] == LABELS[1][:25] + "…" and out[5] == "short 🔥"
    assert out[2] == "가족 👨\u200d👩\u200d👧\u200d👦 " * 5 + "…"
    assert out[3] == "e\u0301" * 25 + "…" and out[4] == "👍🏽" * 25 + "…"
    for text in out:
        text.encode("utf-8")  # a lone surrogate cannot be encoded


# ---------------------------------------------------------------- field values are data
def _sample_values() -> list[str]:
    """The codec's dangerous constructs plus generated text biased towards wikitext and tricky code points."""
    from hypothesis import HealthCheck, given, settings
    from support.codec_cases import CONSTRUCTS, field_text

    values = list(CONSTRUCTS.values())

    @settings(max_examples=400, database=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(field_text(60))
    def collect(value):
        values.append(value)

    collect()
    return values


def test_site_script_codec_agrees_with_the_page_codec():
    """``mw.s3rm.encodeValue`` is inert wikitext the page codec reads back as the value, and
    ``mw.s3rm.decodeValue`` reads what the page codec writes: a form save stores what an agent stores."""
    import unicodedata

    import mwparserfromhell
    from mwparserfromhell.nodes import HTMLEntity, Text

    from gateway.domain.codec import decode_value, encode_value

    def assert_inert(encoded: str) -> None:  # as tests/gateway/domain/test_codec.py
        assert "\n" not in encoded and "\r" not in encoded
        assert not set(encoded) & set("|{}[]<>"), encoded
        assert all(isinstance(n, (Text, HTMLEntity)) for n in mwparserfromhell.parse(encoded).nodes), encoded
        assert unicodedata.normalize("NFC", "=" + encoded + "\n") == "=" + encoded + "\n", encoded

    values = [v for v in _sample_values() if not any(0xD800 <= ord(c) <= 0xDFFF for c in v)]
    with _common_js_page("", "Main_Page", 0, 1) as (page, errors):
        js = page.evaluate("""(values) => values.map(v => [mw.s3rm.encodeValue(v, false),
                                                              mw.s3rm.decodeValue(v)])""", values)
        py_encoded = [encode_value(v) for v in values]
        js_decoded = page.evaluate("(raw) => raw.map(r => mw.s3rm.decodeValue(r))", py_encoded)
        assert errors == []
    for value, (js_enc, js_dec_raw), py_enc, js_dec in zip(values, js, py_encoded, js_decoded):
        assert decode_value(js_enc) == value, (value, js_enc)
        assert_inert(js_enc)
        assert js_dec == value, (value, py_enc)
        assert js_dec_raw == decode_value(value), value


def test_site_script_reads_named_references_as_the_page_codec():
    """``mw.s3rm.decodeValue`` resolves every name of ``codec.NAMED_REFERENCES`` and nothing else:
    no HTML5 legacy prefix (``&copy2024;`` stays), MediaWiki's rlm aliases (docs/data-contract.md#codec)."""
    import html.entities

    from gateway.domain.codec import NAMED_REFERENCES, decode_value

    raws = [f"a&{name};b" for name in NAMED_REFERENCES] + [f"&{name}x;" for name in html.entities.html5]
    raws += ["&copy2024;", "&ampx;", "&notit;", "&copy", "&NotARealName;", "&é;", "&1;", "&ampé;",
             "&\u05e8\u05dc\u05de;", "&amp;copy;"]
    with _common_js_page("", "Main_Page", 0, 1) as (page, errors):
        js = page.evaluate("(raws) => raws.map(r => mw.s3rm.decodeValue(r))", raws)
        assert errors == []
    assert [(r, v) for r, v in zip(raws, js) if v != decode_value(r)] == []


FIELDS_FORM = """
<form id="pfForm" onsubmit="return false">
  <input type="hidden" name="Lesson[updated_at]" value="2024-05-01T10:00:00Z">
  <input type="text" name="Lesson[title]" value="{title}">
  <textarea name="Lesson[context]">{context}</textarea>
  <input type="text" name="Lesson evidence[1][citation]" value="">
  <input type="text" name="Lesson evidence[1][url]" value="{url}">
  <textarea name="Lesson evidence[num][note]"></textarea>
  <button type="submit" name="wpSave">save</button>
</form>
<script>
window.__posted = [];
document.getElementById('pfForm').addEventListener('submit', function (e) {
  window.__posted.push(Object.fromEntries(new FormData(e.target).entries()));
});
</script>
"""


def test_form_shows_decoded_values_and_submits_encoded_ones():
    """An MCP-written Lesson opens in the form with plain text (no ``&#10;``), and a save stores the
    page codec's encoding: a ``|`` typed into 출처 reaches Page Forms as ``&#124;`` (its pipe check
    passes) and the page reads back the typed text."""
    import html as _html

    from gateway.domain.codec import decode_value, encode_value
    context = "A100 80GB\nPyTorch 2.3 | batch {{16}}"
    title = "<b>B</b> '''x''' [[y]]"
    url = "https://example.org/a?b=1&c=%20#x"
    body = (FIELDS_FORM.replace("{title}", _html.escape(encode_value(title), quote=True))
            .replace("{context}", _html.escape(encode_value(context)))
            .replace("{url}", _html.escape(encode_value(url, url=True), quote=True)))
    with _common_js_page(body, "Lesson:gpu_frag", 3000, 42) as (page, errors):
        assert page.input_value("[name='Lesson[context]']") == context
        assert page.input_value("[name='Lesson[title]']") == title
        assert page.input_value("[name='Lesson evidence[1][url]']") == url
        page.fill("[name='Lesson evidence[1][citation]']", "repo | commit abc")
        page.click("[name=wpSave]")
        posted = page.evaluate("() => window.__posted")[-1]
        # as typed again, once the script has put the reader's text back
        expect(page.locator("[name='Lesson evidence[1][citation]']")).to_have_value("repo | commit abc")
        assert errors == []
    assert "|" not in posted["Lesson evidence[1][citation]"] and "\n" not in posted["Lesson[context]"]
    assert decode_value(posted["Lesson evidence[1][citation]"]) == "repo | commit abc"
    assert decode_value(posted["Lesson[context]"]) == context
    assert decode_value(posted["Lesson[title]"]) == title
    assert decode_value(posted["Lesson evidence[1][url]"]) == url and posted["Lesson evidence[1][url]"].startswith("https:")
    assert posted["Lesson evidence[num][note]"] == ""


def test_value_a_field_cannot_hold_stays_encoded_and_unchanged():
    """A CR LF in a textarea or a line break in a one-line input would be lost by the field, so
    such a value is left in its encoded form and saved as it was."""
    from gateway.domain.codec import decode_value, encode_value
    context, title = "line1\r\nline2", "two\nlines"
    import html as _html
    body = (FIELDS_FORM.replace("{title}", _html.escape(encode_value(title)))
            .replace("{context}", _html.escape(encode_value(context))).replace("{url}", ""))
    with _common_js_page(body, "Lesson:gpu_frag", 3000, 42) as (page, errors):
        assert page.input_value("[name='Lesson[context]']") == encode_value(context)
        page.click("[name=wpSave]")
        posted = page.evaluate("() => window.__posted")[-1]
        assert errors == []
    assert decode_value(posted["Lesson[context]"]) == context and decode_value(posted["Lesson[title]"]) == title
