"""``Module:S3RM values`` on a REAL MediaWiki with Scribunto (``docs/browser.md#values-in-smw``).

The module is what the SMW variant of the Lesson templates calls instead of
``#set`` / ``#subobject``. CI's wiki has no Semantic MediaWiki, so these tests
call the module's ``show`` function, which returns — as inert JSON text — the
very argument list ``set`` and ``subobject`` hand to SMW (both build it with
the one function ``arguments``):

* ``test_values_reach_the_annotation_decoded`` — every dangerous construct of
  the codec tests (``| { } [ ] & < >``, line breaks, HTML, signatures, …),
  written by the page codec, arrives decoded; ``&`` is handed on as ``&amp;``,
  which SMW's SQL store turns back into ``&``;
* ``test_any_value_reaches_the_annotation_decoded`` — the same for arbitrary
  text (tests/support/codec_cases.py: any Unicode, wikitext syntax, control
  characters, combining marks), 20 values per page parse;
* ``test_decoding_matches_the_page_codec`` — references typed by hand (hex,
  named, out of range, malformed) decode exactly as ``codec.decode_value``;
* ``test_every_named_reference_decodes_as_the_codec_and_the_page_view_read_it``
  — every name of ``codec.NAMED_REFERENCES`` and legacy prefixes such as
  ``&copy2024;`` (literal): the module, ``decode_value`` and the rendered page agree;
* ``test_list_keep_and_empty_values`` — the other modes;
* ``test_evidence_url_reaches_smw_as_written`` and
  ``test_any_evidence_url_reaches_smw_as_written`` — every URL the schema
  accepts (percent escapes, Korean, ``&``, wikitext marks) goes to the Text
  property ``Evidence URL`` decoded, so what SMW stores is the URL agents read;
* ``test_values_still_render_as_text`` — the same values in a Lesson page
  rendered by the wiki's templates show as text (the module changes nothing
  a reader sees).
"""
from __future__ import annotations

import html
import io
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.codec_cases import CONSTRUCTS, SCHEMA, field_text

from gateway.domain.codec import NAMED_REFERENCES, decode_value, encode_value, serialize_page
from gateway.domain.model import LessonPage
from gateway.domain.rules import value_problems
from sync import pageset, push, wikisite
from sync.pages.properties import render_property_pages
from sync.pages.templates import value_mode

pytestmark = pytest.mark.wiki

MODULE = "S3RM values"


@pytest.fixture(scope="module")
def site(dev_wiki):
    """The agent's mwclient.Site, after sync pushed this wiki's generated pages (the module included)."""
    wiki = wikisite.connect(wikisite.ConnectionSettings(dev_wiki.api_url, dev_wiki.sync.username,
                                                        dev_wiki.sync.password))
    assert "scribunto" in wiki.info.capabilities, "the dev wiki loads Scribunto (LocalSettings.dev.php)"
    pages = [pageset.DesiredPage(title, text, pageset.kind_of(title))
             for title, text in pageset.generated_schema_pages(SCHEMA, wiki.info.capabilities).items()]
    assert f"Module:{MODULE}" in {p.title for p in pages}
    push.push(wiki, push.plan_sync(wiki, pages), out=io.StringIO())
    return dev_wiki.site("agent")


def shown(site, function_args: list[tuple[str, str]]) -> list[str]:
    """The argument list ``{{#invoke:S3RM values|show|…}}`` returns for ``name=mode:wikitext`` pairs."""
    call = "{{#invoke:" + MODULE + "|show" + "".join(f"|{name}={raw}" for name, raw in function_args) + "}}"
    out = site.post("parse", text=call, contentmodel="wikitext", prop="text", disablelimitreport=1,
                    formatversion=2)["parse"]["text"]
    assert "scribunto-error" not in out, out
    start, end = out.index("<p>") + 3, out.rindex("</p>")
    return json.loads(html.unescape(out[start:end].strip()))


