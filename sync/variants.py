"""Hand-written wiki pages: the page manifest and capability variants.

Hand-written pages (the home page, the Korean help pages, the site script and
stylesheet) live under ``schema/`` beside the generated ones.
``schema/pages/manifest.toml`` maps each source file to its canonical wiki
title; ``schema/pages/README.md`` documents the layout. ``sync push`` reads the
manifest with :func:`load_manifest` and turns each source into the text to
save with :func:`render_page`.

Variant blocks
--------------
A page that must look different on a wiki with or without an extension marks
the alternatives with HTML comments, each on its own line::

    <!-- s3rm:if smw -->
    ... text for wikis with Semantic MediaWiki ...
    <!-- s3rm:else -->
    ... text for plain MediaWiki ...
    <!-- s3rm:end -->

``s3rm:if !pageforms`` negates a condition, ``s3rm:else`` is optional and
blocks may nest. Capability names are the keys of :data:`CAPABILITIES`; an
unknown name is an error, so a typo never silently selects a branch. The
marker lines themselves never reach the wiki.

Placeholders
------------
``%%NAME%%`` tokens (upper case, digits, underscores) are replaced by values
that sync takes from its configuration, HTML-escaped so they are safe inside
attribute values. ``%%S3RM_MCP_URL%%`` (home page, site script) is filled from
``S3RM_MCP_PUBLIC_URL``; a token left unreplaced is harmless, since the site
script then uses the same-origin ``/mcp``. ``%%S3RM_MCP_DOC_URL%%`` (help
pages' set-up commands) is derived from it by :func:`render_page`.
"""
from __future__ import annotations

import html
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from sync.errors import SyncError

__all__ = [
    "CAPABILITIES",
    "PLACEHOLDERS",
    "PageSource",
    "VariantError",
    "load_manifest",
    "render_page",
    "select_variants",
    "substitute_placeholders",
]

#: Capabilities a variant block may test, with what each means.
CAPABILITIES: Mapping[str, str] = {
    "smw": "Semantic MediaWiki is installed (#ask, the ask API)",
    "pageforms": "Page Forms is installed (#forminput, Special:FormEdit)",
    "scribunto": "Scribunto is installed (#invoke, Module: pages)",
}

#: Placeholders sync fills, with where the value comes from.
PLACEHOLDERS: Mapping[str, str] = {
    "S3RM_MCP_URL": "S3RM_MCP_PUBLIC_URL (the public /mcp endpoint); left as is when unset, "
                    "which the site script reads as same-origin /mcp",
    "S3RM_MCP_DOC_URL": "derived, never passed in: S3RM_MCP_URL when it is an absolute URL, "
                        "else DOC_URL_FALLBACK; used in help pages' set-up commands",
}

#: What help pages show as the MCP address when no absolute public URL is configured.
DOC_URL_FALLBACK = "https://wiki.example.org/mcp"

_MARKER = re.compile(r"^[ \t]*<!--\s*s3rm:(if|else|end)\b\s*(.*?)\s*-->[ \t]*$")
_CONDITION = re.compile(r"^(!?)([a-z][a-z0-9_]*)$")
_PLACEHOLDER = re.compile(r"%%([A-Z][A-Z0-9_]*)%%")
# Values must be plain URLs: they land in an HTML attribute and in a JavaScript string.
_URL_RULE = r"^(?:https?://[A-Za-z0-9.\-]+(?::[0-9]{1,5})?|https?://\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?)?/[A-Za-z0-9._~/\-]*$"
_PLACEHOLDER_VALUE = {"S3RM_MCP_URL": re.compile(_URL_RULE), "S3RM_MCP_DOC_URL": re.compile(_URL_RULE)}


class VariantError(SyncError, ValueError):
    """A page's variant markers or placeholders are malformed.

    ``line`` is the 1-based line number of the offending marker (0 when the
    problem is not tied to a line, e.g. an unclosed block at the end).
    """

    def __init__(self, message: str, line: int = 0):
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line


@dataclass(frozen=True)
class PageSource:
    """One hand-written page as listed in ``schema/pages/manifest.toml``.

    Attributes:
        title: canonical wiki title (English namespace names, e.g. ``Help:…``).
        path: absolute path of the source file.
        content_model: ``wikitext``, ``javascript`` or ``css``.
        main_page: True for the page sync also sets as ``MediaWiki:Mainpage``.
    """

    title: str
    path: Path
    content_model: str = "wikitext"
    main_page: bool = False

    def read(self) -> str:
        """The source text (UTF-8)."""
        return self.path.read_text(encoding="utf-8")


