"""Offline tests of the Lesson page codec (gateway/domain/codec.py).

Two kinds of checks:

* **properties** (hypothesis): ``decode(encode(s)) == s`` for any text, and
  ``parse(serialize(page)) == page`` for any page — both also after a
  simulated MediaWiki save (:func:`sync.wikisite.normalize_text`: NFC, LF line
  ends, trailing whitespace trimmed), which is what the real save path does to
  the whole page text;
* **one named test per dangerous construct** (``docs/data-contract.md#codec``):
  the value round-trips and its encoding is *inert* — mwparserfromhell sees
  only plain text and character references in it (no template, link, tag,
  heading, comment, argument), it is one line, and it holds no raw ``|``,
  braces, brackets, ``<`` or ``>``.

tests/gateway/domain/test_codec_wiki.py repeats the round trip and the rendering checks
through a real MediaWiki.
"""
from __future__ import annotations

import html.entities
import unicodedata

import mwparserfromhell
import pytest
from support.codec_cases import CONSTRUCTS, SCHEMA, field_text, lesson_pages
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mwparserfromhell.nodes import HTMLEntity, Text

from gateway.domain.codec import (NAMED_REFERENCES, PageFormatError, decode_value, encode_value, parse_page,
                                  serialize_page)
from gateway.domain.model import LessonPage
from sync.wikisite import normalize_text


def saved(wikitext: str) -> str:
    """What MediaWiki's save path does to a page text (short of the pre-save transform)."""
    return normalize_text(wikitext)


def assert_inert(encoded: str) -> None:
    """The encoding contains only text and character references, on one line."""
    assert "\n" not in encoded and "\r" not in encoded
    assert not set(encoded) & set("|{}[]<>"), encoded
    nodes = mwparserfromhell.parse(encoded).nodes
    assert all(isinstance(n, (Text, HTMLEntity)) for n in nodes), [type(n).__name__ for n in nodes]
    # the only named references the codec writes; decode_value resolves them like every reader
    assert {n.value for n in nodes if isinstance(n, HTMLEntity) and n.named} <= {"amp", "lt", "gt"}, encoded
    assert unicodedata.normalize("NFC", "=" + encoded + "\n") == "=" + encoded + "\n", "not stable under NFC"


def round_trip_field(value: str, field: str = "question") -> str:
    """Store ``value`` in one Lesson field, simulate the save, parse it back."""
    page = LessonPage(fields={**{n: "x" for n in SCHEMA.lesson.field_names}, field: value})
    return parse_page(saved(serialize_page(page, SCHEMA)), SCHEMA).fields[field]


# ---------------------------------------------------------------- properties


@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(field_text(80))
def test_decode_inverts_encode(value: str) -> None:
    encoded = encode_value(value)
    assert decode_value(encoded) == value
    assert saved(encoded) == encoded  # MediaWiki's save leaves the encoding alone
    assert_inert(encoded)


@settings(max_examples=500)
@given(st.text())
def test_decode_inverts_encode_on_any_text(value: str) -> None:
    assert decode_value(encode_value(value)) == value
    assert_inert(encode_value(value))


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lesson_pages())
def test_parse_inverts_serialize(page: LessonPage) -> None:
    text = serialize_page(page, SCHEMA)
    assert parse_page(text, SCHEMA) == page
    assert parse_page(saved(text), SCHEMA) == page
    assert serialize_page(parse_page(text, SCHEMA), SCHEMA) == text  # deterministic


def test_lone_surrogate_is_rejected() -> None:
    with pytest.raises(ValueError, match="surrogate"):
        encode_value("a\ud800b")


# ---------------------------------------------------------------- dangerous constructs (tests/support/codec_cases.py)

@pytest.mark.parametrize("name", sorted(CONSTRUCTS))
def test_dangerous_construct_round_trips_and_is_inert(name: str) -> None:
    value = CONSTRUCTS[name]
    assert_inert(encode_value(value))
    for field in ("title", "question", "applicability"):
        assert round_trip_field(value, field) == value


def test_leading_markup_characters_are_references() -> None:
    for ch in "*#;:=- \t":
        encoded = encode_value(ch + "x")
        assert encoded.startswith("&#"), (ch, encoded)


def test_nfd_value_survives_nfc_normalisation() -> None:
    nfd = unicodedata.normalize("NFD", "한글 é")
    assert nfd != unicodedata.normalize("NFC", nfd)
    encoded = encode_value(nfd)
    assert unicodedata.normalize("NFC", encoded) == encoded
    assert round_trip_field(nfd) == nfd


def test_newlines_never_reach_the_wikitext() -> None:
    encoded = encode_value("a\n\nb\n")
    assert encoded == "a&#10;&#10;b&#10;"


def test_readable_text_stays_literal() -> None:
    text = "캐시를 끄면 p95 지연이 12 ms에서 9 ms로 줄었다 (A/B, n=40)."
    assert encode_value(text) == text


def test_every_named_reference_mediawiki_resolves_decodes() -> None:
    """HTML5's names with their ";" and MediaWiki's aliases of rlm (docs/data-contract.md#codec)."""
    html5 = {name[:-1]: text for name, text in html.entities.html5.items() if name.endswith(";")}
    assert NAMED_REFERENCES == {**html5, "\u05e8\u05dc\u05de": "\u200f", "\u0631\u0644\u0645": "\u200f"}
    assert len(NAMED_REFERENCES) == 2127
    for name, text in NAMED_REFERENCES.items():
        assert decode_value(f"a&{name};b") == f"a{text}b", name


