"""hooks_spec conformance: every vector in hooks_spec/vectors/*.json passes the checker.

Each vector states the exact set of rule ids the checker must report for one
revision (previous wikitext, new wikitext, account, time, summary). Every
rule of ``hooks_spec/checker.RULE_IDS`` has at least three vectors: one that
passes, one that fails and one edge case (issue 4 acceptance). rules.md lists
every rule id the checker knows.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hooks_spec.checker import RULE_IDS, check_revision

SPEC_DIR = Path(__file__).resolve().parents[1] / "hooks_spec"
FILES = sorted((SPEC_DIR / "vectors").glob("HS*.json"))


def _load():
    out = []
    for path in FILES:
        doc = json.loads(path.read_text(encoding="utf-8"))
        for vector in doc["vectors"]:
            out.append(pytest.param(doc["rule"], vector, id=f"{doc['rule']}:{vector['name']}"))
    return out


def _run(vector: dict):
    return check_revision(
        vector["previous"], vector["new"], vector["account"], vector["timestamp"], vector["summary"],
        keys=vector["keys"], existing_lessons=vector["existing_lessons"], lesson_id=vector["lesson_id"],
        parent_revision_id=vector["parent_revision_id"], agent_accounts=vector["agent_accounts"],
        restored_wikitext=vector["restored"],
    )


@pytest.mark.parametrize("rule,vector", _load())
def test_vector(rule, vector):
    got = sorted({v.rule_id for v in _run(vector)})
    assert got == sorted(vector["expect"]), [(v.rule_id, v.message) for v in _run(vector)]


def test_every_rule_has_pass_fail_and_edge_vectors():
    by_rule: dict[str, list[dict]] = {}
    for path in FILES:
        doc = json.loads(path.read_text(encoding="utf-8"))
        by_rule.setdefault(doc["rule"], []).extend(doc["vectors"])
    assert sorted(by_rule) == sorted(RULE_IDS)
    for rule, vectors in by_rule.items():
        cases = {v["case"] for v in vectors}
        assert len(vectors) >= 3 and {"pass", "fail", "edge"} <= cases, rule
        assert any(rule in v["expect"] for v in vectors), f"{rule}: no vector shows it failing"
        assert any(rule not in v["expect"] for v in vectors), f"{rule}: no vector shows it passing"


def test_rules_md_lists_every_rule():
    text = (SPEC_DIR / "rules.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^### (HS\d\d) ", text, flags=re.M))
    assert documented == set(RULE_IDS)


def test_checker_never_raises_on_garbage():
    for text in ("", "{{", "{{Lesson|", "}}{{Lesson}}", "{{Lesson|title=a|title=b}}", "\x00\ud7ff"):
        result = check_revision(text, text, "", "not a time", "[S3R", keys={})
        assert isinstance(result, list)