def test_values_reach_the_annotation_decoded(site) -> None:
    cases = sorted(CONSTRUCTS.items())
    args = [(f"P{i:02d}", "text:" + encode_value(value)) for i, (_, value) in enumerate(cases)]
    got = shown(site, args)
    want = [f"P{i:02d}=" + value.replace("&", "&amp;") for i, (_, value) in enumerate(cases) if value]
    assert got == want


@settings(max_examples=10)
@given(values=st.lists(field_text(), min_size=20, max_size=20))
def test_any_value_reaches_the_annotation_decoded(site, values: list[str]) -> None:
    got = shown(site, [(f"P{i:02d}", "text:" + encode_value(v)) for i, v in enumerate(values)])
    assert got == [f"P{i:02d}=" + v.replace("&", "&amp;") for i, v in enumerate(values) if v]


def test_decoding_matches_the_page_codec(site) -> None:
    typed = ["&#x41;&#X42;&#67;", "&#1114112; &#55296; &#x110000;", "&nbsp;&eacute;&hellip;&NotARealName;",
             "&amp;lt; &amp;amp;", "&#12a; &# ; &#; &x; & ;", "&#0000065;&#x0041;", "a && b &",
             "&#12345678; &#x1234567;", "&lt;span&gt;&#124;&#123;&#91;", "&#10;&#13;&#9;line",
             *NAMED_TYPED]
    got = shown(site, [(f"P{i:02d}", "text:" + raw) for i, raw in enumerate(typed)])
    want = [f"P{i:02d}=" + decode_value(raw).replace("&", "&amp;") for i, raw in enumerate(typed)]
    assert got == want
    assert got[-len(NAMED_TYPED):] == [f"P{i:02d}=" + v for i, v in enumerate(NAMED_DECODED, len(typed) - len(NAMED_TYPED))]


#: Named references outside PHP's one-name-per-character table, legacy HTML5 prefixes (which
#: MediaWiki does not read: a name counts only whole and with its ";") and MediaWiki's rlm aliases.
NAMED_TYPED = ["&ldquo;x&rdquo; &rarr; &AMP; &frac12;", "&copy2024; &ampx; &notit; &ltfoo;",
               "&copy &amp &DownBreve;&NotEqualTilde;", "&\u05e8\u05dc\u05de;&\u0631\u0644\u0645;&ampé;"]
NAMED_DECODED = ["\u201cx\u201d \u2192 &amp; \u00bd", "&amp;copy2024; &amp;ampx; &amp;notit; &amp;ltfoo;",
                 "&amp;copy &amp;amp \u0311\u2242\u0338", "\u200f\u200f&amp;ampé;"]


def test_every_named_reference_decodes_as_the_codec_and_the_page_view_read_it(site) -> None:
    """All of codec.NAMED_REFERENCES in one value: the module, decode_value and the rendered page agree."""
    raw = "".join(f"&{name};|" for name in sorted(NAMED_REFERENCES)) + NAMED_TYPED[1]
    raw = raw.replace("|", "&#124;")
    assert shown(site, [("P", "text:" + raw)]) == ["P=" + decode_value(raw).replace("&", "&amp;")]
    out = site.post("parse", text="<span id=v>" + raw + "</span>", contentmodel="wikitext", prop="text",
                    disablelimitreport=1, formatversion=2)["parse"]["text"]
    start = out.index("<span id=\"v\">") + len("<span id=\"v\">")
    assert html.unescape(out[start:out.index("</span>", start)]) == decode_value(raw)


def test_list_keep_and_empty_values(site) -> None:
    got = shown(site, [
        ("C", "list:observation,interpretation"),
        ("D", "keep:Lesson:gpu&#95;&#95;oom"),
        ("E", "text:"),
        ("F", "keep:"),
    ])
    assert got == ["C=observation,interpretation", "+sep=,", "D=Lesson:gpu&#95;&#95;oom"]


