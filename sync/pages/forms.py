"""The Page Forms form ``Form:Lesson`` (``docs/data-contract.md#browser-forms``).

Sections, in page order (``docs/data-contract.md#templates``): the Lesson
itself, repeatable evidence (at least one instance), repeatable verification
records and repeatable relations. Page Forms writes the templates of a save in
the order of the form's ``for template`` sections, so this order is the page
order. Enums are drop-downs
showing Korean labels through the ``S3RM label <enum>`` mapping templates. A
drop-down lists every value of its enum, so Page Forms selects the stored
value of an existing page or record (a value missing from the list would show
the first option and a save would write it: a synthetic Lesson became lab);
what a NEW Lesson or record may choose — record_origin's ``form_values`` (lab,
imported), never a ``legacy_only`` value (``not_recorded``) — is in the rules
block :func:`form_rules` writes into the form, and the site script offers
only those (docs/browser.md#form-rules).

Provenance (``docs/data-contract.md#browser-forms``):

* account fields (author, added_by, created_by, verified_by) are hidden inputs
  with ``default=current user`` — Page Forms fills the logged-in user's name
  for new pages and new instances and keeps stored values otherwise;
* time fields (created_at, updated_at, added_at, verified_at) are hidden
  inputs WITHOUT a default: Page Forms' ``default=now`` writes the wiki's local
  time as ``YYYY-M-D HH:MM:SS`` (optionally AM/PM and a zone name), not UTC
  ISO-8601, so the site JavaScript fills them on submit (see
  :data:`BROWSER_FILLED`);
* reviewer is hidden and empty, review_state hidden with default ``Draft``;
* a relation's ``to`` is a combobox over the Lesson namespace; Page Forms lists
  page names (spaces for underscores), and the site JavaScript submits the
  chosen name as the Lesson id (``BROWSER_FILLED``);
* record_origin and created_at carry the CSS class ``s3rm-lock-after-create``
  so the site JavaScript can lock them when the page already exists (Page
  Forms cannot make a field editable on creation only); the save-hook auditor
  (hooks_spec) still rejects any change after the fact.

Only rendered for wikis with Page Forms; without it the Form namespace does not
exist and browser editing goes through the source editor.
"""
from __future__ import annotations

from gateway.config.schema import FieldDef, RecordDef, Schema

import json

from gateway.domain.rules import URL_SCHEMES

from .wikitext import banner_call, field_enum, label_template, wt

#: Hidden inputs the site JavaScript must fill, by template: field → rule.
#: Input names follow Page Forms: ``Lesson[updated_at]`` for the single template,
#: ``Lesson evidence[<n>][added_at]`` for multiple-instance templates.
BROWSER_FILLED: dict[str, dict[str, str]] = {
    "Lesson": {
        "created_at": "now (UTC, YYYY-MM-DDTHH:MM:SSZ) when empty; never changed afterwards",
        "updated_at": "now on every submit, strictly later than the loaded value",
    },
    "Lesson evidence": {"added_at": "now when empty (new instance)"},
    "Lesson evidence verification": {
        "id": "a new id matching meta.evidence_id_pattern when empty",
        "verified_at": "now when empty (new instance)",
    },
    "Lesson relation": {
        "from": "the page's Lesson id (title without the Lesson: prefix) when empty",
        "to": "the picked page name as the Lesson id (no Lesson: prefix, spaces as underscores)",
        "created_at": "now when empty (new instance)",
    },
}

_LOCK_CLASS = "s3rm-lock-after-create"


def _values(schema: Schema, f: FieldDef) -> list[str]:
    """Every value of the field's enum (the drop-down must hold any stored value)."""
    e = field_enum(schema, f)
    return list(e.values) if e is not None else []


def _new_values(schema: Schema, f: FieldDef) -> list[str]:
    """The values a new Lesson or a new record may choose: ``form_values`` when the enum has them,
    never a ``legacy_only`` value."""
    e = field_enum(schema, f)
    if e is None:
        return []
    legacy = set(e.extra.get("legacy_only", ()))
    return [v for v in e.extra.get("form_values", e.values) if v not in legacy]


#: id of the element holding :func:`form_rules` in the rendered form.
RULES_ELEMENT_ID = "s3rm-form-rules"


