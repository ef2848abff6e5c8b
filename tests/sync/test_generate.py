"""Tests of the schema generator (sync/generate.py, sync/pages, sync/toolschemas.py).

Contract: docs/data-contract.md#schema-source (one source, committed output,
staleness check), docs/data-contract.md#templates,
docs/data-contract.md#browser-forms, docs/browser.md#synced-pages.
The ``wiki`` tests render the plain variant in the real
development MediaWiki (no SMW, no Page Forms).
"""
from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from support.schema_dirs import SCHEMA
import pytest
from jsonschema import Draft202012Validator

from gateway.config import DEFAULT_SCHEMA_DIR
from gateway.domain.codec import NAMED_REFERENCES
from s3rm.cli import main as cli_main
from sync.generate import GENERATED_DIRS, render_generated_files
from sync.pages import WikiCapabilities, page_relpath, render_schema_pages, title_for_relpath
from sync.pages.templates import value_mode
from gateway.tools.schema_builders import DEF_NAME, desc, hoist_defs, obj, string
from sync.toolschemas import TOOL_NAMES, render_tool_schemas

FULL = render_schema_pages(SCHEMA, WikiCapabilities.full())
PLAIN = render_schema_pages(SCHEMA, WikiCapabilities.plain())
TOOLS = render_tool_schemas(SCHEMA)
SMW_OR_PF_CALLS = ("{{#set", "{{#subobject", "{{#ask", "{{#forminput", "{{{for template", "[[Has type::", "{{#invoke")


# --------------------------------------------------------------------------- generate / --check

def test_check_passes_on_committed_output(capsys):
    assert cli_main(["schema", "generate", "--check"]) == 0, capsys.readouterr().out


def _copy_schema(tmp_path: Path) -> Path:
    root = tmp_path / "schema"
    root.mkdir()
    shutil.copy(DEFAULT_SCHEMA_DIR / "lesson.toml", root / "lesson.toml")
    for folder in GENERATED_DIRS:
        if (DEFAULT_SCHEMA_DIR / folder).is_dir():
            shutil.copytree(DEFAULT_SCHEMA_DIR / folder, root / folder)
    return root


def test_check_fails_after_source_edit_and_generate_repairs(tmp_path, capsys, monkeypatch):
    root = _copy_schema(tmp_path)
    assert cli_main(["schema", "generate", "--check", "--schema", str(root / "lesson.toml")]) == 0
    source = root / "lesson.toml"
    text = source.read_text(encoding="utf-8")
    source.write_text(text.replace('label = "제목"', 'label = "메모 제목"', 1), encoding="utf-8")
    (root / "Templates" / "Obsolete.wiki").write_text("old\n", encoding="utf-8")
    (root / "tools" / "search_lessons.input.schema.json").unlink()
    capsys.readouterr()
    # the folder form of the path argument and S3RM_SCHEMA_DIR both select the copy
    monkeypatch.setenv("S3RM_SCHEMA_DIR", str(root))
    assert cli_main(["schema", "generate", "--check"]) == 1
    out = capsys.readouterr().out
    assert "stale: Templates/Lesson.wiki" in out
    assert "stale: Forms/Lesson.wiki" in out
    assert "missing: tools/search_lessons.input.schema.json" in out
    assert "extra: Templates/Obsolete.wiki" in out
    assert cli_main(["schema", "generate", "--schema", str(root)]) == 0
    assert not (root / "Templates" / "Obsolete.wiki").exists()
    assert "메모 제목" in (root / "Templates" / "Lesson.wiki").read_text(encoding="utf-8")
    assert cli_main(["schema", "generate", "--check", "--schema", str(root)]) == 0


def test_check_shows_a_diff_naming_a_stale_tool_schema_file(tmp_path, capsys):
    root = _copy_schema(tmp_path)
    path = root / "tools" / "get_lesson.input.schema.json"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"additionalProperties": false', '"additionalProperties": true', 1), encoding="utf-8")
    capsys.readouterr()
    assert cli_main(["schema", "generate", "--check", "--schema", str(root)]) == 1
    out = capsys.readouterr().out
    assert "stale: tools/get_lesson.input.schema.json" in out
    assert "--- tools/get_lesson.input.schema.json (committed)" in out
    assert "+++ tools/get_lesson.input.schema.json (generated)" in out
    assert '-  "additionalProperties": true' in out and '+  "additionalProperties": false' in out


def test_missing_source_is_a_usage_error(tmp_path, capsys):
    assert cli_main(["schema", "generate", "--check", "--schema", str(tmp_path / "nope.toml")]) == 2


def test_output_is_deterministic_lf_and_newline_terminated():
    first = render_generated_files(SCHEMA)
    assert first == render_generated_files(SCHEMA)
    assert list(first) == sorted(first)
    for rel, content in first.items():
        assert content.endswith("\n") and not content.endswith("\n\n"), rel
        assert "\r" not in content, rel
    for name in TOOLS:
        text = first[f"tools/{name}"]
        assert json.loads(text) == TOOLS[name]
        assert text == json.dumps(TOOLS[name], indent=2, ensure_ascii=False) + "\n"


def test_page_paths_round_trip():
    for title in FULL:
        assert title_for_relpath(page_relpath(title)) == title
    with pytest.raises(ValueError):
        page_relpath("MediaWiki:Common.css")


# --------------------------------------------------------------------------- variants

