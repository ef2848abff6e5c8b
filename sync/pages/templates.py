"""Record templates (``Template:Lesson`` …) and the banner.

What each template does (``docs/data-contract.md#templates``,
``docs/data-contract.md#browser-forms``, ``docs/browser.md#synced-pages``):

* ``Lesson`` — ``#set`` of every Lesson property (SMW only), ``[[Category:Lessons]]``
  (always), a Korean view: title heading, confidence badge, a table of the
  client fields in schema order with Korean labels, a provenance line and a
  link to the page history. ``reviewer`` / ``review_state`` are never shown.
* ``Lesson evidence`` — named ``#subobject`` ``evidence-<id>`` (SMW only) and a
  readable block: id, kind and basis labels, citation, URL (only when set),
  note, provenance and a digest placeholder
  ``<span class="s3rm-evidence-digest" data-evidence-id="…">`` that the site
  JavaScript fills from the gateway (wikitext cannot hash; the page codec
  stores no digest).
* ``Lesson evidence verification`` — ``#subobject`` ``verification-<id>`` and a
  record with outcome badge, basis label, source fields and claim fields.
* ``Lesson relation`` — ``#subobject`` ``relation-<type>-<to>`` and the line
  "출발 → 관계 → [[Lesson:to|to]]"; the plain wiki link is in every variant so
  MediaWiki's link tables know the edge without SMW.
* the banner (``S3RM synced``) and, with Page Forms, one mapping template per
  enum (``S3RM label <enum>``) so drop-downs show Korean labels.

Parameter values arrive entity-encoded by the page codec (gateway/domain/codec.py),
so ``{{{field|}}}`` is inert text anywhere; every reference has an empty default.
With Scribunto the SMW calls go through ``Module:S3RM values`` (:func:`smw_set`),
which hands SMW the decoded values (``docs/browser.md#values-in-smw``).
"""
from __future__ import annotations

from gateway.config.schema import FieldDef, RecordDef, Schema

from .wikitext import (WikiCapabilities, banner_call, banner_template, enum_class_switch, enum_label_switch,
                     field_enum, label_template, param, wt)


# --------------------------------------------------------------------------- SMW blocks

def _smw_value(schema: Schema, f: FieldDef) -> str:
    value = param(f.name)
    if f.smw_type == "Page":
        return "{{#if:" + value + "|" + schema.namespace + ":" + value + "}}"
    return value


#: Name of the Lua module that hands values to SMW decoded (``docs/browser.md#values-in-smw``).
VALUES_MODULE = "S3RM values"


def value_mode(f: FieldDef) -> str:
    """How ``Module:S3RM values`` hands ``f`` to SMW: ``text``, ``list`` or ``keep``.

    Free text (SMW type Text, not an enum — the evidence URL included) is decoded; enum lists, enums, dates and page names go as written
    (their valid values hold no character the codec encodes, and SMW reports an
    invalid one with the text it was given).
    """
    if f.type == "enum_list":
        return "list"
    if f.smw_type == "Text" and f.type != "enum":
        return "text"
    return "keep"


def _smw_assignments(schema: Schema, rec: RecordDef) -> list[str]:
    out = []
    for f in rec.fields:
        out.append(f"{f.property}={_smw_value(schema, f)}")
        if f.type == "enum_list":
            out.append("+sep=,")
    return out


def _module_assignments(schema: Schema, rec: RecordDef) -> list[str]:
    return [f"{f.property}={value_mode(f)}:{_smw_value(schema, f)}" for f in rec.fields]


def smw_set(schema: Schema, rec: RecordDef, caps: WikiCapabilities) -> str:
    """The call storing every field of ``rec`` on the page.

    With Scribunto: ``{{#invoke:S3RM values|set|…}}`` (values reach SMW decoded);
    without: ``{{#set:…}}`` with the parameters' wikitext.
    """
    if caps.scribunto:
        return ("{{#invoke:" + VALUES_MODULE + "|set\n|"
                + "\n|".join(_module_assignments(schema, rec)) + "\n}}")
    return "{{#set:" + "\n|".join(_smw_assignments(schema, rec)) + "\n}}"


