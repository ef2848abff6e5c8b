"""SMW property pages (``Property:<name>``), one per property of ``schema/lesson.toml``.

Each page declares ``[[Has type::…]]``, ``[[Allows value::…]]`` for enum
properties (including legacy-only values such as ``not_recorded``, because
old pages carry them), a Korean description and the do-not-edit banner
(``docs/browser.md#synced-pages``). Only rendered for wikis with SMW; without SMW the
Property namespace does not exist and the pages would be stray main-namespace pages.
"""
from __future__ import annotations

from gateway.config.schema import Schema

from .wikitext import banner_call, field_enum, wt

_KIND_WORD = {"lesson": "메모 본문", "evidence": "근거 자료 항목", "verification": "근거 검증 기록",
              "relation": "메모 사이의 관계"}


def render_property_pages(schema: Schema) -> dict[str, str]:
    """``Property:<name>`` → wikitext for every SMW property, in schema order.

    Raises SchemaError (from ``Schema.properties``) when a property is used with two types.
    """
    pages = {}
    for prop, (smw_type, users) in schema.properties().items():
        lines = [banner_call(schema), "", f"[[Has type::{smw_type}]]"]
        allowed: list[str] = []
        for f in users:
            e = field_enum(schema, f)
            if e:
                allowed.extend(v for v in e.values if v not in allowed)
        lines.extend(f"[[Allows value::{v}]]" for v in allowed)
        lines.append("")
        first = users[0]
        lines.append(f"'''{wt(first.label)}''' 값을 담는 속성입니다. {wt(first.help)}")
        lines.append("")
        lines.append("이 값을 채우는 틀과 매개변수:")
        for f in users:
            rec = next(r for r in schema.records if any(f is g for g in r.fields))
            lines.append(f"* [[Template:{rec.template}|{rec.template}]] 틀의 <code>{f.name}</code> "
                         f"({_KIND_WORD[rec.kind]} · {wt(f.label)})")
        if allowed:
            lines.append("")
            lines.append("허용하는 값:")
            for f in users:
                e = field_enum(schema, f)
                legacy = set(e.extra.get("legacy_only", ())) if e else set()
                for v in (e.values if e else ()):
                    note = " — 이전 자료에만 남아 있는 값으로, 새 항목에는 쓰지 않습니다" if v in legacy else ""
                    lines.append(f"* <code>{v}</code>: {wt(e.label(v))}{note}")
                break
        pages[f"Property:{prop}"] = "\n".join(lines)
    return pages
