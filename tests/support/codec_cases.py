"""Shared test data for the Lesson page codec tests (test_codec.py, test_codec_wiki.py).

* :data:`CONSTRUCTS` — one value per dangerous wikitext construct
  (``docs/data-contract.md#codec``), keyed by a short name used in test ids;
* :func:`field_text` — a hypothesis strategy for field values: any
  surrogate-free Unicode, biased towards wikitext syntax, combining marks,
  Hangul (syllables and conjoining jamo), control characters and noncharacters;
* :func:`record` / :func:`lesson_pages` — whole records and pages built from it;
* :func:`sample_page` — one complete page with a given value in every free-text field.
"""
from __future__ import annotations

from support.schema_dirs import SCHEMA

import unicodedata

from hypothesis import strategies as st

from gateway.domain.codec import canonical_value
from gateway.domain.model import LessonPage

#: Wikitext pieces that mean something to MediaWiki (mixed into generated text).
DANGEROUS_PIECES = (
    "|", "||", "=", "{{", "}}", "{{{", "}}}", "[[", "]]", "[", "]", "~~~", "~~~~", "~~~~~",
    "<nowiki>", "</nowiki>", "<nowiki/>", "{{#set:Confidence=high}}", "{{#subobject:x|a=b}}",
    "[[Category:X]]", "[[Lesson:other]]", "{{Lesson relation|from=a|relation=supports|to=b}}",
    "{{subst:PAGENAME}}", "{{PAGENAME}}", "{{{1}}}", "__NOTOC__", "__목차숨김__", "''", "'''",
    "* ", "# ", "; ", ": ", "= ", "== h ==", "----", " ", "\t", "\n", "\n\n", "\r\n", "\r",
    "<script>alert(1)</script>", "<b>", "</div>", "<!-- c -->", "&amp;", "&#124;", "&", "&lt;",
    "http://example.com", "https://evil.example/x?y=1", "mailto:a@b.c", "//example.com",
    "ISBN 978-3-16-148410-0", "RFC 1234", "-{ zh }-", "\u0338", "=\u0338", "e\u0301", "\u1100\u1161",
    "한국어", "🙂", "👩‍🔬", "\u200d", "\ufeff", "\u00a0", "\u3000", "\u2028", "\x00", "\x7f", "\x85",
)

#: Code points a broad alphabet should hit often: combining marks, Hangul jamo
#: (conjoining, compose under NFC), control characters and noncharacters.
SPECIAL_CHARS = st.one_of(
    st.characters(categories=["Mn", "Mc", "Me"]),
    st.characters(min_codepoint=0x1100, max_codepoint=0x11FF),
    st.characters(min_codepoint=0xA960, max_codepoint=0xA97F),
    st.characters(min_codepoint=0xD7B0, max_codepoint=0xD7FF),
    st.characters(min_codepoint=0x0, max_codepoint=0x1F),
    st.characters(min_codepoint=0x7F, max_codepoint=0x9F),
    st.sampled_from("\ufdd0\ufdef\ufffe\uffff\U0001fffe\U0010ffff"),
)


def field_text(max_size: int = 40) -> st.SearchStrategy[str]:
    """Any surrogate-free text, biased towards wikitext syntax and tricky code points."""
    piece = st.one_of(
        st.text(max_size=8),  # all of Unicode except surrogates
        st.text(alphabet=SPECIAL_CHARS, max_size=4),
        st.sampled_from(DANGEROUS_PIECES),
        st.text(alphabet=st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3), max_size=6),  # Hangul
    )
    return st.lists(piece, max_size=max_size // 4).map("".join)


def record(rec, values: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, str]]:
    """A complete record of kind ``rec`` with generated values; structured fields (a list, a page
    reference) hold their one canonical reading (:func:`gateway.domain.codec.canonical_value`)."""
    return st.fixed_dictionaries({f.name: values.map(lambda v, f=f: canonical_value(f, v)) for f in rec.fields})


