"""Page Forms as far as the browser and a save see it, for a wiki without Page Forms (CI, the dev wiki).

Read in Page Forms 5.9.1 and 6.0.10 (the same in both for what is used here) and rebuilt on the
project's own form definition ``schema/Forms/Lesson.wiki``:

* :func:`render_form` — the HTML ``PFFormPrinter::formHTML`` produces for a form definition and a
  page: the definition's wikitext is parsed by the REAL wiki (``action=parse``) with every
  ``{{{…}}}`` tag held out, as Page Forms parses it before it handles the tags; then each tag
  becomes Page Forms' markup — ``form#pfForm``; inputs named ``Template[field]`` and
  ``Template[<n>a][field]`` (instances the form starts with), ``Template[num][field]`` in the
  hidden ``.multipleTemplateStarter``; ids ``input_<n>``; ``span.inputSpan.mandatoryFieldSpan``;
  drop-downs with the stored value ``selected`` and no empty option when mandatory
  (``PFDropdownInput``); OOUI check boxes ``…[claim_fields][<k>]`` plus a hidden ``[is_list]``
  (``PFCheckboxesInput``); autogrow text areas ``cols=90 style="width: auto"``
  (``PFTextAreaInput``); text inputs ``size=35`` (``PFTextInput``); hidden fields as plain
  ``Html::hidden`` (no class); ``default=current user`` filled for a new page and new instances
  only; the instance table (``instanceRearranger``, ``addAboveButton``, ``removeButton``) and the
  adder button (``PFFormPrinter::multipleTemplate*HTML``); the bottom: summary, 저장 / 미리 보기 /
  차이 보기 buttons (``PFFormUtils::formBottom``).
* :data:`STANDIN_JS` — the parts of ``PageForms.js`` a save goes through: ``validateAll`` (hooks
  ``pf.formValidationBefore`` then ``pf.formValidation`` with ``{numErrors}``, mandatory fields
  outside the starter, minimum instances; then disables the starter's inputs so they are not
  posted), bound to the form's submit; the adder (``[num]`` → ``[<n>b]``), the remove button; and
  ``PF_formInput.js``'s page-name box with ``data-autofocus``.
* :func:`wikitext_from_post` — what ``PFFormPrinter`` / ``PFWikiPage::createPageText`` write for a
  POST: one call per template in form order, each instance in posted order (``num`` skipped),
  ``\\n|name=value`` lines with empty values left out, lists joined with ``"<delimiter> "``.
* :func:`render_forminput` — ``{{#forminput}}`` (``PFFormInputParserFunction``).

Nothing of Page Forms' code is here; the markup is rebuilt from reading it, and
``tests/schema/site/test_page_forms.py`` drives it in Chromium with the real ``Common.js``.
"""
from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

import mwparserfromhell
import requests

TAG = re.compile(r"\{\{\{(.*?)\}\}\}", re.S)
TOKEN = re.compile(r"S3RMPFTAG(\d+)X")


@dataclass
class Field:
    """One ``{{{field|…}}}`` tag: ``name`` and its options (``{"input type": "dropdown", "mandatory": ""}``)."""

    name: str
    options: dict[str, str]

    @property
    def input_type(self) -> str:
        return "hidden" if "hidden" in self.options else self.options.get("input type", "text")


@dataclass
class Section:
    """One ``{{{for template|…}}}`` … ``{{{end template}}}`` section: parsed HTML pieces and fields."""

    template: str
    options: dict[str, str]
    pieces: list = field(default_factory=list)  # str (HTML) | Field

    @property
    def multiple(self) -> bool:
        return "multiple" in self.options


def _options(parts: list[str]) -> dict[str, str]:
    out = {}
    for part in parts:
        key, _, value = part.partition("=")
        out[key.strip()] = value.strip()
    return out


def form_body(form_text: str) -> str:
    """The ``<includeonly>`` part of a form page (what Page Forms reads as the definition)."""
    m = re.search(r"<includeonly>(.*)</includeonly>", form_text, re.S)
    return m.group(1) if m else form_text


