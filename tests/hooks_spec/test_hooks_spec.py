"""hooks_spec conformance: every vector in hooks_spec/vectors/*.json passes the checker.

Each vector states the exact set of rule ids the checker must report for one
revision (previous wikitext, new wikitext, account, time, summary). Every
rule of ``gateway/domain/checker.RULE_IDS`` has at least three vectors: one that
passes, one that fails and one edge case (`hooks_spec/rules.md`). rules.md lists
every rule id the checker knows.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from support.schema_dirs import SCHEMA
import pytest

from gateway.domain.checker import RULE_IDS, check_revision

SPEC_DIR = Path(__file__).resolve().parents[2] / "hooks_spec"
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
        restored_wikitext=vector["restored"], schema=SCHEMA
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
        result = check_revision(text, text, "", "not a time", "[S3R", keys={}, schema=SCHEMA)
        assert isinstance(result, list)


# ---------------------------------------------------------------- domain helpers the checker and tools share
from datetime import datetime, timezone  # noqa: E402

from gateway.domain import ids, markers, seals  # noqa: E402
from gateway.domain.digests import content_digest  # noqa: E402
from gateway.domain.idempotency import find_prior_write  # noqa: E402
from gateway.domain.model import LessonPage  # noqa: E402
from gateway.domain.timestamps import next_updated_at  # noqa: E402
from gateway.domain.verdicts import current_verdict  # noqa: E402
from gateway.domain.writes import WriteRefused, parse_request, salt  # noqa: E402
from gateway.tools import attach_evidence, record_evidence_verification  # noqa: E402
from gateway.domain.codec import parse_page, serialize_page  # noqa: E402
from hooks_spec import build_vectors as bv  # noqa: E402

LONG_OP = "O" + "p" * 127


def test_longest_seal_fits_the_summary_limit_with_room_for_a_prefix():
    page = parse_page(bv.BASE, SCHEMA)
    fields = tuple(f.name for f in SCHEMA.lesson.fields if f.client_settable)
    marker = seals.make_seal(keys={"k" * 32: "secret-0123456789abcdef"}, active_kid="k" * 32, lesson_id="x" * 120,
                             account="A" * 255, op=LONG_OP, request_digest="f" * 64, basis_ids=["e" * 64] * 8,
                             fields=fields, parent=10 ** 11, page=page, schema=SCHEMA)
    text = markers.format_marker(marker, SCHEMA)
    assert len(text) <= markers.SUMMARY_LIMIT - 40
    summary = markers.build_summary("MCP revise_lesson: " + "긴 이유 " * 200, marker, SCHEMA)
    assert len(summary) <= markers.SUMMARY_LIMIT and summary.endswith(text) and "…" in summary
    assert markers.parse_summary(summary, SCHEMA) == marker


@pytest.mark.parametrize("marker", [
    markers.Marker(tag="S3W", parent=0, op=LONG_OP, kind="create", digest="a" * 32),
    markers.Marker(tag="S3W", parent=7, op="op-12345678", kind="link", digest="b" * 32),
    markers.Marker(tag="S3V", parent=9, op="op:1.2-3_4", kind="verify", digest="c" * 32),
    markers.Marker(tag="S3U", parent=12, restored=11, kind="undo"),
])
def test_markers_round_trip(marker):
    assert markers.parse_summary("human text " + markers.format_marker(marker, SCHEMA), SCHEMA) == marker


@pytest.mark.parametrize("summary", ["x [S3W v1 op=bad]", "[S3W v1 op=op-12345678 k=create d=" + "a" * 32 + " p=0] tail",
                                     "[S3R] [S3W v1 op=op-12345678 k=create d=" + "a" * 32 + " p=0]"])
def test_reserved_marker_syntax_must_be_well_formed(summary):
    with pytest.raises(markers.MarkerError):
        markers.parse_summary(summary, SCHEMA)


def test_human_prefix_cannot_smuggle_a_marker_or_links():
    clean = markers.sanitize_human("fix [[Lesson:x]] [S3W v1 op=evil k=create]\n/* s */")
    assert "[" not in clean and "]" not in clean and "\n" not in clean and "/*" not in clean


def test_seal_binds_lesson_author_parent_body_and_rotates():
    page = parse_page(bv.BASE, SCHEMA)
    keys = {"old": "old-secret-0123456789", "new": "new-secret-0123456789"}
    m = seals.make_seal(keys=keys, active_kid="old", lesson_id="l", account="S3Agent", op="op-12345678",
                        request_digest="d" * 64, basis_ids=["e1"], fields=("title",), parent=5, page=page, schema=SCHEMA)
    ok = dict(keys=keys, lesson_id="l", account="S3Agent", parent_revision_id=5, page=page, schema=SCHEMA)
    assert seals.verify_seal(m, **ok).ok  # still verifies after "new" became the active key
    assert not seals.verify_seal(m, **{**ok, "keys": {"new": keys["new"]}}).ok
    assert not seals.verify_seal(m, **{**ok, "lesson_id": "other"}).ok
    assert not seals.verify_seal(m, **{**ok, "account": "Mallory"}).ok
    assert not seals.verify_seal(m, **{**ok, "parent_revision_id": 6}).ok
    other = page.evolve(fields={**page.fields, "title": "changed"})
    assert not seals.verify_seal(m, **{**ok, "page": other}).ok


def test_derived_ids_are_deterministic_and_valid():
    meta = SCHEMA.meta
    for title in ("GPU allocator fragmentation", "GPU 메모리 단편화", "메모리", "", "x" * 500):
        a, b = ids.derive_lesson_id(title, "op-12345678"), ids.derive_lesson_id(title, "op-12345678")
        assert a == b and re.fullmatch(meta["id_pattern"], a) and len(a) <= int(meta["id_max_length"])
    assert ids.derive_lesson_id("메모리", "op-12345678").startswith("lesson-")
    assert ids.derive_lesson_id("t", "op-12345678") != ids.derive_lesson_id("t", "op-12345679")
    assert ids.derive_evidence_id("op-12345678", "attach") != ids.derive_evidence_id("op-12345678", "initial")


def test_conflict_salt_is_invisible_to_the_codec_and_differs_per_request():
    text = bv.BASE
    a, b = salt(text, "a" * 64), salt(text, "b" * 64)
    assert parse_page(a, SCHEMA) == parse_page(text, SCHEMA) == parse_page(b, SCHEMA)
    assert content_digest(parse_page(a, SCHEMA), SCHEMA) == content_digest(parse_page(text, SCHEMA), SCHEMA)
    line = [ln for ln in a.split("\n") if ln.startswith("|updated_at=")][0]
    assert line != [ln for ln in b.split("\n") if ln.startswith("|updated_at=")][0]
    assert salt(a, "a" * 64) == a  # re-salting replaces, never accumulates


def test_updated_at_strictly_increases():
    now = datetime(2025, 3, 1, 10, 0, 0, 500000, tzinfo=timezone.utc)
    assert next_updated_at(now, None) == "2025-03-01T10:00:00Z"
    assert next_updated_at(now, "2025-03-01T10:00:00Z") == "2025-03-01T10:00:01Z"
    assert next_updated_at(now, "2025-03-01T09:00:00Z") == "2025-03-01T10:00:00Z"
    assert next_updated_at(now, "garbage") == "2025-03-01T10:00:00Z"


def test_current_verdict_never_guesses_on_tied_or_reversed_times():
    e = bv.ev()

    def page(*times_outcomes):
        return LessonPage(fields=bv.fields(), evidence=(e,), verifications=tuple(
            bv.vr(f"v{i}", e, at=t, outcome=o) for i, (t, o) in enumerate(times_outcomes)))

    assert current_verdict(page(), "e1").verdict == "none"
    assert current_verdict(page((bv.T0, "supports"), (bv.T1, "contradicts")), "e1").verdict == "contradicts"
    assert current_verdict(page((bv.T1, "supports"), (bv.T1, "contradicts")), "e1").verdict == "ambiguous"
    assert current_verdict(page((bv.T1, "supports"), (bv.T0, "contradicts")), "e1").verdict == "ambiguous"


def test_request_digest_ignores_order_of_sets_and_absent_optionals():
    base = {"operation_id": "op-12345678", "lesson_id": "l", "evidence_id": "e1", "expected_revision_id": 3,
            "expected_evidence_digest": "sha256:" + "0" * 64, "verification_basis": "full_text",
            "source_identity": "s", "source_sha256": "a" * 64, "source_locator": "l", "coverage": "c",
            "outcome": "supports", "claim_fields": ["observation", "context"]}
    a = parse_request(record_evidence_verification.OPERATION, base, SCHEMA)
    b = parse_request(record_evidence_verification.OPERATION, {**base, "claim_fields": ["context", "observation"]}, SCHEMA)
    assert a.digest == b.digest
    ev = {"operation_id": "op-12345678", "lesson_id": "l", "citation": "c", "kind": "log",
          "verification_basis": "full_text"}
    assert parse_request(attach_evidence.OPERATION, ev, SCHEMA).digest == parse_request(attach_evidence.OPERATION, {**ev, "note": ""}, SCHEMA).digest
    with pytest.raises(WriteRefused) as exc:
        parse_request(attach_evidence.OPERATION, {**ev, "added_by": "Mallory"}, SCHEMA)
    assert (exc.value.code, exc.value.rule) == ("invalid_argument", "GW02")


def test_replay_scan_is_bounded():
    from support.memory import InMemoryRepository

    repo = InMemoryRepository()
    marker = markers.Marker(tag="S3W", parent=0, op="op-12345678", kind="create", digest="a" * 32)
    repo.save_page("l", bv.BASE, markers.build_summary("MCP", marker, SCHEMA), base_revision_id=None)
    page = parse_page(bv.BASE, SCHEMA)
    for i in range(30):
        repo.put_page("l", serialize_page(page.evolve(fields={**page.fields, "title": f"t{i}"}), SCHEMA), "edit")
    found = find_prior_write(repo, "l", "op-12345678", account="S3Agent", keys={}, schema=SCHEMA)
    assert found.prior is not None and found.prior.revision_id == 1 and found.scanned == 31
    capped = find_prior_write(repo, "l", "op-12345678", account="S3Agent", keys={}, limit=10, schema=SCHEMA)
    assert capped.prior is None and capped.partial and capped.scanned == 10
    assert find_prior_write(repo, "l", "op-12345678", account="Someone", keys={}, schema=SCHEMA).prior is None