def test_full_variant_has_every_page_kind():
    props = [t for t in FULL if t.startswith("Property:")]
    assert len(props) == len(SCHEMA.properties())
    for name in ("Lesson", "Lesson evidence", "Lesson evidence verification", "Lesson relation", "S3RM synced"):
        assert f"Template:{name}" in FULL
    assert "Form:Lesson" in FULL
    assert "Module:S3RM values" in FULL and "Module:S3RM entities" in FULL
    assert "{{#invoke:S3RM values|set\n" in FULL["Template:Lesson"]
    assert "{{#invoke:S3RM values|subobject|evidence-" in FULL["Template:Lesson evidence"]
    assert "{{#invoke:S3RM values|subobject|verification-" in FULL["Template:Lesson evidence verification"]
    assert "{{#invoke:S3RM values|subobject|relation-" in FULL["Template:Lesson relation"]


def test_plain_variant_has_no_smw_or_page_forms_calls():
    assert not [t for t in PLAIN if t.startswith(("Property:", "Form:"))]
    assert not [t for t in PLAIN if t.startswith("Template:S3RM label")]
    for title, text in PLAIN.items():
        for call in SMW_OR_PF_CALLS:
            assert call not in text, (title, call)


def test_mixed_variants():
    smw_only = render_schema_pages(SCHEMA, WikiCapabilities(smw=True, page_forms=False))
    assert "Property:Lesson title" in smw_only and "Form:Lesson" not in smw_only
    forms_only = render_schema_pages(SCHEMA, WikiCapabilities(smw=False, page_forms=True))
    assert "Form:Lesson" in forms_only and "Property:Lesson title" not in forms_only
    assert "{{#set" not in forms_only["Template:Lesson"]
    assert WikiCapabilities.from_extension_names(["Semantic MediaWiki", "ParserFunctions"]) == \
        WikiCapabilities(smw=True, page_forms=False)
    assert WikiCapabilities.from_extension_names(["PageForms"]).page_forms
    assert WikiCapabilities.from_extension_names(["Scribunto"]).scribunto


def test_smw_values_go_through_the_module_only_with_scribunto():
    """docs/browser.md#values-in-smw: with Scribunto every SMW annotation is the module's; without, plain #set."""
    for title, text in FULL.items():
        assert "{{#set" not in text and "{{#subobject" not in text, title
    smw_only = render_schema_pages(SCHEMA, WikiCapabilities(smw=True, page_forms=False))
    assert "Module:S3RM values" not in smw_only and "{{#invoke" not in smw_only["Template:Lesson"]
    assert "Module:S3RM entities" not in smw_only
    assert "{{#set:" in smw_only["Template:Lesson"]
    assert "{{#subobject:relation-" in smw_only["Template:Lesson relation"]
    plain_lua = render_schema_pages(SCHEMA, WikiCapabilities(smw=False, page_forms=False, scribunto=True))
    assert "Module:S3RM values" in plain_lua and "{{#invoke" not in plain_lua["Template:Lesson"]


def test_entities_module_holds_the_codec_table_in_ascii():
    """``Module:S3RM entities`` evaluates, in real Lua 5.1, to codec.NAMED_REFERENCES; its entries are
    printable ASCII (NFC on save cannot touch them), and Module:S3RM values loads it."""
    text = FULL["Module:S3RM entities"]
    body = text[text.index("return {"):]
    assert all(0x20 <= ord(c) < 0x7F or c in "\t\n" for c in body)
    assert "mw.loadData( 'Module:S3RM entities' )" in FULL["Module:S3RM values"]
    script = ("local t = dofile(arg[1]) local names = {} for k in pairs(t) do names[#names + 1] = k end "
              "table.sort(names) for _, k in ipairs(names) do io.write(k, '\\0', t[k], '\\0') end")
    with tempfile.TemporaryDirectory() as tmp:
        module, dump = Path(tmp, "entities.lua"), Path(tmp, "dump.lua")
        module.write_text(text, encoding="utf-8")
        dump.write_text(script, encoding="utf-8")
        out = subprocess.run(["lua5.1", dump, module], capture_output=True, check=True).stdout
    fields = out.decode("utf-8").split("\0")[:-1]
    assert dict(zip(fields[::2], fields[1::2])) == NAMED_REFERENCES


def test_module_modes_follow_the_field_types():
    """Free text and the evidence URL (SMW type Text) decoded, lists/enums/dates/pages as written."""
    lesson = FULL["Template:Lesson"]
    assert "|Lesson title=text:{{{title|}}}\n" in lesson
    assert "|Confidence=keep:{{{confidence|}}}\n" in lesson
    assert "|Created at=keep:{{{created_at|}}}\n" in lesson
    evidence = FULL["Template:Lesson evidence"]
    assert "|Evidence URL=text:{{{url|}}}\n" in evidence
    assert "|Evidence citation=text:{{{citation|}}}\n" in evidence
    verification = FULL["Template:Lesson evidence verification"]
    assert "=list:{{{claim_fields|}}}\n" in verification
    relation = FULL["Template:Lesson relation"]
    assert "|Relation to=keep:{{#if:{{{to|}}}|Lesson:{{{to|}}}}}\n" in relation
    assert "|Relation note=text:{{{note|}}}\n" in relation
    for rec in SCHEMA.records:
        for f in rec.fields:
            assert value_mode(f) in ("text", "list", "keep"), f.name


def test_templates_never_reference_a_parameter_without_default():
    bare = re.compile(r"\{\{\{([^|{}]+)\}\}\}")
    for title, text in FULL.items():
        if title.startswith("Form:"):
            continue  # Page Forms tags ({{{end template}}}) are not parameters
        assert not bare.search(text), (title, bare.search(text).group(0))


