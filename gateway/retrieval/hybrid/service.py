"""``hybrid_v1`` for the read tools: the process's retrieval service, its wiring and lifecycle.

Contract: docs/retrieval.md#fusion, docs/retrieval.md#revalidation,
docs/retrieval.md#fallback, docs/retrieval.md#semantic-status,
docs/retrieval.md#min-score, docs/retrieval.md#resource-isolation and
docs/tools.md#cursors.

:class:`RetrievalService` is the one object the app builds per process and
hands to tools as ``ToolContext.retrieval``. It owns the embedding provider,
the generation's projection builder, the :class:`IndexRefresher` and the
ranking configuration, starts and stops them, and reports status, progress,
health and quarantine. The two pipelines run the requests the tools parse:
:meth:`RetrievalService.search_lessons` hands a
:class:`~gateway.retrieval.request.SearchRequest` to
:class:`~gateway.retrieval.hybrid.search_pipeline.SearchPipeline`,
:meth:`RetrievalService.find_analogies` an
:class:`~gateway.retrieval.request.AnalogyRequest` to
:class:`~gateway.retrieval.hybrid.analogy_pipeline.AnalogyPipeline`; both
share :class:`~gateway.retrieval.hybrid.stages.Stages` (preflight,
revalidation, fusion).

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
from typing import Any, Callable

from gateway.domain.model import LessonPage, LessonSnapshot
from gateway.retrieval.hybrid.duplicates import DuplicateChecker
from gateway.retrieval.embedding.client import EmbeddingProvider, build_provider
from gateway.retrieval.hybrid.analogy_pipeline import AnalogyPipeline
from gateway.retrieval.hybrid.channels import prepare_snapshot
from gateway.retrieval.hybrid.fusion import DEFAULT_RANKING, RankingConfig
from gateway.retrieval.hybrid.results import HybridList
from gateway.retrieval.hybrid.search_pipeline import SearchPipeline
from gateway.retrieval.hybrid.stages import Stages
from gateway.config.profiles import generation_id, get_profile
from gateway.retrieval.indexing.projection import ProjectionBuilder, ProjectionDocument
from gateway.retrieval.indexing.follower import ChangeFollower, build_checkpoint_store
from gateway.retrieval.indexing.refresher import IndexRefresher
from gateway.retrieval.hybrid.shadow import ShadowRunner
from gateway.config.retrieval import RetrievalSettings
from gateway.retrieval.request import AnalogyRequest, SearchRequest

__all__ = ["RetrievalService"]

log = logging.getLogger("s3rm.hybrid")


class RetrievalService:
    """The process-wide hybrid retrieval service (``ToolContext.retrieval``).

    Args:
        settings: :class:`RetrievalSettings` (``GatewayConfig.retrieval``).
        repository: the Lesson repository the refresher reads (the app's lazy one); its ``schema``
            (``LessonRepository.schema``) gives the projection's facets and the text fields.
        metrics: optional ``gateway.ops.metrics.Metrics``.
        provider: injectable provider (default: :func:`build_provider`).
        ranking: ranking configuration (default ``rrf_v10``).
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
                                           clock=clock, metrics=metrics, follower=follower,
                                           prepare=prepare_snapshot(ranking))
        self._duplicates = DuplicateChecker(self)
        self._shadow = ShadowRunner(metrics=metrics)
        self._text_fields = tuple(f.name for f in repository.schema.lesson.fields if f.type in ("text", "longtext"))
        stages = Stages(self, self._text_fields)
        self.search_pipeline = SearchPipeline(stages, self._shadow)
        self.analogy_pipeline = AnalogyPipeline(stages)

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
        self.search_pipeline.close()
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

    # ----------------------------------------------------------- pipelines
    def search_lessons(self, repository: Any, request: SearchRequest, *, continuation: bool = False,
                       beside: Callable[[list[str]], Any] | None = None) -> HybridList:
        """The bounded hybrid list of one ``search_lessons`` request (:meth:`SearchPipeline.run`).

        Raises SemanticFallback (first page) or ToolError ``semantic_unavailable`` (``continuation``).
        """
        return self.search_pipeline.run(repository, request, continuation=continuation, beside=beside)

    def find_analogies(self, repository: Any, request: AnalogyRequest, *, continuation: bool = False) -> HybridList:
        """The bounded hybrid list of one ``find_analogies`` request (:meth:`AnalogyPipeline.run`).

        Raises SemanticFallback (first page) or ToolError ``semantic_unavailable`` (``continuation``).
        """
        return self.analogy_pipeline.run(repository, request, continuation=continuation)