def form_rules(schema: Schema) -> dict:
    """The save rules the site script checks in the form before Page Forms submits it, derived
    from ``schema/lesson.toml`` (the same definitions ``gateway.domain.rules`` and the hooks
    checker read; docs/browser.md#form-rules).

    Shape: ``{"templates": {template: kind}, "fields": {kind: {name: {"type", "label", "required",
    "settable", "max_length"?, "values"?, "new_values"?, "labels"?}}}, "patterns": {"id",
    "id_max_length", "record_id", "sha256", "digest"}, "url_schemes": [...], "confidence":
    {"rank", "claims", "supporting", "supports"}}``.
    """
    fields: dict[str, dict] = {}
    for rec in schema.records:
        out = {}
        for f in rec.fields:
            d = {"type": f.type, "label": f.label, "required": bool(f.required), "settable": f.settable}
            if f.max_length:
                d["max_length"] = f.max_length
            e = field_enum(schema, f)
            if e is not None:
                d.update(values=list(e.values), new_values=_new_values(schema, f),
                         labels={v: e.label(v) for v in e.values})
            out[f.name] = d
        fields[rec.kind] = out
    claims = schema.enum("claim_field")
    return {
        "templates": {rec.template: rec.kind for rec in schema.records},
        "fields": fields,
        "patterns": {"id": schema.meta["id_pattern"], "id_max_length": int(schema.meta["id_max_length"]),
                     "record_id": schema.meta["evidence_id_pattern"], "sha256": schema.patterns["sha256"],
                     "digest": schema.patterns["digest"]},
        "url_schemes": list(URL_SCHEMES),
        "confidence": {"rank": list(schema.enum("confidence").values),
                       "claims": list(claims.extra["high_confidence_claims"]),
                       "supporting": list(schema.enum("verification_basis").extra["supporting"]),
                       "supports": "supports"},  # the outcome gateway.domain.confidence counts as support
    }


_INERT = set('"&<>{}[]|\'~\\')


