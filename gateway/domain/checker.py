"""The hooks_spec checker: judge one revision against the save rules in ``rules.md``.

A MediaWiki save hook (if one were written in PHP) would run exactly this
over every save. Here it runs (a) in the gateway before every MCP write — a
violation refuses the write — and (b) in ``s3rm audit`` over the wiki's
history, where browser saves are judged after the fact.

Usage::

    from gateway.domain.checker import check_revision
    violations = check_revision(previous_wikitext, new_wikitext, "S3Agent", "2025-01-01T00:00:00Z",
                                summary, keys={"k1": "secret"}, lesson_id="gpu_frag",
                                parent_revision_id=41, existing_lessons={"other"},
                                agent_accounts={"S3Agent"}, schema=schema)
    # -> [Violation(rule_id="HS15", message="updated_at must be later than ..."), ...]

Inputs:
    previous_wikitext: the parent revision's wikitext, None for a page creation.
    new_wikitext: the revision's wikitext.
    saving_account: MediaWiki user name of the revision (its actor).
    revision_timestamp: the revision time (``YYYY-MM-DDTHH:MM:SSZ`` or an aware datetime).
    edit_summary: the revision's summary.
    keys: ``{key id: secret}`` for S3R seals (may be empty: seals then fail HS44).
    existing_lessons: ids of Lessons that exist (relation targets); None skips HS34.
    lesson_id: the page's Lesson id; None skips HS33/HS36 and fails seal checks.
    parent_revision_id: MediaWiki ``parentid`` of the revision; None skips HS42.
    agent_accounts: accounts allowed to write gateway markers; None skips HS41.
    restored_wikitext: for an ``[S3U …]`` compensation revision, the text of
        the revision it claims to restore.

Output: a list of :class:`Violation` (``rule_id``, ``message``), empty when the
revision keeps every rule. Messages name fields, ids and rules, never field
content. The function never raises for any string input.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Mapping

from gateway.domain.codec import PageFormatError, parse_page
from gateway.domain.confidence import create_problem, revision_problems
from gateway.domain.digests import content_digest, evidence_digest
from gateway.domain.markers import Marker, MarkerError, parse_summary
from gateway.domain.model import LessonPage
from gateway.domain.rules import record_problems
from gateway.config.schema import Schema
from gateway.domain.seals import verify_seal
from gateway.domain.timestamps import parse_ts, window_seconds

__all__ = ["Violation", "check_revision", "RULE_IDS"]

#: Every rule id the checker can report (rules.md lists them with rationale).
RULE_IDS = (
    "HS01", "HS02", "HS03", "HS04", "HS05", "HS06",
    "HS10", "HS11", "HS12", "HS13", "HS14", "HS15", "HS16", "HS17", "HS18", "HS19",
    "HS21", "HS22", "HS23", "HS24", "HS25", "HS26", "HS27", "HS28", "HS29", "HS30",
    "HS31", "HS32", "HS33", "HS34", "HS35", "HS36", "HS37", "HS38",
    "HS40", "HS41", "HS42", "HS43", "HS44", "HS45",
)

_RECORDS = (("evidence", "evidence", "HS21"), ("verification", "verifications", "HS22"),
            ("relation", "relations", "HS23"))
_TIME_FIELD = {"evidence": "added_at", "verification": "verified_at", "relation": "created_at"}
_WHO_FIELD = {"evidence": "added_by", "verification": "verified_by", "relation": "created_by"}


@dataclass(frozen=True)
class Violation:
    """One broken rule: ``rule_id`` (``HSnn``) and a content-free ``message``."""

    rule_id: str
    message: str


def _moment(value) -> datetime | None:
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc) if value.tzinfo else None
    return parse_ts(value) if isinstance(value, str) else None


class _Check:
    def __init__(self, schema: Schema):
        self.schema = schema
        self.out: list[Violation] = []
        self._seen: set[tuple[str, str]] = set()

    def add(self, rule: str, message: str) -> None:
        key = (rule, message)
        if key not in self._seen:
            self._seen.add(key)
            self.out.append(Violation(rule, message))


def _complete(values: dict[str, str], names: tuple[str, ...]) -> dict[str, str]:
    return {n: values.get(n, "") for n in names}


def _label(kind: str, item: dict[str, str], index: int) -> str:
    ident = item.get("id") or (f"{item.get('relation', '')}->{item.get('to', '')}" if kind == "relation" else "")
    return f"{kind} #{index + 1}" + (f" ({ident})" if ident and len(ident) <= 140 else "")


def _key(kind: str, item: dict[str, str]) -> tuple:
    if kind == "relation":
        return (item.get("from", ""), item.get("relation", ""), item.get("to", ""))
    return (item.get("id", ""),)


def _appended(kind: str, rule: str, prev_items, new_items, names, chk: _Check) -> list[tuple[int, dict]]:
    """Append-only check; returns the appended items with their index in the new page.

    When the previous records are an unchanged prefix, the tail is appended.
    Otherwise the first broken record is reported and only records whose
    identity (id, or from/relation/to) is new count as appended, so an edit in
    place is not also judged as a new record.
    """
    prev = [_complete(i, names) for i in prev_items]
    new = [_complete(i, names) for i in new_items]
    if new[: len(prev)] == prev:
        return list(enumerate(new))[len(prev):]
    for i, item in enumerate(prev):
        if i >= len(new) or new[i] != item:
            chk.add(rule, f"{_label(kind, item, i)} was edited, removed or reordered; {kind} records are "
                          "append-only")
            break
    known = {_key(kind, p) for p in prev}
    return [(i, item) for i, item in enumerate(new) if _key(kind, item) not in known]


def check_revision(previous_wikitext: str | None, new_wikitext: str, saving_account: str, revision_timestamp,
                   edit_summary: str, *, keys: Mapping[str, str] | None = None,
                   existing_lessons: Iterable[str] | None = None, lesson_id: str | None = None,
                   parent_revision_id: int | None = None, agent_accounts: Iterable[str] | None = None,
                   restored_wikitext: str | None = None, schema: Schema) -> list[Violation]:
    """Judge one revision by ``schema`` (the schema source's field rules); see the module docstring for
    inputs and output."""
    chk = _Check(schema)
    keys = keys or {}
    try:
        new = parse_page(new_wikitext or "", schema)
    except (PageFormatError, ValueError) as exc:
        chk.add("HS01", f"the revision is not a well-formed Lesson page: {exc}")
        return chk.out
    is_new = previous_wikitext is None
    prev: LessonPage | None = None
    if not is_new:
        try:
            prev = parse_page(previous_wikitext, schema)
        except (PageFormatError, ValueError):
            prev = None  # repairing an unreadable page: only rules on the new content apply

    # ------------------------------------------------------------ marker
    marker: Marker | None = None
    try:
        marker = parse_summary(edit_summary or "", schema)
    except MarkerError as exc:
        chk.add("HS40", str(exc))
    if marker is not None:
        if agent_accounts is not None and saving_account not in set(agent_accounts):
            chk.add("HS41", f"a {marker.tag} marker was saved by an account that is not a gateway account")
        if parent_revision_id is not None and marker.parent != parent_revision_id:
            chk.add("HS42", f"the {marker.tag} marker declares base revision {marker.parent} but the revision's "
                            f"parent is {parent_revision_id} (merged or copied marker)")
        if marker.tag == "S3U":
            _check_undo(new, restored_wikitext, chk)
            return chk.out

    rev_time = _moment(revision_timestamp)
    window = window_seconds(schema)

    # ------------------------------------------------------------ stray text
    if new.extra_wikitext and (prev is None or prev.extra_wikitext != new.extra_wikitext):
        chk.add("HS02", "the page carries text outside the Lesson record templates")

    # ------------------------------------------------------------ Lesson fields
    lesson_names = schema.lesson.field_names
    if is_new or prev is None:
        changed = {n for n in lesson_names if new.fields.get(n, "")} if is_new else set(lesson_names)
        for p in record_problems(schema.lesson, new.fields, schema=schema):
            chk.add(p.rule, p.message)
    else:
        changed = {n for n in lesson_names if new.fields.get(n, "") != prev.fields.get(n, "")}
        for p in record_problems(schema.lesson, new.fields, only=changed, schema=schema):
            chk.add(p.rule, p.message)

    new_updated = parse_ts(new.fields.get("updated_at", ""))
    if is_new:
        if new.fields.get("author", "") != saving_account:
            chk.add("HS10", "author of a new Lesson must be the saving account")
        if new.fields.get("created_at", "") != new.fields.get("updated_at", ""):
            chk.add("HS14", "a new Lesson must have created_at equal to updated_at")
        if new.fields.get("review_state", "") != "Draft" or new.fields.get("reviewer", ""):
            chk.add("HS19", "a new Lesson must have review_state Draft and an empty reviewer")
        for name in ("created_at", "updated_at"):
            _window(chk, name, new.fields.get(name, ""), rev_time, window)
    elif prev is not None:
        for name, rule in (("author", "HS11"), ("record_origin", "HS12"), ("created_at", "HS13")):
            if name in changed:
                chk.add(rule, f"{name} is immutable")
        if {"reviewer", "review_state"} & changed:
            chk.add("HS19", "reviewer and review_state are fixed compatibility fields")
        prev_updated = parse_ts(prev.fields.get("updated_at", ""))
        if new == prev:
            pass  # a re-encoding (s3rm migrate): every value is the same, so updated_at stays (HS15)
        elif new_updated is not None and prev_updated is not None and new_updated <= prev_updated:
            chk.add("HS15", "updated_at must be later than the previous revision's updated_at")
        elif "updated_at" not in changed and prev_updated is not None:
            chk.add("HS15", "updated_at must be later than the previous revision's updated_at")
        if "updated_at" in changed:
            _window(chk, "updated_at", new.fields.get("updated_at", ""), rev_time, window)
    else:
        _window(chk, "updated_at", new.fields.get("updated_at", ""), rev_time, window)

    # ------------------------------------------------------------ records
    appended: dict[str, list[tuple[int, dict]]] = {}
    for kind, attr, rule in _RECORDS:
        rec = schema.record(kind)
        prev_items = getattr(prev, attr) if prev is not None else ()
        appended[kind] = _appended(kind, rule, prev_items, getattr(new, attr), rec.field_names, chk)
        for index, item in appended[kind]:
            where = _label(kind, item, index)
            for p in record_problems(rec, item, where, schema=schema):
                chk.add(p.rule, p.message)
            if item.get(_WHO_FIELD[kind], "") != saving_account:
                chk.add("HS17", f"{_WHO_FIELD[kind]} of {where} must be the saving account")
            _window(chk, f"{_TIME_FIELD[kind]} of {where}", item.get(_TIME_FIELD[kind], ""), rev_time, window)
            if marker is not None and marker.tag in ("S3W", "S3V") \
                    and item.get(_TIME_FIELD[kind], "") != new.fields.get("updated_at", ""):
                chk.add("HS18", f"{_TIME_FIELD[kind]} of {where} must equal the new updated_at in a gateway write")

    _check_evidence(new, appended, chk)
    _check_verifications(new, prev, is_new, appended, new_updated, chk)
    _check_relations(new, appended["relation"], lesson_id, existing_lessons, chk)

    # ------------------------------------------------------------ confidence
    if is_new:
        if len(new.evidence) < 1:
            chk.add("HS26", "a new Lesson needs at least one evidence")
        problem = create_problem(new, schema)
        if problem:
            chk.add(problem.rule, problem.message)
    elif prev is not None:
        for problem in revision_problems(prev, new, schema=schema):
            chk.add(problem.rule, problem.message)

    # ------------------------------------------------------------ marker scope and seal
    if marker is not None:
        _check_scope(marker, new, prev, is_new, changed, appended, chk)
        if marker.tag == "S3R":
            if lesson_id is None:
                chk.add("HS44", "the seal cannot be verified without the Lesson id")
            else:
                result = verify_seal(marker, keys=keys, lesson_id=lesson_id, account=saving_account,
                                     parent_revision_id=None, page=new, schema=schema)
                if not result.ok:
                    chk.add("HS44", f"the S3R seal does not verify: {result.reason}")
    return chk.out


def _window(chk: _Check, name: str, value: str, rev_time: datetime | None, window: int) -> None:
    moment = parse_ts(value)
    if moment is None or rev_time is None:
        return  # malformed values are HS05; an unknown revision time cannot be judged
    if abs((moment - rev_time).total_seconds()) > window:
        chk.add("HS16", f"{name} must be within {window} seconds of the revision time")


def _check_undo(new: LessonPage, restored_wikitext: str | None, chk: _Check) -> None:
    if restored_wikitext is None:
        chk.add("HS45", "an S3U undo revision cannot be verified without the restored revision's text")
        return
    try:
        restored = parse_page(restored_wikitext, chk.schema)
    except (PageFormatError, ValueError):
        chk.add("HS45", "the revision an S3U undo restores is not a readable Lesson page")
        return
    if content_digest(restored, chk.schema) != content_digest(new, chk.schema) or restored.extra_wikitext != new.extra_wikitext:
        chk.add("HS45", "an S3U undo revision must restore the named revision's content exactly")


def _check_evidence(new, appended, chk: _Check) -> None:
    legacy = set(chk.schema.enum("verification_basis").extra.get("legacy_only", ()))
    earlier_ids = Counter(e.get("id", "") for e in new.evidence)
    for index, item in appended["evidence"]:
        where = _label("evidence", item, index)
        if earlier_ids[item.get("id", "")] > 1:
            chk.add("HS24", f"{where}: evidence ids must be unique within the Lesson")
        if item.get("verification_basis", "") in legacy:
            chk.add("HS27", f"{where}: verification_basis not_recorded is legacy only and refused on new evidence")


def _check_verifications(new, prev, is_new, appended, new_updated, chk: _Check) -> None:
    legacy = set(chk.schema.enum("verification_basis").extra.get("legacy_only", ()))
    ids = Counter(v.get("id", "") for v in new.verifications)
    evidence = {}
    for e in new.evidence:
        evidence.setdefault(e.get("id", ""), e)
    prev_updated = parse_ts(prev.fields.get("updated_at", "")) if prev is not None else None
    for index, item in appended["verification"]:
        where = _label("verification", item, index)
        if ids[item.get("id", "")] > 1:
            chk.add("HS25", f"{where}: verification ids must be unique within the Lesson")
        if item.get("verification_basis", "") in legacy:
            chk.add("HS27", f"{where}: verification_basis not_recorded is refused on new verification records")
        target = evidence.get(item.get("evidence_id", ""))
        if target is None:
            chk.add("HS28", f"{where}: evidence_id names no evidence of this Lesson")
        else:
            if item.get("evidence_digest", "") != evidence_digest(target, chk.schema):
                chk.add("HS29", f"{where}: evidence_digest does not match the evidence as stored")
            if is_new and item.get("verification_basis", "") != target.get("verification_basis", ""):
                chk.add("HS31", f"{where}: an initial verification must have the same verification_basis as "
                                "its evidence")
        verified = parse_ts(item.get("verified_at", ""))
        if verified is None:
            continue
        if prev_updated is not None and verified <= prev_updated:
            chk.add("HS30", f"{where}: verified_at must be later than the previous updated_at")
        if new_updated is not None and verified > new_updated:
            chk.add("HS30", f"{where}: verified_at must not be later than the new updated_at")
        for other in new.verifications[:index]:
            if other.get("evidence_id") != item.get("evidence_id"):
                continue
            other_time = parse_ts(other.get("verified_at", ""))
            if other_time is not None and verified <= other_time:
                chk.add("HS30", f"{where}: verified_at must be later than the previous record of the same evidence")
                break


def _check_relations(new, appended, lesson_id, existing_lessons, chk: _Check) -> None:
    existing = None if existing_lessons is None else set(existing_lessons)
    edges = Counter((r.get("from", ""), r.get("relation", ""), r.get("to", "")) for r in new.relations)
    for index, item in appended:
        where = _label("relation", item, index)
        if lesson_id is not None and item.get("from", "") != lesson_id:
            chk.add("HS33", f"{where}: from must be the Lesson the relation is stored on")
        if existing is not None and item.get("to", "") and item.get("to") not in existing:
            chk.add("HS34", f"{where}: the target Lesson does not exist")
        if edges[(item.get("from", ""), item.get("relation", ""), item.get("to", ""))] > 1:
            chk.add("HS35", f"{where}: the same relation edge is already stored")
        if item.get("to", "") and item.get("to") in (item.get("from"), lesson_id):
            chk.add("HS36", f"{where}: a Lesson cannot be related to itself")


def _check_scope(marker: Marker, new, prev, is_new, changed, appended, chk: _Check) -> None:
    counts = {k: len(v) for k, v in appended.items()}
    others = changed - {"updated_at"}

    def only(kind_name: str, expect: dict[str, int]) -> None:
        if is_new:
            chk.add("HS43", f"a {kind_name} marker cannot create a page")
            return
        if counts != expect:
            chk.add("HS43", f"a {kind_name} write appends exactly one record and nothing else")
        if others:
            chk.add("HS43", f"a {kind_name} write changes no Lesson field except updated_at")

    if marker.tag == "S3W" and marker.kind == "create":
        if not is_new:
            chk.add("HS43", "a create marker must create the page")
            return
        if new.fields.get("record_origin") != "lab":
            chk.add("HS43", "a Lesson created over MCP must have record_origin lab")
        if counts["relation"] or counts["evidence"] != 1 or counts["verification"] > 1:
            chk.add("HS43", "a create writes one evidence, at most one verification and no relation")
    elif marker.tag == "S3W" and marker.kind == "link":
        only("link", {"evidence": 0, "verification": 0, "relation": 1})
    elif marker.tag == "S3W" and marker.kind == "evidence":
        only("evidence", {"evidence": 1, "verification": 0, "relation": 0})
    elif marker.tag == "S3V":
        only("verification", {"evidence": 0, "verification": 1, "relation": 0})
    elif marker.tag == "S3R":
        if is_new:
            chk.add("HS43", "a revise marker cannot create a page")
            return
        allowed = {f.name for f in chk.schema.lesson.fields if f.client_settable}
        if any(counts.values()):
            chk.add("HS43", "a revise appends no evidence, verification or relation")
        if not others:
            chk.add("HS43", "a revise must change at least one core field")
        if others - allowed:
            chk.add("HS43", "a revise may change only client-settable core fields: "
                            + ", ".join(sorted(others - allowed)))
        order = [n for n in chk.schema.lesson.field_names if n in others]
        if tuple(order) != marker.fields:
            chk.add("HS43", "the seal's changed-field list differs from the fields the revision changed")