def lesson_pages(values: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[LessonPage]:
    """Whole Lesson pages: one Lesson, 0-2 evidence, verification and relation records."""
    values = values or field_text()
    return st.builds(
        LessonPage,
        fields=record(SCHEMA.lesson, values),
        evidence=st.lists(record(SCHEMA.evidence, values), max_size=2).map(tuple),
        verifications=st.lists(record(SCHEMA.verification, values), max_size=2).map(tuple),
        relations=st.lists(record(SCHEMA.relation, values), max_size=2).map(tuple),
    )


#: One value per dangerous construct: each must render as itself, inject
#: nothing and read back identical after a save.
CONSTRUCTS = {
    "pipes": "a | b || c |d=e",
    "braces": "{{Lesson}} {{{title}}} }} {{ {",
    "brackets": "[[Lesson:x]] [https://example.com x] ] [",
    "signature": "signed ~~~~ and ~~~ and ~~~~~ and ~",
    "nowiki": "<nowiki>[[x]]</nowiki> <nowiki/> </nowiki>",
    "smw_set": "{{#set:Confidence=high|Lesson title=pwned}} {{#subobject:x|Relation to=Lesson:y}}",
    "category": "[[Category:X]] [[분류:Y]] [[:Category:Z]]",
    "leading_star": "* not a list",
    "leading_hash": "# not a list",
    "leading_semicolon": "; not a definition",
    "leading_colon": ": not indented",
    "leading_equals": "= not a heading =",
    "leading_rule": "---- not a rule",
    "html_tags": "<script>alert(1)</script><b>bold</b><div style=\"x\">d</div><!-- c --><br/>",
    "newlines_and_blank_lines": "line 1\nline 2\n\n\nline 5\r\nline 6\rline 7",
    "leading_trailing_spaces": "  \t spaced \t  ",
    "nfc": unicodedata.normalize("NFC", "é 한 Å"),
    "nfd": unicodedata.normalize("NFD", "é 한 Å"),
    "emoji": "🙂 👩‍🔬 🇰🇷 1️⃣",
    "korean": "한국어 메모: 캐시를 끄면 지연 시간이 30% 줄었다",
    "leading_combining_mark": "\u0338 after the equals sign",
    "entities_typed_literally": "&amp; &lt;b&gt; &#124; &nbsp; & ;",
    "magic_words": "__NOTOC__ __목차숨김__ {{PAGENAME}} {{subst:CURRENTYEAR}}",
    "external_links": "see http://example.com and mailto:a@b.c and //example.com",
    "quotes": "''italic'' '''bold''' ' single",
    "template_injection": "{{Lesson relation|from=a|relation=supports|to=b}}",
}


#: The time stamp :func:`sample_page` writes everywhere.
SAMPLE_TS = "2026-01-02T03:04:05Z"


def sample_page(lesson_id: str, value: str = "plain text", *, url: str = "", verification: bool = False,
                account: str = "S3Agent", ts: str = SAMPLE_TS) -> LessonPage:
    """A complete page with one evidence (URL ``url``), one relation (to ``codec-target``) and, with
    ``verification``, one verification record; ``value`` goes into every free-text field (title, the
    long fields, notes, source fields), ``account`` into the provenance fields, ``ts`` into every time."""
    free = {f.name for rec in SCHEMA.records for f in rec.fields if f.type in ("text", "longtext")}

    def values(rec, fixed: dict[str, str]) -> dict[str, str]:
        return {n: (value if n in free else fixed.get(n, "")) for n in rec.field_names}

    verifications = (values(SCHEMA.verification, {
        "id": "v1", "evidence_id": "e1", "evidence_digest": "sha256:" + "0" * 64, "verification_basis": "full_text",
        "source_sha256": "0" * 64, "outcome": "supports", "claim_fields": "observation",
        "verified_by": account, "verified_at": ts}),) if verification else ()
    return LessonPage(
        fields=values(SCHEMA.lesson, {"confidence": "medium", "record_origin": "lab", "author": account,
                                      "review_state": "Draft", "created_at": ts, "updated_at": ts}),
        evidence=(values(SCHEMA.evidence, {"id": "e1", "url": url, "kind": "paper", "verification_basis": "full_text",
                                           "added_by": account, "added_at": ts}),),
        verifications=verifications,
        relations=(values(SCHEMA.relation, {"from": lesson_id, "relation": "supports", "to": "codec-target",
                                            "created_by": account, "created_at": ts}),),
    )
