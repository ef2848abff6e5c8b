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
from pathlib import Path

import pytest

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
  util: {}, Api: function () {}
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
            page.set_content("<html><body>" + body + "</body></html>")
            page.add_script_tag(content=STUBS % {"page": page_name, "ns": ns, "article": article})
            page.add_script_tag(content=COMMON_JS.read_text(encoding="utf-8"))
            yield page, errors
        finally:
            browser.close()


def _run(page_name: str, ns: int, article: int, created: str, updated: str) -> dict:
    with _common_js_page(FORM.format(created=created, updated=updated), page_name, ns, article) as (page, errors):
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
