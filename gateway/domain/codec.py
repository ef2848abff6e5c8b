"""Lesson page codec: wikitext ⇄ :class:`~gateway.domain.model.LessonPage`.

Page shape (``docs/data-contract.md#templates``; values: ``docs/data-contract.md#codec``):
exactly one ``{{Lesson|…}}`` call followed by one
``{{Lesson evidence|…}}`` per evidence, one ``{{Lesson evidence verification|…}}``
per verification record and one ``{{Lesson relation|…}}`` per relation, each
parameter on its own line, in schema order, every parameter always written.

Values are data, not wikitext. :func:`encode_value` turns any Unicode string
into wikitext that (a) renders as exactly that text, (b) cannot inject a
template, parser function, link, category, external link, signature, magic
word, list, heading or HTML, and (c) survives MediaWiki's save path unchanged:
the pre-save transform (signatures, ``subst:``, pipe trick, CRLF) and the
NFC normalisation MediaWiki applies to all submitted text.
:func:`decode_value` is its exact inverse, so ``decode(encode(s)) == s`` for
every string without lone surrogates (which are rejected: they cannot be sent
as UTF-8).

Normalisation policy: none for text. The codec never trims, re-cases or
re-normalises a text value; leading/trailing whitespace, NFD sequences, blank
lines and control characters all come back byte-for-byte. Only the *encoding*
in wikitext changes, using character references MediaWiki passes through
verbatim. Two structured fields have one canonical reading
(:func:`canonical_value`): a ``claim_fields`` list without blanks around its
commas, and a relation's page reference with ``_`` for spaces.

What is encoded (everything else stays literal so the page stays readable):
``& < >`` always; ``| { } [ ]`` always (``|`` as the hex ``&#x7C;``, never the decimal
``&#124;`` that Semantic MediaWiki turns back into a pipe); line breaks, tabs and other control
or non-characters as numeric references; ``~``, ``'`` and ``_`` when they
touch a twin (signatures, bold/italic, ``__MAGIC__``); the ``:`` after a URL
scheme name (free external links); the first character when it is one of
`` *#:;=-``, whitespace or a combining character (it would compose with
the ``=`` before the value under NFC), and trailing whitespace (MediaWiki
trims named parameters); combining marks, conjoining jamo and NFC-unstable characters
when the value is not already in NFC.
"""
from __future__ import annotations

import html.entities
import re
import unicodedata

import mwparserfromhell
from mwparserfromhell.nodes import Template, Text, Comment

from gateway.core.errors import GatewayError
from gateway.domain.model import LessonPage
from gateway.config.schema import Schema


class PageFormatError(GatewayError, ValueError):
    """The wikitext is not a well-formed Lesson page (message says what is wrong)."""


# URL schemes MediaWiki 1.39 recognises for free external links ($wgUrlProtocols).
# Matched without a word boundary on purpose: MediaWiki looks for the boundary
# in the *encoded* text, where a reference such as "&#95;" ends in ";" and so
# creates one ("__http://x" is not a link, "&#95;&#95;http://x" would be).
_SCHEMES = (
    "bitcoin|ftp|ftps|geo|git|gopher|http|https|irc|ircs|magnet|mailto|matrix|mms|news|nntp|"
    "redis|sftp|sip|sips|sms|ssh|svn|tel|telnet|urn|worldwind|xmpp"
)
_SCHEME_COLON = re.compile(rf"(?i)(?:{_SCHEMES}):")
# "|" is written in hex: Semantic MediaWiki turns every decimal "&#124;" of a parsed page back
# into "|" before MediaWiki splits table cells (LinksEncoder::removeLinkObfuscation, run by
# InTextAnnotationParser on InternalParseBeforeLinks), so a decimal reference would split the
# Lesson view's table rows (docs/browser.md#smw-page-forms-behaviours). decode_value reads both.
_ALWAYS = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#x7C;", "{": "&#123;", "}": "&#125;",
           "[": "&#91;", "]": "&#93;"}
_TWIN = {"~", "'", "_"}
_LEADING = set(" *#:;=-")
_PHP_TRIM = set(" \t\n\r\0\x0b")
#: Named character references MediaWiki's parser resolves in wikitext (core ``Sanitizer``,
#: ``decodeCharReferences`` / ``normalizeCharReferences``, the page view): a name followed by its
#: ``;`` that is in HTML5's list, plus MediaWiki's two right-to-left spellings of ``rlm``. HTML5's
#: legacy forms without ``;`` are not references in wikitext (``&copy2024;`` renders as typed).
#: Name (without ``&`` and ``;``) → text; ``Module:S3RM entities`` is generated from it
#: (``docs/data-contract.md#codec``).
NAMED_REFERENCES: dict[str, str] = {
    **{name[:-1]: text for name, text in html.entities.html5.items() if name.endswith(";")},
    "\u05e8\u05dc\u05de": "\u200f",  # רלמ
    "\u0631\u0644\u0645": "\u200f",  # رلم
}
# A reference as MediaWiki delimits one (Sanitizer::CHAR_REFS_REGEX): a name is any run of ASCII
# letters, digits and non-ASCII characters up to ";". Numeric forms keep the codec's own limits.
_ENTITY = re.compile(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z0-9\u0080-\U0010ffff]+);")


