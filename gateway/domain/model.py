"""Plain domain values shared by the codec, the rules and the tools.

A Lesson page is held as plain string mappings keyed by the schema's field
names (``schema/lesson.toml``), so the schema stays the only place that lists
fields. Contract: ``docs/data-contract.md#templates``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class LessonPage:
    """The decoded content of one ``Lesson:<id>`` page.

    Attributes:
        fields: Lesson template parameters, name → value (all schema fields present).
        evidence: one mapping per ``{{Lesson evidence}}``, page order.
        verifications: one mapping per ``{{Lesson evidence verification}}``, page order.
        relations: one mapping per ``{{Lesson relation}}``, page order.
        extra_wikitext: text outside the record templates (normally empty),
            kept so a gateway rewrite never drops what a person typed.
    """

    fields: dict[str, str]
    evidence: tuple[dict[str, str], ...] = ()
    verifications: tuple[dict[str, str], ...] = ()
    relations: tuple[dict[str, str], ...] = ()
    extra_wikitext: str = ""

    def evolve(self, **changes) -> "LessonPage":
        """Return a copy with the given attributes replaced."""
        return replace(self, **changes)

    def evidence_by_id(self, evidence_id: str) -> dict[str, str] | None:
        """The first evidence whose ``id`` equals ``evidence_id``, else None."""
        for item in self.evidence:
            if item.get("id") == evidence_id:
                return item
        return None


@dataclass(frozen=True)
class LessonSnapshot:
    """A Lesson page as read from MediaWiki at one revision.

    Attributes:
        id: Lesson id (page title without the namespace prefix).
        revision_id: MediaWiki revision id the content came from.
        timestamp: that revision's timestamp, UTC ISO-8601 (``...Z``).
        page: the decoded page.
        wikitext: the raw wikitext of that revision.
        summary: that revision's edit summary (``""`` when the read did not ask for it); a
            gateway write's summary ends with its marker (docs/tools.md#markers).
    """

    id: str
    revision_id: int
    timestamp: str
    page: LessonPage
    wikitext: str = field(repr=False, default="")
    summary: str = field(repr=False, default="", compare=False)
