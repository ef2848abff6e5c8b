"""The write tools on the REAL dev wiki (docs/tools.md#write-semantics).

Per tool: success; the same request twice → ``replayed`` and exactly one
revision; the operation_id reused for another request → ``idempotency_conflict``;
one test per validation rule; a gateway restart (a new repository and
dispatcher) between a call and its retry. Plus: seals (wrong key, copied
seal → never a replay, reported by the auditor), the dirty hint (docs/tools.md#dirty-hint), the
response field names (docs/tools.md#current-revision-id), read-your-write
(docs/retrieval.md#read-your-write).

Every test creates its own Lessons (unique ids) in the session's wiki.

Size: about 700 lines: one section per write tool (success, replay, conflict,
restart, validation cases) plus a cross-cutting section, all on the one
harness of ``tests/support/write_harness.py``.
"""
from __future__ import annotations

import re

import pytest

from gateway.domain.codec import parse_page, serialize_page
from gateway.domain.digests import evidence_digest
from gateway.domain.markers import parse_summary
from gateway.domain.seals import verify_seal
from gateway.domain.timestamps import parse_ts
from s3rm.audit import audit
from support.schema_dirs import SCHEMA
from support.write_harness import KEYS, WriteHarness, claim_args, evidence_args, lesson_fields, unique



@pytest.fixture(scope="module")
def h(dev_wiki):
    return WriteHarness(dev_wiki)


def restarted(h: WriteHarness, **kw) -> WriteHarness:
    """A new gateway instance on the same wiki (fresh client, session and repository)."""
    return WriteHarness(h.wiki, **kw)


def create_args(**overrides):
    args = lesson_fields()
    args.update(operation_id=unique("op-create"), lesson_id=unique("lesson"), initial_evidence=evidence_args())
    args.update(overrides)
    return args


# =============================================================== create_lesson_draft
def test_create_stores_lesson_evidence_and_server_fields_in_one_revision(h):
    out = h.ok("create_lesson_draft", **create_args())
    assert out["status"] == "created" and out["current_revision_id"] > 0
    assert out["duplicate_candidates"]["status"] in ("disabled", "ok", "skipped", "not_ready")
    history = h.history(out["id"])
    assert len(history) == 1 and history[0].parent_id == 0 and history[0].user == "S3Agent"
    marker = parse_summary(history[0].comment, SCHEMA)
    assert (marker.tag, marker.kind, marker.parent) == ("S3W", "create", 0)
    page = h.repo.get_snapshot(out["id"]).page
    f = page.fields
    assert (f["author"], f["record_origin"], f["review_state"], f["reviewer"]) == ("S3Agent", "lab", "Draft", "")
    assert f["created_at"] == f["updated_at"] and abs((parse_ts(f["created_at"]) - parse_ts(history[0].timestamp))
                                                      .total_seconds()) <= 300
    (ev,) = page.evidence
    assert ev["id"] == out["evidence_ids"][0] and ev["added_by"] == "S3Agent" and ev["added_at"] == f["updated_at"]
    assert page.verifications == () and out["verification_ids"] == []


def test_create_without_lesson_id_derives_it_and_replays(h):
    args = create_args()
    del args["lesson_id"]
    first = h.ok("create_lesson_draft", **args)
    assert first["id"].startswith("gpu-allocator-fragmentation-under-long-runs-")
    again = h.ok("create_lesson_draft", **args)
    assert again["status"] == "replayed"
    assert (again["id"], again["evidence_ids"], again["current_revision_id"]) == \
        (first["id"], first["evidence_ids"], first["current_revision_id"])
    assert len(h.history(first["id"])) == 1


def test_create_same_operation_id_other_request_is_idempotency_conflict(h):
    args = create_args()
    del args["lesson_id"]
    h.ok("create_lesson_draft", **args)
    err = h.error("create_lesson_draft", **{**args, "observation": "A different observation."})
    assert err["code"] == "idempotency_conflict" and err["field"] == "operation_id"


def test_create_existing_id_with_another_request_is_lesson_exists(h):
    first = h.create()
    err = h.error("create_lesson_draft", **create_args(lesson_id=first["id"]))
    assert err["code"] == "lesson_exists"
    assert err["details"]["current_revision_id"] == first["current_revision_id"]


def test_create_high_confidence_with_initial_verification_in_the_same_revision(h):
    out = h.create(confidence="high", verification=True)
    assert len(out["verification_ids"]) == 1 and len(h.history(out["id"])) == 1
    page = h.repo.get_snapshot(out["id"]).page
    (vr,) = page.verifications
    assert vr["evidence_digest"] == evidence_digest(page.evidence[0], SCHEMA)
    assert vr["verified_by"] == "S3Agent" and vr["verified_at"] == page.fields["updated_at"]
    assert vr["claim_fields"] == "observation,interpretation,reusable_lesson"


