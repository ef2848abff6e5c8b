"""Record views shared by the read tools (citations, verification records, relations).

Shapes follow the tools' output schemas (the registry's, exported to ``schema/tools/*.output.schema.json``):

* citation (compact): ``id, citation, url?, kind, verification_basis, digest,
  current_verdict``; full adds ``note, added_by, added_at`` (docs/tools.md#get-lesson).
  ``digest`` is :func:`gateway.domain.digests.evidence_digest` — what
  ``record_evidence_verification.expected_evidence_digest`` must equal (docs/data-contract.md#digests);
  ``current_verdict`` is the latest verification's outcome, ``ambiguous`` for
  equal/reversed timestamps, ``none`` without records (docs/data-contract.md#current-verdict).
* verification record: every schema field, ``claim_fields`` as a list.
* relation: stored ``from``/``relation``/``to``/``note``/provenance plus
  ``direction`` (seen from the requested Lesson) and ``symmetric``
  (``analogous_to``: shown from both ends; the stored endpoints stay explicit).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Mapping, Sequence

from gateway.domain.digests import evidence_digest
from gateway.domain.model import LessonPage
from gateway.domain.model import LessonSnapshot
from gateway.domain.repository import LessonRepository, RelationEdge, SNAPSHOT_BATCH
from gateway.config.schema import Schema
from gateway.domain.verdicts import AMBIGUOUS, claim_fields_of, current_verdicts

__all__ = ["citation_item", "citation_items", "verification_item", "relation_item", "symmetric_relations",
           "unmirrored", "standing_of", "standings", "IncomingAhead", "AHEAD_WAIT_SECONDS", "CORRECTIONS",
           "VERDICT_VALUES"]

#: Longest wait of a page for the incoming-relations read sent ahead (:class:`IncomingAhead`), in
#: seconds; past it the page reads for itself.
AHEAD_WAIT_SECONDS = 30.0

#: Relation types that correct the Lesson they point at (docs/tools.md#standing).
CORRECTIONS = ("supersedes", "contradicts")
VERDICT_VALUES = frozenset({"supports", "contradicts", "inconclusive", "none", "ambiguous"})
_COMPACT = ("id", "citation", "url", "kind", "verification_basis")
_FULL_EXTRA = ("note", "added_by", "added_at")


def citation_item(evidence: dict[str, str], verdict: str, detail: str, schema: Schema) -> dict[str, Any]:
    """One citation view; ``detail`` is ``compact`` or ``full``; empty optional values are omitted;
    ``digest`` is the evidence digest under ``schema``."""
    names = _COMPACT + (_FULL_EXTRA if detail == "full" else ())
    item: dict[str, Any] = {n: evidence.get(n, "") for n in names if evidence.get(n, "") or n in ("id", "citation")}
    item["digest"] = evidence_digest(evidence, schema)
    item["current_verdict"] = verdict if verdict in VERDICT_VALUES else AMBIGUOUS
    return item


def citation_items(page: LessonPage, detail: str, schema: Schema) -> list[dict[str, Any]]:
    """Citation views of every evidence on ``page`` in page order."""
    verdicts = current_verdicts(page)
    return [citation_item(e, verdicts[e.get("id", "")].verdict if e.get("id", "") in verdicts else "none",
                          detail, schema) for e in page.evidence]


def verification_item(record: dict[str, str]) -> dict[str, Any]:
    """One verification record view (``claim_fields`` split into a list)."""
    item: dict[str, Any] = dict(record)
    item["claim_fields"] = claim_fields_of(record)
    return item


def symmetric_relations(schema: Schema) -> frozenset[str]:
    """Relation types shown from both ends (schema ``enums.relation.symmetric``)."""
    return frozenset(schema.enum("relation").extra.get("symmetric", ()))


def unmirrored(outgoing: Iterable[RelationEdge], incoming: Iterable[RelationEdge],
               symmetric: frozenset[str]) -> list[RelationEdge]:
    """The ``incoming`` edges that are not the mirror of a symmetric ``outgoing`` one.

    A symmetric pair stored on both pages (A→B and B→A ``analogous_to``) is one
    relation, read once as the requested Lesson's own outgoing copy
    (docs/data-contract.md#relations).
    """
    shown = {(e.relation, e.target) for e in outgoing if e.relation in symmetric}
    return [e for e in incoming if (e.relation, e.source) not in shown]


def standing_of(page: LessonPage, incoming: Iterable[RelationEdge], limit: int) -> dict[str, list[str]]:
    """The ``standing`` block of one Lesson (docs/tools.md#standing); ``{}`` when it is clean.

    ``incoming``: relation edges stored on other Lessons pointing at it; ``limit``: ids per list.
    """
    edges = list(incoming)
    verdicts = current_verdicts(page)
    lists = {
        "superseded_by": sorted({e.source for e in edges if e.relation == "supersedes"}),
        "contradicted_by": sorted({e.source for e in edges if e.relation == "contradicts"}),
        "evidence_contradicted": sorted({i for i, v in verdicts.items() if i and v.verdict == "contradicts"}),
    }
    return {name: ids[:limit] for name, ids in lists.items() if ids}


def standings(repository: LessonRepository, snapshots: Mapping[str, LessonSnapshot], limit: int,
              incoming: Mapping[str, Iterable[RelationEdge]] | None = None) -> dict[str, dict[str, list[str]]]:
    """Lesson id → ``standing`` block for a page of fresh snapshots (clean Lessons left out).

    The incoming corrections of the whole page come from one batched repository call
    (:meth:`LessonRepository.find_incoming_edges`), never one per Lesson; ``incoming``: such a
    read the caller already made (of :data:`CORRECTIONS`, covering every snapshot).
    """
    if not snapshots:
        return {}
    if incoming is None:
        incoming, _ = repository.find_incoming_edges(list(snapshots), CORRECTIONS)
    out = {}
    for lesson_id, snap in snapshots.items():
        block = standing_of(snap.page, incoming.get(lesson_id, ()), limit)
        if block:
            out[lesson_id] = block
    return out


def relation_item(edge: RelationEdge, direction: str, symmetric: frozenset[str]) -> dict[str, Any]:
    """One relation view; ``direction`` is ``outgoing`` or ``incoming`` seen from the requested Lesson."""
    item: dict[str, Any] = {"from": edge.source, "relation": edge.relation, "to": edge.target,
                            "created_by": edge.created_by, "created_at": edge.created_at,
                            "direction": direction, "symmetric": edge.relation in symmetric}
    if edge.note:
        item["note"] = edge.note
    return item


class IncomingAhead:
    """The incoming corrections of a search's likely hits, read while the search still ranks.

    Called once on the request thread (as ``RetrievalService.search_lessons(beside=…)``) with
    candidate ids in preliminary order: it claims the first :data:`SNAPSHOT_BATCH` of them and
    returns the read (one batched :meth:`~LessonRepository.find_incoming_edges` call) for a worker
    to run. :meth:`covering` hands that read to :func:`standings` when it covers the whole page, so
    the page sends no read of its own after the ranking; otherwise (not claimed, page not covered,
    cut short at its limit, failed) it gives None and the page reads its incoming relations itself,
    as without it (docs/tools.md#standing).
    """

    def __init__(self, repository: LessonRepository):
        self._repository = repository
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._targets: frozenset[str] | None = None
        self._closed = False
        self._found: Mapping[str, list[RelationEdge]] | None = None

    def __call__(self, ids: Sequence[str]) -> Callable[[], None] | None:
        """Claim the first :data:`SNAPSHOT_BATCH` of ``ids``; the read to run, or None once the page has asked."""
        with self._lock:
            if self._closed or self._targets is not None:
                return None
            targets = list(dict.fromkeys(ids))[:SNAPSHOT_BATCH]
            self._targets = frozenset(targets)
        return lambda: self._read(targets)

    def _read(self, targets: list[str]) -> None:
        try:
            found, cut = self._repository.find_incoming_edges(targets, CORRECTIONS)
            self._found = None if cut else found
        except Exception:  # the page then reads for itself and fails as it would have
            self._found = None
        finally:
            self._done.set()

    def covering(self, lesson_ids: Iterable[str]) -> Mapping[str, list[RelationEdge]] | None:
        """The read when it covers every id of ``lesson_ids`` (waiting for it if it still runs), else None."""
        with self._lock:
            self._closed = True
            targets = self._targets
        wanted = set(lesson_ids)
        if targets is None or not wanted or not wanted <= targets:
            return None
        if not self._done.wait(AHEAD_WAIT_SECONDS):  # never run (the pool stopped) or still stuck
            return None
        return self._found