def _ref(ch: str) -> str:
    return f"&#{ord(ch)};"


def _is_control_or_nonchar(ch: str) -> bool:
    cp = ord(ch)
    if cp < 0x20 or 0x7F <= cp <= 0x9F:
        return True
    if 0xFDD0 <= cp <= 0xFDEF or (cp & 0xFFFE) == 0xFFFE:
        return True
    return False


def _nfc_sensitive(ch: str) -> bool:
    cp = ord(ch)
    if unicodedata.category(ch).startswith("M"):
        return True
    if 0x1100 <= cp <= 0x11FF or 0xA960 <= cp <= 0xA97F or 0xD7B0 <= cp <= 0xD7FF:
        return True  # conjoining Hangul jamo compose under NFC
    return unicodedata.normalize("NFC", ch) != ch


def encode_value(value: str, *, url: bool = False) -> str:
    """Encode a field value as inert wikitext; inverse of :func:`decode_value`.

    Args:
        value: any Unicode string (may be empty).
        url: the value is a URL field (schema type ``url``, validated as
            http/https on input): its scheme colon stays literal so the
            template renders it as an external link. Everything else is
            still encoded.
    Returns:
        Wikitext on a single line that renders as ``value``.
    Raises:
        ValueError: ``value`` contains a lone surrogate (not representable in UTF-8).
    """
    if not value:
        return ""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text contains a lone surrogate code point, which cannot be stored") from None
    not_nfc = unicodedata.normalize("NFC", value) != value
    scheme_colons = set() if url else {m.end() - 1 for m in _SCHEME_COLON.finditer(value)}
    last = len(value) - 1
    trailing_from = len(value.rstrip("".join(_PHP_TRIM)))
    out = []
    for i, ch in enumerate(value):
        if ch in _ALWAYS:
            out.append(_ALWAYS[ch])
        elif _is_control_or_nonchar(ch):
            out.append(_ref(ch))
        elif i == 0 and (ch in _LEADING or ch.isspace() or _nfc_sensitive(ch)):
            # a leading combining mark would compose with the "=" before the
            # value under NFC ("=" + U+0338 becomes "≠") and break the parameter
            out.append(_ref(ch))
        elif i >= trailing_from:
            out.append(_ref(ch))
        elif ch in _TWIN and ((i > 0 and value[i - 1] == ch) or (i < last and value[i + 1] == ch)):
            out.append(_ref(ch))
        elif i in scheme_colons:
            out.append(_ref(ch))
        elif not_nfc and _nfc_sensitive(ch):
            out.append(_ref(ch))
        else:
            out.append(ch)
    return "".join(out)


def _entity(match: re.Match) -> str:
    body = match.group(1)
    if body[0] == "#":
        cp = int(body[2:], 16) if body[1] in "xX" else int(body[1:])
        if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
            return match.group(0)
        return chr(cp)
    return NAMED_REFERENCES.get(body, match.group(0))


def decode_value(raw: str) -> str:
    """Decode a template parameter's raw wikitext into the stored value.

    The raw text is first trimmed the way MediaWiki trims named parameters
    (PHP ``trim``), then character references are resolved exactly (numeric
    references map to their code point, named ones through
    :data:`NAMED_REFERENCES`: only a name with its ``;`` that MediaWiki's
    renderer resolves, ``docs/data-contract.md#codec``).
    Text a browser editor typed without encoding is returned as typed.
    """
    stripped = raw.strip("".join(_PHP_TRIM))
    if "&" not in stripped:
        return stripped
    return _ENTITY.sub(_entity, stripped)


def _norm_template_name(name: str) -> str:
    name = name.strip().replace("_", " ")
    for prefix in ("template:", "틀:"):
        if name.lower().startswith(prefix):
            name = name[len(prefix):].strip()
            break
    return name[:1].upper() + name[1:]


