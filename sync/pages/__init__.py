"""Wiki pages generated from ``schema/lesson.toml``: properties, templates, forms.

Public API (used by ``s3rm schema generate`` and ``sync push``)::

    pages = render_schema_pages(schema, WikiCapabilities(smw=False, page_forms=False))
    # {"Template:Lesson": "<includeonly>…", …}   canonical English titles → wikitext

Variants (``docs/data-contract.md#wiki-capabilities``: the dev wiki has neither SMW nor Page Forms):

* ``smw`` off — no ``#set`` / ``#subobject`` in templates, no ``Property:`` pages
  (the namespace would not exist; ``[[Has type::…]]`` would become a red link);
* ``page_forms`` off — no ``Form:`` page and no ``S3RM label …`` mapping
  templates (only forms use them);
* ``scribunto`` off — no ``Module:S3RM values`` (nor the ``Module:S3RM entities``
  table it loads); SMW annotations are plain
  ``#set`` / ``#subobject`` calls (``docs/browser.md#values-in-smw``).

The files committed under ``schema/`` are the full variant. Returned wikitext
has no trailing newline (MediaWiki trims it on save), is NFC-normalised and
uses LF line ends, so it compares equal to what the wiki stores.
"""
from __future__ import annotations

import unicodedata
from pathlib import Path

from gateway.config.schema import Schema

from .wikitext import WikiCapabilities, banner_template
from .forms import BROWSER_FILLED, render_form_pages
from .properties import render_property_pages
from .templates import VALUES_MODULE, render_template_pages
from .entities import ENTITIES_MODULE, render_entities_module

__all__ = ["WikiCapabilities", "render_schema_pages", "page_relpath", "title_for_relpath", "PAGE_DIRS",
           "BROWSER_FILLED", "banner_template"]

#: Canonical namespace → folder under schema/.
PAGE_DIRS = {"Property": "Properties", "Template": "Templates", "Form": "Forms", "Module": "Modules"}
#: File name ending per folder (Lua modules are ``.lua``, everything else ``.wiki``).
_SUFFIX = {"Modules": ".lua"}


def render_module_pages() -> dict[str, str]:
    """``Module:S3RM values`` → its Lua source (``sync/pages/values.lua``), and
    ``Module:S3RM entities`` → the named-reference table it loads (:mod:`.entities`)."""
    source = (Path(__file__).with_name("values.lua")).read_text(encoding="utf-8")
    return {f"Module:{VALUES_MODULE}": source, f"Module:{ENTITIES_MODULE}": render_entities_module()}


def render_schema_pages(schema: Schema, capabilities: WikiCapabilities) -> dict[str, str]:
    """Canonical page title → wikitext for a wiki with the given capabilities, sorted by title.

    Raises SchemaError when the schema is inconsistent (e.g. a property with two types).
    """
    pages: dict[str, str] = {}
    if capabilities.smw:
        pages.update(render_property_pages(schema))
    pages.update(render_template_pages(schema, capabilities))
    if capabilities.page_forms:
        pages.update(render_form_pages(schema))
    if capabilities.scribunto:
        pages.update(render_module_pages())
    return {title: _normalise(text) for title, text in sorted(pages.items())}


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n"))
    return "\n".join(line.rstrip() for line in text.split("\n")).rstrip()


def page_relpath(title: str) -> str:
    """``"Template:Lesson evidence"`` → ``"Templates/Lesson evidence.wiki"`` (relative to schema/).

    ``Module:`` pages end in ``.lua``. Raises ValueError for titles outside
    Property/Template/Form/Module or containing "/".
    """
    ns, sep, name = title.partition(":")
    if not sep or ns not in PAGE_DIRS or not name or "/" in name:
        raise ValueError(f"not a generated schema page title: {title!r}")
    folder = PAGE_DIRS[ns]
    return f"{folder}/{name}{_SUFFIX.get(folder, '.wiki')}"


def title_for_relpath(relpath: str) -> str:
    """Inverse of :func:`page_relpath`; raises ValueError for other paths."""
    folder, sep, filename = relpath.partition("/")
    inverse = {v: k for k, v in PAGE_DIRS.items()}
    suffix = _SUFFIX.get(folder, ".wiki")
    if not sep or folder not in inverse or not filename.endswith(suffix) or "/" in filename:
        raise ValueError(f"not a generated schema page path: {relpath!r}")
    return f"{inverse[folder]}:{filename[:-len(suffix)]}"
