"""The steps both hybrid pipelines share: preflight, revalidation and fusion, metrics.

Preflight (:meth:`Stages.usable_snapshot`): no provider, no snapshot yet, a
blocked profile → :class:`~gateway.retrieval.hybrid.results.SemanticFallback`
(``disabled`` / ``building`` / ``unavailable``) at once on a first page, the
retryable ``semantic_unavailable`` error on a hybrid continuation
(docs/retrieval.md#fallback); a hybrid request also queues a due reconcile
(never waits for it).

The shared tail (:meth:`Stages.finish`, steps 5–7 of
:mod:`gateway.retrieval.hybrid.search_pipeline`): preliminary RRF order, the
scan cap, canonical revalidation against fresh snapshots
(docs/retrieval.md#revalidation), the final fusion with ``min_score``
(docs/retrieval.md#min-score) and, for a search in a slot language, the
language slots (:mod:`gateway.retrieval.hybrid.slots`).
"""
from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from gateway.domain.model import LessonSnapshot
from gateway.retrieval.filters import SearchFilters
from gateway.retrieval.hybrid import slots
from gateway.retrieval.hybrid.fusion import (
    SEARCH,
    TIER_REST,
    FusionCandidate,
    RankContribution,
    RankingConfig,
    exact_match,
    fuse,
    is_exact_query,
    preliminary_order,
    verified_coverage,
)
from gateway.retrieval.hybrid.results import HybridList, HybridResult, SemanticFallback, semantic_continuation_error
from gateway.retrieval.index.snapshot import IndexSnapshot
from gateway.retrieval.request import HYBRID_MODE

__all__ = ["Stages", "votes_by_lesson"]


