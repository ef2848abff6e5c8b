"""Writes the conformance vectors ``hooks_spec/vectors/HS<nn>.json``.

Run ``python -m hooks_spec.build_vectors`` after changing a vector here. Every
vector's expected rule ids are written down BY HAND below (``expect=``), never
computed by the checker: the vectors are the specification the checker is
tested against (tests/hooks_spec/test_hooks_spec.py).

Vector file format (JSON)::

    {"rule": "HS15", "title": "...", "vectors": [
       {"name": "...", "case": "pass" | "fail" | "edge",
        "previous": "<wikitext>" | null, "new": "<wikitext>",
        "account": "Alice", "timestamp": "2025-03-01T11:00:00Z", "summary": "...",
        "lesson_id": "gpu_frag", "parent_revision_id": 41 | null,
        "existing_lessons": ["..."] | null, "agent_accounts": ["S3Agent"] | null,
        "keys": {"k1": "..."}, "restored": "<wikitext>" | null,
        "expect": ["HS15"]}]}

``expect`` is the exact set of rule ids the checker must report.
"""
from __future__ import annotations

import json
from pathlib import Path

from gateway.config.loader import DEFAULT_SCHEMA_DIR
from gateway.config.schema import load_schema
from gateway.domain.codec import parse_page, serialize_page
from gateway.domain.digests import evidence_digest
from gateway.domain.markers import Marker, build_summary
from gateway.domain.model import LessonPage
from gateway.domain.seals import make_seal

OUT = Path(__file__).resolve().parent / "vectors"
#: The vectors specify the committed schema source (an explicit file, never the environment's).
SCHEMA = load_schema(DEFAULT_SCHEMA_DIR / "lesson.toml")
T0 = "2025-03-01T10:00:00Z"
T1 = "2025-03-01T11:00:00Z"
T1p = "2025-03-01T11:00:01Z"
LID = "gpu_frag"
AGENT = "S3Agent"
KEYS = {"k1": "vector-key-one-0123456789", "k2": "vector-key-two-0123456789"}
OP = "op-vector-0001"
D32 = "0123456789abcdef0123456789abcdef"

TITLES = {
    "HS01": "The revision is a well-formed Lesson page",
    "HS02": "No new text outside the record templates",
    "HS03": "Required fields are non-empty",
    "HS04": "Enum values are valid",
    "HS05": "Formats: timestamps, ids, URLs, SHA-256, digests",
    "HS06": "Length limits",
    "HS10": "A new Lesson's author is the saving account",
    "HS11": "author is immutable",
    "HS12": "record_origin is immutable",
    "HS13": "created_at is immutable",
    "HS14": "A new Lesson has created_at = updated_at",
    "HS15": "updated_at strictly increases",
    "HS16": "New timestamps lie within ±5 minutes of the revision time",
    "HS17": "Provenance of appended items is the saving account",
    "HS18": "Items a gateway write appends take the new updated_at as their time",
    "HS19": "Review fields: Draft and empty reviewer on creation, fixed afterwards",
    "HS21": "Evidence is append-only",
    "HS22": "Verification records are append-only",
    "HS23": "Relations are append-only",
    "HS24": "Evidence ids are unique",
    "HS25": "Verification ids are unique",
    "HS26": "A new Lesson has at least one evidence",
    "HS27": "not_recorded is refused on new evidence and verification records",
    "HS28": "A verification names an existing evidence",
    "HS29": "A verification's evidence_digest matches the evidence",
    "HS30": "verified_at ordering",
    "HS31": "Initial verification basis equals the initial evidence basis",
    "HS32": "High-confidence create needs full supporting verification",
    "HS33": "A relation starts at the page it is stored on",
    "HS34": "Relation targets exist",
    "HS35": "No duplicate relation edges",
    "HS36": "No self-relations",
    "HS37": "Changed claim fields of a medium/high Lesson are supported",
    "HS38": "High (or raised) confidence is supported",
    "HS40": "Marker syntax is reserved and well-formed",
    "HS41": "Markers come from gateway accounts",
    "HS42": "A marker's base revision is the revision's parent",
    "HS43": "A marker's kind matches what the revision changed",
    "HS44": "S3R seals verify",
    "HS45": "An S3U undo restores the named revision exactly",
}