def smw_text_store(argument: str) -> str:
    """What SMW's SQL store keeps of a Text value handed to ``#set`` / ``#subobject``:
    ``htmlspecialchars_decode( trim( $text ), ENT_QUOTES )`` (``DIBlobHandler::getInsertValues``);
    an ``ask`` printout shows that text."""
    text = argument.strip(" \t\n\r\0\x0b")
    for ref, ch in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&#039;", "'"), ("&#39;", "'"), ("&amp;", "&")):
        text = text.replace(ref, ch)
    return text


#: URLs the reported re-run found changed in SMW, and others the schema accepts.
URLS = [
    "https://status.cloud.google.com/incident/cloud-datastore/19003#a%20b",  # %20 -> _ under type URL
    "https://groups.google.com/forum/#!topic/google-appengine-downtime-notify/x%23y",  # %23 -> #
    "https://example.org/검색?x=가&y=한",  # saved by the form; stored as ?x=가&amp;y=한 by the url mode
    "https://example.org/a?b=1&c=2;d=(x)*!$+,@'~-_.%20#f",
    "https://example.org/__NOINDEX__/''bold''/~~~~",
    "https://example.org/[x]/{{y}}/a|b/&amp;/&#124;/<i>",
    "http://example.org:8080/%7E/%%/%zz/é",
]


@settings(max_examples=10)
@given(tail=st.lists(st.sampled_from(["%20", "%23", "%2F", "%25", "&", "&amp;", "#", "?", "=", "|", "가", "_", "__",
                                      "''", "~~~", "[", "]", "{{", "}}", "'", '"', "<", ">", ";", "+", "é", "a"]),
                     min_size=1, max_size=12))
def test_any_evidence_url_reaches_smw_as_written(site, tail: list[str]) -> None:
    url = "https://example.org/" + "".join(tail)
    assert_urls_stored_as_written(site, [url])


def test_evidence_url_reaches_smw_as_written(site) -> None:
    """docs/browser.md#values-in-smw: Evidence URL is a Text property, handed to SMW decoded like any
    text, so the stored value (an ``ask`` printout) is the URL ``get_lesson`` reads, byte for byte."""
    assert_urls_stored_as_written(site, URLS)


def assert_urls_stored_as_written(site, urls: list[str]) -> None:
    field = SCHEMA.evidence.field("url")
    assert field.smw_type == "Text"
    assert "[[Has type::Text]]" in render_property_pages(SCHEMA)["Property:" + field.property]
    mode = value_mode(field)
    for url in urls:
        assert not value_problems(SCHEMA.evidence, field, url, schema=SCHEMA), url
    got = shown(site, [(f"U{i:02d}", f"{mode}:" + encode_value(url, url=True)) for i, url in enumerate(urls)])
    assert [smw_text_store(arg.split("=", 1)[1]) for arg in got] == urls
    assert [decode_value(encode_value(url, url=True)) for url in urls] == urls  # what get_lesson reads


def test_values_still_render_as_text(site) -> None:
    value = "a | b {{PAGENAME}} [[Lesson:x]] & <b>bold</b>\nline 2"
    fields = {f.name: "" for f in SCHEMA.lesson.fields}
    fields.update(title=value, question=value, confidence="low", record_origin="synthetic",
                  created_at="2026-01-02T03:04:05Z", updated_at="2026-01-02T03:04:05Z")
    title = f"Lesson:values-module-{time.time_ns() % 10**9}"
    result = site.post("edit", title=title, text=serialize_page(LessonPage(fields=fields), SCHEMA), summary="values test",
                       token=site.get_token("csrf"), formatversion=2)
    assert result["edit"]["result"] == "Success", result
    out = site.post("parse", page=title, prop="text|links|templates", disablelimitreport=1, formatversion=2)["parse"]
    assert "<b>bold</b>" not in out["text"] and "scribunto-error" not in out["text"]
    assert html.escape("<b>bold</b>", quote=False) in out["text"]
    assert not [link for link in out["links"] if link["title"] == "Lesson:X" or link["title"] == "Lesson:x"]
    assert [(t["ns"], t["title"].split(":", 1)[1]) for t in out["templates"]] == [(10, "Lesson")]