def test_every_synced_page_carries_the_banner():
    for title, text in FULL.items():
        if title == "Template:S3RM synced":
            assert "s3rm-synced-banner" in text
        elif title.startswith("Module:"):
            assert text.startswith("-- S3RM synced:"), title  # Lua cannot show the banner template
        else:
            assert "{{S3RM synced}}" in text, title


# --------------------------------------------------------------------------- page contents

def _view(text: str) -> str:
    """The part of a template that renders on Lesson pages, minus SMW storage calls."""
    inc = "".join(re.findall(r"<includeonly>(.*?)</includeonly>", text, re.S))
    return re.sub(r"\{\{#(?:set:|subobject:|invoke:S3RM values\|).*?\n\}\}", "", inc, flags=re.S)


def test_property_pages():
    conf = FULL["Property:Confidence"]
    assert "[[Has type::Text]]" in conf
    for v in ("low", "medium", "high"):
        assert f"[[Allows value::{v}]]" in conf
    assert "[[Allows value::not_recorded]]" in FULL["Property:Verification basis"]
    assert "[[Has type::Date]]" in FULL["Property:Updated at"]
    assert "[[Has type::Page]]" in FULL["Property:Relation to"]
    # Text, not URL: SMW's URL type re-encodes the address (docs/browser.md#values-in-smw)
    assert "[[Has type::Text]]" in FULL["Property:Evidence URL"]
    # the home page relies on these (docs/browser.md#home-page)
    for name in ("Lesson title", "Confidence", "Updated at"):
        assert f"Property:{name}" in FULL


def test_lesson_template_layout_and_hidden_legacy_fields():
    text = FULL["Template:Lesson"]
    assert "<includeonly>" in text and "[[Category:Lessons]]</includeonly>" in text
    view = _view(text)
    for f in SCHEMA.lesson.fields:
        if f.settable == "legacy":
            assert f.name not in view, f.name  # docs/data-contract.md#legacy-fields
        else:
            assert "{{{" + f.name + "|}}}" in view, f.name
    labels = [SCHEMA.lesson.field(n).label for n in ("question", "attempt", "context", "observation",
                                                      "interpretation", "reusable_lesson", "applicability")]
    positions = [view.index(label) for label in labels]
    assert positions == sorted(positions), "fields follow schema order"
    assert "s3rm-badge s3rm-confidence-" in view
    assert "{{fullurl:{{FULLPAGENAME}}|action=history}}" in view
    for f in SCHEMA.lesson.fields:  # every property stored, through the module
        assert f"{f.property}={value_mode(f)}:{{{{{{{f.name}|}}}}}}" in text


def test_evidence_template_digest_placeholder_and_optional_url():
    view = _view(FULL["Template:Lesson evidence"])
    assert 'class="s3rm-evidence-digest" data-evidence-id="{{anchorencode:{{{id|}}}}}"' in view
    assert "{{#if:{{{url|}}}|" in view
    assert "paper=논문" in view and "full_text=원문 전체" in view


def test_relation_template_links_target_in_every_variant():
    for pages in (FULL, PLAIN):
        view = _view(pages["Template:Lesson relation"])
        assert "[[Lesson:{{{to|}}}|{{{to|}}}]]" in view
        assert "analogous_to=비슷한 사례" in view


def test_no_page_shows_smw_printouts_through_a_template():
    """SMW passes a Text printout into a result template as raw wikitext
    (ValueTextsBuilder / WikitextTemplateRenderer), so a value would be re-parsed: no generated page
    and no home page variant runs an #ask, and the summary-row template is gone
    (docs/browser.md#home-page)."""
    assert "Template:S3RM lesson summary" not in FULL
    for title, text in FULL.items():
        assert "{{#ask" not in text, title


def test_lesson_template_sets_its_default_form_only_with_page_forms():
    """``{{#default_form:Lesson}}`` sets the page property PFDefaultForm: Lesson pages get the
    form-edit tab and action=formedit opens Form:Lesson (docs/browser.md#page-forms)."""
    assert "{{#default_form:Lesson}}" in FULL["Template:Lesson"].split("<noinclude>")[0]
    assert "#default_form" not in PLAIN["Template:Lesson"]
    smw_only = render_schema_pages(SCHEMA, WikiCapabilities(smw=True, page_forms=False))
    assert "#default_form" not in smw_only["Template:Lesson"]


def test_form_sections_follow_the_page_order():
    """Page Forms writes the templates of a save in the order of the form's sections, so the form
    lists them in page order: Lesson, evidence, verification, relation (docs/data-contract.md#templates)."""
    form = FULL["Form:Lesson"]
    starts = [form.index("{{{for template|" + rec.template + "|") for rec in SCHEMA.records]
    assert starts == sorted(starts)


def test_form_carries_the_schemas_save_rules_for_the_site_script():
    """docs/browser.md#form-rules: the form holds the rules the site script checks, derived from
    schema/lesson.toml — new-record choices, patterns, URL schemes, the confidence rule — as JSON
    in a hidden element whose every wikitext-active character is a reference."""
    import html as _html
    import json as _json

    from sync.pages.forms import form_rules
    form = FULL["Form:Lesson"]
    m = re.search(r'<div id="s3rm-form-rules" style="display:none" data-rules="([^"]*)"></div>', form)
    raw = m.group(1)
    assert not set(raw) & set("{}[]|<>'~\\") and "__" not in raw
    rules = _json.loads(_html.unescape(raw))
    assert rules == form_rules(SCHEMA)
    assert rules["fields"]["lesson"]["record_origin"]["new_values"] == SCHEMA.enum("record_origin").extra["form_values"]
    assert "not_recorded" not in rules["fields"]["evidence"]["verification_basis"]["new_values"]
    assert rules["patterns"]["record_id"] == SCHEMA.meta["evidence_id_pattern"]
    assert rules["confidence"]["claims"] == SCHEMA.enum("claim_field").extra["high_confidence_claims"]
    assert rules["url_schemes"] == ["http", "https"]