def parse_definition(wiki, form_text: str) -> tuple[list, dict[str, str]]:
    """The form definition as ``[str | Section]`` (HTML parsed by the wiki) and its ``info`` options."""
    tags: list[str] = []

    def hold(m: re.Match) -> str:
        tags.append(m.group(1))
        return f"S3RMPFTAG{len(tags) - 1}X"

    held = TAG.sub(hold, form_body(form_text))
    parsed = requests.post(wiki.api_url, data={
        "action": "parse", "format": "json", "formatversion": "2", "contentmodel": "wikitext", "text": held,
        "title": "Form:Lesson", "disableeditsection": "1", "disablelimitreport": "1", "prop": "text",
        "wrapoutputclass": ""}, timeout=60).json()["parse"]["text"]
    out: list = []
    info: dict[str, str] = {}
    current: Section | None = None
    pos = 0
    for m in TOKEN.finditer(parsed):
        chunk = parsed[pos:m.start()]
        pos = m.end()
        (current.pieces if current else out).append(chunk)
        parts = tags[int(m.group(1))].split("|")
        kind = parts[0].strip()
        if kind == "info":
            info = _options(parts[1:])
        elif kind == "for template":
            current = Section(parts[1].strip(), _options(parts[2:]))
        elif kind == "end template":
            out.append(current)
            current = None
        elif kind == "field":
            current.pieces.append(Field(parts[1].strip(), _options(parts[2:])))
    out.append(parsed[pos:])
    return out, info


def page_records(page_text: str | None) -> dict[str, list[dict[str, str]]]:
    """Template calls of a page: name → [params] in page order, values trimmed
    (``PFTemplateInForm::setFieldValuesFromPage``)."""
    out: dict[str, list[dict[str, str]]] = {}
    if not page_text:
        return out
    for t in mwparserfromhell.parse(page_text).filter_templates(recursive=False):
        name = str(t.name).strip().removeprefix("Template:").removeprefix("틀:")
        out.setdefault(name, []).append({str(p.name).strip(): str(p.value).strip() for p in t.params})
    return out


def post_records(pairs: list[tuple[str, str]]) -> dict[str, list[dict[str, str]]]:
    """A POST read the way PHP and Page Forms read it: template → [instance values] in posted order;
    the ``num`` starter skipped; check-box lists joined with ``", "`` (``getStringFromPassedInArray``)."""
    instances: dict[str, dict[str, dict[str, object]]] = {}
    singles: dict[str, dict[str, object]] = {}
    name_re = re.compile(r"^(.+?)\[([^\]]*)\](?:\[([^\]]*)\])?(?:\[([^\]]*)\])?$")
    for key, value in pairs:
        m = name_re.match(key)
        if not m or key.startswith("wp"):
            continue
        template, a, b, c = m.groups()
        if b is None:  # Template[field]
            singles.setdefault(template, {})[a] = value
            continue
        if a == "num":
            continue
        fields = instances.setdefault(template, {}).setdefault(a, {})
        if c is not None:  # a list input: [field][k] and [field][is_list]
            items = fields.setdefault(b, [])
            if c != "is_list":
                items.append(value)
        else:
            fields[b] = value
    out: dict[str, list[dict[str, str]]] = {t: [dict(v) for v in [values]] for t, values in singles.items()}
    for template, by_key in instances.items():
        out[template] = [{k: (", ".join(v) if isinstance(v, list) else v) for k, v in fields.items()}
                         for fields in by_key.values()]
    return out


