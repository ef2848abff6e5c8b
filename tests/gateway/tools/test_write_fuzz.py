"""Property-based fuzzing of the write tools through the real HTTP app and the REAL dev wiki.

Every example sends one tools/call over ``POST /mcp`` (Flask test client, the
production app factory, token mode) with arguments derived from a valid call
by random mutations: odd Unicode and wikitext-looking text (pipes, ``}}``,
``[[…]]``, ``~~~~``, ``<script>``, ``{{#set:…}}``, NFD, RTL marks, control
characters), values at and beyond their length limits, huge strings, wrong
JSON types, missing and unknown keys, bad enums and URLs.

Properties (docs/tools.md#results, docs/tools.md#write-semantics):

* never an HTTP 500 (200 with a JSON-RPC body, or 413 for an over-size body);
* a rejected call leaves the Lesson's wikitext byte-identical (a rejected
  create leaves no page) — never a partial page;
* an accepted call produced a revision that passes the hooks_spec checker
  against its parent with MediaWiki's own user, time, summary and parent, and
  the stored values read back byte-for-byte.

``max_examples`` keeps the suite within the CI budget (about a minute).
"""
from __future__ import annotations

import hashlib
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.app import create_app
from gateway.config import DEFAULT_SCHEMA_DIR, GatewayConfig
from gateway.domain.codec import parse_page
from gateway.domain.digests import evidence_digest
from gateway.wiki.repository import repository_factory
from gateway.domain.checker import check_revision
from support.schema_dirs import SCHEMA
from support.write_harness import KEYS, WriteHarness, claim_args, evidence_args, lesson_fields, unique

pytestmark = pytest.mark.wiki

TOKEN = "fuzz-write-token-0123456789"
HEADERS = {"Host": "127.0.0.1:8080", "Accept": "application/json, text/event-stream",
           "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
FUZZ = settings(max_examples=20, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])

SPECIAL = ["|", "}}", "{{", "{{Lesson}}", "{{Lesson evidence|id=x}}", "[[Category:Spam]]", "[[Lesson:other]]",
           "~~~~", "~~~~~", "<script>alert(1)</script>", "{{#set:Confidence=high}}", "* item", "# item",
           "= heading =", "----", "\n\n", "\r\n", "\r", "__NOTOC__", "''bold''", "'''", "&amp;", "&#124;", "&lt;",
           "http://example.org/x", "mailto:a@b", " lead", "trail ", "\t", "\u200f", "\u202e", "e\u0301",
           "\u1100\u1161", "가", "한국어 메모", "😀", "\x00", "\x7f", "\x1b[31m", "\ufffe", "\ufeff", "<!-- c -->",
           "<nowiki>", "</nowiki>", "{{subst:x}}", "[[", "]]", "=", ":", ";", "[S3W v1 op=x]", "{{!}}", "\u0085"]
TEXT = st.one_of(
    st.text(min_size=1, max_size=30),
    st.sampled_from(SPECIAL),
    st.lists(st.one_of(st.sampled_from(SPECIAL), st.text(max_size=6)), min_size=1, max_size=8).map("".join),
)
JUNK = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.lists(st.integers(), max_size=3),
                 st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


@pytest.fixture(scope="module")
def env(dev_wiki):
    config = GatewayConfig.from_env({
        "S3RM_SCHEMA_DIR": str(DEFAULT_SCHEMA_DIR),
        "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(TOKEN.encode()).hexdigest(),
        "S3RM_WIKI_API_URL": dev_wiki.api_url, "S3RM_WIKI_USERNAME": dev_wiki.agent.username,
        "S3RM_WIKI_PASSWORD": dev_wiki.agent.password,
        "S3RM_REVISION_HMAC_KEYS": json.dumps(KEYS), "S3RM_REVISION_HMAC_ACTIVE_KEY_ID": "k1",
    })
    app = create_app(config, repository_factory=repository_factory, wiki_probe=lambda: True)
    h = WriteHarness(dev_wiki)
    pool = [h.create(confidence="high", verification=True)["id"] for _ in range(3)]
    revise_pool = [h.create(confidence="high", verification=True)["id"] for _ in range(2)]
    return {"client": app.test_client(), "h": h, "pool": pool, "revise_pool": revise_pool}