class Stages:
    """Preflight, the revalidate-and-fuse tail and metrics of the hybrid pipelines.

    ``service`` is the :class:`~gateway.retrieval.hybrid.service.RetrievalService`
    whose provider, refresher, builder, ranking and calibration the steps use
    (read at each call, so a replaced ranking takes effect at once);
    ``text_fields`` are the Lesson fields the exact-identifier test reads.
    """

    def __init__(self, service: Any, text_fields: tuple[str, ...]):
        self.service = service
        self.text_fields = text_fields

    def usable_snapshot(self, continuation: bool) -> IndexSnapshot:
        """The snapshot a hybrid request may use, or SemanticFallback / continuation error."""
        if not self.service.provider.enabled:
            self.fallback("disabled", "disabled", continuation)
        self.service.refresher.maybe_reconcile()
        status = self.service.refresher.status()
        snap = self.service.refresher.current()
        if snap is None or status == "unavailable":
            self.fallback(status if status in ("building", "unavailable") else "unavailable", status, continuation)
        return snap  # type: ignore[return-value]

    def fallback(self, cause: str, status: str, continuation: bool):
        """Count the fallback ``cause``; raise SemanticFallback (first page) or the continuation error."""
        self.count("hybrid_fallbacks", cause=cause)
        if continuation:
            raise semantic_continuation_error()
        raise SemanticFallback(cause, status)

    def status_after_failure(self) -> str:
        """The semantic_status a fallback reports after an embedding failure."""
        snap = self.service.refresher.current()
        status = self.service.refresher.status()
        if status in ("disabled", "unavailable", "building"):
            return status
        return "degraded" if snap is not None else "unavailable"

    # ---------------------------------------------------------- shared tail
    def finish(self, repository: Any, snap: IndexSnapshot,
               channel_hits: Mapping[str, list[tuple[str, RankContribution]]], *,
               operation: str, channels: Sequence[str], filters: SearchFilters, min_score: float | None,
               partial: bool, query: str | None, exclude: str | None = None,
               prefetched: Mapping[str, LessonSnapshot] | None = None,
               config: RankingConfig | None = None) -> HybridList:
        """Preliminary fusion, scan cap, canonical revalidation, final fusion, language slots (steps 5–7)."""
        cfg = config or self.service.ranking
        votes = votes_by_lesson(channel_hits, exclude)
        order = preliminary_order(votes, cfg)
        examined = slots.scan_ids(order, channel_hits.get(slots.SLOT_CHANNEL, ()), cfg)
        partial |= len(order) > cfg.scan_limit
        t0 = time.monotonic()
        known = dict(prefetched or {})
        fresh = {i: known[i] for i in examined if i in known}
        unread = [i for i in examined if i not in known]
        if unread:
            fresh.update(repository.get_snapshots(unread))
        self.observe("hybrid_stage_seconds", time.monotonic() - t0, stage="wiki_reads")
        t0 = time.monotonic()
        missing = [i for i in examined if i not in fresh]
        stale, metadata, candidates = [], [], []
        current = [i for i in examined if i in fresh and snap.retrieval_hash(i) is not None]
        novelty = {f: snap.vectors(f, current) for f in ("approach", "mechanism")}
        exact_query = query is not None and is_exact_query(query)
        dropped_by_filter = 0
        buried = 0
        for lesson_id in examined:
            snapshot = fresh.get(lesson_id)
            if snapshot is None:
                continue
            if self.service.refresher.is_tombstoned(lesson_id, snapshot.revision_id):
                buried += 1  # deleted or moved away (docs/hybrid-search.md#tombstones)
                continue
            doc = self.service.builder.build_snapshot(snapshot)
            record = snap.record(lesson_id)
            contributions = votes[lesson_id]
            hash_ok = record is not None and record.retrieval_hash == doc.retrieval_hash
            if record is not None and not hash_ok:
                stale.append(lesson_id)
            elif record is not None and (record.revision_id != snapshot.revision_id
                                         or record.metadata_hash != doc.metadata.metadata_hash):
                metadata.append(lesson_id)
            if not hash_ok:
                contributions = [c for c in contributions if not c.indexed]
            if not filters.matches(snapshot.page):
                dropped_by_filter += 1
                continue
            vectors = {f: novelty[f].get(lesson_id) for f in ("approach", "mechanism")} if hash_ok else {}
            page = snapshot.page
            candidates.append(FusionCandidate(
                lesson_id=lesson_id,
                contributions=tuple(contributions),
                exact=exact_query and exact_match(query or "", (page.fields.get(n, "") for n in self.text_fields)),
                coverage=verified_coverage(page, cfg),
                record_origin=page.fields.get("record_origin", ""),
                vectors={k: v for k, v in vectors.items() if v is not None},
                quality=_quality(snap, lesson_id) if hash_ok else 1.0,
            ))
        missing_indexed = [i for i in missing if i in snap]
        if missing_indexed:
            self.service.refresher.queue_cleanup(missing_indexed)
        if stale:
            self.service.refresher.queue_reembed(stale)
        if metadata:
            self.service.refresher.queue_metadata(metadata)
        fused = fuse(candidates, operation=operation, channels=channels, calibration=self.service.calibration,
                     config=cfg, min_score=min_score)
        self.observe("hybrid_stage_seconds", time.monotonic() - t0, stage="ranking")
        self.count("hybrid_candidates", len(examined), operation=operation)
        self.count("hybrid_dropped", len(stale), reason="stale_hash")
        self.count("hybrid_dropped", len(missing), reason="missing")
        self.count("hybrid_dropped", buried, reason="tombstone")
        self.count("hybrid_dropped", dropped_by_filter, reason="filter")
        status = self.service.refresher.status()
        if stale and status == "ready":
            status = "stale"
        votes_of = {c.lesson_id: c.contributions for c in candidates}
        moved: dict[str, int] = {}
        if operation == SEARCH and slots.SLOT_CHANNEL in channels and slots.applies(cfg, query):
            # docs/hybrid-search.md#language-slots (not for a one-facet request: no slot channel ran)
            by_id = {r.lesson_id: r for r in fused}
            order_ids, moved = slots.language_slots([r.lesson_id for r in fused], votes_of,
                                                    slots.korean_lesson(snap), cfg.slot_depth,
                                                    pinned={r.lesson_id for r in fused if r.tier != TIER_REST})
            fused = [by_id[i] for i in order_ids]
        results = tuple(HybridResult(fresh[r.lesson_id], r.score, r.basis, r.channels,
                                     votes=votes_of.get(r.lesson_id, ()), tier=r.tier,
                                     slot_from=moved.get(r.lesson_id)) for r in fused)
        return HybridList(results=results, effective_mode=HYBRID_MODE, ranking_version=cfg.version,
                          semantic_status=status, generation=snap.generation, partial=partial,
                          scanned=len(examined), scan_limit=cfg.scan_limit)

    # -------------------------------------------------------------- metrics
    def count(self, name: str, amount: int = 1, **labels: str) -> None:
        """Add ``amount`` to counter ``name`` (no metrics: nothing)."""
        if self.service.metrics is not None and amount:
            self.service.metrics.incr(name, amount, **labels)

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        """Record ``seconds`` in histogram ``name`` (no metrics: nothing)."""
        if self.service.metrics is not None:
            self.service.metrics.observe(name, seconds, **labels)


def _quality(snap: IndexSnapshot, lesson_id: str) -> float:
    value = snap.quality(lesson_id)
    return 1.0 if value is None else value


def votes_by_lesson(channel_hits: Mapping[str, list[tuple[str, RankContribution]]],
                    exclude: str | None = None) -> dict[str, list[RankContribution]]:
    """Lesson id → its votes, in channel order then rank order (``exclude``: an id left out)."""
    votes: dict[str, list[RankContribution]] = {}
    for hits in channel_hits.values():
        for lesson_id, vote in hits:
            if lesson_id != exclude:
                votes.setdefault(lesson_id, []).append(vote)
    return votes
