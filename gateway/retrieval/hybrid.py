"""``hybrid_v1``: channels, canonical revalidation, fusion and fallback for the read tools.

Contract: seeds/design-hybrid-search.ko.wiki "후보 생성과 순위", "기준 저장소
재검증", "장애 동작", "페이지 나누기와 cursor"; DESIGN.md §4; CHECKLIST H2,
H3, H5, H6, H11, P1, R5.

:class:`RetrievalService` is the one object the app builds per process and
hands to tools as ``ToolContext.retrieval``. It owns the embedding provider,
the generation's projection builder, the :class:`IndexRefresher` and the
ranking configuration.

``search_lessons`` (:meth:`RetrievalService.search_lessons`):

1. An empty query never reaches the model (H6): :class:`SemanticFallback`
   ``empty_query`` — the listing is the same in both modes.
2. No provider, no snapshot yet, a blocked profile → :class:`SemanticFallback`
   (``disabled`` / ``building`` / ``unavailable``) at once; a hybrid request
   also queues a due reconcile (never waits for it).
3. The query embedding starts on the provider's pool (one shared gate; a full
   queue fails at once → fallback ``saturated``) while MediaWiki full text runs.
4. Channels, each with a fixed cap (``partial`` when a cap is hit, H3): full
   text; query vs situation/approach/mechanism with the profile's cosine
   floor and a pre-filter on indexed scalars.
5. Preliminary RRF order; only the first ``scan_limit`` ids (one cap over all
   channels) are revalidated: ``scanned`` = ids examined (H3).
6. Canonical revalidation against fresh snapshots (batches of 50): missing →
   dropped and queued for index cleanup; retrieval_hash differs → semantic
   votes dropped, Lesson queued for re-embedding, status ``stale``; same hash,
   new revision/metadata → scalars refreshed without embedding (H5); filters
   re-applied to fresh data; exact-identifier test on fresh text.
7. Fusion (:mod:`gateway.retrieval.fusion`), ``min_score`` on the service score.

The whole bounded list is rebuilt on every page; cursors are offsets into it
and bind mode, ranking version and generation in their fingerprint. First
pages fall back to legacy on any semantic failure; a hybrid *continuation*
never does — it gets a retryable ``semantic_unavailable`` error instead.

``min_score`` per mode (H11): in ``legacy`` it applies to the legacy score of
each tool; in ``hybrid_v1`` it applies to the fused 0–1 service score after
revalidation and before diversity (stored relations, score 1.0, always pass).

Logs and metrics: stage latencies (embedding, candidates, wiki reads,
ranking), candidate/drop counts, fallback causes — never query text.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from gateway.domain.model import LessonPage, LessonSnapshot
from gateway.domain.repository import FullTextResult
from gateway.domain.schema import load_schema
from gateway.retrieval import lexical
from gateway.retrieval.duplicates import DuplicateChecker
from gateway.retrieval.embedding import EmbeddingError, EmbeddingProvider, build_provider
from gateway.retrieval.filters import SearchFilters
from gateway.retrieval.fusion import (
    ANALOGY_CHANNELS,
    RRF_V2,
    SEARCH_CHANNELS,
    FusionCandidate,
    RankContribution,
    RankingConfig,
    exact_match,
    fuse,
    is_exact_query,
    preliminary_order,
    verified_coverage,
)
from gateway.retrieval.index import FilterMask, IndexSnapshot, epoch_seconds
from gateway.retrieval.profiles import FACETS, generation_id, get_profile
from gateway.retrieval.projection import ProjectionBuilder, ProjectionDocument, normalize_query
from gateway.retrieval.refresher import IndexRefresher
from gateway.retrieval.settings import RetrievalSettings
from gateway.tools.base import ToolError

__all__ = [
    "HYBRID_MODE",
    "LEGACY_MODE",
    "HybridResult",
    "HybridList",
    "SemanticFallback",
    "RetrievalService",
    "LexicalCandidate",
    "semantic_continuation_error",
]

log = logging.getLogger("s3rm.hybrid")

HYBRID_MODE = "hybrid_v1"
LEGACY_MODE = "legacy"


class SemanticFallback(Exception):
    """Hybrid cannot answer this first page; the caller serves legacy instead.

    Attributes:
        cause: short code (``empty_query``, ``disabled``, ``building``,
            ``unavailable``, ``saturated``, ``timeout``, ``circuit_open``,
            ``profile_mismatch``, ``error``…), counted in metrics.
        semantic_status: the value the legacy response reports.
    """

    def __init__(self, cause: str, semantic_status: str):
        super().__init__(cause)
        self.cause = cause
        self.semantic_status = semantic_status


def semantic_continuation_error() -> ToolError:
    """The retryable error a hybrid cursor page gets when semantic search cannot serve it (P1)."""
    return ToolError(
        "semantic_unavailable",
        "Semantic search cannot serve this hybrid_v1 cursor right now, and a cursor never switches to another "
        "ordering. Retry shortly, or restart from the first page without a cursor.",
        retryable=True,
    )


@dataclass(frozen=True)
class HybridResult:
    """One ranked Lesson, read fresh from MediaWiki.

    ``score``: 0–1 service score; ``basis``: full_text | semantic_similarity |
    hybrid | stored_relation | lexical; ``channels``: channels that voted;
    ``shared_terms``: lexical evidence (find_analogies).
    """

    snapshot: LessonSnapshot
    score: float
    basis: str
    channels: tuple[str, ...]
    shared_terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class HybridList:
    """The bounded, revalidated, fused result list of one hybrid request (every page slices it).

    ``partial``/``scanned``/``scan_limit`` follow CHECKLIST H3;
    ``source_revision_id``/``source_projection_hash`` are set for find_analogies
    (cursor fingerprints bind them, R5).
    """

    results: tuple[HybridResult, ...]
    effective_mode: str
    ranking_version: str
    semantic_status: str
    generation: str
    partial: bool
    scanned: int
    scan_limit: int
    source_revision_id: int | None = None
    source_projection_hash: str | None = None


@dataclass(frozen=True)
class LexicalCandidate:
    """A legacy lexical analogy candidate: id, Jaccard score, shared terms (in legacy order)."""

    lesson_id: str
    score: float
    shared_terms: tuple[str, ...] = ()


FullText = Callable[[str, int], FullTextResult]


class RetrievalService:
    """The process-wide hybrid retrieval service (``ToolContext.retrieval``).

    Args:
        settings: :class:`RetrievalSettings`.
        repository: the Lesson repository the refresher reads (the app's lazy one).
        metrics: optional ``gateway.metrics.Metrics``.
        provider: injectable provider (default: :func:`build_provider`).
        ranking: ranking configuration (default ``rrf_v2``).
        clock: monotonic seconds for the refresher.
    """

    def __init__(self, settings: RetrievalSettings, repository: Any, *, metrics: Any = None,
                 provider: EmbeddingProvider | None = None, ranking: RankingConfig = RRF_V2,
                 clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self.metrics = metrics
        self.profile = get_profile(settings.profile_name)
        self.builder = ProjectionBuilder(facet_char_cap=self.profile.facet_char_cap)
        self.ranking = ranking
        self.calibration = ranking.calibration(self.profile.name)
        self.generation = generation_id(self.profile, self.builder.identity(), ranking.version)
        self.provider = provider or build_provider(settings, metrics=metrics)
        self.refresher = IndexRefresher(repository, self.provider, self.builder, self.generation, settings,
                                        clock=clock, metrics=metrics)
        self._duplicates = DuplicateChecker(self)
        self._text_fields = tuple(f.name for f in load_schema().lesson.fields if f.type in ("text", "longtext"))

    # ------------------------------------------------------------ lifecycle
    @property
    def enabled(self) -> bool:
        """True when an embedding provider is configured."""
        return self.provider.enabled

    def start(self) -> bool:
        """Start the refresher (prewarm). Idempotent; False when disabled or already running."""
        return self.refresher.start()

    def stop(self) -> None:
        """Stop the refresher and release the provider's threads."""
        self.refresher.stop()
        self._duplicates.close()
        self.provider.close()

    def semantic_status(self) -> str:
        """Current semantic_status (CHECKLIST H2)."""
        return self.refresher.status()

    def health(self) -> dict[str, Any]:
        """Semantic counts and states for ``/readyz`` (never configuration values or content)."""
        return self.refresher.health()

    def hint_dirty(self, lesson_id: str) -> None:
        """Write-path hint after a create or core revise (CHECKLIST W5). Never raises, never blocks."""
        try:
            self.refresher.hint_dirty(lesson_id)
        except Exception:  # pragma: no cover - a hint never fails a write
            log.exception("dirty hint failed")

    def duplicate_candidates(self, repository: Any, lesson_id: str, page: LessonPage) -> dict[str, Any]:
        """The ``duplicate_candidates`` object of a create_lesson_draft response (never raises).

        See :mod:`gateway.retrieval.duplicates`: ``{"status", "items"}`` within
        ``S3RM_DUPLICATE_BUDGET_SECONDS``, from the ready snapshot only.
        """
        return self._duplicates.check(repository, lesson_id, page)

    def projection(self, lesson_id: str, snapshot: LessonSnapshot) -> ProjectionDocument:
        """The generation's projection of a snapshot (its hash goes into find_analogies cursors, R5)."""
        return self.builder.build(lesson_id, snapshot.page, snapshot.revision_id)

    # ----------------------------------------------------------- preflight
    def _usable_snapshot(self, continuation: bool) -> IndexSnapshot:
        """The snapshot a hybrid request may use, or SemanticFallback / continuation error."""
        if not self.provider.enabled:
            self._fallback("disabled", "disabled", continuation)
        self.refresher.maybe_reconcile()
        status = self.refresher.status()
        snap = self.refresher.current()
        if snap is None or status == "unavailable":
            self._fallback(status if status in ("building", "unavailable") else "unavailable", status, continuation)
        return snap  # type: ignore[return-value]

    def _fallback(self, cause: str, status: str, continuation: bool):
        self._count("hybrid_fallbacks", cause=cause)
        if continuation:
            raise semantic_continuation_error()
        raise SemanticFallback(cause, status)

    def _status_after_failure(self) -> str:
        snap = self.refresher.current()
        status = self.refresher.status()
        if status in ("disabled", "unavailable", "building"):
            return status
        return "degraded" if snap is not None else "unavailable"

    # ------------------------------------------------------- search_lessons
    def search_lessons(self, repository: Any, *, query: str, filters: SearchFilters | None = None,
                       min_score: float | None = None, continuation: bool = False,
                       full_text: FullText | None = None) -> HybridList:
        """The bounded hybrid result list of ``search_lessons`` (module docstring steps 1–7).

        ``full_text(query, limit)`` defaults to MediaWiki search with the
        legacy query rewriting (:func:`gateway.retrieval.lexical.query_terms`).
        Raises SemanticFallback (first page) or ToolError
        ``semantic_unavailable`` (continuation).
        """
        filters = filters or SearchFilters()
        q = normalize_query(query)
        if not q:
            raise SemanticFallback("empty_query", self.semantic_status())
        snap = self._usable_snapshot(continuation)
        cfg = self.ranking
        started = time.monotonic()
        try:
            pending = self.provider.begin_queries(q, FACETS)
        except EmbeddingError as exc:
            self._fallback(exc.code, self._status_after_failure(), continuation)
        channel_hits: dict[str, list[tuple[str, RankContribution]]] = {}
        partial = False
        try:
            t0 = time.monotonic()
            ft = (full_text or self._default_full_text(repository))(q, cfg.channel_caps["full_text"])
            self._observe("hybrid_stage_seconds", time.monotonic() - t0, stage="full_text")
        except BaseException:
            pending.cancel()
            raise
        channel_hits["full_text"] = [(hit.id, RankContribution("full_text", hit.rank + 1)) for hit in ft.hits]
        partial |= ft.partial or len(ft.hits) >= cfg.channel_caps["full_text"]
        try:
            vectors = pending.result()
        except EmbeddingError as exc:
            self._fallback(exc.code, self._status_after_failure(), continuation)
        self._observe("hybrid_stage_seconds", time.monotonic() - started, stage="embedding")
        t0 = time.monotonic()
        allowed = snap.allowed_rows(_mask(filters))
        for facet in FACETS:
            channel = f"semantic:{facet}"
            cap = cfg.channel_caps[channel]
            hits = snap.search(facet, vectors[facet], cap, allowed=allowed, min_score=self.calibration.semantic_floor)
            channel_hits[channel] = self._semantic_votes(snap, channel, hits)
            partial |= len(hits) >= cap
        self._observe("hybrid_stage_seconds", time.monotonic() - t0, stage="candidates")
        return self._finish(repository, snap, channel_hits, operation="search_lessons", channels=SEARCH_CHANNELS,
                            filters=filters, min_score=min_score, partial=partial, query=q)

    # ------------------------------------------------------- find_analogies
    def find_analogies(self, repository: Any, *, source: LessonSnapshot, relation_ids: Sequence[str],
                       lexical_candidates: Sequence[LexicalCandidate], filters: SearchFilters | None = None,
                       min_score: float | None = None, continuation: bool = False,
                       shared_terms_of: Callable[[LessonSnapshot], Sequence[str]] | None = None) -> HybridList:
        """The bounded hybrid list of ``find_analogies`` for a fresh ``source`` snapshot.

        Channels: stored ``analogous_to`` relations (``relation_ids`` in legacy
        order), the source's situation vs situation and mechanism vs mechanism
        (cross-problem) similarity, and the legacy lexical candidates. The
        source's vectors come from the index when its retrieval_hash is
        current, else its two facets are embedded once (no retries).
        ``shared_terms_of(candidate)`` supplies lexical evidence for
        non-lexical results (default: none).
        """
        filters = filters or SearchFilters()
        snap = self._usable_snapshot(continuation)
        cfg = self.ranking
        doc = self.projection(source.id, source)
        started = time.monotonic()
        try:
            source_vectors = self._source_vectors(snap, doc)
        except EmbeddingError as exc:
            self._fallback(exc.code, self._status_after_failure(), continuation)
        self._observe("hybrid_stage_seconds", time.monotonic() - started, stage="embedding")
        channel_hits: dict[str, list[tuple[str, RankContribution]]] = {}
        partial = False
        relation_cap = cfg.channel_caps["relation"]
        rel = [i for i in dict.fromkeys(relation_ids) if i != source.id]
        channel_hits["relation"] = [(i, RankContribution("relation", n, 1.0))
                                    for n, i in enumerate(rel[:relation_cap], 1)]
        partial |= len(rel) > relation_cap
        lex_cap = cfg.channel_caps["lexical"]
        lex = [c for c in lexical_candidates if c.lesson_id != source.id]
        channel_hits["lexical"] = [(c.lesson_id, RankContribution("lexical", n, c.score))
                                   for n, c in enumerate(lex[:lex_cap], 1)]
        partial |= len(lex) > lex_cap
        lexical_terms = {c.lesson_id: tuple(c.shared_terms) for c in lex[:lex_cap]}
        t0 = time.monotonic()
        allowed = snap.allowed_rows(_mask(filters))
        for facet in ("situation", "mechanism"):
            channel = f"source:{facet}"
            vec = source_vectors.get(facet)
            if vec is None:
                channel_hits[channel] = []
                continue
            cap = cfg.channel_caps[channel]
            hits = snap.search(facet, vec, cap, allowed=allowed, exclude=(source.id,),
                               min_score=self.calibration.semantic_floor)
            channel_hits[channel] = self._semantic_votes(snap, channel, hits)
            partial |= len(hits) >= cap
        self._observe("hybrid_stage_seconds", time.monotonic() - t0, stage="candidates")
        out = self._finish(repository, snap, channel_hits, operation="find_analogies", channels=ANALOGY_CHANNELS,
                           filters=filters, min_score=min_score, partial=partial, query=None,
                           exclude=source.id)
        results = tuple(
            HybridResult(r.snapshot, r.score, r.basis, r.channels,
                         lexical_terms.get(r.snapshot.id)
                         or (tuple(shared_terms_of(r.snapshot)) if shared_terms_of else ()))
            for r in out.results
        )
        return HybridList(results=results, effective_mode=out.effective_mode, ranking_version=out.ranking_version,
                          semantic_status=out.semantic_status, generation=out.generation, partial=out.partial,
                          scanned=out.scanned, scan_limit=out.scan_limit, source_revision_id=source.revision_id,
                          source_projection_hash=doc.retrieval_hash)

    def _source_vectors(self, snap: IndexSnapshot, doc: ProjectionDocument) -> dict[str, np.ndarray]:
        """Situation and mechanism vectors of the source: from the index when current, else embedded."""
        wanted = ("situation", "mechanism")
        if snap.retrieval_hash(doc.lesson_id) == doc.retrieval_hash:
            out = {}
            for facet in wanted:
                vec = snap.vector(facet, doc.lesson_id)
                if vec is not None and np.any(vec):
                    out[facet] = vec
            return out
        texts = [(facet, doc.text(facet)) for facet in wanted if doc.text(facet)]
        if not texts:
            return {}
        matrix = self.provider.embed_documents([t for _, t in texts], retries=0)
        self.refresher.hint_dirty(doc.lesson_id)
        return {facet: matrix[row] for row, (facet, _) in enumerate(texts)}

    # ---------------------------------------------------------- shared tail
    @staticmethod
    def _semantic_votes(snap: IndexSnapshot, channel: str, hits) -> list[tuple[str, RankContribution]]:
        """Votes of a semantic channel, each carrying the indexed revision and retrieval hash."""
        votes = []
        for hit in hits:
            record = snap.record(hit.lesson_id)
            votes.append((hit.lesson_id, RankContribution(channel, hit.rank, hit.score,
                                                          record.revision_id if record else None,
                                                          record.retrieval_hash if record else None)))
        return votes

    def _finish(self, repository: Any, snap: IndexSnapshot,
                channel_hits: Mapping[str, list[tuple[str, RankContribution]]], *,
                operation: str, channels: Sequence[str], filters: SearchFilters, min_score: float | None,
                partial: bool, query: str | None, exclude: str | None = None) -> HybridList:
        """Preliminary fusion, scan cap, canonical revalidation, final fusion (steps 5–7)."""
        cfg = self.ranking
        votes: dict[str, list[RankContribution]] = {}
        for hits in channel_hits.values():
            for lesson_id, vote in hits:
                if lesson_id != exclude:
                    votes.setdefault(lesson_id, []).append(vote)
        order = preliminary_order(votes, cfg)
        examined = order[: cfg.scan_limit]
        partial |= len(order) > cfg.scan_limit
        t0 = time.monotonic()
        fresh = repository.get_snapshots(examined)
        self._observe("hybrid_stage_seconds", time.monotonic() - t0, stage="wiki_reads")
        t0 = time.monotonic()
        missing = [i for i in examined if i not in fresh]
        stale, metadata, candidates = [], [], []
        exact_query = query is not None and is_exact_query(query)
        dropped_by_filter = 0
        for lesson_id in examined:
            snapshot = fresh.get(lesson_id)
            if snapshot is None:
                continue
            doc = self.builder.build_snapshot(snapshot)
            record = snap.record(lesson_id)
            contributions = votes[lesson_id]
            hash_ok = record is not None and record.retrieval_hash == doc.retrieval_hash
            if record is not None and not hash_ok:
                stale.append(lesson_id)
            elif record is not None and (record.revision_id != snapshot.revision_id
                                         or record.metadata_hash != doc.metadata.metadata_hash):
                metadata.append(lesson_id)
            if not hash_ok:
                contributions = [c for c in contributions if not c.semantic]
            if not filters.matches(snapshot.page):
                dropped_by_filter += 1
                continue
            vectors = {f: snap.vector(f, lesson_id) for f in ("approach", "mechanism")} if hash_ok else {}
            page = snapshot.page
            candidates.append(FusionCandidate(
                lesson_id=lesson_id,
                contributions=tuple(contributions),
                exact=exact_query and exact_match(query or "", (page.fields.get(n, "") for n in self._text_fields)),
                coverage=verified_coverage(page, cfg),
                record_origin=page.fields.get("record_origin", ""),
                vectors={k: v for k, v in vectors.items() if v is not None},
            ))
        missing_indexed = [i for i in missing if i in snap]
        if missing_indexed:
            self.refresher.queue_cleanup(missing_indexed)
        if stale:
            self.refresher.queue_reembed(stale)
        if metadata:
            self.refresher.queue_metadata(metadata)
        fused = fuse(candidates, operation=operation, channels=channels, calibration=self.calibration, config=cfg,
                     min_score=min_score)
        self._observe("hybrid_stage_seconds", time.monotonic() - t0, stage="ranking")
        self._count("hybrid_candidates", len(examined), operation=operation)
        self._count("hybrid_dropped", len(stale), reason="stale_hash")
        self._count("hybrid_dropped", len(missing), reason="missing")
        self._count("hybrid_dropped", dropped_by_filter, reason="filter")
        status = self.refresher.status()
        if stale and status == "ready":
            status = "stale"
        results = tuple(HybridResult(fresh[r.lesson_id], r.score, r.basis, r.channels) for r in fused)
        return HybridList(results=results, effective_mode=HYBRID_MODE, ranking_version=cfg.version,
                          semantic_status=status, generation=self.generation, partial=partial,
                          scanned=len(examined), scan_limit=cfg.scan_limit)

    def _default_full_text(self, repository: Any) -> FullText:
        def run(query: str, limit: int) -> FullTextResult:
            terms = lexical.query_terms(query)
            if not terms:
                return FullTextResult(hits=(), scanned=0, scan_limit=limit)
            return repository.search_full_text(lexical.mediawiki_query(terms), limit)
        return run

    # -------------------------------------------------------------- metrics
    def _count(self, name: str, amount: int = 1, **labels: str) -> None:
        if self.metrics is not None and amount:
            self.metrics.incr(name, amount, **labels)

    def _observe(self, name: str, seconds: float, **labels: str) -> None:
        if self.metrics is not None:
            self.metrics.observe(name, seconds, **labels)


def _mask(filters: SearchFilters) -> FilterMask | None:
    """Index pre-filter from search filters (indexed scalars may lag; final filters use fresh data).

    None (no pre-filter) when a set filter is empty: nothing can match and the
    fresh-data filter drops every candidate anyway.
    """
    if any(getattr(filters, key) is not None and not getattr(filters, key)
           for key in ("confidence", "record_origin", "review_state")):
        return None
    return FilterMask(
        confidence=tuple(sorted(filters.confidence or ())),
        record_origin=tuple(sorted(filters.record_origin or ())),
        review_state=tuple(sorted(filters.review_state or ())),
        updated_after=epoch_seconds(filters.updated_after) if filters.updated_after else None,
        updated_before=epoch_seconds(filters.updated_before) if filters.updated_before else None,
    )
