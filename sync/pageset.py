"""The full set of pages ``sync push`` keeps in the wiki, built from the repository.

:func:`build_page_set` assembles, for one wiki's capabilities:

1. the **schema pages** from the generator (:func:`sync.pages.render_schema_pages`):
   templates always; ``Property:`` pages only with Semantic MediaWiki and
   ``Form:`` pages only with Page Forms (the generator picks the variant that
   renders cleanly on that wiki);
2. the **hand-written pages** listed in ``schema/pages/manifest.toml``
   (``MediaWiki:Common.js``, ``MediaWiki:Common.css``, the home page, the help
   pages), each with its ``s3rm:if`` variant blocks selected for the wiki and
   its ``%%S3RM_MCP_URL%%`` placeholder filled from ``S3RM_MCP_PUBLIC_URL``
   (see :mod:`sync.variants`);
3. ``MediaWiki:Mainpage``, whose text is the home page's title (연구 메모리),
   so the wiki's main-page link points at it.
4. the **interface messages** of ``schema/pages/messages.toml`` whose capability the
   wiki has (:func:`interface_messages`; e.g. Page Forms' save-failure message in plain
   Korean, ``docs/browser.md#smw-page-forms-behaviours``).

Every title is canonical English (``Template:``, ``Property:``, ``Form:``,
``MediaWiki:``, ``Help:``); :mod:`sync.wikisite` maps them onto the wiki's
localized namespaces. Each page has a ``kind`` which fixes its edit summary.

Pure apart from reading the source files; no network.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from gateway.config.schema import Schema, SchemaError, load_schema
from sync import variants
from sync.pages import WikiCapabilities, render_schema_pages
from gateway.config.loader import DEFAULT_SCHEMA_DIR
from sync.errors import SyncConfigError, SyncError

#: Environment variable holding the public MCP URL the home page advertises.
MCP_URL_ENV = "S3RM_MCP_PUBLIC_URL"
MAIN_PAGE_MESSAGE = "MediaWiki:Mainpage"

#: Edit summary per page kind (fixed, so the history shows what sync did).
SUMMARIES: Mapping[str, str] = {
    "property": "S3RM sync: schema property",
    "module": "S3RM sync: Lua module",
    "template": "S3RM sync: template",
    "form": "S3RM sync: form",
    "site-script": "S3RM sync: site script",
    "site-style": "S3RM sync: site stylesheet",
    "interface": "S3RM sync: interface message",
    "home": "S3RM sync: home page",
    "help": "S3RM sync: help page",
    "page": "S3RM sync: page",
}


@dataclass(frozen=True)
class DesiredPage:
    """One page as the repository wants it.

    Attributes:
        title: canonical English title, e.g. ``Template:Lesson``.
        text: the full text to save (before MediaWiki's save normalisation).
        kind: one of :data:`SUMMARIES`' keys.
        source: where the text comes from (for messages), e.g. ``schema/pages/home.wiki``.
    """

    title: str
    text: str
    kind: str
    source: str = ""

    @property
    def namespace(self) -> str:
        """Canonical namespace name the title asks for (``""`` for the main namespace)."""
        return canonical_namespace(self.title)

    @property
    def summary(self) -> str:
        """The fixed edit summary of this page's kind."""
        return SUMMARIES[self.kind]


#: Canonical namespace names our titles may use (core + the extension namespaces).
KNOWN_NAMESPACES = frozenset({
    "Talk", "User", "User talk", "Project", "Project talk", "File", "File talk", "MediaWiki",
    "MediaWiki talk", "Template", "Template talk", "Help", "Help talk", "Category", "Category talk",
    "Property", "Property talk", "Concept", "Form", "Form talk", "Module", "Module talk", "Lesson", "Lesson talk",
})


def canonical_namespace(title: str) -> str:
    """The canonical namespace a title addresses (``Property:X`` → ``Property``; ``연구 메모리`` → ``""``)."""
    prefix, sep, _ = title.partition(":")
    prefix = " ".join(prefix.replace("_", " ").split())
    if sep:
        for name in KNOWN_NAMESPACES:
            if name.casefold() == prefix.casefold():
                return name
    return ""


def kind_of(title: str, *, main_page: bool = False) -> str:
    """The page kind of ``title`` (decides the edit summary)."""
    if main_page:
        return "home"
    ns = canonical_namespace(title)
    lower = title.lower()
    if ns == "MediaWiki":
        if lower.endswith(".js"):
            return "site-script"
        if lower.endswith(".css"):
            return "site-style"
        return "interface"
    return {"Property": "property", "Template": "template", "Form": "form", "Module": "module",
            "Help": "help"}.get(ns, "page")


SchemaRenderer = Callable[[Schema, frozenset[str]], Mapping[str, str]]


def generated_schema_pages(schema: Schema, capabilities: frozenset[str]) -> Mapping[str, str]:
    """Title → wikitext of the generated schema pages for ``capabilities`` (``smw``, ``pageforms``, ``scribunto``).

    Raises:
        SyncError: the schema source is inconsistent.
    """
    caps = WikiCapabilities(smw="smw" in capabilities, page_forms="pageforms" in capabilities,
                            scribunto="scribunto" in capabilities)
    try:
        return render_schema_pages(schema, caps)
    except SchemaError as exc:
        raise SyncError(f"cannot generate the schema pages: {exc}") from None


def build_page_set(capabilities: Iterable[str], *, placeholders: Mapping[str, str], root: Path | None = None,
                   schema: Schema | None = None,
                   render_schema: SchemaRenderer | None = None) -> list[DesiredPage]:
    """Every page sync keeps, in push order: schema pages, hand-written pages, ``MediaWiki:Mainpage``.

    Args:
        capabilities: names from :data:`sync.variants.CAPABILITIES` the wiki has.
        root: the schema folder (default ``<repo>/schema``; the CLI passes ``S3RM_SCHEMA_DIR``).
        schema: the loaded schema source (default: ``<root>/lesson.toml``).
        placeholders: values for ``%%NAME%%`` tokens (:func:`placeholder_values`).
        render_schema: generator override (tests); default :func:`generated_schema_pages`.

    Raises:
        SyncError: a source is missing or malformed, or two sources claim one title.
    """
    caps = frozenset(capabilities)
    root = Path(root) if root else DEFAULT_SCHEMA_DIR
    if schema is None:
        try:
            schema = load_schema(root / "lesson.toml")
        except (SchemaError, OSError) as exc:
            raise SyncError(f"cannot load the schema source {root / 'lesson.toml'}: {exc}") from None
    values = placeholders
    pages: list[DesiredPage] = []
    for title, text in sorted((render_schema or generated_schema_pages)(schema, caps).items(),
                              key=lambda item: (_schema_order(item[0]), item[0])):
        pages.append(DesiredPage(title, text, kind_of(title), "generated from schema/lesson.toml"))
    try:
        manifest = variants.load_manifest(root)
    except FileNotFoundError:
        manifest = []
    except (ValueError, OSError) as exc:
        raise SyncError(f"cannot read the page manifest: {exc}") from None
    main_title = None
    for source in manifest:
        rel = _relative(source.path, root)
        try:
            text = variants.render_page(source.read(), caps, values)
        except variants.VariantError as exc:
            raise SyncError(f"{rel}: {exc}") from None
        except OSError as exc:
            raise SyncError(f"cannot read {rel}: {exc}") from None
        pages.append(DesiredPage(source.title, text, kind_of(source.title, main_page=source.main_page), rel))
        if source.main_page:
            main_title = source.title
    if main_title:
        pages.append(DesiredPage(MAIN_PAGE_MESSAGE, main_title, "interface",
                                 "the manifest's main_page entry"))
    pages.extend(interface_messages(root, caps))
    _reject_duplicates(pages)
    return pages


MESSAGES_FILE = "pages/messages.toml"


def interface_messages(root: Path, capabilities: Iterable[str]) -> list[DesiredPage]:
    """``MediaWiki:<name>`` pages from ``<root>/pages/messages.toml`` whose ``requires`` is in ``capabilities``.

    Raises:
        SyncError: the file is malformed (an entry without name or text, an unknown capability).
    """
    path = Path(root) / MESSAGES_FILE
    if not path.is_file():
        return []
    try:
        entries = tomllib.loads(path.read_text(encoding="utf-8")).get("message", [])
    except (tomllib.TOMLDecodeError, OSError) as exc:
        raise SyncError(f"cannot read {_relative(path, root)}: {exc}") from None
    caps = frozenset(capabilities)
    out = []
    for entry in entries:
        name, text, needs = entry.get("name"), entry.get("text"), entry.get("requires")
        if not isinstance(name, str) or not name or not isinstance(text, str) or not text.strip():
            raise SyncError(f"{_relative(path, root)}: every [[message]] needs a name and a text")
        if needs is not None and needs not in variants.CAPABILITIES:
            raise SyncError(f"{_relative(path, root)}: {name}: unknown capability {needs!r}")
        if needs is None or needs in caps:
            out.append(DesiredPage(f"MediaWiki:{name}", text.strip(), "interface", _relative(path, root)))
    return out


def placeholder_values(url: str) -> dict[str, str]:
    """Placeholder values for the public MCP URL ``url`` (``S3RM_MCP_URL`` ← ``S3RM_MCP_PUBLIC_URL``;
    the CLI looks it up in the environment, else the dev stack's ``.dev/stack.env``); ``""`` → ``{}``.

    Raises:
        SyncConfigError: the URL is not a plain ``http(s)://host[:port]/path`` or an absolute path.
    """
    url = url.strip()
    if not url:
        return {}
    try:
        variants.substitute_placeholders("%%S3RM_MCP_URL%%", {"S3RM_MCP_URL": url})
    except variants.VariantError as exc:
        raise SyncConfigError(f"{MCP_URL_ENV}={url!r}: {exc}") from None
    return {"S3RM_MCP_URL": url}


def _schema_order(title: str) -> int:
    # a module before the templates that invoke it
    return {"Property": 0, "Module": 1, "Template": 2, "Form": 3}.get(canonical_namespace(title), 4)


def _relative(path: Path, root: Path) -> str:
    try:
        return str(Path("schema") / Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def _reject_duplicates(pages: list[DesiredPage]) -> None:
    seen: dict[str, DesiredPage] = {}
    for page in pages:
        folded = " ".join(page.title.replace("_", " ").split())
        folded = folded[:1].upper() + folded[1:]
        if folded in seen:
            raise SyncError(f"two sources write {page.title}: {seen[folded].source} and {page.source}")
        seen[folded] = page