# ------------------------------------------------------------------ page builders
def fields(**kw) -> dict[str, str]:
    base = {
        "title": "GPU allocator fragmentation", "question": "Why did long runs run out of GPU memory?",
        "attempt": "Compared the caching allocator with expandable segments.",
        "context": "A100 80GB, PyTorch 2.3, 7B model, batch 16",
        "observation": "Peak reserved memory grew 30% over 10k steps with fixed allocations.",
        "interpretation": "Fragmentation of cached blocks, not a leak.",
        "reusable_lesson": "Enable expandable segments before hunting leaks.",
        "applicability": "Long training runs with variable sequence lengths.",
        "confidence": "medium", "evidence": "Allocator traces from run 31.", "record_origin": "lab",
        "author": "Alice", "reviewer": "", "review_state": "Draft", "created_at": T0, "updated_at": T0,
    }
    base.update(kw)
    return base


def ev(eid: str = "e1", who: str = "Alice", at: str = T0, **kw) -> dict[str, str]:
    base = {"id": eid, "citation": "git lab/probes@4f19a2e results/run-031/summary.json",
            "url": "https://example.org/run-031", "kind": "log", "verification_basis": "full_text",
            "note": "", "added_by": who, "added_at": at}
    base.update(kw)
    return base


def vr(vid: str, evidence: dict, who: str = "Alice", at: str = T0, **kw) -> dict[str, str]:
    base = {"id": vid, "evidence_id": evidence["id"], "evidence_digest": evidence_digest(evidence, SCHEMA),
            "verification_basis": evidence["verification_basis"], "source_identity": "run-031 summary.json",
            "source_sha256": "a" * 64, "source_locator": "lines 1-40", "coverage": "whole file",
            "outcome": "supports", "claim_fields": "observation", "verified_by": who, "verified_at": at}
    base.update(kw)
    return base


def rel(to: str, relation: str = "supports", who: str = "Alice", at: str = T0, frm: str = LID, **kw):
    base = {"from": frm, "relation": relation, "to": to, "note": "", "created_by": who, "created_at": at}
    base.update(kw)
    return base


def page(f: dict, e=(), v=(), r=(), extra: str = "") -> str:
    return serialize_page(LessonPage(fields=f, evidence=tuple(e), verifications=tuple(v), relations=tuple(r),
                                     extra_wikitext=extra), SCHEMA)


E1 = ev()
BASE = page(fields(), [E1])  # previous revision used by most update vectors (saved by Alice at T0)


def upd(**kw) -> dict[str, str]:
    """Lesson fields of a browser update at T1 (updated_at advanced)."""
    return fields(updated_at=T1, **kw)


def seal_summary(new_text: str, *, kid="k1", lesson_id=LID, account=AGENT, parent=41, fields_=("title",),
                 basis=("e1",), keys=KEYS, human="MCP revise_lesson") -> str:
    marker = make_seal(keys=keys, active_kid=kid, lesson_id=lesson_id, account=account, op=OP,
                       request_digest=D32 * 2, basis_ids=basis, fields=tuple(fields_), parent=parent,
                       page=parse_page(new_text, SCHEMA), schema=SCHEMA)
    return build_summary(human, marker, SCHEMA)


def w(kind: str, parent: int, op: str = OP) -> str:
    return build_summary(f"MCP {kind}", Marker(tag="S3W", parent=parent, op=op, kind=kind, digest=D32), SCHEMA)


def sv(parent: int) -> str:
    return build_summary("MCP record_evidence_verification", Marker(tag="S3V", parent=parent, op=OP, kind="verify",
                                                                    digest=D32), SCHEMA)


VECTORS: dict[str, list[dict]] = {}


def vec(rule: str, name: str, case: str, previous, new, *, expect=(), account="Alice", ts=T1, summary="edit",
        lesson_id=LID, parent=None, existing=None, agents=None, keys=None, restored=None) -> None:
    VECTORS.setdefault(rule, []).append({
        "name": name, "case": case, "previous": previous, "new": new, "account": account, "timestamp": ts,
        "summary": summary, "lesson_id": lesson_id, "parent_revision_id": parent,
        "existing_lessons": None if existing is None else sorted(existing),
        "agent_accounts": None if agents is None else sorted(agents), "keys": keys or {},
        "restored": restored, "expect": sorted(expect),
    })


# ------------------------------------------------------------------ HS01–HS06 structure and values
NEW_OK = page(fields(), [E1])
vec("HS01", "valid new Lesson", "pass", None, NEW_OK, ts=T0)
vec("HS01", "plain text is not a Lesson page", "fail", None, "just a note", ts=T0, expect=["HS01"])
vec("HS01", "localized template prefix 틀: is accepted", "edge", None,
    NEW_OK.replace("{{Lesson\n", "{{틀:Lesson\n", 1), ts=T0)