def parse_page(wikitext: str, schema: Schema) -> LessonPage:
    """Parse a Lesson page into a :class:`LessonPage`.

    Accepts pages written by this codec and by Page Forms (any parameter order,
    missing optional parameters, ``Template:``/``틀:`` prefixes, comments).

    Raises:
        PageFormatError: no or several ``{{Lesson}}`` calls, a positional or
            unknown parameter, a parameter given twice, or a record template
            placed before the ``{{Lesson}}`` call.
    """
    code = mwparserfromhell.parse(wikitext)
    lesson = None
    records: dict[str, list[dict[str, str]]] = {"evidence": [], "verification": [], "relation": []}
    extra: list[str] = []
    for node in code.nodes:
        if isinstance(node, Template):
            rec = schema.record_by_template(_norm_template_name(str(node.name)))
            if rec is not None:
                values = _params(node, rec)
                if rec.kind == "lesson":
                    if lesson is not None:
                        raise PageFormatError("the page holds more than one {{Lesson}} call")
                    lesson = values
                else:
                    if lesson is None:
                        raise PageFormatError(f"{{{{{rec.template}}}}} appears before the {{{{Lesson}}}} call")
                    records[rec.kind].append(values)
                continue
        if isinstance(node, Comment):
            continue
        text = str(node)
        if isinstance(node, Text) and not text.strip():
            continue
        extra.append(text)
    if lesson is None:
        raise PageFormatError("the page holds no {{Lesson}} call")
    return LessonPage(
        fields=lesson,
        evidence=tuple(records["evidence"]),
        verifications=tuple(records["verification"]),
        relations=tuple(records["relation"]),
        extra_wikitext="".join(extra).strip(),
    )


def _params(node: Template, rec) -> dict[str, str]:
    allowed = set(rec.field_names)
    values = {name: "" for name in rec.field_names}
    seen = set()
    for param in node.params:
        if not param.showkey:
            if str(param.value).strip():
                raise PageFormatError(f"{{{{{rec.template}}}}} has a positional parameter")
            continue
        key = str(param.name).strip()
        if key not in allowed:
            raise PageFormatError(f"{{{{{rec.template}}}}} has an unknown parameter {key!r}")
        if key in seen:
            raise PageFormatError(f"{{{{{rec.template}}}}} sets {key!r} twice")
        seen.add(key)
        values[key] = canonical_value(rec.field(key), decode_value(str(param.value)))
    return values


_LIST_SPLIT = re.compile(r"[ \t]*,[ \t]*")
_TITLE_SPACES = re.compile(r"[ _]+")


def canonical_value(field, value: str) -> str:
    """The one reading of a decoded structured value (``docs/data-contract.md#codec``).

    Free text is never touched. Two field kinds have equivalent spellings that
    Page Forms or MediaWiki produce, and read as one value:

    * an ``enum_list`` (``claim_fields``): Page Forms joins a ``list`` with
      ``"<delimiter> "`` (``observation, interpretation``); the items are read
      without the blanks around each comma, as ``observation,interpretation``;
    * a page reference (``smw_type = "Page"``: a relation's ``from``/``to``):
      a page name with spaces names the same page as the id with underscores
      (MediaWiki titles treat ``_`` and space alike; Page Forms' namespace
      picker offers ``gpu oom high`` for ``Lesson:gpu_oom_high``), so a value
      holding a space is read as that id. Values without a space are left as
      they are.
    """
    if not value:
        return value
    if field.type == "enum_list":
        return ",".join(_LIST_SPLIT.split(value.strip(" \t")))
    if field.smw_type == "Page" and " " in value:
        return _TITLE_SPACES.sub("_", value).strip("_")
    return value


def _call(rec, values: dict[str, str]) -> str:
    lines = ["{{" + rec.template]
    lines.extend(f"|{f.name}={encode_value(values.get(f.name, ''), url=f.type == 'url')}" for f in rec.fields)
    lines.append("}}")
    return "\n".join(lines)


def serialize_page(page: LessonPage, schema: Schema) -> str:
    """Serialise a :class:`LessonPage` to canonical wikitext (deterministic).

    Unknown keys in a record are rejected with ValueError rather than dropped.
    Any ``extra_wikitext`` the page carried is kept after the records.

    Raises:
        ValueError: unknown field names, or a value with a lone surrogate.
    """
    parts = []
    for rec, items in (
        (schema.lesson, (page.fields,)),
        (schema.evidence, page.evidence),
        (schema.verification, page.verifications),
        (schema.relation, page.relations),
    ):
        for values in items:
            unknown = set(values) - set(rec.field_names)
            if unknown:
                raise ValueError(f"{rec.kind} has unknown fields {sorted(unknown)}")
            parts.append(_call(rec, values))
    if page.extra_wikitext:
        parts.append(page.extra_wikitext)
    return "\n".join(parts) + "\n"