def _form_section(form: str, template: str) -> str:
    start = form.index("{{{for template|" + template + "|")
    return form[start:form.index("{{{end template}}}", start)]


def test_form_lists_every_stored_value_and_locks_provenance():
    """a drop-down holds every value of its enum, so Page Forms selects a stored
    ``synthetic`` or ``not_recorded`` (a value missing from the list shows and saves the first
    option); what a new Lesson or record may choose is in the rules block (next test)."""
    form = FULL["Form:Lesson"]
    evidence = _form_section(form, "Lesson evidence")
    assert "multiple" in evidence and "minimum instances=1" in evidence
    assert "{{{field|verification_basis|input type=dropdown|values=full_text,official_abstract,partial_source," \
           "metadata_only,not_recorded|" in evidence
    lesson = _form_section(form, "Lesson")
    assert "{{{field|record_origin|input type=dropdown|values=lab,imported,synthetic|" in lesson
    assert "{{{field|author|hidden|default=current user}}}" in lesson
    assert "{{{field|review_state|hidden|default=Draft}}}" in lesson
    assert "{{{field|reviewer|hidden}}}" in lesson
    for name in ("created_at", "updated_at"):
        assert re.search(r"\{\{\{field\|" + name + r"\|hidden[|}]", lesson), name
    assert "{{{field|added_by|hidden|default=current user}}}" in evidence
    assert "{{{field|added_at|hidden}}}" in evidence
    relation = _form_section(form, "Lesson relation")
    assert "{{{field|to|input type=combobox|values from namespace=Lesson|existing values only|" in relation
    assert "{{{field|created_by|hidden|default=current user}}}" in relation
    assert "{{{field|from|hidden}}}" in relation
    verification = _form_section(form, "Lesson evidence verification")
    for name in ("evidence_id", "evidence_digest", "source_identity", "source_sha256", "source_locator",
                 "coverage", "outcome"):
        assert "{{{field|" + name + "|" in verification, name
    assert "{{{field|claim_fields|input type=checkboxes|" in verification
    assert "{{{field|verified_by|hidden|default=current user}}}" in verification
    # every server-managed or legacy field is hidden, never a visible input (docs/data-contract.md#browser-forms)
    for rec in SCHEMA.records:
        section = _form_section(form, rec.template)
        for f in rec.fields:
            call = re.search(r"\{\{\{field\|" + re.escape(f.name) + r"\|([^}]*)\}\}\}", section)
            assert call, (rec.kind, f.name)
            assert ("hidden" in call.group(1).split("|")) == (f.settable in ("server", "legacy")), (rec.kind, f.name)


# --------------------------------------------------------------------------- JSON Schemas

def _walk(node, path="$"):
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{path}[{i}]")


#: Names of stored record fields (schema/lesson.toml): in outputs they carry no description of their own
#: (the input field and docs/data-contract.md say what they mean).
_RECORD_FIELDS = {f.name for rec in SCHEMA.records for f in rec.fields}


def _description(doc: dict, node: dict) -> str | None:
    """A property's description: its own, or the one its ``#/$defs`` block holds."""
    while "description" not in node and "$ref" in node:
        node = doc["$defs"][node["$ref"].removeprefix("#/$defs/")]
    return node.get("description")


def test_tool_schemas_are_valid_closed_and_described():
    """Every object closed with a ``required`` list, also inside ``$defs`` (the walk covers them); every
    ``$ref`` a local ``#/$defs/…`` that resolves; every property described in English (on it or in its
    ``$defs`` block), except stored record fields in outputs and in revise_lesson's ``changes`` (described
    once, where a client first sets them) and output properties tools/list has described before (in an
    inputSchema up to this tool's, or an earlier tool's outputSchema: docs/tools.md#tool-list)."""
    assert sorted(TOOLS) == sorted(f"{t}.{d}.schema.json" for t in TOOL_NAMES for d in ("input", "output"))
    said: set[str] = set()
    said_pairs: set[tuple[str, str]] = set()
    for name in [f"{t}.{d}.schema.json" for t in TOOL_NAMES for d in ("input", "output")]:
        doc = TOOLS[name]
        output = name.endswith(".output.schema.json")
        Draft202012Validator.check_schema(doc)
        assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert doc["$id"] == f"https://s3rm.invalid/schema/tools/{name}"
        assert doc["type"] == "object"
        described, said_now = set(), set()
        for path, node in _walk(doc):
            if "$ref" in node:
                assert node["$ref"].startswith("#/$defs/") and node["$ref"][8:] in doc["$defs"], (name, path)
            if node.get("type") == "object" or (isinstance(node.get("type"), list) and "object" in node["type"]):
                assert node.get("additionalProperties") is False, (name, path)
                assert "required" in node, (name, path)
            if path.endswith(".properties"):
                for prop, sub in node.items():
                    description = _description(doc, sub)
                    if description:
                        assert not (output and (prop, description) in said_pairs), ("said before", name, path, prop)
                        described.add(prop)
                        said_now.add((prop, description))
                        assert not re.search(r"[\uac00-\ud7a3]", description), (name, path, prop)
                        assert description.strip(" .").lower() != prop.replace("_", " "), (name, path, prop)
                        continue
                    shared = prop in _RECORD_FIELDS and (output or path.endswith(".changes.properties"))
                    assert shared or (output and prop in said), (name, path, prop)
        said |= described
        said_pairs |= said_now