vec("HS01", "unknown parameter", "edge", None, NEW_OK.replace("|title=", "|colour=x\n|title=", 1), ts=T0,
    expect=["HS01"])
vec("HS01", "two Lesson calls", "fail", None, NEW_OK + NEW_OK, ts=T0, expect=["HS01"])

vec("HS02", "no stray text", "pass", BASE, page(upd(), [E1]))
vec("HS02", "category added outside the records", "fail", BASE, page(upd(), [E1], extra="[[Category:Spam]]"),
    expect=["HS02"])
vec("HS02", "stray text already there and unchanged", "edge", page(fields(), [E1], extra="legacy note"),
    page(upd(), [E1], extra="legacy note"))
vec("HS02", "HTML comments are not stray text", "edge", BASE, page(upd(), [E1]) + "<!-- reviewer note -->\n")

vec("HS03", "all required fields set", "pass", BASE, page(upd(title="New title"), [E1]))
vec("HS03", "title emptied", "fail", BASE, page(upd(title=""), [E1]), expect=["HS03"])
vec("HS03", "appended evidence without citation", "edge", BASE,
    page(upd(), [E1, ev("e2", at=T1, citation="")]), expect=["HS03"])
vec("HS03", "optional note and url empty", "edge", BASE, page(upd(), [E1, ev("e2", at=T1, url="", note="")]))

vec("HS04", "valid enums", "pass", BASE, page(upd(confidence="low"), [E1]))
vec("HS04", "confidence outside the enum", "fail", BASE, page(upd(confidence="certain"), [E1]), expect=["HS04"])
vec("HS04", "claim_fields lists a value twice", "edge", BASE,
    page(upd(), [E1], [vr("v1", E1, at=T1, claim_fields="observation,observation")]), expect=["HS04"])
vec("HS04", "claim_fields with spaces after commas", "edge", BASE,
    page(upd(), [E1], [vr("v1", E1, at=T1, claim_fields="observation, context")]))
vec("HS04", "unknown relation type", "fail", BASE, page(upd(), [E1], r=[rel("other", "causes", at=T1)]),
    existing={"other"}, expect=["HS04"])

vec("HS05", "well-formed values", "pass", BASE, page(upd(), [E1, ev("e2", at=T1, url="HTTPS://Example.org/x")]))
vec("HS05", "ftp url", "fail", BASE, page(upd(), [E1, ev("e2", at=T1, url="ftp://example.org/x")]),
    expect=["HS05"])
vec("HS05", "impossible date", "edge", BASE, page(fields(updated_at="2025-02-30T10:00:00Z"), [E1]),
    expect=["HS05"])
vec("HS05", "upper-case evidence id", "edge", BASE, page(upd(), [E1, ev("E2", at=T1)]), expect=["HS05"])
vec("HS05", "short source_sha256", "fail", BASE, page(upd(), [E1], [vr("v1", E1, at=T1, source_sha256="abc")]),
    expect=["HS05"])

vec("HS06", "title of exactly 200 characters (Korean)", "edge", BASE, page(upd(title="가" * 200), [E1]))
vec("HS06", "title of 201 characters", "fail", BASE, page(upd(title="가" * 201), [E1]), expect=["HS06"])
vec("HS06", "short values", "pass", BASE, page(upd(title="short"), [E1]))

# ------------------------------------------------------------------ HS10–HS19 provenance and time
vec("HS10", "author is the saving account", "pass", None, NEW_OK, ts=T0)
vec("HS10", "author is someone else", "fail", None, page(fields(author="Bob"), [E1]), ts=T0, expect=["HS10"])
vec("HS10", "author differs only in case", "edge", None, page(fields(author="alice"), [E1]), ts=T0,
    expect=["HS10"])

vec("HS11", "author kept", "pass", BASE, page(upd(), [E1]), account="Bob")
vec("HS11", "author changed", "fail", BASE, page(upd(author="Bob"), [E1]), account="Bob", expect=["HS11"])
vec("HS11", "author changed to the current editor", "edge", BASE, page(upd(author="Carol"), [E1]),
    account="Carol", expect=["HS11"])

vec("HS12", "record_origin kept", "pass", BASE, page(upd(), [E1]))
vec("HS12", "lab changed to imported", "fail", BASE, page(upd(record_origin="imported"), [E1]), expect=["HS12"])
vec("HS12", "imported Lesson stays imported", "edge", page(fields(record_origin="imported"), [E1]),
    page(upd(record_origin="imported"), [E1]))