def select_variants(text: str, capabilities: Iterable[str]) -> str:
    """Keep the branches of ``s3rm:if`` blocks that match ``capabilities``.

    ``capabilities`` lists the names the target wiki has (e.g. ``{"smw"}``).
    Marker lines are removed; every other line is kept byte for byte,
    including its line ending. Pure: no I/O.

    Raises :class:`VariantError` for an unknown capability, an ``else`` or
    ``end`` without ``if``, a second ``else`` in one block, or an unclosed
    block.

    >>> select_variants("a\\n<!-- s3rm:if smw -->\\nB\\n<!-- s3rm:else -->\\nC\\n<!-- s3rm:end -->\\n", {"smw"})
    'a\\nB\\n'
    """
    have = set(capabilities)
    unknown = have - set(CAPABILITIES)
    if unknown:
        raise VariantError(f"unknown capability {sorted(unknown)[0]!r}")
    out: list[str] = []
    # stack entries: [condition_true, in_else, parent_active, start_line]
    stack: list[list] = []
    active = True
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        match = _MARKER.match(line.rstrip("\r\n"))
        if match is None:
            if "s3rm:if" in line or "s3rm:else" in line or "s3rm:end" in line:
                raise VariantError("a variant marker must stand alone on its line", number)
            if active:
                out.append(line)
            continue
        verb, argument = match.groups()
        if verb == "if":
            cond = _CONDITION.match(argument)
            if cond is None:
                raise VariantError(f"bad condition {argument!r} (use a name or !name)", number)
            negate, name = cond.groups()
            if name not in CAPABILITIES:
                raise VariantError(f"unknown capability {name!r}", number)
            truth = (name in have) != bool(negate)
            stack.append([truth, False, active, number])
            active = active and truth
        elif verb == "else":
            if argument:
                raise VariantError("s3rm:else takes no argument", number)
            if not stack:
                raise VariantError("s3rm:else without s3rm:if", number)
            top = stack[-1]
            if top[1]:
                raise VariantError("second s3rm:else in one block", number)
            top[1] = True
            active = top[2] and not top[0]
        else:
            if argument:
                raise VariantError("s3rm:end takes no argument", number)
            if not stack:
                raise VariantError("s3rm:end without s3rm:if", number)
            active = stack.pop()[2]
    if stack:
        raise VariantError(f"s3rm:if opened on line {stack[-1][3]} is never closed")
    return "".join(out)


def substitute_placeholders(text: str, values: Mapping[str, str]) -> str:
    """Replace ``%%NAME%%`` tokens whose NAME is in ``values`` (HTML-escaped).

    Tokens with no value are left as they are. Raises :class:`VariantError`
    for a token that is not a known placeholder (see :data:`PLACEHOLDERS`) or a
    value of the wrong shape (``S3RM_MCP_URL`` must be an ``http(s)://host[:port]/path``
    URL or an absolute path without query, quotes or spaces, since it lands in
    both an HTML attribute and a JavaScript string).
    """

    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name not in PLACEHOLDERS:
            raise VariantError(f"unknown placeholder %%{name}%%")
        if name not in values or values[name] is None or values[name] == "":
            return match.group(0)
        value = str(values[name])
        rule = _PLACEHOLDER_VALUE.get(name)
        if rule is not None and not rule.match(value):
            raise VariantError(f"value for %%{name}%% is not a plain http(s) URL or absolute path")
        return html.escape(value, quote=True)

    return _PLACEHOLDER.sub(replace, text)


def render_page(text: str, capabilities: Iterable[str], values: Mapping[str, str] | None = None) -> str:
    """The text sync saves: variants selected for ``capabilities``, then placeholders filled.

    ``values`` holds ``S3RM_MCP_URL`` (or nothing); ``S3RM_MCP_DOC_URL`` is
    derived here: the same URL when it is absolute, else :data:`DOC_URL_FALLBACK`.
    """
    filled = dict(values or {})
    filled.pop("S3RM_MCP_DOC_URL", None)
    url = str(filled.get("S3RM_MCP_URL") or "")
    filled["S3RM_MCP_DOC_URL"] = url if url.startswith(("http://", "https://")) else DOC_URL_FALLBACK
    return substitute_placeholders(select_variants(text, capabilities), filled)


def load_manifest(schema_dir: Path | str) -> list[PageSource]:
    """Read ``<schema_dir>/pages/manifest.toml`` into :class:`PageSource` values, manifest order.

    File paths in the manifest are relative to ``schema_dir``. Raises
    ``ValueError`` for a missing file, a duplicate title, an unknown content
    model or more than one main page.
    """
    root = Path(schema_dir)
    manifest = root / "pages" / "manifest.toml"
    data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    pages: list[PageSource] = []
    seen: set[str] = set()
    for entry in data.get("page", []):
        title = str(entry["title"]).strip()
        path = (root / entry["file"]).resolve()
        model = entry.get("content_model", "wikitext")
        if model not in ("wikitext", "javascript", "css"):
            raise ValueError(f"{manifest}: {title}: unknown content_model {model!r}")
        if title in seen:
            raise ValueError(f"{manifest}: duplicate title {title!r}")
        if not path.is_file():
            raise ValueError(f"{manifest}: {title}: file {entry['file']!r} does not exist")
        seen.add(title)
        pages.append(PageSource(title=title, path=path, content_model=model, main_page=bool(entry.get("main_page"))))
    if sum(p.main_page for p in pages) > 1:
        raise ValueError(f"{manifest}: more than one page has main_page = true")
    return pages