class Renderer:
    """Builds the HTML of one form for one page (see the module docstring)."""

    def __init__(self, definition: list, user: str):
        self.definition = definition
        self.user = user
        self.field_num = 1

    def _next_id(self) -> str:
        self.field_num += 1
        return f"input_{self.field_num - 1}"

    def field_html(self, section: Section, f: Field, name: str, value: str | None, apply_default: bool) -> str:
        o = f.options
        if value in (None, "") and apply_default and "default" in o:
            value = self.user if o["default"] == "current user" else o["default"]
        value = value or ""
        mandatory = "mandatory" in o
        extra = (" " + o["class"]) if o.get("class") else ""
        esc = html.escape
        t = f.input_type
        if t == "hidden":
            return f'<input type="hidden" value="{esc(value)}" name="{esc(name)}">'
        span_class = "inputSpan" + (" mandatoryFieldSpan" if mandatory else "")
        input_id = self._next_id()
        if t == "textarea":
            cls = ("mandatoryField" if mandatory else "createboxInput") + extra + (" autoGrow" if "autogrow" in o else "")
            attrs = f'tabindex="1" name="{esc(name)}" id="{input_id}" class="{cls}" rows="{o.get("rows", "5")}"'
            attrs += ' cols="90" style="width: auto"' if "autogrow" in o else ' cols="90" style="width: 100%"'
            if "maxlength" in o:
                attrs += f' maxlength="{o["maxlength"]}"'
            return f'<span class="{span_class}"><textarea {attrs}>{esc(value)}</textarea></span>'
        if t == "dropdown":
            options = "" if (mandatory and value != "") else '\t<option value=""></option>\n'
            for v in o["values"].split(","):
                sel = ' selected="selected"' if v == value else ""
                options += f'<option value="{esc(v)}"{sel}>{esc(self.label(o, v))}</option>'
            return (f'<span class="{span_class}"><select id="{input_id}" tabindex="1" name="{esc(name)}" '
                    f'class="{("mandatoryField" if mandatory else "createboxInput") + extra}">{options}</select></span>')
        if t == "checkboxes":
            delimiter = o.get("delimiter", ",")
            current = [v.strip() for v in value.split(delimiter) if v.strip()]
            boxes = ""
            for k, v in enumerate(o["values"].split(",")):
                checked = " checked" if v in current else ""
                boxes += (f'<label class="checkboxLabel{extra}"><span class="oo-ui-widget oo-ui-widget-enabled '
                          f'oo-ui-inputWidget oo-ui-checkboxInputWidget"><input type="checkbox" tabindex="1" '
                          f'name="{esc(name)}[{k}]" value="{esc(v)}" id="{input_id}" class="oo-ui-inputWidget-input"'
                          f'{checked}><span></span></span>&nbsp;{esc(self.label(o, v))}</label> ')
                if k:
                    self.field_num += 1
            boxes += f'<input type="hidden" value="1" name="{esc(name)}[is_list]">'
            cls = "checkboxesSpan" + (" mandatoryFieldSpan" if mandatory else "")
            return f'<span id="span_{self.field_num}" class="{cls}">{boxes}</span>'
        if t == "combobox":
            # Page Forms 6 (PF_ComboBoxInput.js): a hidden input carries the name and value, the
            # visible OOUI input the page name; "values from namespace" lists page names with spaces
            shown = value.replace("_", " ")
            cls = "comboboxSpan" + (" mandatoryFieldSpan" if mandatory else "")
            return (f'<span class="{cls}"><input type="hidden" id="{input_id}-hidden" name="{esc(name)}" '
                    f'value="{esc(value)}"><span class="oo-ui-widget oo-ui-inputWidget oo-ui-textInputWidget '
                    f'oo-ui-comboBoxInputWidget pfComboBox"><input type="text" id="{input_id}" '
                    f'class="oo-ui-inputWidget-input" value="{esc(shown)}" data-label="{esc(shown)}" '
                    f'autocompletesettings="Lesson" autocompletedatatype="namespace"></span></span>')
        cls = "createboxInput" + (" mandatoryField" if mandatory else "") + extra
        attrs = f'id="{input_id}" tabindex="1" class="{cls}" size="35"'
        for key in ("maxlength", "placeholder"):
            if key in o:
                attrs += f' {key}="{esc(o[key])}"'
        return f'<span class="{span_class}"><input type="text" {attrs} name="{esc(name)}" value="{esc(value)}"></span>'

    label_values: dict[str, dict[str, str]] = {}

    def label(self, o: dict[str, str], value: str) -> str:
        template = o.get("mapping template")
        return self.label_values.get(template, {}).get(value, value) if template else value

    def section_html(self, section: Section, key: str | None, values: dict[str, str] | None,
                     apply_default: bool) -> str:
        out = []
        for piece in section.pieces:
            if isinstance(piece, Field):
                name = f"{section.template}[{piece.name}]" if key is None else f"{section.template}[{key}][{piece.name}]"
                out.append(self.field_html(section, piece, name, (values or {}).get(piece.name), apply_default))
            else:
                out.append(piece)
        return "".join(out)

    @staticmethod
    def instance_table(main: str) -> str:
        return ('<table class="multipleTemplateInstanceTable"><tr><td class="instanceRearranger"></td>'
                f'<td class="instanceMain">{main}</td><td class="instanceAddAbove"><a class="addAboveButton" '
                'title="위에 추가" tabindex="1" role="button" href="javascript:void(0)"></a></td>'
                '<td class="instanceRemove"><a class="removeButton" title="삭제" tabindex="1" role="button" '
                'href="javascript:void(0)"></a></td></tr></table>')

    def render(self, records: dict[str, list[dict[str, str]]], new_page: bool) -> str:
        out = []
        for piece in self.definition:
            if not isinstance(piece, Section):
                out.append(piece)
                continue
            stored = records.get(piece.template, [])
            if not piece.multiple:
                out.append(self.section_html(piece, None, stored[0] if stored else {}, new_page or not stored))
                continue
            minimum = int(piece.options.get("minimum instances", "0") or 0)
            instances = list(stored) + [None] * max(0, minimum - len(stored))
            attrs = ' minimumInstances="%d"' % minimum if "minimum instances" in piece.options else ""
            out.append(f'<div class="multipleTemplateWrapper"><div class="multipleTemplateList"{attrs}>')
            for i, values in enumerate(instances):
                out.append('<div class="multipleTemplateInstance multipleTemplate">'
                           + self.instance_table(self.section_html(piece, f"{i}a", values, values is None)) + "</div>")
            out.append('<div class="multipleTemplateStarter" style="display: none">'
                       + self.instance_table(self.section_html(piece, "num", None, True)) + "</div>")
            add = html.escape(piece.options.get("add button text", "추가"))
            out.append('</div><p><span class="oo-ui-widget oo-ui-widget-enabled oo-ui-buttonElement '
                       'oo-ui-iconElement oo-ui-labelElement oo-ui-buttonWidget multipleTemplateAdder">'
                       f'<a class="oo-ui-buttonElement-button" role="button" tabindex="1">{add}</a></span></p>'
                       '<div class="pfErrorMessages"></div></div>')
        return "".join(out)