def smw_subobject(schema: Schema, rec: RecordDef, name_expr: str, caps: WikiCapabilities) -> str:
    """The named subobject call storing every field of ``rec`` (module or ``#subobject``, as :func:`smw_set`)."""
    if caps.scribunto:
        return ("{{#invoke:" + VALUES_MODULE + "|subobject|" + name_expr + "\n|"
                + "\n|".join(_module_assignments(schema, rec)) + "\n}}")
    return "{{#subobject:" + name_expr + "\n|" + "\n|".join(_smw_assignments(schema, rec)) + "\n}}"


# --------------------------------------------------------------------------- view helpers

def _value_html(schema: Schema, f: FieldDef) -> str:
    e = field_enum(schema, f)
    if e and f.type == "enum":
        return (f'<span class="s3rm-enum s3rm-{f.name.replace("_", "-")}-'
                f'{enum_class_switch(e, param(f.name))}">{enum_label_switch(e, param(f.name))}</span>')
    if f.type == "enum_list":
        return f'<span class="s3rm-enum-list">{param(f.name)}</span>'
    if f.type in ("sha256", "digest", "id"):
        return f'<code class="s3rm-code">{param(f.name)}</code>'
    return f'<div class="s3rm-field-value">{param(f.name)}</div>'


def anchor(name: str) -> str:
    """``{{anchorencode:{{{name|}}}}}``: the value decoded and made safe for an HTML attribute."""
    return "{{anchorencode:" + param(name) + "}}"


def _row(label: str, value_html: str, cls: str) -> str:
    return f'|- class="{cls}"\n! scope="row" class="s3rm-field-label" | {wt(label)}\n| {value_html}'


def _table(rows: list[str], cls: str) -> str:
    return "{| class=\"" + cls + "\"\n" + "\n".join(rows) + "\n|}"


def _provenance(fields: list[FieldDef], extra: str = "") -> str:
    parts = []
    for f in fields:
        cls = "s3rm-" + f.name.replace("_", "-")
        parts.append(f'<span class="s3rm-provenance-item">{wt(f.label)} <span class="{cls}">{param(f.name)}</span></span>')
    if extra:
        parts.append(extra)
    return '<div class="s3rm-provenance">' + " · ".join(parts) + "</div>"


def _badge(schema: Schema, f: FieldDef, prefix: str = "") -> str:
    e = field_enum(schema, f)
    token = f.name.replace("_", "-")
    label = f"{wt(prefix)} · " if prefix else ""
    return (f'<span class="s3rm-badge s3rm-{token}-{enum_class_switch(e, param(f.name))}">'
            f'{label}{enum_label_switch(e, param(f.name))}</span>')


def _doc(schema: Schema, rec: RecordDef, caps: WikiCapabilities, intro: str) -> str:
    rows = ["{| class=\"wikitable s3rm-template-doc\"", "! 매개변수 !! 화면 이름 !! 필수 !! 채우는 쪽"
            + (" !! SMW 속성" if caps.smw else "")]
    who = {"client": "작성자", "origin": "작성자(처음 한 번)", "server": "자동", "legacy": "이전 필드(표시 안 함)"}
    for f in rec.fields:
        cells = [f"<code>{f.name}</code>", wt(f.label), "예" if f.required else "아니요", who[f.settable]]
        if caps.smw:
            cells.append(f"[[Property:{f.property}|{f.property}]]")
        rows.append("|-\n| " + " || ".join(cells))
    rows.append("|}")
    return "<noinclude>" + banner_call(schema) + "\n" + intro + "\n\n" + "\n".join(rows) + "\n</noinclude>"


def _by_settable(rec: RecordDef, *kinds: str) -> list[FieldDef]:
    return [f for f in rec.fields if f.settable in kinds]