def test_hoisting_shares_blocks_keeps_descriptions_and_validates_the_same_instances():
    """``hoist_defs``: a tagged and an untagged copy of one block share the tag's definition, each use
    keeping its own description beside its ``$ref``; copies that also share a long description share a
    definition holding it and become bare ``$ref`` s; the result accepts and refuses exactly what the
    original does."""
    pattern = "^[a-z0-9_-]+(?:/[a-z0-9_-]+){0,8}$"
    block = string("Same words.", 120, pattern=pattern)
    long_words = "A description long enough that saying it once in $defs is shorter than saying it three times."
    originals = [
        obj({"a": block, "b": desc(block, "Other words."), "c": desc({**block, DEF_NAME: "path_id"}, "Third.")},
            ["a"]),
        obj({"x": desc(block, long_words), "y": desc(block, long_words), "z": desc(block, long_words)}, ["x"]),
    ]
    first, second = (hoist_defs(schema) for schema in originals)
    assert list(first["$defs"]) == ["path_id"] and first["$defs"]["path_id"]["pattern"] == pattern
    assert [first["properties"][p] for p in "abc"] == [
        {"description": d, "$ref": "#/$defs/path_id"} for d in ("Same words.", "Other words.", "Third.")]
    assert list(second["$defs"]) == ["x"] and second["$defs"]["x"]["description"] == long_words
    assert [second["properties"][p] for p in "xyz"] == [{"$ref": "#/$defs/x"}] * 3
    assert DEF_NAME not in json.dumps([first, second])
    for original, hoisted, (p, q, r) in zip(originals, (first, second), ("abc", "xyz")):
        before, after = Draft202012Validator(original), Draft202012Validator(hoisted)
        verdicts = []
        for instance in ({p: "x"}, {p: "x/y", q: "z", r: "a-b"}, {p: "X"}, {q: "x"}, {p: "x", "f": 1},
                         {p: "x" * 121}, {p: 3}):
            verdicts.append(before.is_valid(instance))
            assert after.is_valid(instance) == verdicts[-1], instance
        assert verdicts == [True, True, False, False, False, False, False]


def test_repeated_blocks_are_shared_once():
    """No block of 100 bytes or more appears twice in one document: it sits once in ``$defs``."""
    for name, doc in TOOLS.items():
        seen: dict[str, str] = {}
        for path, node in _walk(doc):
            if path.endswith((".properties", ".$defs")) or "$ref" in node:
                continue
            shape = json.dumps({k: v for k, v in node.items() if k != "description"}, sort_keys=True)
            if len(shape) >= 100 and path != "$":
                assert shape not in seen, (name, path, seen.get(shape))
                seen[shape] = path


#: The JSON types a portable schema names, one per ``type`` (strict clients flag type arrays).
_JSON_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}


def test_published_schemas_are_portable():
    """What MCP Inspector ``--strict`` checks, walked here: no ``type`` arrays such as
    ["string", "null"] (nullable values are ``anyOf`` [schema, {"type": "null"}]), no ``null``
    inside an ``enum``, no OpenAPI ``nullable``; and no array described as comma-separated."""
    for name, doc in TOOLS.items():
        for path, node in _walk(doc):
            if path.endswith(".properties"):
                continue
            if "type" in node:
                assert isinstance(node["type"], str) and node["type"] in _JSON_TYPES, (name, path, node["type"])
            assert None not in node.get("enum", ()), (name, path)
            assert "nullable" not in node, (name, path)
            if node.get("type") == "array":
                assert "쉼표로 구분" not in node.get("description", ""), (name, path)


def test_every_recorded_answer_validates_against_the_published_output_schema():
    """The golden transcripts (tests/gateway/golden/mcp) hold real answers; each successful tool
    result's structuredContent validates against its tool's output schema."""
    golden = Path(__file__).resolve().parents[1] / "gateway" / "golden" / "mcp"
    checked = 0
    for path in sorted(golden.glob("*.txt")):
        request_text, _, response_text = path.read_text(encoding="utf-8").partition("--- response")
        request = json.loads(request_text.strip().splitlines()[-1])
        body = response_text.strip().splitlines()[-1]
        if request.get("method") != "tools/call" or not body.startswith("{"):
            continue
        result = json.loads(body).get("result", {})
        if result.get("isError") or "structuredContent" not in result:
            continue
        errors = list(_validator(request["params"]["name"], "output").iter_errors(result["structuredContent"]))
        assert errors == [], (path.name, [e.message for e in errors][:3])
        checked += 1
    assert checked >= 15


def _resolved(doc: dict, *path: str) -> dict:
    """The node at ``path`` (property names, "items", …) with every ``#/$defs`` reference on the way followed."""
    node = doc
    for step in path:
        while "$ref" in node:
            node = doc["$defs"][node["$ref"].removeprefix("#/$defs/")]
        node = node[step]
    while "$ref" in node:
        node = doc["$defs"][node["$ref"].removeprefix("#/$defs/")]
    return node


def _validator(tool: str, direction: str) -> Draft202012Validator:
    return Draft202012Validator(TOOLS[f"{tool}.{direction}.schema.json"])


DIGEST = "sha256:" + "a" * 64
SHA = "b" * 64
TS = "2026-07-19T02:01:19Z"
LESSON_CORE = {
    "title": "t", "question": "q", "attempt": "a", "context": "c", "observation": "o", "interpretation": "i",
    "reusable_lesson": "r", "applicability": "p", "confidence": "medium", "evidence": "e",
}
CITATION = {"id": "ev1", "citation": "repo@abc", "kind": "code", "verification_basis": "not_recorded",
            "digest": DIGEST, "current_verdict": "none"}