def _rules_element(schema: Schema) -> str:
    """A hidden ``<div>`` carrying :func:`form_rules` as JSON in ``data-rules``; every character
    that could act in wikitext or HTML is a character reference, which the parser leaves to the
    browser, so the attribute reads back as the JSON."""
    text = json.dumps(form_rules(schema), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    inert = "".join(f"&#{ord(ch)};" if ch in _INERT else ch for ch in text).replace("__", "_&#95;")
    return f'<div id="{RULES_ELEMENT_ID}" style="display:none" data-rules="{inert}"></div>'


def _field_call(schema: Schema, rec: RecordDef, f: FieldDef) -> str:
    opts = [f.name]
    if f.type == "enum":
        opts += ["input type=dropdown", "values=" + ",".join(_values(schema, f)),
                 "mapping template=" + label_template(f.enum)]
    elif f.type == "enum_list":
        opts += ["input type=checkboxes", "values=" + ",".join(_values(schema, f)),
                 "mapping template=" + label_template(f.enum), "list", "delimiter=,"]
    elif rec.kind == "relation" and f.name == "to":
        opts += ["input type=combobox", "values from namespace=" + schema.namespace, "existing values only"]
    elif f.type == "longtext":
        opts += ["input type=textarea", "rows=4", "autogrow"]
    else:
        opts += ["input type=text"]
    if f.max_length and f.type not in ("enum", "enum_list"):
        opts.append(f"maxlength={f.max_length}")
    if f.type == "url":
        opts.append("placeholder=https://")
    elif f.type == "digest":
        opts.append("placeholder=sha256:…")
    if f.required:
        opts.append("mandatory")
    if f.settable == "origin":
        opts.append("class=" + _LOCK_CLASS)
    return "{{{field|" + "|".join(opts) + "}}}"


def _hidden_call(rec: RecordDef, f: FieldDef, schema: Schema) -> str:
    opts = [f.name, "hidden"]
    if f.type == "account" and f.settable == "server":
        opts.append("default=current user")
    elif f.settable == "legacy" and f.enum:
        opts.append("default=" + schema.enum(f.enum).values[0])
    if rec.kind == "lesson" and f.name == "created_at":
        opts.append("class=" + _LOCK_CLASS)
    return "{{{field|" + "|".join(opts) + "}}}"


def _visible(rec: RecordDef, f: FieldDef) -> bool:
    if f.settable in ("server", "legacy"):
        return False
    return True


def _section(schema: Schema, rec: RecordDef, header: str, intro: str, *, multiple: bool, extra: str = "") -> str:
    visible = [f for f in rec.fields if _visible(rec, f)]
    hidden = [f for f in rec.fields if not _visible(rec, f)]
    opts = [rec.template]
    if multiple:
        opts += ["multiple", f"label={wt(rec.label)}", f"add button text={wt(rec.label)} 추가"]
        if extra:
            opts.append(extra)
    else:
        opts.append(f"label={wt(rec.label)}")
    rows = []
    for f in visible:
        rows.append(f"|-\n! {wt(f.label)}\n| {_field_call(schema, rec, f)}"
                    f'<div class="s3rm-form-help">{wt(f.help)}</div>')
    return (
        f'<div class="s3rm-form-section s3rm-form-{rec.kind}">\n'
        f"=== {wt(header)} ===\n"
        f'<div class="s3rm-form-intro">{wt(intro)}</div>\n'
        "{{{for template|" + "|".join(opts) + "}}}\n"
        '{| class="formtable s3rm-form-table"\n' + "\n".join(rows) + "\n|}\n"
        + "\n".join(_hidden_call(rec, f, schema) for f in hidden) + "\n"
        "{{{end template}}}\n"
        "</div>"
    )


def lesson_form(schema: Schema) -> str:
    """``Form:Lesson`` wikitext (full variant; see the module docstring for the provenance rules)."""
    lesson, evidence, verification, relation = schema.records
    body = "\n\n".join([
        "{{{info|create title=새 연구 메모 쓰기|edit title=연구 메모 고치기}}}",
        _rules_element(schema),
        _section(schema, lesson, lesson.label,
                 "관찰한 사실과 그 해석을 나눠 적어 주세요. 작성 계정과 시각은 저장할 때 자동으로 채워집니다.",
                 multiple=False),
        _section(schema, evidence, evidence.label,
                 "나중에 다시 찾을 수 있는 자료를 하나 이상 연결합니다. 한번 저장한 자료는 고치지 말고 새 자료나 검증 기록을 덧붙이세요.",
                 multiple=True, extra="minimum instances=1"),
        _section(schema, verification, verification.label,
                 "자료를 실제로 읽어 주장을 확인했을 때 덧붙입니다. 자료 digest는 메모 화면의 근거 자료 칸에 보이는 값을 그대로 옮겨 적고, 기존 기록은 고치지 않습니다.",
                 multiple=True),
        _section(schema, relation, relation.label,
                 "이미 있는 메모만 대상으로 고를 수 있습니다. 목록에는 문서 이름이 빈칸으로 보이지만(gpu oom high) 저장할 때 "
                 "문서 ID(gpu_oom_high)로 바뀝니다. 출발 메모는 지금 쓰는 메모입니다.",
                 multiple=True),
    ])
    doc = (
        "<noinclude>" + banner_call(schema) + "\n"
        f"'''{wt(lesson.label)}'''를 쓰고 고치는 양식입니다. 홈 화면의 새 메모 입력란에서 문서 ID를 넣으면 "
        f"<code>{schema.namespace}:</code> 이름공간에 이 양식으로 문서를 만듭니다.\n\n"
        "* 근거 자료는 한 건 이상 필요하며, 확인 범위에서 이전 자료용 값은 고를 수 없습니다.\n"
        "* 작성 계정·추가한 계정·연결한 계정·검증한 계정은 로그인한 계정으로 자동으로 채워집니다.\n"
        "* 시각 값은 저장할 때 사이트 스크립트가 UTC로 채우고, 수정 시각은 저장할 때마다 앞으로 나아갑니다.\n"
        "* 자료 출처와 작성 시각은 처음 저장한 뒤 바꿀 수 없습니다.\n"
        "* 이미 저장된 근거 자료, 검증 기록, 관계는 양식에서 고치거나 지울 수 없습니다. 바로잡으려면 새 기록을 덧붙입니다.\n"
        "* 저장하기 전에 양식이 ID, URL, 신뢰도 같은 규칙을 확인하고, 맞지 않으면 무엇을 고칠지 알려 줍니다.\n"
        "</noinclude>"
    )
    return doc + "<includeonly>\n" + body + "\n</includeonly>"


def render_form_pages(schema: Schema) -> dict[str, str]:
    """``Form:<name>`` → wikitext (only meaningful on wikis with Page Forms)."""
    return {f"Form:{schema.meta.get('form', schema.lesson.template)}": lesson_form(schema)}