def _post(env, tool: str, arguments) -> tuple[int, dict | None]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    r = env["client"].post("/mcp", data=json.dumps(body).encode(), headers=HEADERS)
    assert r.status_code != 500, r.data[:300]
    assert r.status_code in (200, 413), (r.status_code, r.data[:300])
    assert b"Traceback" not in r.data
    if r.status_code != 200:
        return r.status_code, None
    payload = r.get_json()
    if "error" in payload:  # a JSON-RPC level refusal (never internal)
        assert payload["error"]["code"] != -32603, payload
        return 200, None
    result = payload["result"]
    text = json.loads(result["content"][0]["text"])
    if result.get("isError"):
        assert text["error"]["code"] != "internal_error", text
        return 200, None
    assert result["structuredContent"] == text
    return 200, text


def _mutate(data, args: dict, *, text: list[str], enums: dict[str, list[str]], limits: dict[str, int]) -> None:
    """Apply random valid-type text and (sometimes) one invalid mutation to ``args`` in place."""
    for name in text:
        if name in args and data.draw(st.booleans(), label=f"fuzz {name}"):
            args[name] = data.draw(TEXT, label=name)
    kind = data.draw(st.sampled_from(["none"] * 6 + ["drop", "junk", "extra", "huge", "limit", "enum"]),
                     label="mutation")
    keys = sorted(args)
    if kind == "drop" and keys:
        args.pop(data.draw(st.sampled_from(keys), label="drop"))
    elif kind == "junk" and keys:
        args[data.draw(st.sampled_from(keys), label="junk key")] = data.draw(JUNK, label="junk")
    elif kind == "extra":
        args[data.draw(st.sampled_from(["author", "updated_at", "record_origin", "x", "added_by", "id"]))] = "v"
    elif kind == "huge" and text:
        args[data.draw(st.sampled_from(text))] = data.draw(st.sampled_from(["x", "가", "|"])) * 100_000
    elif kind == "limit" and limits:
        name = data.draw(st.sampled_from(sorted(limits)), label="limit field")
        extra = data.draw(st.sampled_from([0, 1]), label="over")
        args[name] = "한" * (limits[name] + extra)
    elif kind == "enum" and enums:
        name = data.draw(st.sampled_from(sorted(enums)), label="enum field")
        args[name] = data.draw(st.one_of(st.sampled_from(enums[name]), TEXT), label="enum value")


def _limits(kind: str, names) -> dict[str, int]:
    rec = SCHEMA.record(kind)
    return {f.name: f.max_length for f in rec.fields if f.name in names and f.max_length}


def _assert_saved_revision_keeps_the_rules(h, lesson_id: str, before: str | None, existing=None) -> None:
    rev = h.history(lesson_id)[0]
    after = h.repo.get_revision_text(rev.revision_id)
    violations = check_revision(before, after, rev.user, rev.timestamp, rev.comment, keys=KEYS,
                                lesson_id=lesson_id, parent_revision_id=rev.parent_id, agent_accounts={"S3Agent"},
                                existing_lessons=existing, schema=SCHEMA)
    assert violations == [], violations


LESSON_TEXT = [f.name for f in SCHEMA.lesson.fields if f.client_settable and f.name != "confidence"]
EV_TEXT = ["citation", "note"]
CLAIM_TEXT = ["source_identity", "source_locator", "coverage"]
ENUM = SCHEMA.enum


@FUZZ
@given(data=st.data())
def test_fuzz_create_lesson_draft(env, data):
    h = env["h"]
    args = {"operation_id": unique("op-fz"), "lesson_id": unique("fz"), **lesson_fields(),
            "initial_evidence": evidence_args()}
    _mutate(data, args, text=LESSON_TEXT, enums={"confidence": list(ENUM("confidence").values)},
            limits=_limits("lesson", LESSON_TEXT))
    if isinstance(args.get("initial_evidence"), dict):
        _mutate(data, args["initial_evidence"], text=EV_TEXT,
                enums={"kind": list(ENUM("evidence_kind").values),
                       "verification_basis": list(ENUM("verification_basis").values), "url": ["ftp://x"]},
                limits=_limits("evidence", EV_TEXT))
    status, out = _post(env, "create_lesson_draft", args)
    _check_create(h, args, out)


