"""Shared pieces of the generated wiki pages: capabilities, banner, escaping, enum labels.

Contract: ``docs/data-contract.md#language`` (canonical English namespace
names in code) and ``docs/browser.md#synced-pages`` (the "synchronised from
the repository" banner).
"""
from __future__ import annotations

from dataclasses import dataclass

from gateway.config.schema import EnumDef, FieldDef, Schema

#: Name of the banner template every synced page carries (docs/browser.md#synced-pages).
DEFAULT_BANNER = "S3RM synced"
#: Prefix of the Page Forms mapping templates that show enum values in Korean.
LABEL_TEMPLATE_PREFIX = "S3RM label "


@dataclass(frozen=True)
class WikiCapabilities:
    """Which optional extensions the target wiki runs.

    ``smw``: Semantic MediaWiki (``#set``, ``#subobject``, ``#ask``, Property: pages).
    ``page_forms``: Page Forms (Form: pages, ``#forminput``).
    ``scribunto``: Scribunto (``#invoke``, Module: pages); with SMW the templates
    hand values to SMW decoded through ``Module:S3RM values``
    (``docs/browser.md#values-in-smw``).
    """

    smw: bool
    page_forms: bool
    scribunto: bool = False

    @classmethod
    def full(cls) -> "WikiCapabilities":
        """SMW, Page Forms and Scribunto (production; the variant committed under schema/)."""
        return cls(smw=True, page_forms=True, scribunto=True)

    @classmethod
    def plain(cls) -> "WikiCapabilities":
        """Neither extension (the Debian development wiki)."""
        return cls(smw=False, page_forms=False)

    @classmethod
    def from_extension_names(cls, names) -> "WikiCapabilities":
        """Capabilities from ``meta=siteinfo&siprop=extensions`` names.

        Matching ignores case, spaces and underscores, so "Semantic MediaWiki",
        "SemanticMediaWiki" and "Page Forms"/"PageForms" all count.
        """
        norm = {str(n).replace(" ", "").replace("_", "").lower() for n in names}
        return cls(smw="semanticmediawiki" in norm, page_forms="pageforms" in norm, scribunto="scribunto" in norm)

    @property
    def variant(self) -> str:
        """Short name: full, smw-only, forms-only or plain."""
        if self.smw and self.page_forms:
            return "full"
        if self.smw:
            return "smw-only"
        if self.page_forms:
            return "forms-only"
        return "plain"


def banner_template(schema: Schema) -> str:
    """Banner template name (``meta.banner_template``, default "S3RM synced")."""
    return schema.meta.get("banner_template", DEFAULT_BANNER)


def banner_call(schema: Schema) -> str:
    """Wikitext that shows the do-not-edit banner (``docs/browser.md#synced-pages``)."""
    return "{{" + banner_template(schema) + "}}"


# "|" in hex, never "&#124;", which Semantic MediaWiki turns back into "|" (gateway/domain/codec.py)
_WIKITEXT_ESCAPES = {"|": "&#x7C;", "{": "&#123;", "}": "&#125;", "[": "&#91;", "]": "&#93;",
                     "<": "&lt;", ">": "&gt;"}


def wt(text: str) -> str:
    """Schema-source text (Korean labels/help) made inert inside wikitext and template parameters."""
    return "".join(_WIKITEXT_ESCAPES.get(ch, ch) for ch in text)


def param(name: str) -> str:
    """A template parameter reference with an empty default: ``{{{name|}}}``."""
    return "{{{" + name + "|}}}"


def enum_label_switch(e: EnumDef, value_expr: str, *, show_value: bool = False) -> str:
    """``#switch`` mapping an enum value to its Korean label (unknown values shown as-is)."""
    cases = []
    for v in e.values:
        label = wt(e.label(v))
        cases.append(f"{v}={label} ({v})" if show_value else f"{v}={label}")
    return "{{#switch:" + value_expr + "|" + "|".join(cases) + "|#default=" + value_expr + "}}"


def enum_class_switch(e: EnumDef, value_expr: str, fallback: str = "unknown") -> str:
    """``#switch`` mapping an enum value to a CSS-safe token (the value itself, or ``fallback``)."""
    return "{{#switch:" + value_expr + "|" + "|".join(f"{v}={v}" for v in e.values) + f"|#default={fallback}}}}}"


def label_template(enum_name: str) -> str:
    """Name of the Page Forms mapping template of an enum."""
    return LABEL_TEMPLATE_PREFIX + enum_name


def field_enum(schema: Schema, f: FieldDef) -> EnumDef | None:
    """Enum of an enum/enum_list field, else None."""
    return schema.enum(f.enum) if f.enum else None


def namespace(schema: Schema) -> str:
    """Canonical Lesson namespace name (``meta.namespace``)."""
    return schema.namespace