def form_bottom() -> str:
    """``PFFormUtils::formBottom``: summary, minor edit, save / preview / changes buttons, cancel."""
    def button(name: str, label: str, primary: bool = False) -> str:
        flags = " oo-ui-flaggedElement-primary oo-ui-flaggedElement-progressive" if primary else ""
        return (f'<span id="{name}" class="oo-ui-widget oo-ui-widget-enabled oo-ui-inputWidget oo-ui-buttonElement '
                f'oo-ui-labelElement oo-ui-buttonInputWidget{flags}"><button type="submit" tabindex="1" '
                f'name="{name}" value="{label}" class="oo-ui-inputWidget-input oo-ui-buttonElement-button">'
                f'<span class="oo-ui-labelElement-label">{label}</span></button></span>')
    return ('<br><div class="editOptions"><span class="oo-ui-widget oo-ui-widget-enabled oo-ui-inputWidget '
            'oo-ui-textInputWidget" style="max-width: 50em"><input type="text" tabindex="1" name="wpSummary" '
            'id="wpSummary" size="60" maxlength="255" class="oo-ui-inputWidget-input"></span><br><div class="editButtons">'
            + button("wpSave", "저장", True) + button("wpPreview", "미리 보기") + button("wpDiff", "차이 보기")
            + '</div></div>')


