"""Current verdict of each evidence (``docs/data-contract.md#current-verdict``).

Verification records are append-only; the *latest* record of an evidence is
its current verdict. "Latest" is decided by ``verified_at``, and the page order
must agree with it: when the records of one evidence do not have strictly
increasing ``verified_at`` in page order (equal times, a later record with an
earlier time, or an unreadable time), no verdict is guessed — the verdict is
``ambiguous`` and the evidence is reported for audit.

Verdict values: ``supports`` | ``contradicts`` | ``inconclusive`` (the outcome
of the current record), ``none`` (no record), ``ambiguous`` (see above).

Contract: ``docs/data-contract.md#current-verdict``.
"""
from __future__ import annotations

from dataclasses import dataclass

from gateway.domain.model import LessonPage
from gateway.config.schema import Schema
from gateway.domain.timestamps import parse_ts

__all__ = ["NONE", "AMBIGUOUS", "Verdict", "current_verdicts", "current_verdict", "claim_fields_of",
           "supported_claims"]

NONE = "none"
AMBIGUOUS = "ambiguous"


@dataclass(frozen=True)
class Verdict:
    """Current verdict of one evidence.

    Attributes:
        evidence_id: the evidence.
        verdict: ``supports``/``contradicts``/``inconclusive``/``none``/``ambiguous``.
        record: the current record (None for ``none`` and ``ambiguous``).
        record_count: how many records the evidence has.
    """

    evidence_id: str
    verdict: str
    record: dict[str, str] | None
    record_count: int


def claim_fields_of(record: dict[str, str]) -> list[str]:
    """The ``claim_fields`` of a verification record as a list (comma-separated on the page)."""
    raw = record.get("claim_fields", "")
    return [part.strip() for part in raw.split(",") if part.strip()]


def _verdict_of(evidence_id: str, records: list[dict[str, str]]) -> Verdict:
    if not records:
        return Verdict(evidence_id, NONE, None, 0)
    times = [parse_ts(r.get("verified_at", "")) for r in records]
    if any(t is None for t in times) or any(b <= a for a, b in zip(times, times[1:])):
        return Verdict(evidence_id, AMBIGUOUS, None, len(records))
    latest = records[-1]
    return Verdict(evidence_id, latest.get("outcome", ""), latest, len(records))


def current_verdicts(page: LessonPage) -> dict[str, Verdict]:
    """Verdict of every evidence on ``page`` (keyed by evidence id, page order).

    Records pointing at an evidence id that is not on the page are ignored
    here (the hooks checker reports them).
    """
    by_evidence: dict[str, list[dict[str, str]]] = {e.get("id", ""): [] for e in page.evidence}
    for record in page.verifications:
        bucket = by_evidence.get(record.get("evidence_id", ""))
        if bucket is not None:
            bucket.append(record)
    return {eid: _verdict_of(eid, records) for eid, records in by_evidence.items()}


def current_verdict(page: LessonPage, evidence_id: str) -> Verdict:
    """Verdict of one evidence (``none`` when the page has no such evidence or no record)."""
    return current_verdicts(page).get(evidence_id, Verdict(evidence_id, NONE, None, 0))


def supported_claims(page: LessonPage, evidence_ids=None, *, schema: Schema) -> set[str]:
    """Claim fields backed by a *supporting* current verdict.

    A current record supports a claim field when its outcome is ``supports``,
    its ``verification_basis`` is one of the schema's ``supporting`` bases
    (full_text, official_abstract) and its ``claim_fields`` list the field.
    ``evidence_ids`` restricts the evidence considered (revise_lesson's
    ``basis_evidence_ids``); None means every evidence on the page.
    """
    supporting = set(schema.enum("verification_basis").extra.get("supporting", ()))
    allowed = None if evidence_ids is None else set(evidence_ids)
    covered: set[str] = set()
    for eid, verdict in current_verdicts(page).items():
        if allowed is not None and eid not in allowed:
            continue
        record = verdict.record
        if record is None or verdict.verdict != "supports":
            continue
        if record.get("verification_basis") not in supporting:
            continue
        covered.update(claim_fields_of(record))
    return covered