vec("HS13", "created_at kept", "pass", BASE, page(upd(), [E1]))
vec("HS13", "created_at moved back a day", "fail", BASE, page(upd(created_at="2025-02-28T10:00:00Z"), [E1]),
    expect=["HS13"])
vec("HS13", "created_at moved by one second", "edge", BASE, page(upd(created_at="2025-03-01T10:00:01Z"), [E1]),
    expect=["HS13"])

vec("HS14", "created_at = updated_at", "pass", None, NEW_OK, ts=T0)
vec("HS14", "created_at earlier than updated_at", "fail", None,
    page(fields(updated_at="2025-03-01T10:00:01Z"), [E1]), ts=T0, expect=["HS14"])
vec("HS14", "same instant written the same way", "edge", None,
    page(fields(created_at=T1, updated_at=T1), [ev(at=T1)]), ts=T1)

vec("HS15", "updated_at one second later", "pass", BASE,
    page(fields(updated_at="2025-03-01T10:00:01Z"), [E1]), ts="2025-03-01T10:00:01Z")
vec("HS15", "updated_at unchanged", "fail", BASE, page(fields(title="x"), [E1]), ts=T0, expect=["HS15"])
vec("HS15", "updated_at moved backwards", "edge", page(fields(updated_at=T1), [E1]),
    page(fields(updated_at="2025-03-01T10:59:00Z", title="x"), [E1]), ts=T1, expect=["HS15"])
PIPED = page(fields(title="a | b"), [ev(citation="c | d")])
vec("HS15", "re-encoded only (s3rm migrate), updated_at kept", "edge", PIPED.replace("&#x7C;", "&#124;"), PIPED, ts=T1)

vec("HS16", "updated_at exactly 300 s after the revision time", "edge", BASE,
    page(fields(updated_at="2025-03-01T11:05:00Z"), [E1]), ts=T1)
vec("HS16", "updated_at 301 s after the revision time", "fail", BASE,
    page(fields(updated_at="2025-03-01T11:05:01Z"), [E1]), ts=T1, expect=["HS16"])
vec("HS16", "appended evidence 6 minutes old", "edge", BASE,
    page(upd(), [E1, ev("e2", at="2025-03-01T10:54:00Z")]), ts=T1, expect=["HS16"])
vec("HS16", "new Lesson created 10 minutes before its revision", "fail", None, NEW_OK,
    ts="2025-03-01T10:10:00Z", expect=["HS16"])
vec("HS16", "times equal to the revision time", "pass", BASE, page(upd(), [E1, ev("e2", at=T1)]), ts=T1)

vec("HS17", "appended evidence by the saving account", "pass", BASE, page(upd(), [E1, ev("e2", at=T1)]))
vec("HS17", "appended evidence credited to someone else", "fail", BASE,
    page(upd(), [E1, ev("e2", who="Bob", at=T1)]), expect=["HS17"])
vec("HS17", "appended relation credited to someone else", "edge", BASE,
    page(upd(), [E1], r=[rel("other", who="Bob", at=T1)]), existing={"other"}, expect=["HS17"])
vec("HS17", "appended verification by the saving account", "edge", BASE,
    page(upd(), [E1], [vr("v1", E1, at=T1)]))

vec("HS18", "gateway evidence at the new updated_at", "pass", BASE,
    page(upd(), [E1, ev("e2", who=AGENT, at=T1)]), account=AGENT, summary=w("evidence", 41), parent=41,
    agents={AGENT})
vec("HS18", "gateway evidence one second before updated_at", "fail", BASE,
    page(upd(), [E1, ev("e2", who=AGENT, at="2025-03-01T10:59:59Z")]), account=AGENT,
    summary=w("evidence", 41), parent=41, agents={AGENT}, expect=["HS18"])
vec("HS18", "browser evidence may differ from updated_at", "edge", BASE,
    page(upd(), [E1, ev("e2", at="2025-03-01T10:59:59Z")]))

vec("HS19", "new Lesson Draft without reviewer", "pass", None, NEW_OK, ts=T0)
vec("HS19", "new Lesson already Reviewed", "fail", None, page(fields(review_state="Reviewed"), [E1]), ts=T0,
    expect=["HS19"])
vec("HS19", "review_state changed later", "fail", BASE, page(upd(review_state="Stable"), [E1]), expect=["HS19"])
vec("HS19", "new Lesson with a reviewer", "edge", None, page(fields(reviewer="Bob"), [E1]), ts=T0,
    expect=["HS19"])