def render_form(wiki, form_text: str, page_text: str | None, user: str, action: str, *,
                posted: list[tuple[str, str]] | None = None, labels: dict[str, dict[str, str]] | None = None,
                definition: list | None = None) -> str:
    """``form#pfForm`` for ``page_text`` (None: a new page), or for a POST shown again after a
    preview / show-changes (``posted``); ``action`` is the form's submit URL."""
    definition = definition if definition is not None else parse_definition(wiki, form_text)[0]
    renderer = Renderer(definition, user)
    renderer.label_values = labels or {}
    records = post_records(posted) if posted is not None else page_records(page_text)
    body = renderer.render(records, new_page=page_text is None)
    hidden = ('<input type="hidden" value="" name="wpStarttime"><input type="hidden" value="" name="wpEdittime">'
              '<input type="hidden" value="+\\" name="wpEditToken"><input type="hidden" name="wpUltimateParam" value="1">')
    return (f'<form name="createbox" id="pfForm" method="post" action="{html.escape(action)}" '
            f'enctype="application/x-www-form-urlencoded">{body}{hidden}{form_bottom()}</form>')


def wikitext_from_post(definition: list, pairs: list[tuple[str, str]]) -> str:
    """The page text Page Forms writes for a POST of the form (see the module docstring)."""
    records = post_records(pairs)
    text = ""
    for piece in definition:
        if not isinstance(piece, Section):
            continue
        names = [p.name for p in piece.pieces if isinstance(p, Field)]
        for values in records.get(piece.template, []):
            call = "{{" + piece.template
            for name in names:
                value = values.get(name, "")
                if value != "":
                    call += f"\n|{name}={value}"
            text += call + ("\n" if "\n" in call else "") + "}}\n"
    return text


def render_forminput(params: dict[str, str]) -> str:
    """``{{#forminput}}`` as ``PFFormInputParserFunction`` renders it (before PF_formInput.js ran)."""
    attrs = 'class="pfFormInputWrapper" data-size="25"'
    if "placeholder" in params:
        attrs += f' data-placeholder="{html.escape(params["placeholder"])}"'
    if "no autofocus" not in params:
        attrs += ' data-autofocus="1"'
    attrs += f' data-button-label="{html.escape(params.get("button text", "Create or edit"))}"'
    query = dict(parse_qsl(params.get("query string", "")))
    hidden = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in query.items())
    return (f'<form name="createbox" action="{{FORMSTART}}" method="get" class="pfFormInput"><p>'
            f'<input type="hidden" name="form" value="{html.escape(params.get("form", ""))}">{hidden}'
            f'<div {attrs}></div></p></form>')


def forminput_params(wikitext: str) -> dict[str, str]:
    """Parameters of the first ``{{#forminput:…}}`` in ``wikitext`` (``no autofocus`` → "")."""
    m = re.search(r"\{\{#forminput:(.*?)\}\}", wikitext, re.S)
    parts = m.group(1).split("|")
    out = {"form": parts[0].split("=", 1)[1].strip()} if "=" in parts[0] else {}
    for part in parts[1:]:
        key, _, value = part.partition("=")
        out[key.strip()] = value.strip()
    return out


