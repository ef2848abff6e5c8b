"""Confidence rules for creating and revising Lessons.

Claim fields are ``observation``, ``interpretation`` and ``reusable_lesson``
(``enums.claim_field.high_confidence_claims``). Support comes only from a
*current* verification verdict (:mod:`gateway.domain.verdicts`) with outcome
``supports`` and a ``full_text``/``official_abstract`` basis that lists the
claim field; ``contradicts`` and ``inconclusive`` never support.

* Create (hooks_spec HS32): a ``high`` Lesson needs, in the same revision, a
  supporting record covering all three claim fields.
* Revision (hooks_spec HS37, HS38; revise_lesson GW05–GW07):
  - resulting ``medium``/``high`` and a claim field changed → every changed
    claim field is supported;
  - resulting ``high`` when confidence rose to high or a claim field changed →
    all three claim fields are supported;
  - confidence raised from ``low`` to ``medium`` → at least one claim field is
    supported;
  - resulting ``low`` corrections (lowering, or staying low) need no support.
  For ``revise_lesson`` the support must come from its ``basis_evidence_ids``;
  the hooks checker, which cannot see the request, accepts any evidence on
  the page.

Contract: ``docs/tools.md#confidence-rules``; support comes from
``docs/data-contract.md#current-verdict``.
"""
from __future__ import annotations

from dataclasses import dataclass

from gateway.domain.model import LessonPage
from gateway.config.schema import Schema
from gateway.domain.verdicts import claim_fields_of, supported_claims

__all__ = ["ConfidenceProblem", "claim_fields", "create_problem", "revision_problems", "RANK"]

#: Order of confidence levels.
RANK = {"low": 0, "medium": 1, "high": 2}


@dataclass(frozen=True)
class ConfidenceProblem:
    """A broken confidence rule: ``rule`` is the hooks_spec id, ``message`` names the fields."""

    rule: str
    message: str


def claim_fields(schema: Schema) -> tuple[str, ...]:
    """The claim fields a high-confidence Lesson must have supported (schema order)."""
    return tuple(schema.enum("claim_field").extra["high_confidence_claims"])


def _qualifies_for_high_create(record: dict[str, str], schema: Schema) -> bool:
    basis = schema.enum("verification_basis").extra.get("supporting", ())
    return (record.get("outcome") == "supports" and record.get("verification_basis") in basis
            and set(claim_fields(schema)) <= set(claim_fields_of(record)))


def create_problem(page: LessonPage, schema: Schema) -> ConfidenceProblem | None:
    """HS32 for a new Lesson: None when fine, else the problem."""
    if page.fields.get("confidence") != "high":
        return None
    if any(_qualifies_for_high_create(r, schema) for r in page.verifications):
        return None
    return ConfidenceProblem(
        "HS32",
        "a high-confidence Lesson needs, in the same revision, a supports verification with basis "
        "full_text or official_abstract whose claim_fields cover " + ", ".join(claim_fields(schema)),
    )


def revision_problems(previous: LessonPage, new: LessonPage, evidence_ids=None, *,
                      schema: Schema) -> list[ConfidenceProblem]:
    """Confidence problems of changing ``previous`` into ``new`` (HS37, HS38).

    ``evidence_ids`` restricts which evidence may support (revise_lesson's
    basis); None accepts any evidence on ``new``.
    """
    claims = claim_fields(schema)
    before = previous.fields.get("confidence", "")
    after = new.fields.get("confidence", "")
    changed_claims = [f for f in claims if previous.fields.get(f, "") != new.fields.get(f, "")]
    raised = RANK.get(after, -1) > RANK.get(before, -1)
    if after not in ("medium", "high") or not (changed_claims or raised):
        return []
    covered = supported_claims(new, evidence_ids, schema=schema)
    where = "the basis evidence" if evidence_ids is not None else "the Lesson's evidence"
    problems = []
    missing = [f for f in changed_claims if f not in covered]
    if missing:
        problems.append(ConfidenceProblem(
            "HS37",
            f"confidence {after} after changing {', '.join(changed_claims)} needs a current supports "
            f"verification (full_text or official_abstract) on {where} covering: {', '.join(missing)}",
        ))
    if after == "high" and (before != "high" or changed_claims):
        missing_all = [f for f in claims if f not in covered]
        if missing_all:
            problems.append(ConfidenceProblem(
                "HS38",
                f"confidence high needs current supports verifications (full_text or official_abstract) on "
                f"{where} covering all of {', '.join(claims)}; missing: {', '.join(missing_all)}",
            ))
    elif after == "medium" and raised and not (covered & set(claims)):
        problems.append(ConfidenceProblem(
            "HS38",
            f"raising confidence to medium needs a current supports verification (full_text or "
            f"official_abstract) on {where} covering at least one of {', '.join(claims)}",
        ))
    return problems