# ------------------------------------------------------------------ HS21–HS36 records
E2 = ev("e2")
TWO = page(fields(), [E1, E2])
vec("HS21", "evidence appended", "pass", BASE, page(upd(), [E1, ev("e2", at=T1)]))
vec("HS21", "evidence citation edited", "fail", BASE, page(upd(), [ev(citation="other place")]), expect=["HS21"])
vec("HS21", "evidence reordered", "edge", TWO, page(upd(), [E2, E1]), expect=["HS21"])
vec("HS21", "evidence deleted", "fail", TWO, page(upd(), [E1]), expect=["HS21"])

V1 = vr("v1", E1)
WITH_V = page(fields(), [E1], [V1])
vec("HS22", "verification appended", "pass", WITH_V, page(upd(), [E1], [V1, vr("v2", E1, at=T1)]))
vec("HS22", "verification outcome edited", "fail", WITH_V, page(upd(), [E1], [vr("v1", E1, outcome="contradicts")]),
    expect=["HS22"])
vec("HS22", "verification deleted", "edge", WITH_V, page(upd(), [E1]), expect=["HS22"])
V3 = vr("v1", E1, claim_fields="observation,interpretation,reusable_lesson")
WITH_V3 = page(fields(), [E1], [V3])
# a Page Forms save re-joins the checkbox list with ", ", drops empty parameters and writes the
# relation section where the form puts it: the decoded records are unchanged, so nothing was edited
vec("HS22", "form save re-spaces the claim_fields list", "edge", WITH_V3,
    page(upd(), [E1], [V3]).replace("|claim_fields=observation,interpretation,reusable_lesson",
                                    "|claim_fields=observation, interpretation, reusable_lesson"))
vec("HS22", "form save changes the claim_fields list", "fail", WITH_V3,
    page(upd(), [E1], [V3]).replace("|claim_fields=observation,interpretation,reusable_lesson",
                                    "|claim_fields=observation, interpretation"), expect=["HS22"])

R1 = rel("other")
WITH_R = page(fields(), [E1], r=[R1])
vec("HS23", "relation appended", "pass", WITH_R, page(upd(), [E1], r=[R1, rel("third", at=T1)]),
    existing={"other", "third"})
vec("HS23", "relation note edited", "fail", WITH_R, page(upd(), [E1], r=[rel("other", note="changed")]),
    existing={"other"}, expect=["HS23"])
vec("HS23", "relation deleted", "edge", WITH_R, page(upd(), [E1]), expect=["HS23"])
R2 = rel("other_page")
vec("HS23", "relation target re-spelled as its page name", "edge", page(fields(), [E1], r=[R2]),
    page(upd(), [E1], r=[R2]).replace("|to=other_page", "|to=other page"), existing={"other_page"})
vec("HS21", "evidence re-encoded with other character references", "edge",
    page(fields(), [ev(citation="a & b | c")]),
    page(upd(), [ev(citation="a & b | c")]).replace("a &amp; b &#x7C; c", "a &#38; b &#124; c"))

vec("HS24", "distinct evidence ids", "pass", BASE, page(upd(), [E1, ev("e1-2", at=T1)]))
vec("HS24", "evidence id reused", "fail", BASE, page(upd(), [E1, ev("e1", at=T1, citation="other")]),
    expect=["HS24"])
vec("HS24", "two appended evidence share an id", "edge", BASE,
    page(upd(), [E1, ev("e3", at=T1), ev("e3", at=T1, citation="x")]), expect=["HS24"])

vec("HS25", "distinct verification ids", "pass", WITH_V, page(upd(), [E1], [V1, vr("v2", E1, at=T1)]))
vec("HS25", "verification id reused", "fail", WITH_V, page(upd(), [E1], [V1, vr("v1", E1, at=T1)]),
    expect=["HS25"])
vec("HS25", "verification ids differing in suffix", "edge", WITH_V, page(upd(), [E1], [V1, vr("v1-b", E1, at=T1)]))

vec("HS26", "new Lesson with one evidence", "pass", None, NEW_OK, ts=T0)
vec("HS26", "new Lesson without evidence", "fail", None, page(fields()), ts=T0, expect=["HS26"])
vec("HS26", "new Lesson with two evidence", "edge", None, TWO, ts=T0)

LEGACY = page(fields(), [ev(verification_basis="not_recorded")])
vec("HS27", "partial_source on new evidence", "pass", BASE,
    page(upd(), [E1, ev("e2", at=T1, verification_basis="partial_source")]))