def _provenance_fields(rec: RecordDef) -> list[FieldDef]:
    """Server-filled account and time fields (who wrote the record, when)."""
    return [f for f in rec.fields if f.settable == "server" and f.type in ("account", "timestamp")]


# --------------------------------------------------------------------------- templates

def lesson_template(schema: Schema, caps: WikiCapabilities) -> str:
    """``Template:Lesson`` wikitext (``docs/data-contract.md#templates``)."""
    rec = schema.lesson
    title, confidence = rec.field("title"), rec.field("confidence")
    body_fields = [f for f in _by_settable(rec, "client", "origin") if f.name not in ("title", "confidence")]
    rows = [_row(f.label, _value_html(schema, f), f"s3rm-field s3rm-field-{f.name.replace('_', '-')}")
            for f in body_fields]
    history = ('<span class="s3rm-history-link plainlinks">'
               '[{{fullurl:{{FULLPAGENAME}}|action=history}} 고친 내역 보기]</span>')
    parts = ["<includeonly>"]
    if caps.smw:
        parts.append(smw_set(schema, rec, caps))
    if caps.page_forms:
        # the page's own default form: the "edit with form" tab and action=formedit open Form:Lesson
        parts.append("{{#default_form:" + schema.meta.get("form", rec.template) + "}}")
    parts.append(
        f'<div class="s3rm-lesson">\n'
        f'<div class="s3rm-lesson-header">\n'
        f'<h2 class="s3rm-lesson-title">{{{{#if:{param("title")}|{param("title")}|{{{{PAGENAME}}}}}}}}</h2>\n'
        f'{_badge(schema, confidence, confidence.label)}\n'
        f'</div>\n'
        + _table(rows, "s3rm-lesson-fields") + "\n"
        + _provenance(_provenance_fields(rec), history) + "\n"
        f'</div>[[Category:{schema.meta["category"]}]]</includeonly>'
    )
    intro = (f"'''{wt(rec.label)}''' 한 건을 보여 주는 틀입니다. <code>Lesson:</code> 문서마다 이 틀을 한 번만 씁니다. "
             f"{wt(title.label)}은 머리글로, {wt(confidence.label)}는 배지로, 나머지 항목은 아래 표로 보여 주며 "
             "검토자·검토 상태(이전 필드)는 화면에 내보내지 않습니다. 문서는 "
             f"[[:Category:{schema.meta['category']}]] 분류에 들어갑니다.")
    if caps.smw:
        intro += " 모든 값은 같은 이름의 SMW 속성에도 저장됩니다."
    return "".join(parts) + _doc(schema, rec, caps, intro)


def _record_card(schema: Schema, rec: RecordDef, caps: WikiCapabilities, kind: str, record_anchor: str,
                 evidence_anchor: str, record_id: str, head: str, rows: list[str], intro: str) -> str:
    """An append-only record's template: its SMW subobject, a ``s3rm-record s3rm-<kind>`` card and the doc part.

    The card's head shows the record label, ``record_id`` and ``head`` (badges and links of that
    record kind); its body the field ``rows`` and the provenance line.
    """
    parts = ["<includeonly>"]
    if caps.smw:
        parts.append(smw_subobject(schema, rec, f"{rec.subobject_prefix}-{record_anchor}", caps))
    parts.append(
        f'<div class="s3rm-record s3rm-{kind}" id="{rec.subobject_prefix}-{record_anchor}" '
        f'data-evidence-id="{evidence_anchor}">\n'
        f'<div class="s3rm-record-head"><span class="s3rm-record-kind">{wt(rec.label)}</span> '
        f'<code class="s3rm-record-id">{record_id}</code> {head}</div>\n'
        + _table(rows, "s3rm-record-fields") + "\n"
        + _provenance(_provenance_fields(rec)) + "\n"
        "</div></includeonly>"
    )
    return "".join(parts) + _doc(schema, rec, caps, intro)