VERIFICATION = {"id": "v1", "evidence_id": "ev1", "evidence_digest": DIGEST, "verification_basis": "full_text",
                "source_identity": "s", "source_sha256": SHA, "source_locator": "p1", "coverage": "all",
                "outcome": "supports", "claim_fields": ["observation"], "verified_by": "u", "verified_at": TS}
RELATION = {"from": "a", "relation": "analogous_to", "to": "b", "created_by": "u", "created_at": TS,
            "direction": "outgoing", "symmetric": True}
RETRIEVAL = {"effective_mode": "legacy", "requested_mode": "hybrid_v1", "ranking_version": "rrf-1",
             "semantic_status": "unavailable", "partial": False, "scanned": 3, "scan_limit": 500, "scope": None}

VALID = {
    ("search_lessons", "input"): [{}, {"query": "gpu", "filters": {"confidence": ["high"], "updated_after": TS},
                                       "fields": ["id", "title", "citations"], "limit": 20,
                                       "retrieval_mode": "hybrid_v1", "min_score": 0.5}],
    ("search_lessons", "output"): [{"results": [{"id": "a", "score": 1, "basis": "full_text", "title": "t",
                                                 "revision_id": 4, "citations": [CITATION]}],
                                    "next_cursor": None, **RETRIEVAL}],
    ("get_lesson", "input"): [{"id": "gpu_alloc-1", "fields": ["title", "updated_at"], "citation_detail": "full",
                               "relations_limit": 20}],
    ("get_lesson", "output"): [{"id": "a", "revision_id": 7, "content_digest": DIGEST,
                                "lesson": {**LESSON_CORE, "record_origin": "synthetic", "author": "u",
                                           "created_at": TS, "updated_at": TS},
                                "citations": {"items": [CITATION], "next_cursor": "c", "total": 1},
                                "verifications": {"items": [VERIFICATION], "next_cursor": None, "total": 1},
                                "relations": {"items": [RELATION], "next_cursor": None, "total": 1}}],
    ("audit_lessons", "input"): [{"expectations": [{"id": "a", "revision_id": 3, "content_digest": DIGEST,
                                                    "evidence_ids": ["ev1"],
                                                    "relations": [{"relation": "supports", "to": "b"}]}]}],
    ("audit_lessons", "output"): [{"results": [{"position": 0, "id": "a", "status": "mismatch",
                                                "current_revision_id": 4,
                                                "failed": [{"expectation": "relations", "index": 0}]},
                                               {"position": 1, "id": "b", "status": "missing",
                                                "current_revision_id": None, "failed": []}],
                                   "next_cursor": None, "partial": False, "scanned": 2, "scan_limit": 50}],
    ("find_related_lessons", "input"): [{"id": "a", "relation_types": ["supports"], "direction": "incoming"}],
    ("find_related_lessons", "output"): [{"id": "a", "results": [{"id": "b", "title": "t", "relation": "supports",
                                                                   "direction": "incoming", "from": "b", "to": "a",
                                                                   "symmetric": False}],
                                          "next_cursor": None, "partial": False, "scanned": 1, "scan_limit": 10}],
    ("find_analogies", "input"): [{"id": "a", "retrieval_mode": "legacy", "scope": "lab"}],
    ("find_analogies", "output"): [{"source_id": "a", "source_revision_id": 3,
                                    "results": [{"id": "b", "title": "t", "score": 0.4, "basis": "lexical",
                                                 "shared_terms": ["메모리", "gpu"]}],
                                    "next_cursor": None, **RETRIEVAL}],
    ("create_lesson_draft", "input"): [
        {"operation_id": "op-12345678", **LESSON_CORE,
         "initial_evidence": {"citation": "repo@abc", "kind": "code", "verification_basis": "partial_source"}},
        {"operation_id": "op:2026.07-x", "lesson_id": "gpu_x", **LESSON_CORE,
         "confidence": "high",
         "initial_evidence": {"id": "ev1", "citation": "c", "url": "https://example.org/a", "kind": "paper",
                              "verification_basis": "full_text", "note": "n"},
         "initial_verification": {"verification_basis": "full_text", "source_identity": "s",
                                  "source_sha256": SHA, "source_locator": "p", "coverage": "all",
                                  "outcome": "supports",
                                  "claim_fields": ["observation", "interpretation", "reusable_lesson"]}}],
    ("create_lesson_draft", "output"): [{"status": "created", "id": "a", "current_revision_id": 1,
                                         "evidence_ids": ["ev1"], "verification_ids": [],
                                         "duplicate_candidates": {"status": "ok", "items": [
                                             {"id": "b", "title": "t", "score": 0.9, "band": "same_topic"}]}}],
    ("link_lessons", "input"): [{"operation_id": "op-12345678", "from": "a", "relation": "supersedes", "to": "b"}],
    ("link_lessons", "output"): [{"status": "replayed", "from": "a", "relation": "supersedes", "to": "b",
                                  "current_revision_id": 9}],
    ("attach_evidence", "input"): [{"operation_id": "op-12345678", "lesson_id": "a", "citation": "c",
                                    "kind": "log", "verification_basis": "metadata_only"}],
    ("attach_evidence", "output"): [{"status": "created", "lesson_id": "a", "evidence_id": "ev2",
                                     "evidence_digest": DIGEST, "current_revision_id": 5}],
    ("record_evidence_verification", "input"): [{
        "operation_id": "op-12345678", "lesson_id": "a", "evidence_id": "ev1", "expected_revision_id": 3,
        "expected_evidence_digest": DIGEST, "verification_basis": "partial_source", "source_identity": "s",
        "source_sha256": SHA, "source_locator": "l", "coverage": "c", "outcome": "inconclusive",
        "claim_fields": ["context"]}],
    ("record_evidence_verification", "output"): [{"status": "created", "lesson_id": "a", "verification_id": "v1",
                                                  "evidence_id": "ev1", "current_revision_id": 4,
                                                  "current_verdict": "inconclusive"}],
    ("revise_lesson", "input"): [{"operation_id": "op-12345678", "lesson_id": "a", "expected_revision_id": 3,
                                  "basis_evidence_ids": ["ev1"], "changes": {"confidence": "low"},
                                  "reason": "고침"}],
    ("revise_lesson", "output"): [{"status": "revised", "lesson_id": "a", "applied_revision_id": 4,
                                   "current_revision_id": 4, "changed_fields": ["confidence"]}],
}