def _check_create(h, args: dict, out: dict | None) -> None:
    """A refused create leaves no page; an accepted one stores every field as sent (an omitted
    ``lesson_id`` is derived by the server, docs/tools.md#create_lesson_draft)."""
    lid = args.get("lesson_id")
    valid_id = isinstance(lid, str) and re.fullmatch(r"[a-z0-9-]+", lid)
    if out is None:
        if valid_id:
            assert h.wikitext(lid) is None  # never a partial page
        return
    if "lesson_id" not in args:
        lid = out["id"]
        assert re.fullmatch(r"[a-z0-9_-]+", lid), lid
    assert out["id"] == lid
    page = h.repo.get_snapshot(lid).page
    for name in LESSON_TEXT:
        assert page.fields[name] == args[name]
    assert page.evidence[0]["citation"] == args["initial_evidence"]["citation"]
    _assert_saved_revision_keeps_the_rules(h, lid, None)


def test_create_without_lesson_id_stores_the_derived_id(env):
    """Falsifying example of ``test_fuzz_create_lesson_draft`` (kind=drop, key=lesson_id): the server
    derives the id, and the test reads the Lesson back under that id."""
    args = {"operation_id": unique("op-fz"), **lesson_fields(), "initial_evidence": evidence_args()}
    status, out = _post(env, "create_lesson_draft", args)
    assert status == 200 and out is not None and out["status"] == "created", out
    _check_create(env["h"], args, out)


def test_link_with_a_non_json_number_is_a_parse_error_and_writes_nothing(env):
    """Falsifying example of ``test_fuzz_link_lessons`` (kind=junk, value=inf): ``json.dumps`` writes
    ``Infinity``, which is not JSON, so the server answers HTTP 400 with -32700 and the page is
    untouched; the fuzzer itself now draws finite numbers only."""
    h, src = env["h"], env["pool"][0]
    before = h.wikitext(src)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "link_lessons", "arguments": {"operation_id": unique("op-fz"), "from": src,
                                                             "relation": "works_when", "to": float("inf")}}}
    r = env["client"].post("/mcp", data=json.dumps(body).encode(), headers=HEADERS)
    assert r.status_code == 400, r.data[:300]
    assert r.get_json()["error"]["code"] == -32700
    assert h.wikitext(src) == before


@FUZZ
@given(data=st.data())
def test_fuzz_link_lessons(env, data):
    h, pool = env["h"], env["pool"]
    src = data.draw(st.sampled_from(pool), label="from")
    target = data.draw(st.sampled_from(pool + ["ghost-lesson"]), label="to")
    args = {"operation_id": unique("op-fz"), "from": src,
            "relation": data.draw(st.sampled_from(list(ENUM("relation").values))), "to": target,
            "note": "why they relate"}
    _mutate(data, args, text=["note"], enums={"relation": list(ENUM("relation").values), "to": pool},
            limits=_limits("relation", ["note"]))
    before = h.wikitext(src)
    status, out = _post(env, "link_lessons", args)
    if out is None:
        assert h.wikitext(src) == before
        return
    rel = h.repo.get_snapshot(src).page.relations[-1]
    assert (rel["relation"], rel["to"], rel["note"]) == (args["relation"], args["to"], args.get("note", ""))
    _assert_saved_revision_keeps_the_rules(h, src, before, existing=set(pool))