def test_create_restart_between_call_and_retry_replays(h):
    args = create_args()
    first = h.ok("create_lesson_draft", **args)
    again = restarted(h).ok("create_lesson_draft", **args)
    assert again["status"] == "replayed" and again["id"] == first["id"]
    assert len(h.history(first["id"])) == 1


@pytest.mark.parametrize("mutate,code,rule", [
    (lambda a: a.update(confidence="high"), "rule_violation", "HS32"),
    (lambda a: a.update(confidence="high", initial_verification=claim_args(claim_fields=["observation"])),
     "rule_violation", "HS32"),
    (lambda a: a.update(initial_verification=claim_args(verification_basis="official_abstract")),
     "invalid_argument", "HS31"),
    (lambda a: a["initial_evidence"].update(verification_basis="not_recorded"), "invalid_argument", None),
    (lambda a: a["initial_evidence"].update(url="ftp://example.org/x"), "invalid_argument", None),
    (lambda a: a["initial_evidence"].update(url="javascript:alert(1)"), "invalid_argument", None),
    (lambda a: a["initial_evidence"].pop("citation"), "invalid_argument", None),
    (lambda a: a["initial_evidence"].update(kind="rumour"), "invalid_argument", None),
    (lambda a: a.pop("initial_evidence"), "invalid_argument", None),
    (lambda a: a.update(title=""), "invalid_argument", None),
    (lambda a: a.update(title="x" * 201), "invalid_argument", None),
    (lambda a: a.update(confidence="certain"), "invalid_argument", None),
    (lambda a: a.update(author="Mallory"), "invalid_argument", None),
    (lambda a: a.update(record_origin="imported"), "invalid_argument", None),
    (lambda a: a.update(created_at="2020-01-01T00:00:00Z"), "invalid_argument", None),
    (lambda a: a.update(lesson_id="Lesson:Upper"), "invalid_argument", None),
    (lambda a: a.update(operation_id="short"), "invalid_argument", None),
    (lambda a: a["initial_evidence"].update(id="Bad Id"), "invalid_argument", None),
    (lambda a: a["initial_evidence"].update(added_by="Mallory"), "invalid_argument", None),
])
def test_create_validation_rules_leave_no_page(h, mutate, code, rule):
    args = create_args()
    mutate(args)
    err = h.error("create_lesson_draft", **args)
    assert err["code"] == code, err
    if rule:
        assert err["rule"] == rule
    if re.fullmatch(r"[a-z0-9_-]+", str(args.get("lesson_id", ""))):
        assert h.latest(args["lesson_id"]) is None  # never a partial page


# =============================================================== link_lessons
def test_link_appends_one_relation_and_never_edits_the_target(h):
    a, b = h.create(), h.create()
    target_before = h.wikitext(b["id"])
    out = h.ok("link_lessons", operation_id=unique("op-link"), **{"from": a["id"], "relation": "supersedes",
                                                                   "to": b["id"], "note": "newer measurement"})
    assert out["status"] == "created" and out["current_revision_id"] > a["current_revision_id"]
    assert h.wikitext(b["id"]) == target_before
    page = h.repo.get_snapshot(a["id"]).page
    (rel,) = page.relations
    assert (rel["from"], rel["relation"], rel["to"], rel["created_by"]) == (a["id"], "supersedes", b["id"], "S3Agent")
    assert rel["created_at"] == page.fields["updated_at"]


def test_link_replay_conflict_and_restart(h):
    a, b, c = h.create(), h.create(), h.create()
    args = {"operation_id": unique("op-link"), "from": a["id"], "relation": "supports", "to": b["id"]}
    first = h.ok("link_lessons", **args)
    again = restarted(h).ok("link_lessons", **args)
    assert again["status"] == "replayed" and again["current_revision_id"] == first["current_revision_id"]
    assert len(h.history(a["id"])) == 2
    err = h.error("link_lessons", **{**args, "to": c["id"]})
    assert err["code"] == "idempotency_conflict"


