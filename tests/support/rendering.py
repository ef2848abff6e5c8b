"""Saving a wiki page, and what a reader then sees of it: its rendered text, and whether a value shows in it.

Shared by the tests that render Lesson pages on a real wiki
(``tests/gateway/domain/test_codec_wiki.py``, ``tests/sync/test_templates_under_smw.py``).
"""
from __future__ import annotations

import html.parser


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


def save(site, title: str, text: str, summary: str = "test") -> None:
    """Save ``text`` as ``site``'s account (mwclient); fails the test on any API error."""
    result = site.post("edit", title=title, text=text, summary=summary, token=site.get_token("csrf"),
                       formatversion=2)
    assert result["edit"]["result"] == "Success", result
