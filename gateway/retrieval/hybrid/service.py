"""``hybrid_v1``: channels, canonical revalidation, fusion and fallback for the read tools.

Contract: docs/retrieval.md#fusion, docs/retrieval.md#revalidation,
docs/retrieval.md#fallback, docs/retrieval.md#semantic-status,
docs/retrieval.md#min-score, docs/retrieval.md#resource-isolation and
docs/tools.md#cursors.

:class:`RetrievalService` is the one object the app builds per process and
hands to tools as ``ToolContext.retrieval``. It owns the embedding provider,
the generation's projection builder, the :class:`IndexRefresher` and the
ranking configuration.

``search_lessons`` (:meth:`RetrievalService.search_lessons`):

1. An empty query never reaches the model (docs/retrieval.md#listing): :class:`SemanticFallback`
   ``empty_query`` — the listing is the same in both modes.
2. No provider, no snapshot yet, a blocked profile → :class:`SemanticFallback`
   (``disabled`` / ``building`` / ``unavailable``) at once; a hybrid request
   also queues a due reconcile (never waits for it).
3. The query embedding starts on the provider's pool (one shared gate; a full
   queue fails at once → fallback ``saturated``) while MediaWiki full text runs.
4. Channels, each with a fixed cap (``partial`` when a cap is hit): full
   text (legacy's all-terms search, its partial matches taken from the
   read-ahead candidates, ``docs/hybrid-search.md#partial-full-text``); the in-process BM25 channel over the analysed whole text
   (``docs/hybrid-search.md#lexical-channel``); query vs
   situation/approach/mechanism/whole with the profile's cosine floor and a
   pre-filter on indexed scalars (a Hangul query ranks Korean and other
   Lessons separately per channel, ``docs/hybrid-search.md#ranking``).
5. Preliminary RRF order; only the first ``scan_limit`` ids (one cap over all
   channels) are revalidated: ``scanned`` = ids examined (docs/retrieval.md#fusion).
6. Canonical revalidation against fresh snapshots (batches of 50): missing →
   dropped and queued for index cleanup; tombstoned by the follower (deleted
   or moved away, not re-created since) → dropped (docs/hybrid-search.md#tombstones); retrieval_hash differs → semantic
   votes dropped, Lesson queued for re-embedding, status ``stale``; same hash,
   new revision/metadata → scalars refreshed without embedding (docs/retrieval.md#revalidation); filters
   re-applied to fresh data; exact-identifier test on fresh text.
7. Fusion (:mod:`gateway.retrieval.hybrid.fusion`), ``min_score`` on the service score.
8. While a shadow comparison runs, a sampled share of full requests is handed
   to :class:`~gateway.retrieval.hybrid.shadow.ShadowRunner` after step 4 (ranked on
   the shadow generation in the background; docs/operations.md#shadow-queries).

The whole bounded list is rebuilt on every page; cursors are offsets into it
and bind mode, ranking version and generation in their fingerprint. First
pages fall back to legacy on any semantic failure; a hybrid *continuation*
never does — it gets a retryable ``semantic_unavailable`` error instead.

``min_score`` per mode (docs/retrieval.md#min-score): in ``legacy`` it applies to the legacy score of
each tool; in ``hybrid_v1`` it applies to the fused 0–1 service score after
revalidation and before diversity (stored relations, score 1.0, always pass).

Logs and metrics: stage latencies (embedding, candidates, wiki reads,
ranking), candidate/drop counts, fallback causes — never query text.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from gateway.core.errors import GatewayError, ToolError
from gateway.domain.model import LessonPage, LessonSnapshot
from gateway.retrieval.legacy import search as legacy, lexical
from gateway.retrieval.index.analyzer import analyze
from gateway.retrieval.hybrid.duplicates import DuplicateChecker
from gateway.retrieval.embedding.errors import EmbeddingError
from gateway.retrieval.embedding.client import EmbeddingProvider, build_provider
from gateway.retrieval.filters import SearchFilters, index_mask
from gateway.retrieval.hybrid.channels import indexed_votes, lexical_votes, quality_allowed, semantic_votes
from gateway.retrieval.hybrid.fusion import (
    ANALOGIES,
    SEARCH,
    ANALOGY_CHANNELS,
    FusionCandidate,
    DEFAULT_RANKING,
    RankContribution,
    RankingConfig,
    SEARCH_CHANNELS,
    exact_match,
    fuse,
    is_exact_query,
    partial_share,
    preliminary_order,
    verified_coverage,
)
from gateway.retrieval.index.snapshot import IndexSnapshot
from gateway.retrieval.language import query_language
from gateway.config.profiles import FACETS, INDEX_FACETS, WHOLE, generation_id, get_profile
from gateway.retrieval.indexing.projection import ProjectionBuilder, ProjectionDocument, normalize_query
from gateway.retrieval.indexing.follower import ChangeFollower, build_checkpoint_store
from gateway.retrieval.indexing.refresher import IndexRefresher
from gateway.retrieval.hybrid.shadow import ShadowProbe, ShadowRunner
from gateway.config.retrieval import RetrievalSettings

__all__ = [
    "HYBRID_MODE",
    "LEGACY_MODE",
    "HybridResult",
    "HybridList",
    "SemanticFallback",
    "RetrievalService",
    "semantic_continuation_error",
]

log = logging.getLogger("s3rm.hybrid")

#: The source vectors find_analogies compares (cross-problem similarity and the whole Lesson).
ANALOGY_FACETS = ("situation", "mechanism", WHOLE)

#: Full-text workers: twice the largest ``S3RM_ADMISSION_SEMANTIC_CONCURRENCY`` (each admitted
#: hybrid search runs its full-text search and at most one caller read ``beside`` it), so none
#: waits for one (threads start only when needed).
FULL_TEXT_WORKERS = 128

HYBRID_MODE = "hybrid_v1"
LEGACY_MODE = "legacy"


class SemanticFallback(GatewayError):
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
    """The retryable error a hybrid cursor page gets when semantic search cannot serve it.

    Contract: docs/retrieval.md#fallback.
    """
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
    ``shared_terms``: lexical evidence (find_analogies); ``votes``: the valid
    votes fusion used (each channel's best rank and its own score) and ``tier``
    the fusion tier (relation 2, exact 1, rest 0) — what ``explain`` shows.
    """

    snapshot: LessonSnapshot
    score: float
    basis: str
    channels: tuple[str, ...]
    shared_terms: tuple[str, ...] = ()
    votes: tuple[RankContribution, ...] = ()
    tier: int = 0