@pytest.mark.parametrize("case,code,rule", [
    ("missing_target", "not_found", "HS34"),
    ("missing_from", "not_found", None),
    ("self", "invalid_argument", "HS36"),
    ("duplicate", "rule_violation", "HS35"),
    ("bad_relation", "invalid_argument", None),
    ("bad_target_id", "invalid_argument", None),
    ("created_by", "invalid_argument", None),
])
def test_link_validation_rules_change_nothing(h, case, code, rule):
    a, b = h.create(), h.create()
    args = {"operation_id": unique("op-link"), "from": a["id"], "relation": "supports", "to": b["id"]}
    if case == "missing_target":
        args["to"] = unique("ghost")
    elif case == "missing_from":
        args["from"] = unique("ghost")
    elif case == "self":
        args["to"] = a["id"]
    elif case == "duplicate":
        h.ok("link_lessons", **{**args, "operation_id": unique("op-link")})
    elif case == "bad_relation":
        args["relation"] = "causes"
    elif case == "bad_target_id":
        args["to"] = "Not an id"
    elif case == "created_by":
        args["created_by"] = "Mallory"
    before = h.wikitext(a["id"])
    err = h.error("link_lessons", **args)
    assert err["code"] == code, err
    if rule:
        assert err["rule"] == rule
    assert h.wikitext(a["id"]) == before


# =============================================================== attach_evidence
def test_attach_appends_evidence_with_server_provenance(h):
    a = h.create()
    out = h.ok("attach_evidence", operation_id=unique("op-ev"), lesson_id=a["id"], evidence_id="run-032",
               **evidence_args(url=None, verification_basis="metadata_only", note=None))
    assert out["evidence_id"] == "run-032" and out["status"] == "created"
    page = h.repo.get_snapshot(a["id"]).page
    stored = page.evidence_by_id("run-032")
    assert out["evidence_digest"] == evidence_digest(stored, SCHEMA)
    assert stored["added_by"] == "S3Agent" and stored["added_at"] == page.fields["updated_at"]
    assert parse_ts(page.fields["updated_at"]) > parse_ts(page.fields["created_at"])


def test_attach_replay_conflict_and_restart(h):
    a = h.create()
    args = {"operation_id": unique("op-ev"), "lesson_id": a["id"], **evidence_args()}
    first = h.ok("attach_evidence", **args)
    again = restarted(h).ok("attach_evidence", **args)
    assert again["status"] == "replayed"
    assert (again["evidence_id"], again["evidence_digest"]) == (first["evidence_id"], first["evidence_digest"])
    assert len(h.history(a["id"])) == 2
    assert h.error("attach_evidence", **{**args, "citation": "other place"})["code"] == "idempotency_conflict"


@pytest.mark.parametrize("mutate,code,rule", [
    (lambda a, ev: a.update(verification_basis="not_recorded"), "invalid_argument", None),
    (lambda a, ev: a.update(url="ftp://example.org/x"), "invalid_argument", None),
    (lambda a, ev: a.update(url="https://"), "invalid_argument", None),
    (lambda a, ev: a.pop("citation"), "invalid_argument", None),
    (lambda a, ev: a.update(citation=""), "invalid_argument", None),
    (lambda a, ev: a.update(kind="rumour"), "invalid_argument", None),
    (lambda a, ev: a.update(evidence_id=ev), "rule_violation", "HS24"),
    (lambda a, ev: a.update(lesson_id=unique("ghost")), "not_found", None),
    (lambda a, ev: a.update(added_at="2020-01-01T00:00:00Z"), "invalid_argument", None),
    (lambda a, ev: a.update(note="x" * 4001), "invalid_argument", None),
])
def test_attach_validation_rules_change_nothing(h, mutate, code, rule):
    a = h.create()
    args = {"operation_id": unique("op-ev"), "lesson_id": a["id"], **evidence_args()}
    mutate(args, a["evidence_ids"][0])
    before = h.wikitext(a["id"])
    err = h.error("attach_evidence", **args)
    assert err["code"] == code, err
    if rule:
        assert err["rule"] == rule
    assert h.wikitext(a["id"]) == before


# =============================================================== record_evidence_verification
def _verify_args(h, lesson_id, evidence_id, **overrides):
    snap = h.repo.get_snapshot(lesson_id)
    args = {"operation_id": unique("op-vr"), "lesson_id": lesson_id, "evidence_id": evidence_id,
            "expected_revision_id": snap.revision_id,
            "expected_evidence_digest": evidence_digest(snap.page.evidence_by_id(evidence_id), SCHEMA), **claim_args()}
    args.update(overrides)
    return args


def test_verification_appends_a_record_and_reports_the_verdict(h):
    a = h.create()
    ev = a["evidence_ids"][0]
    out = h.ok("record_evidence_verification", **_verify_args(h, a["id"], ev, outcome="inconclusive"))
    assert out["current_verdict"] == "inconclusive" and out["evidence_id"] == ev
    out2 = h.ok("record_evidence_verification", **_verify_args(h, a["id"], ev))
    assert out2["current_verdict"] == "supports"
    page = h.repo.get_snapshot(a["id"]).page
    first, second = page.verifications
    assert parse_ts(first["verified_at"]) < parse_ts(second["verified_at"]) == parse_ts(page.fields["updated_at"])
    assert second["verified_by"] == "S3Agent" and second["evidence_digest"] == evidence_digest(page.evidence[0], SCHEMA)