vec("HS27", "not_recorded on new evidence", "fail", BASE,
    page(upd(), [E1, ev("e2", at=T1, verification_basis="not_recorded")]), expect=["HS27"])
vec("HS27", "legacy not_recorded evidence kept", "edge", LEGACY,
    page(upd(), [ev(verification_basis="not_recorded")]))
vec("HS27", "not_recorded on a new verification", "edge", BASE,
    page(upd(), [E1], [vr("v1", E1, at=T1, verification_basis="not_recorded")]), expect=["HS27"])

vec("HS28", "verification of an existing evidence", "pass", BASE, page(upd(), [E1], [vr("v1", E1, at=T1)]))
vec("HS28", "verification of a missing evidence", "fail", BASE,
    page(upd(), [E1], [vr("v1", E1, at=T1, evidence_id="nope")]), expect=["HS28"])
E3 = ev("e3", at=T1)
vec("HS28", "evidence and its verification in one revision", "edge", BASE,
    page(upd(), [E1, E3], [vr("v1", E3, at=T1)]))

vec("HS29", "digest matches", "pass", BASE, page(upd(), [E1], [vr("v1", E1, at=T1)]))
vec("HS29", "digest of something else", "fail", BASE,
    page(upd(), [E1], [vr("v1", E1, at=T1, evidence_digest="sha256:" + "0" * 64)]), expect=["HS29"])
vec("HS29", "digest of the evidence before it was stored (other added_at)", "edge", BASE,
    page(upd(), [E1], [vr("v1", E1, at=T1, evidence_digest=evidence_digest(ev(at=T1), SCHEMA))]), expect=["HS29"])

vec("HS30", "verified_at = new updated_at", "pass", BASE, page(upd(), [E1], [vr("v1", E1, at=T1)]))
vec("HS30", "verified_at equal to the previous updated_at", "fail", BASE,
    page(fields(updated_at="2025-03-01T10:00:05Z"), [E1], [vr("v1", E1, at=T0)]), ts="2025-03-01T10:00:05Z",
    expect=["HS30"])
vec("HS30", "verified_at after the new updated_at", "fail", BASE,
    page(upd(), [E1], [vr("v1", E1, at=T1p)]), expect=["HS30"])
vec("HS30", "two records of one evidence with the same time", "edge", BASE,
    page(upd(), [E1], [vr("v1", E1, at=T1), vr("v2", E1, at=T1)]), expect=["HS30"])

vec("HS31", "initial verification with the evidence's basis", "pass", None, page(fields(), [E1], [V1]), ts=T0)
vec("HS31", "initial verification with another basis", "fail", None,
    page(fields(), [E1], [vr("v1", E1, verification_basis="official_abstract")]), ts=T0, expect=["HS31"])
vec("HS31", "later verification may use another basis", "edge", BASE,
    page(upd(), [E1], [vr("v1", E1, at=T1, verification_basis="partial_source")]))

HIGH_V = vr("v1", E1, claim_fields="observation,interpretation,reusable_lesson")
vec("HS32", "high with full supporting verification", "pass", None,
    page(fields(confidence="high"), [E1], [HIGH_V]), ts=T0)
vec("HS32", "high without verification", "fail", None, page(fields(confidence="high"), [E1]), ts=T0,
    expect=["HS32"])
vec("HS32", "high with verification covering two claims", "edge", None,
    page(fields(confidence="high"), [E1], [vr("v1", E1, claim_fields="observation,interpretation")]), ts=T0,
    expect=["HS32"])
E_PARTIAL = ev(verification_basis="partial_source")
vec("HS32", "high with partial_source verification", "edge", None,
    page(fields(confidence="high"), [E_PARTIAL],
         [vr("v1", E_PARTIAL, claim_fields="observation,interpretation,reusable_lesson")]), ts=T0,
    expect=["HS32"])

vec("HS33", "relation from this page", "pass", BASE, page(upd(), [E1], r=[rel("other", at=T1)]),
    existing={"other"})
vec("HS33", "relation from another page", "fail", BASE, page(upd(), [E1], r=[rel("other", at=T1, frm="third")]),
    existing={"other", "third"}, expect=["HS33"])
vec("HS33", "relation in a new Lesson", "edge", None, page(fields(), [E1], r=[rel("other")]), ts=T0,
    existing={"other"})

vec("HS34", "target exists", "pass", BASE, page(upd(), [E1], r=[rel("other", at=T1)]), existing={"other"})
vec("HS34", "target missing", "fail", BASE, page(upd(), [E1], r=[rel("ghost", at=T1)]), existing={"other"},
    expect=["HS34"])