@dataclass(frozen=True)
class HybridList:
    """The bounded, revalidated, fused result list of one hybrid request (every page slices it).

    ``partial``/``scanned``/``scan_limit`` follow docs/retrieval.md#fusion;
    ``source_revision_id``/``source_projection_hash`` are set for find_analogies
    (cursor fingerprints bind them, docs/tools.md#cursors).
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

    @property
    def items(self) -> tuple[HybridResult, ...]:
        """Alias of ``results`` (same shape as ``gateway.retrieval.legacy.search.RankedList.items``)."""
        return self.results


class RetrievalService:
    """The process-wide hybrid retrieval service (``ToolContext.retrieval``).

    Args:
        settings: :class:`RetrievalSettings` (``GatewayConfig.retrieval``).
        repository: the Lesson repository the refresher reads (the app's lazy one); its ``schema``
            (``LessonRepository.schema``) gives the projection's facets and the text fields.
        metrics: optional ``gateway.ops.metrics.Metrics``.
        provider: injectable provider (default: :func:`build_provider`).
        ranking: ranking configuration (default ``rrf_v8``).
        clock: monotonic seconds for the refresher.
    """

    def __init__(self, settings: RetrievalSettings, repository: Any, *, metrics: Any = None,
                 provider: EmbeddingProvider | None = None, ranking: RankingConfig = DEFAULT_RANKING,
                 clock: Callable[[], float] = time.monotonic,
                 refresher_factory: Callable[..., IndexRefresher] = IndexRefresher):
        self.settings = settings
        self.metrics = metrics
        self.profile = get_profile(settings.profile_name)
        self.builder = ProjectionBuilder(repository.schema, facet_char_cap=self.profile.facet_char_cap)
        self.ranking = ranking
        self.calibration = ranking.calibration(self.profile.name)
        self.own_generation = generation_id(self.profile, self.builder.identity(), ranking.version)
        self.provider = provider or build_provider(settings, metrics=metrics)
        follower = ChangeFollower(repository, build_checkpoint_store(settings.checkpoint_file), self.own_generation,
                                  max_age_seconds=settings.rc_max_age_seconds)
        self.refresher = refresher_factory(repository, self.provider, self.builder, self.own_generation, settings,
                                           clock=clock, metrics=metrics, follower=follower)
        self._duplicates = DuplicateChecker(self)
        self._shadow = ShadowRunner(metrics=metrics)
        self._text_fields = tuple(f.name for f in repository.schema.lesson.fields if f.type in ("text", "longtext"))
        #: runs each hybrid search's MediaWiki full-text channel beside its in-process channels
        self._pool = ThreadPoolExecutor(max_workers=FULL_TEXT_WORKERS, thread_name_prefix="s3rm-full-text")

    @property
    def generation(self) -> str:
        """The generation being served: the snapshot's (a shared backend may serve a labelled
        generation after a cutover, docs/operations.md#generations), else this process's own id."""
        snap = self.refresher.current()
        return snap.generation if snap is not None else self.own_generation

    # ------------------------------------------------------------ lifecycle
    def gate_stats(self) -> dict[str, Any]:
        """Counts of the provider's shared admission gate (``in_use``, ``slots``, ``waiting``, ``queue_limit``)."""
        gate = getattr(self.provider, "gate", None)
        return gate.stats() if gate is not None else {"in_use": 0, "slots": 1, "waiting": 0, "queue_limit": 1}

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
        self._shadow.close()
        self._duplicates.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.provider.close()

    def semantic_status(self) -> str:
        """Current semantic_status (docs/retrieval.md#semantic-status)."""
        return self.refresher.status()

    def semantic_progress(self) -> dict[str, Any] | None:
        """``{"indexed", "total", "eta_seconds"}`` of the running build (docs/hybrid-search.md#build-progress),
        None while the refresher reports no total (before the first scan ends, or a shared backend)."""
        health = self.refresher.health()
        total = health.get("total")
        if not isinstance(total, int):
            return None
        return {"indexed": min(health["indexed"], total), "total": total, "eta_seconds": health.get("eta_seconds")}

    def health(self) -> dict[str, Any]:
        """Semantic counts and states (``/readyz`` keeps only the counts; ``/metrics`` shows all,
        docs/operations.md#observability).

        Keys: status, indexed (Lessons findable by meaning), total, eta_seconds
        (docs/hybrid-search.md#build-progress), index_as_of, index_lag_seconds
        (docs/hybrid-search.md#freshness), lessons, pending, failed, quarantined,
        missing, stale_hashes, orphans, truncated, refreshing, last_reconcile_age_seconds, error,
        breaker, queue{in_use, waiting, rejected}, generation, model,
        projection_version, ranking_version, shadow{samples, mean_overlap} (shadow queries
        this process compared, docs/operations.md#shadow-queries); the pgvector backend adds
        ``lifecycle`` and ``build_progress``. No query text, no content, no URL.
        """
        return {**self.refresher.health(), "generation": self.generation, "model": self.profile.model_id,
                "projection_version": self.builder.version, "ranking_version": self.ranking.version,
                "shadow": self._shadow.stats()}

    def embedding_truncation(self, page: LessonPage) -> dict[str, dict]:
        """The write answer's ``embedding_truncated``: facets of ``page`` this generation's index cuts
        (:meth:`ProjectionBuilder.truncation_report`, docs/hybrid-search.md#truncation-report);
        ``{}`` when nothing is cut or the provider is disabled. No embedding call."""
        return self.builder.truncation_report(page) if self.provider.enabled else {}

    def freshness(self) -> dict[str, Any]:
        """``index_as_of`` / ``index_lag_seconds`` of the semantic index (docs/hybrid-search.md#freshness)."""
        return self.refresher.freshness()

    def quarantined_count(self) -> int:
        """Lessons whose embedding is quarantined (docs/hybrid-search.md#quarantine); a count only."""
        return self.refresher.quarantined_count()

    def retry_quarantined(self) -> int:
        """Queue every quarantined Lesson for one more embedding attempt; returns how many."""
        return self.refresher.retry_quarantined()

    def hint_dirty(self, lesson_id: str) -> None:
        """Write-path hint after a create or core revise (docs/tools.md#dirty-hint). Never raises, never blocks."""
        try:
            self.refresher.hint_dirty(lesson_id)
        except Exception:  # pragma: no cover - a hint never fails a write
            log.exception("dirty hint failed")

    def duplicate_candidates(self, repository: Any, lesson_id: str, page: LessonPage) -> dict[str, Any]:
        """The ``duplicate_candidates`` object of a create_lesson_draft response (never raises).

        See :mod:`gateway.retrieval.hybrid.duplicates`: ``{"status", "items"}`` within
        ``S3RM_DUPLICATE_BUDGET_SECONDS``, from the ready snapshot only.
        """
        return self._duplicates.check(repository, lesson_id, page)

    def projection(self, lesson_id: str, snapshot: LessonSnapshot) -> ProjectionDocument:
        """The generation's projection of a snapshot (its hash goes into find_analogies cursors,
        docs/tools.md#cursors)."""
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
                       facet: str | None = None, beside: Callable[[list[str]], Any] | None = None) -> HybridList:
        """The bounded hybrid result list of ``search_lessons`` (module docstring steps 1–7).

        The full-text channel ranks as legacy does (:func:`gateway.retrieval.legacy.search.rank_candidates`:
        Korean stem prefixes, title weighted, fresh snapshots, filters) over legacy's all-terms
        hits and, in place of its single-term searches, the read-ahead candidates holding one of
        its fallback terms (docs/hybrid-search.md#partial-full-text), so exact identifiers and
        error strings keep their legacy rank as one channel.

        ``facet`` (``situation``, ``approach`` or ``mechanism``) narrows the request to ONE
        channel: the query against that facet only — no full text, no other facet; the service
        score is then relative to a first rank in that channel (docs/retrieval.md#facet-selector).
        ``beside(ids)``, when given, is called on this thread with the read-ahead ids (likely hits,
        in preliminary order) and may return a callable, which then runs on a worker while the
        full-text search runs; its result and errors are the caller's (docs/hybrid-search.md#read-ahead). Raises SemanticFallback (first page) or
        ToolError ``semantic_unavailable`` (continuation); ``ValueError`` for an unknown facet.
        """
        if facet is not None and facet not in FACETS:
            raise ValueError(f"unknown facet {facet!r}")
        filters = filters or SearchFilters()
        q = normalize_query(query)
        if not q:
            raise SemanticFallback("empty_query", self.semantic_status())
        snap = self._usable_snapshot(continuation)
        cfg = self.ranking.for_query(q)
        facets = INDEX_FACETS if facet is None else (facet,)
        try:
            pending = self.provider.begin_queries(q, facets)
        except EmbeddingError as exc:
            self._fallback(exc.code, self._status_after_failure(), continuation)
        channel_hits: dict[str, list[tuple[str, RankContribution]]] = {}
        partial = False
        prefetched: dict[str, LessonSnapshot] = {}
        allowed = snap.allowed_rows(index_mask(filters))
        full_text = None
        query_terms: tuple[str, ...] = ()
        try:
            if facet is None:  # MediaWiki full text runs on a worker while the in-process channels rank
                # the full-text channels keep their place first in the vote lists (float sums and
                # ties then come out exactly as when the channels ran one after another)
                channel_hits.update({"full_text": [], "full_text_partial": []})
                full_text = self._submit_full_text(repository, query)
                t0 = time.monotonic()
                query_terms = tuple(analyze(q))
                channel_hits["bm25"], channel_hits["bm25_partial"], capped = lexical_votes(
                    snap, query_terms, cfg.channel_caps["bm25"], allowed, cfg.lexical_partial_below)
                partial |= capped
                self._observe("hybrid_stage_seconds", time.monotonic() - t0, stage="bm25")
            t0 = time.monotonic()
            try:
                vectors = pending.result()
            except EmbeddingError as exc:
                self._fallback(exc.code, self._status_after_failure(), continuation)
            self._observe("hybrid_stage_seconds", time.monotonic() - t0, stage="embedding_wait")
            t0 = time.monotonic()
            standardized = query_language(q) in cfg.standardized_languages
            floor = self.calibration.semantic_floor
            for name in facets:
                channel = f"semantic:{name}"
                channel_hits[channel], capped = semantic_votes(snap, name, vectors[name], cfg.channel_caps[channel],
                                                               allowed, floor, standardized, cfg.semantic_quality_floor)
                partial |= capped
            self._observe("hybrid_stage_seconds", time.monotonic() - t0, stage="candidates")
            if full_text is not None:
                ahead, prefetched = self._read_ahead(repository, channel_hits, cfg, beside)
                try:
                    all_terms = full_text.result()
                except CancelledError:  # the service stopped meanwhile: this request still gets its answer
                    all_terms = self._all_terms_search(repository, query)
                pool = dict.fromkeys([i for c in ("bm25", "bm25_partial") for i, _ in channel_hits[c]] + ahead)
                hits, ft_partial, ft_snapshots = self._full_text_votes(query, all_terms, list(pool), prefetched,
                                                                       filters, cfg)
                channel_hits.update(hits)
                partial |= ft_partial
                prefetched.update(ft_snapshots)
        except BaseException:
            pending.cancel()
            if full_text is not None:
                full_text.cancel()
            raise
        if facet is None:  # a sampled copy runs against a shadow generation, off this request's path
            self._shadow.offer(snap, self.refresher.shadow_target(),
                               ShadowProbe(query_terms, vectors, index_mask(filters), cfg, floor, standardized))
        channels = SEARCH_CHANNELS if facet is None else (f"semantic:{facet}",)
        return self._finish(repository, snap, channel_hits, operation=SEARCH, channels=channels,
                            filters=filters, min_score=min_score, partial=partial, query=q, prefetched=prefetched,
                            config=cfg)

    def _all_terms_search(self, repository: Any, query: str) -> tuple[list[str], bool, dict[str, LessonSnapshot]]:
        """Legacy's all-terms search alone (:func:`gateway.retrieval.legacy.search.candidates` with
        ``fallback=False``: one MediaWiki request for up to 50 hits with their text): ids in
        search rank order, ``partial``, fresh snapshots. Runs on :attr:`_pool`, beside the
        in-process channels (docs/hybrid-search.md#read-ahead)."""
        terms = lexical.query_terms(query)
        if not terms:
            return [], False, {}
        t0 = time.monotonic()
        found = legacy.candidates(repository, terms, fallback=False)
        self._observe("hybrid_stage_seconds", time.monotonic() - t0, stage="full_text")
        return found

    def _full_text_votes(self, query: str, all_terms: tuple[list[str], bool, dict[str, LessonSnapshot]],
                         ahead: Sequence[str], fresh: Mapping[str, LessonSnapshot], filters: SearchFilters,
                         cfg: RankingConfig
                         ) -> tuple[dict[str, list[tuple[str, RankContribution]]], bool, dict[str, LessonSnapshot]]:
        """The ``full_text`` / ``full_text_partial`` votes, ``partial`` and the snapshots they rank.

        Legacy's candidates and order (docs/hybrid-search.md#partial-full-text): the
        all-terms hits, then — when they are fewer than legacy's
        :data:`~gateway.retrieval.legacy.search.FALLBACK_THRESHOLD` and the query has several terms —
        in place of legacy's single-term MediaWiki searches, the read-ahead candidates
        ``ahead`` (``fresh`` snapshots) holding one of legacy's fallback terms, up to legacy's
        scan limit (``partial`` when more exist); all ranked by
        :func:`gateway.retrieval.legacy.search.rank_candidates`. A candidate holding only some terms
        votes in ``full_text_partial``, scaled by its share (docs/hybrid-search.md#partial-share).
        """
        terms = lexical.query_terms(query)
        ids, partial, snaps = list(all_terms[0]), all_terms[1], dict(all_terms[2])
        if len(terms) > 1 and len(ids) < legacy.FALLBACK_THRESHOLD:
            seen = set(ids)
            for lesson_id in ahead:
                snapshot = fresh.get(lesson_id)
                if lesson_id in seen or snapshot is None or not legacy.holds_fallback_term(terms, snapshot.page):
                    continue
                if len(ids) >= legacy.SEARCH_SCAN_LIMIT:
                    partial = True
                    break
                seen.add(lesson_id)
                ids.append(lesson_id)
                snaps[lesson_id] = snapshot
        ranked = legacy.rank_candidates(terms, ids, snaps, filters)
        matched = {r.snapshot.id: self._matched_terms(terms, r.snapshot) for r in ranked}
        complete = [r for r in ranked if matched[r.snapshot.id] >= len(terms)]
        incomplete = [r for r in ranked if matched[r.snapshot.id] < len(terms)]
        hits: dict[str, list[tuple[str, RankContribution]]] = {}
        snapshots: dict[str, LessonSnapshot] = {}
        for channel, items in (("full_text", complete), ("full_text_partial", incomplete)):
            cap = cfg.channel_caps[channel]
            hits[channel] = [
                (r.snapshot.id, RankContribution(channel, n, r.score, share=1.0 if channel == "full_text" else
                                                 partial_share(matched[r.snapshot.id], len(terms),
                                                               cfg.lexical_partial_below)))
                for n, r in enumerate(items[:cap], 1)]
            partial |= len(items) > cap
            snapshots.update((r.snapshot.id, r.snapshot) for r in items[:cap])
        return hits, partial, snapshots

    def _submit_full_text(self, repository: Any, query: str) -> Future:
        """:meth:`_all_terms_search` on :attr:`_pool`; on the calling thread when the pool is shut down."""
        try:
            return self._pool.submit(self._all_terms_search, repository, query)
        except RuntimeError:  # stop() shut the pool down while this request was running
            done: Future = Future()
            try:
                done.set_result(self._all_terms_search(repository, query))
            except Exception as exc:
                done.set_exception(exc)
            return done

    def _read_ahead(self, repository: Any, channel_hits: Mapping[str, list[tuple[str, RankContribution]]],
                    cfg: RankingConfig, beside: Callable[[list[str]], Any] | None = None
                    ) -> tuple[list[str], dict[str, LessonSnapshot]]:
        """Fresh snapshots of the in-process channels' first ``scan_limit`` candidates, read while
        the full-text search is still running (docs/hybrid-search.md#read-ahead).

        The revalidation of step 6 then finds them read, and the all-terms hits come with
        their text, so a hybrid search costs about as long as the all-terms search or the
        embedding plus this read, whichever is longer — not all of them in sequence; the
        partial full-text candidates are taken from these snapshots
        (docs/hybrid-search.md#partial-full-text).
        """
        ids = preliminary_order(_votes_by_lesson(channel_hits), cfg)[: cfg.scan_limit]
        job = beside(list(ids)) if beside is not None and ids else None
        if job is not None:
            try:
                self._pool.submit(job)
            except RuntimeError:  # stop() shut the pool down: run it here, the caller waits for it anyway
                job()
        t0 = time.monotonic()
        out = repository.get_snapshots(ids) if ids else {}
        self._observe("hybrid_stage_seconds", time.monotonic() - t0, stage="read_ahead")
        return ids, out

    # ------------------------------------------------------- find_analogies
    def find_analogies(self, repository: Any, *, source: LessonSnapshot, stored_ids: Sequence[str],
                       filters: SearchFilters | None = None, min_score: float | None = None,
                       continuation: bool = False) -> HybridList:
        """The bounded hybrid list of ``find_analogies`` for a fresh ``source`` snapshot.

        Channels: stored ``analogous_to`` partners (``stored_ids``) and lexical
        Jaccard candidates, both exactly as legacy ranks them
        (:func:`gateway.retrieval.legacy.search.analogies`), plus the source's
        situation vs situation and mechanism vs mechanism (cross-problem)
        similarity. The source's vectors come from the index when its
        retrieval_hash is current, else its two facets are embedded once (no
        retries). Every result keeps its ``shared_terms`` (lexical evidence).
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
        lg = legacy.analogies(repository, source, stored_ids, filters, 0.0)
        source_terms = snap.terms(source.id) if snap.retrieval_hash(source.id) == doc.retrieval_hash \
            else tuple(analyze(doc.text(WHOLE)))
        channel_hits: dict[str, list[tuple[str, RankContribution]]] = {}
        partial = lg.partial
        for channel, basis in (("relation", "stored_relation"), ("lexical", "lexical")):
            items = [r for r in lg.items if r.basis == basis]
            cap = cfg.channel_caps[channel]
            channel_hits[channel] = [(r.snapshot.id, RankContribution(channel, n, r.score))
                                     for n, r in enumerate(items[:cap], 1)]
            partial |= len(items) > cap
        prefetched = {r.snapshot.id: r.snapshot for r in lg.items}
        terms = {r.snapshot.id: tuple(r.shared_terms) for r in lg.items}
        t0 = time.monotonic()
        allowed = snap.allowed_rows(index_mask(filters))
        similar = quality_allowed(snap, allowed, cfg.semantic_quality_floor)
        for facet in ANALOGY_FACETS:
            channel = f"source:{facet}"
            vec = source_vectors.get(facet)
            hits = [] if vec is None else snap.search(facet, vec, cfg.channel_caps[channel], allowed=similar,
                                                      exclude=(source.id,), min_score=self.calibration.semantic_floor)
            channel_hits[channel] = indexed_votes(snap, channel, hits)
            partial |= len(hits) >= cfg.channel_caps[channel]
        hits = snap.lexical_search(source_terms, cfg.channel_caps["bm25"], allowed=allowed, exclude=(source.id,))
        channel_hits["bm25"] = indexed_votes(snap, "bm25", hits)
        partial |= len(hits) >= cfg.channel_caps["bm25"]
        self._observe("hybrid_stage_seconds", time.monotonic() - t0, stage="candidates")
        out = self._finish(repository, snap, channel_hits, operation=ANALOGIES, channels=ANALOGY_CHANNELS,
                           filters=filters, min_score=min_score, partial=partial, query=None, exclude=source.id,
                           prefetched=prefetched)
        source_features = lexical.features(legacy.analogy_projection(source.page))

        def shared(snapshot: LessonSnapshot) -> tuple[str, ...]:
            if snapshot.id in terms:
                return terms[snapshot.id]
            other = lexical.features(legacy.analogy_projection(snapshot.page))
            return tuple(lexical.shared_terms(source_features, other))

        results = tuple(replace(r, shared_terms=shared(r.snapshot)) for r in out.results)
        return replace(out, results=results, source_revision_id=source.revision_id,
                       source_projection_hash=doc.retrieval_hash)

    def _source_vectors(self, snap: IndexSnapshot, doc: ProjectionDocument) -> dict[str, np.ndarray]:
        """The source's vectors for :data:`ANALOGY_FACETS`: from the index when current, else embedded."""
        wanted = ANALOGY_FACETS
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
        matrix = self.provider.embed_documents([t for _, t in texts], facets=[f for f, _ in texts], retries=0,
                                               lane="query")
        self.refresher.hint_dirty(doc.lesson_id)
        return {facet: matrix[row] for row, (facet, _) in enumerate(texts)}

    def _matched_terms(self, terms, snapshot: LessonSnapshot) -> int:
        """How many query terms occur in the Lesson's text fields (all of them: a complete full-text match)."""
        words: set[str] = set()
        for name in self._text_fields:
            words.update(lexical.words(snapshot.page.fields.get(name, "")))
        return sum(1 for term in terms if lexical.term_matches(term, words))

    # ---------------------------------------------------------- shared tail
    def _finish(self, repository: Any, snap: IndexSnapshot,
                channel_hits: Mapping[str, list[tuple[str, RankContribution]]], *,
                operation: str, channels: Sequence[str], filters: SearchFilters, min_score: float | None,
                partial: bool, query: str | None, exclude: str | None = None,
                prefetched: Mapping[str, LessonSnapshot] | None = None,
                config: RankingConfig | None = None) -> HybridList:
        """Preliminary fusion, scan cap, canonical revalidation, final fusion (steps 5–7)."""
        cfg = config or self.ranking
        votes = _votes_by_lesson(channel_hits, exclude)
        order = preliminary_order(votes, cfg)
        examined = order[: cfg.scan_limit]
        partial |= len(order) > cfg.scan_limit
        t0 = time.monotonic()
        known = dict(prefetched or {})
        fresh = {i: known[i] for i in examined if i in known}
        unread = [i for i in examined if i not in known]
        if unread:
            fresh.update(repository.get_snapshots(unread))
        self._observe("hybrid_stage_seconds", time.monotonic() - t0, stage="wiki_reads")
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
            if self.refresher.is_tombstoned(lesson_id, snapshot.revision_id):
                buried += 1  # deleted or moved away (docs/hybrid-search.md#tombstones)
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
                contributions = [c for c in contributions if not c.indexed]
            if not filters.matches(snapshot.page):
                dropped_by_filter += 1
                continue
            vectors = {f: novelty[f].get(lesson_id) for f in ("approach", "mechanism")} if hash_ok else {}
            page = snapshot.page
            candidates.append(FusionCandidate(
                lesson_id=lesson_id,
                contributions=tuple(contributions),
                exact=exact_query and exact_match(query or "", (page.fields.get(n, "") for n in self._text_fields)),
                coverage=verified_coverage(page, cfg),
                record_origin=page.fields.get("record_origin", ""),
                vectors={k: v for k, v in vectors.items() if v is not None},
                quality=_quality(snap, lesson_id) if hash_ok else 1.0,
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
        self._count("hybrid_dropped", buried, reason="tombstone")
        self._count("hybrid_dropped", dropped_by_filter, reason="filter")
        status = self.refresher.status()
        if stale and status == "ready":
            status = "stale"
        votes_of = {c.lesson_id: c.contributions for c in candidates}
        results = tuple(HybridResult(fresh[r.lesson_id], r.score, r.basis, r.channels,
                                     votes=votes_of.get(r.lesson_id, ()), tier=r.tier) for r in fused)
        return HybridList(results=results, effective_mode=HYBRID_MODE, ranking_version=cfg.version,
                          semantic_status=status, generation=snap.generation, partial=partial,
                          scanned=len(examined), scan_limit=cfg.scan_limit)

    # -------------------------------------------------------------- metrics
    def _count(self, name: str, amount: int = 1, **labels: str) -> None:
        if self.metrics is not None and amount:
            self.metrics.incr(name, amount, **labels)

    def _observe(self, name: str, seconds: float, **labels: str) -> None:
        if self.metrics is not None:
            self.metrics.observe(name, seconds, **labels)


def _quality(snap: IndexSnapshot, lesson_id: str) -> float:
    value = snap.quality(lesson_id)
    return 1.0 if value is None else value


def _votes_by_lesson(channel_hits: Mapping[str, list[tuple[str, RankContribution]]],
                     exclude: str | None = None) -> dict[str, list[RankContribution]]:
    """Lesson id → its votes, in channel order then rank order (``exclude``: an id left out)."""
    votes: dict[str, list[RankContribution]] = {}
    for hits in channel_hits.values():
        for lesson_id, vote in hits:
            if lesson_id != exclude:
                votes.setdefault(lesson_id, []).append(vote)
    return votes