def test_verification_replay_after_the_lesson_moved_on_and_restart(h):
    a = h.create()
    args = _verify_args(h, a["id"], a["evidence_ids"][0])
    first = h.ok("record_evidence_verification", **args)
    h.attach(a["id"])  # the Lesson moves on: expected_revision_id is now stale
    again = restarted(h).ok("record_evidence_verification", **args)
    assert again["status"] == "replayed" and again["verification_id"] == first["verification_id"]
    assert again["current_revision_id"] == h.latest(a["id"]) != first["current_revision_id"]
    assert len(h.repo.get_snapshot(a["id"]).page.verifications) == 1
    assert h.error("record_evidence_verification", **{**args, "outcome": "contradicts"})["code"] == \
        "idempotency_conflict"


@pytest.mark.parametrize("case,code,rule", [
    ("stale_revision", "revision_conflict", "GW03"),
    ("wrong_digest", "rule_violation", "GW04"),
    ("unknown_evidence", "not_found", "HS28"),
    ("not_recorded", "invalid_argument", None),
    ("bad_sha", "invalid_argument", None),
    ("no_claims", "invalid_argument", None),
    ("bad_claim", "invalid_argument", None),
    ("bad_outcome", "invalid_argument", None),
    ("verified_by", "invalid_argument", None),
    ("missing_lesson", "not_found", None),
])
def test_verification_validation_rules_change_nothing(h, case, code, rule):
    a = h.create()
    args = _verify_args(h, a["id"], a["evidence_ids"][0])
    if case == "stale_revision":
        args["expected_revision_id"] -= 1
    elif case == "wrong_digest":
        args["expected_evidence_digest"] = "sha256:" + "0" * 64
    elif case == "unknown_evidence":
        args["evidence_id"] = "nope"
    elif case == "not_recorded":
        args["verification_basis"] = "not_recorded"
    elif case == "bad_sha":
        args["source_sha256"] = "ABC"
    elif case == "no_claims":
        args["claim_fields"] = []
    elif case == "bad_claim":
        args["claim_fields"] = ["confidence"]
    elif case == "bad_outcome":
        args["outcome"] = "maybe"
    elif case == "verified_by":
        args["verified_by"] = "Mallory"
    elif case == "missing_lesson":
        args["lesson_id"] = unique("ghost")
    before = h.wikitext(a["id"])
    err = h.error("record_evidence_verification", **args)
    assert err["code"] == code, err
    if rule:
        assert err["rule"] == rule
    if code == "revision_conflict":
        assert err["details"]["current_revision_id"] == a["current_revision_id"]
    assert h.wikitext(a["id"]) == before


# =============================================================== revise_lesson
def _supported(h, **kw):
    """A Lesson whose evidence has a current supports/full_text verification of all three claims."""
    a = h.create(**kw)
    h.verify(a["id"], a["evidence_ids"][0])
    return a["id"], a["evidence_ids"][0]


def _revise_args(h, lesson_id, basis, changes, **overrides):
    args = {"operation_id": unique("op-rev"), "lesson_id": lesson_id, "expected_revision_id": h.latest(lesson_id),
            "basis_evidence_ids": basis, "changes": changes, "reason": "corrected figure from the trace"}
    args.update(overrides)
    return args


def test_revise_changes_fields_and_seals_the_revision(h):
    lid, ev = _supported(h)
    args = _revise_args(h, lid, [ev], {"observation": "Peak reserved memory grew 31%.", "confidence": "high"})
    out = h.ok("revise_lesson", **args)
    assert out["status"] == "revised" and out["applied_revision_id"] == out["current_revision_id"]
    assert out["changed_fields"] == ["observation", "confidence"]
    rev = h.history(lid)[0]
    marker = parse_summary(rev.comment, SCHEMA)
    assert rev.revision_id == out["applied_revision_id"] and marker.tag == "S3R"
    assert rev.comment.startswith("MCP revise_lesson: corrected figure") and len(rev.comment) <= 500
    snap = h.repo.get_snapshot(lid)
    assert verify_seal(marker, keys=KEYS, lesson_id=lid, account=rev.user, parent_revision_id=rev.parent_id,
                       page=snap.page, schema=SCHEMA).ok
    assert snap.page.fields["observation"] == "Peak reserved memory grew 31%."
    assert snap.page.fields["author"] == "S3Agent" and snap.page.fields["record_origin"] == "lab"