vec("HS34", "target existence unknown (not checked)", "edge", BASE, page(upd(), [E1], r=[rel("ghost", at=T1)]))

vec("HS35", "different relation to the same target", "edge", WITH_R,
    page(upd(), [E1], r=[R1, rel("other", "contradicts", at=T1)]), existing={"other"})
vec("HS35", "same edge again", "fail", WITH_R, page(upd(), [E1], r=[R1, rel("other", at=T1)]),
    existing={"other"}, expect=["HS35"])
vec("HS35", "same edge with another note", "edge", WITH_R, page(upd(), [E1], r=[R1, rel("other", at=T1, note="x")]),
    existing={"other"}, expect=["HS35"])
vec("HS35", "new edge", "pass", WITH_R, page(upd(), [E1], r=[R1, rel("third", at=T1)]),
    existing={"other", "third"})

vec("HS36", "relation to another Lesson", "pass", BASE, page(upd(), [E1], r=[rel("other", at=T1)]),
    existing={"other"})
vec("HS36", "relation to itself", "fail", BASE, page(upd(), [E1], r=[rel(LID, at=T1)]), existing={LID},
    expect=["HS36"])
vec("HS36", "analogous_to itself", "edge", BASE, page(upd(), [E1], r=[rel(LID, "analogous_to", at=T1)]),
    existing={LID}, expect=["HS36"])

# ------------------------------------------------------------------ HS37–HS38 confidence
V_OBS = vr("v1", E1, claim_fields="observation")
SUPPORTED = page(fields(), [E1], [V_OBS])
vec("HS37", "observation change supported", "pass", SUPPORTED, page(upd(observation="New figure"), [E1], [V_OBS]))
vec("HS37", "observation change without support", "fail", BASE, page(upd(observation="New figure"), [E1]),
    expect=["HS37"])
V_CONTRA = vr("v2", E1, at="2025-03-01T10:30:00Z", outcome="contradicts", claim_fields="observation")
CONTRA = page(fields(updated_at="2025-03-01T10:30:00Z"), [E1], [V_OBS, V_CONTRA])
vec("HS37", "latest verdict contradicts", "edge", CONTRA, page(upd(observation="New figure"), [E1], [V_OBS, V_CONTRA]),
    expect=["HS37"])
vec("HS37", "lowering to low while correcting", "edge", BASE,
    page(upd(observation="New figure", confidence="low"), [E1]))

V_ALL = vr("v1", E1, claim_fields="observation,interpretation,reusable_lesson")
vec("HS38", "raise to high fully supported", "pass", page(fields(), [E1], [V_ALL]),
    page(upd(confidence="high"), [E1], [V_ALL]))
vec("HS38", "raise to high with one claim supported", "fail", SUPPORTED,
    page(upd(confidence="high"), [E1], [V_OBS]), expect=["HS38"])
vec("HS38", "raise low to medium with no support", "edge", page(fields(confidence="low"), [E1]),
    page(upd(confidence="medium"), [E1]), expect=["HS38"])
vec("HS38", "high Lesson, title edit only", "edge", page(fields(confidence="high"), [E1], [V_ALL]),
    page(upd(confidence="high", title="Renamed"), [E1], [V_ALL]))

# ------------------------------------------------------------------ HS40–HS45 markers and seals
LINKED = page(upd(), [E1], r=[rel("other", who=AGENT, at=T1)])
vec("HS40", "summary mentions S3W without brackets", "pass", BASE, page(upd(), [E1]),
    summary="rename (see S3W v1 docs)")
vec("HS40", "malformed marker", "fail", BASE, page(upd(), [E1]), summary="fix [S3W v1 op=bad]", expect=["HS40"])
vec("HS40", "two markers", "edge", BASE, LINKED, account=AGENT, summary="[S3V v1 x] " + w("link", 41), parent=41,
    existing={"other"}, expect=["HS40"])

vec("HS41", "gateway account", "pass", BASE, LINKED, account=AGENT, summary=w("link", 41), parent=41,
    existing={"other"}, agents={AGENT})
vec("HS41", "marker saved by a person", "fail", BASE, page(upd(), [E1], r=[rel("other", at=T1)]),
    summary=w("link", 41), parent=41, existing={"other"}, agents={AGENT}, expect=["HS41"])
vec("HS41", "gateway accounts not given (not checked)", "edge", BASE, page(upd(), [E1], r=[rel("other", at=T1)]),
    summary=w("link", 41), parent=41, existing={"other"})