@FUZZ
@given(data=st.data())
def test_fuzz_attach_evidence(env, data):
    h, pool = env["h"], env["pool"]
    lesson = data.draw(st.sampled_from(pool), label="lesson")
    args = {"operation_id": unique("op-fz"), "lesson_id": lesson, **evidence_args()}
    if data.draw(st.booleans(), label="explicit id"):
        args["evidence_id"] = data.draw(st.sampled_from([unique("e"), "UPPER", "with space", "a" * 65, "ok_id-1"]))
    _mutate(data, args, text=EV_TEXT,
            enums={"kind": list(ENUM("evidence_kind").values),
                   "verification_basis": list(ENUM("verification_basis").values),
                   "url": ["https://example.org/ok", "http://x", "javascript:alert(1)", "https://", "//x"]},
            limits=_limits("evidence", EV_TEXT + ["url"]))
    before = h.wikitext(lesson)
    status, out = _post(env, "attach_evidence", args)
    if out is None:
        assert h.wikitext(lesson) == before
        return
    stored = h.repo.get_snapshot(lesson).page.evidence_by_id(out["evidence_id"])
    assert stored["citation"] == args["citation"] and stored["note"] == args.get("note", "")
    assert out["evidence_digest"] == evidence_digest(stored, SCHEMA)
    _assert_saved_revision_keeps_the_rules(h, lesson, before)


@FUZZ
@given(data=st.data())
def test_fuzz_record_evidence_verification(env, data):
    h, pool = env["h"], env["pool"]
    lesson = data.draw(st.sampled_from(pool), label="lesson")
    snap = h.repo.get_snapshot(lesson)
    ev = data.draw(st.sampled_from(snap.page.evidence), label="evidence")
    args = {"operation_id": unique("op-fz"), "lesson_id": lesson, "evidence_id": ev["id"],
            "expected_revision_id": snap.revision_id, "expected_evidence_digest": evidence_digest(ev, SCHEMA),
            **claim_args(claim_fields=data.draw(st.lists(st.sampled_from(list(ENUM("claim_field").values)),
                                                         min_size=1, max_size=3, unique=True)))}
    _mutate(data, args, text=CLAIM_TEXT,
            enums={"outcome": list(ENUM("outcome").values), "verification_basis": list(ENUM("verification_basis").values),
                   "source_sha256": ["A" * 64, "0" * 63], "expected_evidence_digest": ["sha256:" + "0" * 64]},
            limits=_limits("verification", CLAIM_TEXT))
    before = snap.wikitext
    status, out = _post(env, "record_evidence_verification", args)
    if out is None:
        assert h.wikitext(lesson) == before
        return
    record = h.repo.get_snapshot(lesson).page.verifications[-1]
    assert record["id"] == out["verification_id"] and record["coverage"] == args["coverage"]
    _assert_saved_revision_keeps_the_rules(h, lesson, before)


@FUZZ
@given(data=st.data())
def test_fuzz_revise_lesson(env, data):
    h, pool = env["h"], env["revise_pool"]
    lesson = data.draw(st.sampled_from(pool), label="lesson")
    snap = h.repo.get_snapshot(lesson)
    fields = data.draw(st.lists(st.sampled_from(LESSON_TEXT + ["confidence"]), min_size=1, max_size=4, unique=True))
    changes = {f: (data.draw(st.sampled_from(list(ENUM("confidence").values))) if f == "confidence"
                   else data.draw(TEXT, label=f)) for f in fields}
    args = {"operation_id": unique("op-fz"), "lesson_id": lesson, "expected_revision_id": snap.revision_id,
            "basis_evidence_ids": [snap.page.evidence[0]["id"]], "changes": changes,
            "reason": data.draw(TEXT, label="reason")}
    _mutate(data, args, text=["reason"], enums={"expected_revision_id": [snap.revision_id - 1]}, limits={})
    if isinstance(args.get("changes"), dict):
        _mutate(data, args["changes"], text=[], enums={"confidence": ["certain"]},
                limits=_limits("lesson", list(args["changes"])))
    before = snap.wikitext
    status, out = _post(env, "revise_lesson", args)
    if out is None:
        assert h.wikitext(lesson) == before
        return
    page = h.repo.get_snapshot(lesson).page
    for name, value in args["changes"].items():
        assert page.fields[name] == value
    assert parse_page(before, SCHEMA).fields != page.fields
    _assert_saved_revision_keeps_the_rules(h, lesson, before)