def test_revise_replay_returns_applied_and_current_revision_after_restart(h):
    lid, ev = _supported(h)
    args = _revise_args(h, lid, [ev], {"title": "Renamed after review"})
    first = h.ok("revise_lesson", **args)
    later = h.attach(lid)
    again = restarted(h).ok("revise_lesson", **args)
    assert again["status"] == "replayed"
    assert again["applied_revision_id"] == first["applied_revision_id"]
    assert again["current_revision_id"] == later["current_revision_id"] != first["applied_revision_id"]
    assert again["changed_fields"] == ["title"]
    err = h.error("revise_lesson", **{**args, "changes": {"title": "Another title"}})
    assert err["code"] == "idempotency_conflict"


def test_revise_shares_operation_id_scope_with_other_writes(h):
    lid, ev = _supported(h)
    op = unique("op-shared")
    h.ok("attach_evidence", operation_id=op, lesson_id=lid, **evidence_args())
    err = h.error("revise_lesson", **_revise_args(h, lid, [ev], {"title": "x"}, operation_id=op))
    assert err["code"] == "idempotency_conflict"
    other = h.create()  # another Lesson may reuse the id
    h.ok("attach_evidence", operation_id=op, lesson_id=other["id"], **evidence_args())


@pytest.mark.parametrize("case,code,rule", [
    ("stale", "revision_conflict", "GW03"),
    ("basis_missing", "invalid_argument", "GW05"),
    ("basis_empty", "invalid_argument", None),
    ("basis_nine", "invalid_argument", None),
    ("server_field", "invalid_argument", None),
    ("no_change", "invalid_argument", "GW08"),
    ("empty_changes", "invalid_argument", None),
    ("claim_unsupported", "rule_violation", "HS37"),
    ("high_partial_support", "rule_violation", "HS38"),
    ("support_not_in_basis", "rule_violation", "HS37"),
    ("empty_required", "invalid_argument", None),
    ("missing_lesson", "not_found", None),
])
def test_revise_validation_rules_change_nothing(h, case, code, rule):
    lid, ev = _supported(h)
    args = _revise_args(h, lid, [ev], {"title": "New title"})
    if case == "stale":
        args["expected_revision_id"] -= 1
    elif case == "basis_missing":
        args["basis_evidence_ids"] = ["nope"]
    elif case == "basis_empty":
        args["basis_evidence_ids"] = []
    elif case == "basis_nine":
        args["basis_evidence_ids"] = [f"e{i}" for i in range(9)]
    elif case == "server_field":
        args["changes"] = {"author": "Mallory"}
    elif case == "no_change":
        args["changes"] = {"title": h.repo.get_snapshot(lid).page.fields["title"]}
    elif case == "empty_changes":
        args["changes"] = {}
    elif case == "claim_unsupported":
        plain = h.create()
        lid = plain["id"]
        args = _revise_args(h, lid, plain["evidence_ids"], {"observation": "New figure"})
    elif case == "high_partial_support":
        a = h.create()
        h.verify(a["id"], a["evidence_ids"][0], claim_fields=["observation"])
        lid = a["id"]
        args = _revise_args(h, lid, a["evidence_ids"], {"confidence": "high"})
    elif case == "support_not_in_basis":
        other = h.attach(lid, verification_basis="partial_source")["evidence_id"]
        args = _revise_args(h, lid, [other], {"observation": "New figure"})
    elif case == "empty_required":
        args["changes"] = {"title": ""}
    elif case == "missing_lesson":
        args["lesson_id"] = unique("ghost")
    before = h.wikitext(lid)
    err = h.error("revise_lesson", **args)
    assert err["code"] == code, err
    if rule:
        assert err["rule"] == rule
    if code == "revision_conflict":
        assert err["details"]["current_revision_id"] == h.latest(lid)
    assert h.wikitext(lid) == before


def test_revise_low_correction_needs_only_recorded_basis(h):
    a = h.create()
    out = h.ok("revise_lesson", **_revise_args(h, a["id"], a["evidence_ids"],
                                               {"observation": "Corrected.", "confidence": "low"}))
    assert out["changed_fields"] == ["observation", "confidence"]