def _mutate(instance: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(instance)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


_DELETE = object()

# (tool, direction, index of the VALID example, path, new value): each must be rejected.
INVALID = [
    ("search_lessons", "input", 0, ("unknown",), 1),
    ("search_lessons", "input", 1, ("limit",), 21),
    ("search_lessons", "input", 1, ("query",), "x" * 501),
    ("search_lessons", "input", 1, ("fields",), ["reviewer"]),
    ("search_lessons", "input", 1, ("filters", "updated_after"), "2026-07-19 02:01:19"),
    ("search_lessons", "input", 1, ("filters", "extra"), []),
    ("search_lessons", "output", 0, ("results", 0, "score"), 1.5),
    ("search_lessons", "output", 0, ("results", 0, "reviewer"), "x"),
    ("search_lessons", "output", 0, ("semantic_status",), "warm"),
    ("get_lesson", "input", 0, ("id",), "Capital"),
    ("get_lesson", "input", 0, ("fields",), ["review_state"]),
    ("get_lesson", "input", 0, ("citations_limit",), 0),
    ("get_lesson", "output", 0, ("lesson", "review_state"), "Draft"),
    ("get_lesson", "output", 0, ("content_digest",), "sha256:xyz"),
    ("get_lesson", "output", 0, ("citations", "items", 0, "current_verdict"), "maybe"),
    ("get_lesson", "output", 0, ("relations", "items", 0, "direction"), "both"),
    ("audit_lessons", "input", 0, ("expectations",), []),
    ("audit_lessons", "input", 0, ("expectations",), [{"id": "a"}] * 51),
    ("audit_lessons", "input", 0, ("expectations", 0, "evidence_ids"), [f"e{i}" for i in range(9)]),
    ("audit_lessons", "output", 0, ("results", 0, "failed", 0, "expectation"), "title"),
    ("find_related_lessons", "input", 0, ("direction",), "sideways"),
    ("find_related_lessons", "input", 0, ("relation_types",), ["related"]),
    ("find_analogies", "output", 0, ("results", 0, "basis"), "full_text"),
    ("create_lesson_draft", "input", 0, ("operation_id",), "short"),
    ("create_lesson_draft", "input", 0, ("title",), _DELETE),
    ("create_lesson_draft", "input", 0, ("title",), ""),
    ("create_lesson_draft", "input", 0, ("author",), "someone"),
    ("create_lesson_draft", "input", 0, ("record_origin",), "lab"),
    ("create_lesson_draft", "input", 0, ("initial_evidence", "verification_basis"), "not_recorded"),
    ("create_lesson_draft", "input", 0, ("initial_evidence", "url"), "ftp://example.org"),
    ("create_lesson_draft", "input", 0, ("initial_evidence", "added_by"), "x"),
    ("create_lesson_draft", "input", 1, ("initial_verification", "claim_fields"), []),
    ("create_lesson_draft", "input", 1, ("initial_verification", "claim_fields"), ["observation", "observation"]),
    ("create_lesson_draft", "input", 1, ("initial_verification", "verification_basis"), "not_recorded"),
    ("create_lesson_draft", "input", 1, ("initial_verification", "source_sha256"), "B" * 64),
    ("create_lesson_draft", "output", 0, ("duplicate_candidates", "items"),
     [{"id": "b", "title": "t", "score": 0.9, "band": "same_topic"}] * 4),
    ("link_lessons", "input", 0, ("relation",), "related_to"),
    ("link_lessons", "input", 0, ("created_by",), "u"),
    ("attach_evidence", "input", 0, ("verification_basis",), "not_recorded"),
    ("attach_evidence", "input", 0, ("citation",), "c" * 1001),
    ("record_evidence_verification", "input", 0, ("expected_revision_id",), 0),
    ("record_evidence_verification", "input", 0, ("expected_evidence_digest",), "a" * 64),
    ("record_evidence_verification", "input", 0, ("verification_basis",), "not_recorded"),
    ("record_evidence_verification", "input", 0, ("verified_at",), TS),
    ("revise_lesson", "input", 0, ("changes",), {}),
    ("revise_lesson", "input", 0, ("changes",), {"record_origin": "lab"}),
    ("revise_lesson", "input", 0, ("basis_evidence_ids",), []),
    ("revise_lesson", "input", 0, ("basis_evidence_ids",), [f"e{i}" for i in range(9)]),
    ("revise_lesson", "input", 0, ("reason",), "r" * 501),
    ("revise_lesson", "output", 0, ("status",), "created"),
]


@pytest.mark.parametrize("tool,direction", sorted(VALID))
def test_valid_examples(tool, direction):
    validator = _validator(tool, direction)
    for example in VALID[(tool, direction)]:
        errors = [e.message for e in validator.iter_errors(example)]
        assert not errors, errors


@pytest.mark.parametrize("tool,direction,index,path,value", INVALID,
                         ids=[f"{t}-{d}-{'.'.join(map(str, p))}" for t, d, _, p, _ in INVALID])
def test_invalid_examples(tool, direction, index, path, value):
    instance = _mutate(VALID[(tool, direction)][index], path, value)
    assert not _validator(tool, direction).is_valid(instance)


def test_every_tool_has_examples():
    assert {t for t, _ in VALID} == set(TOOL_NAMES)
    assert {t for t, *_ in INVALID} == set(TOOL_NAMES)


def test_lengths_and_enums_come_from_the_source():
    create = TOOLS["create_lesson_draft.input.schema.json"]
    assert _resolved(create, "properties", "question")["maxLength"] == SCHEMA.lesson.field("question").max_length
    assert _resolved(create, "properties", "confidence")["enum"] == list(SCHEMA.enum("confidence").values)
    basis = _resolved(TOOLS["attach_evidence.input.schema.json"], "properties", "verification_basis")["enum"]
    assert basis == [v for v in SCHEMA.enum("verification_basis").values if v != "not_recorded"]
    out_basis = _resolved(TOOLS["get_lesson.output.schema.json"], "properties", "citations", "properties", "items",
                          "items", "properties", "verification_basis")["enum"]
    assert "not_recorded" in out_basis


# --------------------------------------------------------------------------- the real wiki (plain variant)

def _parse(site, text: str, title: str) -> dict:
    return site.post("parse", text=text, contentmodel="wikitext", title=title, prop="text|links",
                     disablelimitreport=1, formatversion=2)["parse"]


@pytest.fixture(scope="module")
def wiki_site(dev_wiki):
    """The test wiki, logged in as the sync account, with the plain variant saved (as sync push would)."""
    site = dev_wiki.site("sync")
    for title, text in PLAIN.items():
        site.pages[title].edit(text, summary="test_generate: plain schema pages")
    return site


@pytest.mark.wiki
def test_plain_pages_parse_cleanly_in_the_wiki(wiki_site):
    site = wiki_site
    for title, text in PLAIN.items():
        parsed = _parse(site, text, title)
        html = parsed["text"]
        assert 'class="error' not in html, title
        assert "{{{" not in html and "{{#" not in html, title
        assert "s3rm-synced-banner" in html or "{{S3RM synced}}" not in text, title


@pytest.mark.wiki
def test_sample_lesson_renders_in_the_wiki(wiki_site):
    from gateway.domain.model import LessonPage
    from gateway.domain.codec import serialize_page

    site = wiki_site
    lesson_fields = {f.name: "" for f in SCHEMA.lesson.fields}
    lesson_fields.update(LESSON_CORE)
    lesson_fields.update({
        "title": "GPU 할당기 | {{조각화}} [[Category:X]]",
        "question": "왜 느려졌나?\n둘째 줄 ~~~~",
        "record_origin": "lab", "author": "S3Admin", "reviewer": "hidden-reviewer-xyz",
        "review_state": "Reviewed", "created_at": TS, "updated_at": TS,
    })
    page = LessonPage(
        fields=lesson_fields,
        evidence=({"id": "ev1", "citation": "repo@4f19a2e, results/run-031", "url": "https://example.org/run",
                   "kind": "log", "verification_basis": "partial_source", "note": "", "added_by": "S3Admin",
                   "added_at": TS},),
        verifications=({"id": "v1", "evidence_id": "ev1", "evidence_digest": DIGEST,
                        "verification_basis": "partial_source", "source_identity": "run-031",
                        "source_sha256": SHA, "source_locator": "summary.json", "coverage": "전체",
                        "outcome": "supports", "claim_fields": "observation, interpretation",
                        "verified_by": "S3Admin", "verified_at": TS},),
        relations=({"from": "gen_sample", "relation": "analogous_to", "to": "gen_target", "note": "비슷함",
                    "created_by": "S3Admin", "created_at": TS},),
    )
    wikitext = serialize_page(page, SCHEMA)
    site.pages["Lesson:gen_sample"].edit(wikitext, summary="test_generate: sample Lesson")
    parsed = site.post("parse", page="Lesson:gen_sample", prop="text|links|categories",
                       disablelimitreport=1, formatversion=2)["parse"]
    html = parsed["text"]
    assert "{{{" not in html and 'class="error' not in html
    for label in ("궁금했던 점", "다음에 기억할 것", "신뢰도", "보통", "근거 자료", "로그", "원본 일부",
                  "근거 검증 기록", "뒷받침함", "다른 메모와의 관계", "비슷한 사례", "고친 내역 보기"):
        assert label in html, label
    assert "hidden-reviewer-xyz" not in html and "Reviewed" not in html  # docs/data-contract.md#legacy-fields
    assert 'class="s3rm-evidence-digest" data-evidence-id="ev1"' in html
    assert "GPU 할당기 | {{조각화}} [[Category:X]]" in _text(html)
    links = {(link["ns"], link["title"].replace(" ", "_")) for link in parsed["links"]}
    assert (SCHEMA.namespace_id, "Lesson:gen_target") in links  # the edge without SMW
    categories = {c["category"] for c in parsed["categories"]}
    assert categories == {"Lessons"}


def _text(html: str) -> str:
    import html as html_mod
    return html_mod.unescape(re.sub(r"<[^>]+>", "", html))