def evidence_template(schema: Schema, caps: WikiCapabilities) -> str:
    """``Template:Lesson evidence`` wikitext (digest placeholder: ``docs/data-contract.md#digests``)."""
    rec = schema.evidence
    ev_id = param("id")
    ev_anchor = anchor("id")
    rows = [
        _row(rec.field("citation").label, _value_html(schema, rec.field("citation")), "s3rm-field s3rm-field-citation"),
        _row(rec.field("url").label,
             "{{#if:" + param("url") + '|<span class="s3rm-evidence-url">' + param("url")
             + '</span>|<span class="s3rm-empty">없음</span>}}', "s3rm-field s3rm-field-url"),
        _row(rec.field("note").label,
             "{{#if:" + param("note") + "|" + _value_html(schema, rec.field("note"))
             + '|<span class="s3rm-empty">없음</span>}}', "s3rm-field s3rm-field-note"),
        _row("자료 digest",
             f'<code class="s3rm-evidence-digest" data-evidence-id="{ev_anchor}">'
             '<span class="s3rm-digest-pending">브라우저에서 계산해 표시합니다</span></code>',
             "s3rm-field s3rm-field-digest"),
    ]
    head = (f'{_badge(schema, rec.field("kind"))} '
            f'{_badge(schema, rec.field("verification_basis"), rec.field("verification_basis").label)}')
    intro = (f"'''{wt(rec.label)}''' 한 건을 보여 주는 틀입니다. 메모 하나에 여러 번 쓸 수 있습니다. "
             "자료 digest는 위키 문법으로 계산할 수 없어서, 사이트 스크립트가 게이트웨이에서 받아 "
             "<code>s3rm-evidence-digest</code> 자리에 채웁니다. 검증 기록을 남길 때 이 값을 그대로 옮겨 적습니다.")
    return _record_card(schema, rec, caps, "evidence", ev_anchor, ev_anchor, ev_id, head, rows, intro)


def verification_template(schema: Schema, caps: WikiCapabilities) -> str:
    """``Template:Lesson evidence verification`` wikitext (append-only record view)."""
    rec = schema.verification
    v_id = param("id")
    v_anchor = anchor("id")
    row_fields = [f for f in _by_settable(rec, "client")
                  if f.name not in ("evidence_id", "outcome", "verification_basis")]
    rows = [_row(rec.field("verification_basis").label, _value_html(schema, rec.field("verification_basis")),
                 "s3rm-field s3rm-field-verification-basis")]
    rows += [_row(f.label, _value_html(schema, f), f"s3rm-field s3rm-field-{f.name.replace('_', '-')}")
             for f in row_fields]
    evidence_link = ("{{#if:" + param("evidence_id") + "|[[#" + schema.evidence.subobject_prefix + "-"
                     + anchor("evidence_id") + "|" + param("evidence_id") + "]]}}")
    head = (f'<span class="s3rm-verification-target">{wt(rec.field("evidence_id").label)} {evidence_link}</span> '
            f'{_badge(schema, rec.field("outcome"), rec.field("outcome").label)}')
    intro = (f"'''{wt(rec.label)}''' 한 건을 보여 주는 틀입니다. 기록은 덧붙이기만 하고 고치거나 지우지 않으며, "
             "같은 근거 자료의 마지막 기록이 현재 판정입니다. 확인한 주장은 쉼표로 구분해 저장합니다.")
    return _record_card(schema, rec, caps, "verification", v_anchor, anchor("evidence_id"), v_id, head, rows, intro)