def test_revise_with_only_not_recorded_basis_is_refused(h):
    """A legacy (imported) Lesson whose evidence has basis not_recorded: GW07."""
    lid = unique("legacy")
    text = serialize_page(parse_page(h.wikitext(h.create()["id"]), SCHEMA), SCHEMA)
    page = parse_page(text, SCHEMA)
    page = page.evolve(fields={**page.fields, "author": "S3Import", "record_origin": "imported"},
                       evidence=({**page.evidence[0], "verification_basis": "not_recorded", "added_by": "S3Import"},))
    h.raw_edit(lid, serialize_page(page, SCHEMA), "import", base=None, account="importer")
    err = h.error("revise_lesson", **_revise_args(h, lid, [page.evidence[0]["id"]],
                                                  {"confidence": "low", "observation": "x"}))
    assert err["code"] == "rule_violation" and err["rule"] == "GW07"


def test_revise_without_hmac_key_is_not_configured(h):
    lid, ev = _supported(h)
    err = restarted(h, keys={}).error("revise_lesson", **_revise_args(h, lid, [ev], {"title": "x y"}))
    assert err["code"] == "not_configured"


def test_seal_with_wrong_key_is_never_a_replay_and_is_audited(h):
    lid, ev = _supported(h)
    args = _revise_args(h, lid, [ev], {"title": "Signed with another key"})
    forged = restarted(h, keys={"k1": "attacker-key-0123456789-abcdef"})
    applied = forged.ok("revise_lesson", **args)["applied_revision_id"]
    # The real gateway (right key) does not accept that seal: the retry is not replayed.
    err = h.error("revise_lesson", **args)
    assert err["code"] == "revision_conflict"
    report = audit(h.raw_client(), since=parse_ts(h.history(lid)[-1].timestamp), limit=5000, keys=KEYS,
                   agent_accounts={"S3Agent"}, force_allrevisions=True, schema=SCHEMA)
    rules = {(f.revision_id, f.rule_id) for f in report.findings if f.lesson_id == lid}
    assert (applied, "HS44") in rules


def test_seal_copied_onto_another_body_is_never_a_replay_and_is_audited(h):
    lid, ev = _supported(h)
    args = _revise_args(h, lid, [ev], {"title": "Sealed title"})
    out = h.ok("revise_lesson", **args)
    sealed = h.history(lid)[0]
    # Someone with the gateway's wiki account saves another body under the same summary.
    page = parse_page(h.wikitext(lid), SCHEMA)
    page = page.evolve(fields={**page.fields, "title": "Tampered title",
                               "updated_at": _later(page.fields["updated_at"])})
    copied = h.raw_edit(lid, serialize_page(page, SCHEMA), sealed.comment, base=out["current_revision_id"])["newrevid"]
    # A retry now finds the copy first: it must not count; the original sealed revision still does.
    again = h.ok("revise_lesson", **args)
    assert again["status"] == "replayed" and again["applied_revision_id"] == out["applied_revision_id"]
    report = audit(h.raw_client(), since=parse_ts(h.history(lid)[-1].timestamp), limit=5000, keys=KEYS,
                   agent_accounts={"S3Agent"}, force_allrevisions=True, schema=SCHEMA)
    rules = {(f.revision_id, f.rule_id) for f in report.findings if f.lesson_id == lid}
    assert (copied, "HS44") in rules and (copied, "HS42") in rules
    assert not {r for r in rules if r[0] == out["applied_revision_id"]}


def _later(ts: str) -> str:
    from datetime import timedelta

    from gateway.domain.timestamps import format_ts
    return format_ts(parse_ts(ts) + timedelta(seconds=2))


def test_summary_limit_with_longest_values(h):
    lid = unique("lesson")[:20] + "-" + "x" * 90
    a = h.create(lesson_id=lid)
    h.verify(lid, a["evidence_ids"][0])
    basis = [a["evidence_ids"][0]] + [h.attach(lid, evidence_id=("e" * 60) + f"{i:04d}")["evidence_id"]
                                      for i in range(7)]
    op = "O" + "p" * 127
    changes = {n: "v" for n in ("title", "question", "attempt", "context", "applicability", "evidence")}
    out = h.ok("revise_lesson", **_revise_args(h, lid, basis, changes, operation_id=op, reason="r" * 500))
    rev = h.history(lid)[0]
    assert len(rev.comment) <= 500 and rev.comment.endswith("]")
    assert parse_summary(rev.comment, SCHEMA).op == op and out["status"] == "revised"


# =============================================================== cross-cutting
class FakeRetrieval:
    def __init__(self, fail: bool = False):
        self.hints: list[str] = []
        self.fail = fail

    def hint_dirty(self, lesson_id: str) -> None:
        self.hints.append(lesson_id)
        if self.fail:
            raise RuntimeError("index down")

    def duplicate_candidates(self, repository, lesson_id, page):
        return {"status": "ok", "items": []}