vec("HS42", "marker base = parent", "pass", BASE, LINKED, account=AGENT, summary=w("link", 41), parent=41,
    existing={"other"})
vec("HS42", "marker base differs from the parent (merged)", "fail", BASE, LINKED, account=AGENT,
    summary=w("link", 41), parent=42, existing={"other"}, expect=["HS42"])
NEW_AGENT = page(fields(author=AGENT), [ev(who=AGENT)])
vec("HS42", "create marker with base 0", "edge", None, NEW_AGENT, account=AGENT, ts=T0, summary=w("create", 0),
    parent=0)

vec("HS43", "link appends one relation", "pass", BASE, LINKED, account=AGENT, summary=w("link", 41), parent=41,
    existing={"other"})
vec("HS43", "link marker on an evidence append", "fail", BASE, page(upd(), [E1, ev("e2", who=AGENT, at=T1)]),
    account=AGENT, summary=w("link", 41), parent=41, expect=["HS43"])
vec("HS43", "verification marker that also edits the title", "edge", BASE,
    page(upd(title="Other"), [E1], [vr("v1", E1, who=AGENT, at=T1)]), account=AGENT, summary=sv(41), parent=41,
    expect=["HS43"])
vec("HS43", "create marker on an existing page", "fail", BASE, page(upd(), [E1]), account=AGENT,
    summary=w("create", 41), parent=41, expect=["HS43"])
vec("HS43", "create marker with record_origin imported", "edge", None,
    page(fields(author=AGENT, record_origin="imported"), [ev(who=AGENT)]), account=AGENT, ts=T0,
    summary=w("create", 0), parent=0, expect=["HS43"])

REVISED = page(upd(title="Renamed"), [E1])
vec("HS44", "valid seal", "pass", BASE, REVISED, account=AGENT, summary=seal_summary(REVISED), parent=41,
    keys=KEYS)
vec("HS44", "seal made with a key the wiki does not know", "fail", BASE, REVISED, account=AGENT,
    summary=seal_summary(REVISED, keys={"k1": "attacker-key-0123456789"}), parent=41, keys=KEYS, expect=["HS44"])
vec("HS44", "seal copied onto another body", "fail", BASE, page(upd(title="Renamed differently"), [E1]),
    account=AGENT, summary=seal_summary(REVISED), parent=41, keys=KEYS, expect=["HS44"])
vec("HS44", "seal of another Lesson", "edge", BASE, REVISED, account=AGENT,
    summary=seal_summary(REVISED, lesson_id="other_lesson"), parent=41, keys=KEYS, expect=["HS44"])
vec("HS44", "seal by another account", "edge", BASE, REVISED, account="Mallory",
    summary=seal_summary(REVISED), parent=41, keys=KEYS, expect=["HS44"])
vec("HS44", "old key id still configured after rotation", "edge", BASE, REVISED, account=AGENT,
    summary=seal_summary(REVISED, kid="k2"), parent=41, keys=KEYS)
vec("HS44", "unknown key id", "fail", BASE, REVISED, account=AGENT,
    summary=seal_summary(REVISED, kid="k9", keys={"k9": "retired-key-0123456789"}), parent=41, keys=KEYS,
    expect=["HS44"])

UNDO = build_summary("MCP undo of merged revision 42", Marker(tag="S3U", parent=42, restored=41), SCHEMA)
MERGED = page(upd(title="Merged"), [E1, ev("e2", who=AGENT, at=T1)])
vec("HS45", "undo restores the named revision", "pass", MERGED, BASE, account=AGENT, summary=UNDO, parent=42,
    restored=BASE, agents={AGENT})
vec("HS45", "undo restores something else", "fail", MERGED, page(fields(title="x"), [E1]), account=AGENT,
    summary=UNDO, parent=42, restored=BASE, agents={AGENT}, expect=["HS45"])
vec("HS45", "undo without the restored text", "edge", MERGED, BASE, account=AGENT, summary=UNDO, parent=42,
    agents={AGENT}, expect=["HS45"])
vec("HS45", "undo saved by a person", "edge", MERGED, BASE, account="Alice", summary=UNDO, parent=42,
    restored=BASE, agents={AGENT}, expect=["HS41"])


def main() -> int:
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("HS*.json"):
        old.unlink()
    for rule, vectors in sorted(VECTORS.items()):
        doc = {"rule": rule, "title": TITLES[rule], "vectors": vectors}
        (OUT / f"{rule}.json").write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {sum(len(v) for v in VECTORS.values())} vectors for {len(VECTORS)} rules into {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