def relation_template(schema: Schema, caps: WikiCapabilities) -> str:
    """``Template:Lesson relation`` wikitext; the ``[[Lesson:to|to]]`` link is in every variant."""
    rec = schema.relation
    ns = schema.namespace
    rel = rec.field("relation")
    e = field_enum(schema, rel)
    to_link = "{{#if:" + param("to") + "|[[" + ns + ":" + param("to") + "|" + param("to") + "]]}}"
    note = rec.field("note")
    parts = ["<includeonly>"]
    if caps.smw:
        parts.append(smw_subobject(schema, rec, f"{rec.subobject_prefix}-{enum_class_switch(e, param('relation'))}-{anchor('to')}",
                                  caps))
    parts.append(
        f'<div class="s3rm-record s3rm-relation s3rm-relation-{enum_class_switch(e, param("relation"))}">'
        f'<span class="s3rm-record-kind">{wt(rec.label)}</span> '
        f'<span class="s3rm-relation-from">{param("from")}</span> → '
        f'<span class="s3rm-relation-type" data-relation="{enum_class_switch(e, param("relation"))}">'
        f'{enum_label_switch(e, param("relation"))}</span> → '
        f'<span class="s3rm-relation-to">{to_link}</span>'
        "{{#if:" + param("note") + f'|<div class="s3rm-relation-note"><span class="s3rm-field-label">{wt(note.label)}</span> '
        f'<span class="s3rm-field-value">{param("note")}</span></div>}}}}\n'
        + _provenance(_provenance_fields(rec)) + "\n"
        "</div></includeonly>"
    )
    intro = (f"'''{wt(rec.label)}'''를 한 줄로 보여 주는 틀입니다. 출발 메모 → 관계 → 대상 메모 순서로 읽습니다. "
             "대상 메모로 가는 일반 위키 링크를 함께 만들어, SMW가 없어도 위키의 링크 표에 연결이 남습니다.")
    return "".join(parts) + _doc(schema, rec, caps, intro)


def banner_template_page(schema: Schema) -> str:
    """The banner template (``docs/browser.md#synced-pages``): a small Korean notice, shown on every synced page."""
    return (
        '<div class="s3rm-synced-banner" role="note">'
        "이 문서는 프로젝트 저장소의 원본에서 자동으로 옮겨 온 것입니다. "
        "여기서 고친 내용은 다음 동기화 때 덮어써지므로, 바꿀 점은 저장소에서 고쳐 주세요."
        "</div><noinclude>\n"
        "동기화 도구(<code>s3rm sync push</code>)가 올리는 모든 문서의 맨 위에 붙는 안내 틀입니다.\n"
        "</noinclude>"
    )


def label_template_page(schema: Schema, enum_name: str) -> str:
    """Page Forms mapping template of one enum: ``{{{1}}}`` value → "한국어 (value)"."""
    e = schema.enum(enum_name)
    return (
        "<includeonly>" + enum_label_switch(e, "{{{1|}}}", show_value=True) + "</includeonly>"
        "<noinclude>" + banner_call(schema) + "\n"
        f"양식의 선택 목록에서 <code>{enum_name}</code> 값을 한국어로 보여 주는 변환 틀입니다. "
        "저장되는 값은 영문 그대로입니다.\n</noinclude>"
    )


def form_enums(schema: Schema) -> list[str]:
    """Enums offered by the form's drop-downs/checkboxes (those of client/origin fields), schema order."""
    out: list[str] = []
    for rec in schema.records:
        for f in rec.fields:
            if f.enum and f.settable in ("client", "origin") and f.enum not in out:
                out.append(f.enum)
    return out


def render_template_pages(schema: Schema, caps: WikiCapabilities) -> dict[str, str]:
    """``Template:<name>`` → wikitext for the variant ``caps``."""
    pages = {
        f"Template:{schema.lesson.template}": lesson_template(schema, caps),
        f"Template:{schema.evidence.template}": evidence_template(schema, caps),
        f"Template:{schema.verification.template}": verification_template(schema, caps),
        f"Template:{schema.relation.template}": relation_template(schema, caps),
        f"Template:{banner_template(schema)}": banner_template_page(schema),
    }
    if caps.page_forms:
        for name in form_enums(schema):
            pages[f"Template:{label_template(name)}"] = label_template_page(schema, name)
    return pages