def test_dirty_hint_only_after_create_and_revise_and_never_fails_the_write(h):
    fake = FakeRetrieval(fail=True)
    g = restarted(h, retrieval=fake)
    a, b = g.create(), g.create()
    assert fake.hints == [a["id"], b["id"]]
    g.ok("link_lessons", operation_id=unique("op-link"), **{"from": a["id"], "relation": "supports", "to": b["id"]})
    g.attach(a["id"])
    g.verify(a["id"], a["evidence_ids"][0])
    assert fake.hints == [a["id"], b["id"]]
    g.ok("revise_lesson", **_revise_args(g, a["id"], a["evidence_ids"], {"title": "Renamed"}))
    assert fake.hints == [a["id"], b["id"], a["id"]]


def test_every_write_response_carries_current_revision_id(h):
    a, b = h.create(), h.create()
    outs = [a, h.ok("link_lessons", operation_id=unique("op-link"), **{"from": a["id"], "relation": "works_when",
                                                                        "to": b["id"]}),
            h.attach(a["id"]), h.verify(a["id"], a["evidence_ids"][0]),
            h.ok("revise_lesson", **_revise_args(h, a["id"], a["evidence_ids"], {"title": "Chained"}))]
    for out in outs:
        assert isinstance(out["current_revision_id"], int)
    assert outs[-1]["current_revision_id"] == h.latest(a["id"])


def test_read_your_write_in_legacy_search(h):
    token = "zq" + unique("w").replace("-", "")
    a = h.create(fields={"title": f"Allocator {token} fragmentation"})
    found = h.ok("search_lessons", query=token)
    assert a["id"] in [r["id"] for r in found["results"]]


def test_gateway_writes_pass_the_auditor(h):
    since = parse_ts(h.history(h.create()["id"])[0].timestamp)
    a, b = h.create(confidence="high", verification=True), h.create()
    h.ok("link_lessons", operation_id=unique("op-link"), **{"from": a["id"], "relation": "analogous_to",
                                                             "to": b["id"]})
    h.attach(a["id"])
    h.verify(a["id"], a["evidence_ids"][0])
    h.ok("revise_lesson", **_revise_args(h, a["id"], a["evidence_ids"], {"title": "Audited"}))
    report = audit(h.raw_client(), since=since, limit=5000, keys=KEYS, agent_accounts={"S3Agent"}, schema=SCHEMA)
    mine = [f for f in report.findings if f.lesson_id in (a["id"], b["id"])]
    assert mine == []


def test_auditor_lists_truncated_facets_as_information_only(h):
    """docs/hybrid-search.md#truncation-report: a long Lesson is listed, never a violation."""
    long = h.create(context="context words " * 300, observation="observed value " * 200)
    since = parse_ts(h.history(long["id"])[0].timestamp)
    report = audit(h.raw_client(), since=since, limit=5000, keys=KEYS, agent_accounts={"S3Agent"}, schema=SCHEMA)
    listed = [t for t in report.truncated_facets if t["lesson_id"] == long["id"]]
    assert listed and listed[0]["facets"]["situation"]["fields"] == ["context", "observation"]
    assert [f for f in report.findings if f.lesson_id == long["id"]] == []


def test_browser_style_edit_breaking_rules_is_reported_by_the_auditor(h):
    a = h.create()
    snap = h.repo.get_snapshot(a["id"])
    page = snap.page
    edited = page.evolve(fields={**page.fields, "record_origin": "imported"},
                         evidence=({**page.evidence[0], "citation": "rewritten"},))
    rev = h.raw_edit(a["id"], serialize_page(edited, SCHEMA), "tidy", base=snap.revision_id, account="importer")["newrevid"]
    report = audit(h.raw_client(), since=parse_ts(snap.timestamp), limit=5000, keys=KEYS, agent_accounts={"S3Agent"},
                   force_allrevisions=True, schema=SCHEMA)
    rules = {f.rule_id for f in report.findings if f.revision_id == rev}
    assert {"HS12", "HS15", "HS21"} <= rules


def test_lesson_ids_with_underscores(h):
    """MediaWiki shows underscores as spaces in titles; every write must still find the page."""
    a, b = h.create(lesson_id=unique("with_underscore").replace("-", "_")), h.create(lesson_id=unique("b_x"))
    assert h.attach(a["id"])["status"] == "created"
    assert h.ok("link_lessons", operation_id=unique("op-link"), **{"from": a["id"], "relation": "suggests",
                                                                   "to": b["id"]})["status"] == "created"
    args = create_args(lesson_id=a["id"])
    assert h.error("create_lesson_draft", **args)["code"] == "lesson_exists"


