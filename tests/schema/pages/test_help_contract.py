"""The help pages (schema/pages/help/*.wiki) and README.md against the running contract.

Wherever they state a default retrieval mode, a ranking version, a tool limit, a
configuration default, a duplicate-check status or which verification bases a
tool accepts, the value is read here from the code or the published schemas and
compared, so a statement cannot go stale silently. Default modes differ between
the development stack (``s3rm/devstack/stack.py`` ``gateway_env``) and production
(the configuration's own default, which compose.yaml keeps); a page that names a
default must name both, in one phrase (:func:`_default_phrase`).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from support.schema_dirs import SCHEMA
import pytest

from gateway.config import load_config
from gateway.config.schema import REPO_ROOT
from gateway.retrieval.hybrid.fusion import RANKING_VERSION
from gateway.tools.schema_builders import DUPLICATE_STATUSES
from s3rm.devstack import stack

HELP = sorted((REPO_ROOT / "schema" / "pages" / "help").glob("*.wiki"))
README = REPO_ROOT / "README.md"
TOOLS_DIR = REPO_ROOT / "schema" / "tools"
FIXED = {"S3RM_CURSOR_SECRET": "contract-test-cursor-secret-0123"}


class _Wiki:
    server_url = "http://127.0.0.1:8081/"

    def env(self) -> dict[str, str]:
        return {"S3RM_WIKI_API_URL": "http://127.0.0.1:8081/api.php", "S3RM_WIKI_USERNAME": "S3Agent@gateway",
                "S3RM_WIKI_PASSWORD": "p" * 32}


def _modes() -> tuple[str, str]:
    """(production default mode, development stack default mode) from the configuration code."""
    secrets = {"write_token": "t" * 32, "hmac_key_id": "dev", "hmac_key": "k" * 32, "cursor_secret": "c" * 32}
    dev_env = {k: v for k, v in stack.gateway_env(_Wiki(), 8080, 8082, secrets).items() if k.startswith("S3RM_")}
    return load_config(FIXED).retrieval_default_mode, load_config(dev_env).retrieval_default_mode


def _default_phrase() -> str:
    prod, dev = _modes()
    return f"기본 방식은 운영 서버 <code>{prod}</code>, 개발 스택(<code>s3rm stack up</code>) <code>{dev}</code>"


def _input_schema(tool: str) -> dict:
    return json.loads((TOOLS_DIR / f"{tool}.input.schema.json").read_text(encoding="utf-8"))


def _texts() -> list[tuple[Path, str]]:
    return [(p, p.read_text(encoding="utf-8")) for p in [*HELP, README]]


def test_the_production_default_mode_is_the_configurations_and_compose_keeps_it():
    prod, dev = _modes()
    assert (prod, dev) == ("legacy", "hybrid_v1")  # the two differ, so every page must name both
    assert "S3RM_RETRIEVAL_DEFAULT_MODE" not in (REPO_ROOT / "compose.yaml").read_text(encoding="utf-8")


def test_every_ranking_version_named_is_the_shipped_one():
    for path, text in _texts():
        for found in re.findall(r"rrf_v\d+", text):
            assert found == RANKING_VERSION, f"{path.name} names {found}; the gateway ranks with {RANKING_VERSION}"


def test_a_help_page_naming_a_default_mode_names_production_and_development():
    claim = re.compile(r"기본[^.\n]{0,30}<code>(legacy|hybrid_v1)</code>|<code>(legacy|hybrid_v1)</code>[^.\n]{0,6}기본")
    phrase = _default_phrase()
    claims = 0
    for path in HELP:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if claim.search(line):
                claims += 1
                assert phrase in line, f"{path.name}:{n} states a default mode without: {phrase}"
    assert claims >= 4


def test_readme_states_both_default_modes_as_configured():
    prod, dev = _modes()
    text = README.read_text(encoding="utf-8")
    assert re.findall(r"makes `(\w+)` its default mode", text) == [dev]
    assert re.findall(r"keeps the provider `disabled` and the default mode `(\w+)`", text) == [prod]
    row = re.search(r"^\| `S3RM_RETRIEVAL_DEFAULT_MODE` \| `(\w+)` \|.*only `s3rm stack up` sets `(\w+)`", text, re.M)
    assert row and row.groups() == (prod, dev)


def _table_defaults() -> list[tuple[str, str]]:
    """(variable, documented default) of the README configuration rows whose cells are plain values."""
    section = README.read_text(encoding="utf-8").split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`S3RM_"):
            continue
        names = re.fullmatch(r"`(S3RM_[A-Z0-9_]+)`((?:, `S3RM_[A-Z0-9_]+`)*)", cells[0])
        if not names:
            continue
        names = re.findall(r"`(S3RM_[A-Z0-9_]+)`", cells[0])
        if cells[1] == "empty":
            values = [""] * len(names)
        elif re.fullmatch(r"`[^`]*`(?:, `[^`]*`)*", cells[1]):
            values = re.findall(r"`([^`]*)`", cells[1])
        else:
            continue
        if len(values) == len(names) and not any("<" in v for v in values):
            out += list(zip(names, values))
    return out


def test_readme_configuration_defaults_are_the_configurations():
    """Setting a variable to the default README names leaves the loaded configuration unchanged."""
    rows = _table_defaults()
    assert len(rows) >= 30 and ("S3RM_OUTPUT_MAX_BYTES", "32768") in rows
    base = load_config(FIXED)
    wrong = [(name, value) for name, value in rows if name not in FIXED and load_config({**FIXED, name: value}) != base]
    assert wrong == []


_LIMIT = re.compile(r"<code>([\w…]+)</code>(?:\(([^()]*)\)| 최대 (\d+)건)")


def _property_checks() -> list[tuple[str, str, str, str]]:
    """(tool, property, what, documented) from the tool tables of the tools help page."""
    out = []
    for line in (REPO_ROOT / "schema/pages/help/tools.wiki").read_text(encoding="utf-8").splitlines():
        row = re.match(r"\| <code>(\w+)</code> \|\|.*\|\| (.*)$", line)
        if not row:
            continue
        tool, inputs = row.groups()
        props = _input_schema(tool)["properties"]
        for name, spec, items in _LIMIT.findall(inputs):
            names = [p for p in props if p.endswith(name[1:])] if name.startswith("…") else [name]
            for prop in names:
                if items:
                    out.append((tool, prop, "maxItems", items))
                for what, pattern in (("default", r"기본 (\w+)"), ("maximum", r"최대 (\d+)"),
                                      ("maxLength", r"(\d+)자까지"), ("range", r"^(\d+~\d+)$")):
                    out += [(tool, prop, what, v) for v in re.findall(pattern, spec or "")]
    return out


def test_tool_limits_on_the_tools_page_are_the_published_schemas():
    checks = _property_checks()
    assert len(checks) >= 12
    for tool, prop, what, documented in checks:
        doc = _input_schema(tool)
        schema = doc["properties"][prop]
        if "$ref" in schema:  # a block shared through the document's $defs
            schema = {**doc["$defs"][schema["$ref"].removeprefix("#/$defs/")], **schema}
        if what == "maximum":
            actual = schema.get("maximum", schema.get("maxItems", schema.get("maxLength")))
        elif what == "range":
            actual = f"{schema['minItems']}~{schema['maxItems']}"
        else:
            actual = schema.get(what)
        assert str(actual) == documented, f"tools.wiki: {tool}.{prop} {what} {documented}, the schema says {actual}"
    common = (REPO_ROOT / "schema/pages/help/tools.wiki").read_text(encoding="utf-8").split("== 공통 한도 ==")[1]
    assert re.findall(r"최대 (\d+)건", common.split("==")[0]) == [str(SCHEMA.limits["page_max"])]


def test_every_duplicate_check_status_is_explained_with_the_configured_budget():
    budget = load_config(FIXED).retrieval.duplicate_budget_seconds
    tools_page = (REPO_ROOT / "schema/pages/help/tools.wiki").read_text(encoding="utf-8")
    line = next(x for x in tools_page.splitlines() if "<code>duplicate_candidates</code>" in x)
    contract = " ".join((REPO_ROOT / "docs" / "tools.md").read_text(encoding="utf-8").split())
    for status in DUPLICATE_STATUSES:
        assert f"<code>{status}</code>(" in line, status
        assert f"`{status}` (" in contract, status
    assert f"기본 {budget:g}초" in line and f"default {budget:g} s" in contract


def test_the_verification_bases_each_tool_accepts_are_stated_as_published():
    initial = _input_schema("create_lesson_draft")["properties"]["initial_verification"]["properties"]
    initial = initial["verification_basis"]["enum"]
    anytime = _input_schema("record_evidence_verification")["properties"]["verification_basis"]["enum"]
    supporting = list(SCHEMA.enum("verification_basis").extra["supporting"])
    assert initial == supporting and len(anytime) == 4
    for page in ("evidence.wiki", "tools.wiki", "revising.wiki"):
        text = (REPO_ROOT / "schema/pages/help" / page).read_text(encoding="utf-8")
        said_initial = re.search(r"<code>initial_verification</code>(?:의 확인 범위)?[은는] (.*?)만 받", text)
        assert said_initial and re.findall(r"<code>(\w+)</code>", said_initial.group(1)) == initial, page
        if "네 값(" in text:
            said_all = re.search(r"네 값\((.*?)\)", text).group(1)
            assert re.findall(r"<code>(\w+)</code>", said_all) == anytime, page
    revising = (REPO_ROOT / "schema/pages/help/revising.wiki").read_text(encoding="utf-8")
    assert "HS37" in revising and "<code>partial_source</code> 근거만 있는 <code>medium</code>" in revising


def test_score_and_min_score_are_explained_where_agents_read():
    out = json.loads((TOOLS_DIR / "search_lessons.output.schema.json").read_text(encoding="utf-8"))
    score = out["properties"]["results"]["items"]["properties"]["score"]["description"]
    min_score = _input_schema("search_lessons")["properties"]["min_score"]["description"]
    assert "legacy" in score and "hybrid_v1" in score and "lower score can be listed above" in score
    assert "default 0" in min_score and "limit" in min_score
    tools_page = (REPO_ROOT / "schema/pages/help/tools.wiki").read_text(encoding="utf-8")
    assert "'''점수(<code>score</code>)'''" in tools_page and "'''<code>min_score</code> 고르기'''" in tools_page


@pytest.mark.parametrize("pointer", ["measured figures"])
def test_readme_points_to_figures_that_exist(pointer):
    text = README.read_text(encoding="utf-8").replace("\n  ", " ")
    found = re.findall(r"see `(docs/[\w-]+\.md)#([\w-]+)` for " + pointer, text)
    assert found and "`eval/README.md` for measured" not in text
    for doc, anchor in found:
        body = (REPO_ROOT / doc).read_text(encoding="utf-8")
        section = body.split(f'<a id="{anchor}"></a>', 1)[1][:3000]
        assert "recall@5" in section and re.search(r"\| \d\.\d{3}", section)