#: The parts of PageForms.js / PF_formInput.js a browser save goes through (module docstring).
#: Runs after ResourceLoader has jQuery and mw.hook.
STANDIN_JS = r"""
(function () {
  var numElements = 0;
  function validateAll() {
    $('.errorMessage').remove();
    mw.hook('pf.formValidationBefore').fire();
    var args = {numErrors: 0};
    mw.hook('pf.formValidation').fire(args);
    var errors = args.numErrors;
    $('.multipleTemplateStarter').find('span, div').addClass('hiddenByPF');
    $('.multipleTemplateList').each(function () {
      var min = parseInt($(this).attr('minimuminstances') || '0', 10);
      if ($(this).children('.multipleTemplateInstance').length < min) { errors++; }
    });
    $('span.inputSpan.mandatoryFieldSpan, span.comboboxSpan.mandatoryFieldSpan').not('.hiddenByPF').each(function () {
      var input = $(this).find('input:not([type=hidden]), select, textarea').first();
      if (!input.length) { input = $(this).find('input').first(); }
      if (!String(input.val() || '').trim()) {
        errors++; $(this).after('<div class="errorMessage">필수 입력 칸입니다.</div>');
      }
    });
    $('span.checkboxesSpan.mandatoryFieldSpan').not('.hiddenByPF').each(function () {
      if (!$(this).find('input[type=checkbox]:checked').length) {
        errors++; $(this).after('<div class="errorMessage">필수 입력 칸입니다.</div>');
      }
    });
    if (errors === 0) {
      $('.hiddenByPF').find('input, select, textarea').not(':disabled').prop('disabled', true).addClass('disabledByPF');
    }
    mw.hook('pf.formValidationAfter').fire();
    window.__pfErrors = errors;
    return errors === 0;
  }
  window.validateAll = validateAll;
  $('#pfForm').on('submit', function () { return validateAll(); });
  $(document).on('click', '.multipleTemplateAdder', function () {
    numElements++;
    var list = $(this).closest('.multipleTemplateWrapper').children('.multipleTemplateList');
    var div = list.children('.multipleTemplateStarter').clone()
      .removeClass('multipleTemplateStarter').addClass('multipleTemplateInstance multipleTemplate').removeAttr('style');
    div.find('input, select, textarea').each(function () {
      if (this.name) { this.name = this.name.replace(/\[num\]/g, '[' + numElements + 'b]'); }
      if (this.id) { this.id = this.id.replace(/input_/g, 'input_' + numElements + '_'); }
    });
    list.append(div);
  });
  $(document).on('click', '.removeButton', function () {
    $(this).closest('.multipleTemplateInstance').remove();
    return false;
  });
  $('.pfFormInputWrapper').each(function () {
    var input = $('<input type="text" name="page_name" size="25" class="oo-ui-inputWidget-input">');
    if ($(this).attr('data-placeholder')) { input.attr('placeholder', $(this).attr('data-placeholder')); }
    if ($(this).attr('data-autofocus') !== undefined) { input.attr('autofocus', 'autofocus'); }
    var box = $('<div class="oo-ui-widget oo-ui-inputWidget oo-ui-textInputWidget pfPageNameWithoutNamespace">').append(input);
    var button = $('<span class="oo-ui-widget oo-ui-buttonElement oo-ui-buttonInputWidget pfCreateOrEditButton">')
      .append($('<button type="submit" class="oo-ui-inputWidget-input oo-ui-buttonElement-button">').text($(this).attr('data-button-label')));
    $(this).append($('<div class="oo-ui-fieldsetLayout"><div class="oo-ui-horizontalLayout"></div></div>'));
    $(this).find('.oo-ui-horizontalLayout').append(box, button);
    if ($(this).attr('data-autofocus') !== undefined) { input[0].focus(); }  // OOUI's autofocus
  });
  window.__pfReady = true;
}());
"""


def label_maps(schema) -> dict[str, dict[str, str]]:
    """``S3RM label <enum>`` mapping templates as Page Forms shows them: value → Korean label (value)."""
    from sync.pages.wikitext import label_template

    return {label_template(name): {v: f"{e.label(v)} ({v})" for v in e.values} for name, e in schema.enums.items()}


def inject(page_html: str, content: str, config: dict[str, object], heading: str | None = None) -> str:
    """A real MediaWiki page's HTML with its content area replaced by ``content``, the stand-in
    Page Forms script queued after ResourceLoader, ``config`` merged into RLCONF and the first
    heading set to ``heading``."""
    start = page_html.index('<div id="mw-content-text"')
    end = page_html.index('<div class="printfooter"', start)
    open_tag_end = page_html.index(">", start) + 1
    script = ("<script>(window.RLQ=window.RLQ||[]).push([['jquery','mediawiki.base'],function(){$(function(){"
              + STANDIN_JS + "});}]);</script>")
    page_html = page_html[:open_tag_end] + content + script + "</div>" + page_html[end:]
    m = re.search(r"RLCONF=(\{.*?\});RLSTATE", page_html, re.S)
    conf = json.loads(m.group(1))
    conf.update(config)
    page_html = page_html[:m.start(1)] + json.dumps(conf, ensure_ascii=False) + page_html[m.end(1):]
    if heading is not None:
        page_html = re.sub(r'(<h1 id="firstHeading"[^>]*>).*?(</h1>)',
                           lambda mm: mm.group(1) + '<span class="mw-page-title-main">' + html.escape(heading) + "</span>" + mm.group(2),
                           page_html, count=1, flags=re.S)
    return page_html