def test_audit_cli_reports_tied_verification_times_and_exits_1(h, monkeypatch, capsys):
    """Two records of one evidence at the same time: HS30 + an ambiguous verdict (docs/data-contract.md#current-verdict)."""
    import json as _json
    from datetime import datetime, timezone

    from gateway.domain.timestamps import next_updated_at
    from s3rm.audit import main

    a = h.create()
    snap = h.repo.get_snapshot(a["id"])
    page = snap.page
    stamp = next_updated_at(datetime.now(timezone.utc), page.fields["updated_at"])
    ev = page.evidence[0]
    record = {"evidence_id": ev["id"], "evidence_digest": evidence_digest(ev, SCHEMA), "verification_basis": "full_text",
              "source_identity": "s", "source_sha256": "a" * 64, "source_locator": "l", "coverage": "c",
              "claim_fields": "observation", "verified_by": "S3Import", "verified_at": stamp}
    tied = page.evolve(fields={**page.fields, "updated_at": stamp},
                       verifications=({**record, "id": "v1", "outcome": "supports"},
                                      {**record, "id": "v2", "outcome": "contradicts"}))
    h.raw_edit(a["id"], serialize_page(tied, SCHEMA), "two verdicts", base=snap.revision_id, account="importer")
    for name, value in {"S3RM_WIKI_API_URL": h.wiki.api_url, "S3RM_WIKI_USERNAME": h.wiki.agent.username,
                        "S3RM_WIKI_PASSWORD": h.wiki.agent.password,
                        "S3RM_REVISION_HMAC_KEYS": _json.dumps(KEYS), "S3RM_REVISION_HMAC_ACTIVE_KEY_ID": "k1"}.items():
        monkeypatch.setenv(name, value)
    code = main(["--since", snap.timestamp, "--format", "json", "--max-findings", "1"])
    report = _json.loads(capsys.readouterr().out)
    assert code == 1 and report["source"] == "recentchanges"
    assert report["truncated"] and len(report["violations"]) == 1 and report["by_rule"]["HS30"] >= 2
    assert main(["--since", "2999-01-01T00:00:00Z"]) == 0
    assert "0 violation(s)" in capsys.readouterr().out


# =============================================================== without the wiki: failure mapping
def _memory_dispatcher(repo):
    from types import MappingProxyType

    from gateway.config import DEFAULT_SCHEMA_DIR, GatewayConfig
    from gateway.tools.dispatcher import Dispatcher
    from gateway.tools.registry import ToolRegistry

    config = GatewayConfig(write_auth_mode="open", wiki_username="S3Agent@gateway",
                           revision_hmac_keys=MappingProxyType(KEYS), revision_hmac_active_key_id="k1",
                           schema_dir=DEFAULT_SCHEMA_DIR)
    return Dispatcher(ToolRegistry.load(config.schema), config=config, repository=repo)


def _memory_call(dispatcher, tool, **arguments):
    import json as _json

    from gateway.ops.access import Credentials

    result = dispatcher.call({"name": tool, "arguments": arguments}, request_id=1, credentials=Credentials())
    return _json.loads(result.content[0].text)


@pytest.mark.parametrize("maybe_applied", [True, False])
def test_unconfirmed_save_is_retryable_and_the_retry_replays(maybe_applied):
    from gateway.domain.repository import WikiUnavailable
    from support.memory import InMemoryRepository

    class Flaky(InMemoryRepository):
        fail_next = True

        def save_page(self, *args, **kwargs):
            result = super().save_page(*args, **kwargs) if maybe_applied else None
            if self.fail_next:
                self.fail_next = False
                exc = WikiUnavailable("timeout")
                exc.wiki_code, exc.maybe_applied = "timeout", maybe_applied
                raise exc
            return result if result is not None else super().save_page(*args, **kwargs)

    d = _memory_dispatcher(Flaky())
    args = create_args()
    err = _memory_call(d, "create_lesson_draft", **args)["error"]
    assert err["code"] == "wiki_unavailable" and err["retryable"] is True
    again = _memory_call(d, "create_lesson_draft", **args)
    assert again["status"] == ("replayed" if maybe_applied else "created")


def test_permission_denied_is_reported_without_details():
    from gateway.domain.repository import PermissionDenied
    from support.memory import InMemoryRepository

    class ReadOnly(InMemoryRepository):
        def save_page(self, *args, **kwargs):
            raise PermissionDenied("protectedpage")

    err = _memory_call(_memory_dispatcher(ReadOnly()), "create_lesson_draft", **create_args())["error"]
    assert err["code"] == "wiki_permission_denied"