@pytest.mark.parametrize("raw", [
    "&copy2024;", "&ampx;", "&notit;", "&ltfoo;", "&copy", "&amp", "&lt", "&NotARealName;", "&é;", "&1;",
    "&amp x;", "&#;", "&ampé;",
])
def test_other_names_and_legacy_prefixes_stay_literal(raw: str) -> None:
    """MediaWiki resolves a name only whole and with its ";": no HTML5 legacy-prefix reading."""
    assert decode_value(raw) == raw


def test_named_references_decode_once_and_in_place() -> None:
    assert decode_value("&amp;copy; &AMP;&ldquo;x&rdquo; &rarr; &frac12;&copy2024;") == "&copy; &“x” → ½&copy2024;"


# ---------------------------------------------------------------- parser robustness


def test_page_forms_style_page_parses() -> None:
    text = ("{{틀:Lesson\n|question=Q?\n|title=T\n}}\n{{Template:Lesson_evidence|citation=C|id=e1}}\n"
            "<!-- a comment -->\n{{Lesson relation\n|to=b\n|relation=supports\n|from=a}}")
    page = parse_page(text, SCHEMA)
    assert page.fields["title"] == "T" and page.fields["question"] == "Q?" and page.fields["author"] == ""
    assert page.evidence[0]["id"] == "e1" and page.evidence[0]["citation"] == "C"
    assert page.relations[0]["to"] == "b"
    assert page.extra_wikitext == ""


@pytest.mark.parametrize("text, message", [
    ("no template here", "no {{Lesson}}"),
    ("{{Lesson|title=a}}{{Lesson|title=b}}", "more than one"),
    ("{{Lesson|positional}}", "positional"),
    ("{{Lesson|bogus=1}}", "unknown parameter"),
    ("{{Lesson|title=a|title=b}}", "twice"),
    ("{{Lesson evidence|id=e}}{{Lesson|title=a}}", "before"),
])
def test_malformed_pages_are_rejected(text: str, message: str) -> None:
    with pytest.raises(PageFormatError, match=message):
        parse_page(text, SCHEMA)


def test_serialize_rejects_unknown_fields() -> None:
    with pytest.raises(ValueError, match="unknown fields"):
        serialize_page(LessonPage(fields={"title": "a", "nope": "b"}), SCHEMA)


# ---------------------------------------------------------------- what a Page Forms save produces

#: A Lesson as Page Forms 5.9/6 saves it after a form edit (``PFFormPrinter::getStringFromPassedInArray``
#: joins a checkbox list with ``"<delimiter> "``; empty fields are left out; the relation picker
#: ``values from namespace=Lesson`` holds page names with spaces; MediaWiki trims the trailing
#: whitespace of the gateway's conflict salt).
FORM_SAVE = """{{Lesson
|title=T
|question=Q
|author=agent
|review_state=Draft
|created_at=2026-01-01T00:00:00Z
|updated_at=2026-01-01T00:00:05Z
}}
{{Lesson evidence
|id=e1
|citation=C
|kind=paper
}}
{{Lesson evidence verification
|id=v1
|evidence_id=e1
|claim_fields=observation, interpretation, reusable_lesson
|outcome=supports
}}
{{Lesson relation
|from=a_b
|relation=works_when
|to=gpu oom high
|created_at=2026-01-01T00:00:05Z
}}
"""


def test_form_save_reads_as_the_values_the_gateway_wrote() -> None:
    page = parse_page(FORM_SAVE, SCHEMA)
    assert page.verifications[0]["claim_fields"] == "observation,interpretation,reusable_lesson"
    assert page.relations[0]["to"] == "gpu_oom_high"
    assert page.fields["reviewer"] == "" and page.fields["updated_at"] == "2026-01-01T00:00:05Z"
    # re-serialised by the gateway, the page is the canonical form and reads back the same
    assert parse_page(serialize_page(page, SCHEMA), SCHEMA) == page
    assert "|claim_fields=observation,interpretation,reusable_lesson\n" in serialize_page(page, SCHEMA)


def test_form_save_with_relation_before_verification_reads_the_same_records() -> None:
    ver_start = FORM_SAVE.index("{{Lesson evidence verification")
    rel_start = FORM_SAVE.index("{{Lesson relation")
    swapped = FORM_SAVE[:ver_start] + FORM_SAVE[rel_start:] + FORM_SAVE[ver_start:rel_start]
    assert parse_page(swapped, SCHEMA) == parse_page(FORM_SAVE, SCHEMA)


@pytest.mark.parametrize("raw, value", [
    ("observation,interpretation", "observation,interpretation"),
    ("observation , interpretation,  context", "observation,interpretation,context"),
    (" observation ", "observation"),
])
def test_claim_field_lists_read_without_blanks_around_commas(raw: str, value: str) -> None:
    text = FORM_SAVE.replace("observation, interpretation, reusable_lesson", raw.replace(" ", "&#32;", 1)
                             if raw.startswith(" ") else raw)
    assert parse_page(text, SCHEMA).verifications[0]["claim_fields"] == value


@pytest.mark.parametrize("raw, value", [
    ("gpu_oom_high", "gpu_oom_high"), ("gpu oom high", "gpu_oom_high"), ("gpu _oom", "gpu_oom"),
])
def test_relation_target_page_name_reads_as_the_id(raw: str, value: str) -> None:
    assert parse_page(FORM_SAVE.replace("gpu oom high", raw), SCHEMA).relations[0]["to"] == value


def test_free_text_keeps_its_blanks_and_commas() -> None:
    assert round_trip_field("a , b,  c ") == "a , b,  c "
