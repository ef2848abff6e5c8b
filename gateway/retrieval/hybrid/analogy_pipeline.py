"""The ``hybrid_v1`` pipeline of ``find_analogies``: stored partners, lexical and cross-problem channels.

:meth:`AnalogyPipeline.run` receives the tool's
:class:`~gateway.retrieval.request.AnalogyRequest`. Preflight, revalidation,
fusion and ``min_score`` are :class:`~gateway.retrieval.hybrid.stages.Stages`'
(docs/retrieval.md#fusion, docs/retrieval.md#revalidation, docs/retrieval.md#fallback);
the cursor binds the source's projection hash (docs/tools.md#cursors).
"""
from __future__ import annotations

import time
from typing import Any
from dataclasses import replace

import numpy as np

from gateway.config.profiles import WHOLE
from gateway.domain.model import LessonSnapshot
from gateway.retrieval.embedding.errors import EmbeddingError
from gateway.retrieval.filters import index_mask
from gateway.retrieval.hybrid.channels import indexed_votes, quality_allowed
from gateway.retrieval.hybrid.fusion import ANALOGIES, ANALOGY_CHANNELS, RankContribution
from gateway.retrieval.hybrid.results import HybridList
from gateway.retrieval.hybrid.stages import Stages
from gateway.retrieval.index.analyzer import analyze
from gateway.retrieval.index.snapshot import IndexSnapshot
from gateway.retrieval.indexing.projection import ProjectionDocument
from gateway.retrieval.legacy import lexical, search as legacy
from gateway.retrieval.request import AnalogyRequest

__all__ = ["ANALOGY_FACETS", "AnalogyPipeline"]

#: The source vectors find_analogies compares (cross-problem similarity and the whole Lesson).
ANALOGY_FACETS = ("situation", "mechanism", WHOLE)


class AnalogyPipeline:
    """Runs hybrid ``find_analogies`` requests (module doc) over the service :class:`Stages` serves."""

    def __init__(self, stages: Stages):
        self.stages = stages
        self.service = stages.service

    def run(self, repository: Any, request: AnalogyRequest, *, continuation: bool = False) -> HybridList:
        """The bounded hybrid list of one ``find_analogies`` ``request`` (its fresh ``source`` snapshot,
        stored partners, filters and ``min_score``); ``continuation`` for a hybrid cursor page.

        Channels: stored ``analogous_to`` partners (``request.stored_ids``) and lexical
        Jaccard candidates, both exactly as legacy ranks them
        (:func:`gateway.retrieval.legacy.search.analogies`), plus the source's
        situation vs situation and mechanism vs mechanism (cross-problem)
        similarity. The source's vectors come from the index when its
        retrieval_hash is current, else its two facets are embedded once (no
        retries). Every result keeps its ``shared_terms`` (lexical evidence).
        """
        source, filters = request.source, request.filters
        snap = self.stages.usable_snapshot(continuation)
        cfg = self.service.ranking
        doc = self.service.projection(source.id, source)
        started = time.monotonic()
        try:
            source_vectors = self._source_vectors(snap, doc)
        except EmbeddingError as exc:
            self.stages.fallback(exc.code, self.stages.status_after_failure(), continuation)
        self.stages.observe("hybrid_stage_seconds", time.monotonic() - started, stage="embedding")
        lg = legacy.analogies(repository, replace(request, min_score=0.0))
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
        floor = self.service.calibration.semantic_floor
        for facet in ANALOGY_FACETS:
            channel = f"source:{facet}"
            vec = source_vectors.get(facet)
            hits = [] if vec is None else snap.search(facet, vec, cfg.channel_caps[channel], allowed=similar,
                                                      exclude=(source.id,), min_score=floor)
            channel_hits[channel] = indexed_votes(snap, channel, hits)
            partial |= len(hits) >= cfg.channel_caps[channel]
        hits = snap.lexical_search(source_terms, cfg.channel_caps["bm25"], allowed=allowed, exclude=(source.id,))
        channel_hits["bm25"] = indexed_votes(snap, "bm25", hits)
        partial |= len(hits) >= cfg.channel_caps["bm25"]
        self.stages.observe("hybrid_stage_seconds", time.monotonic() - t0, stage="candidates")
        out = self.stages.finish(repository, snap, channel_hits, operation=ANALOGIES, channels=ANALOGY_CHANNELS,
                                 filters=filters, min_score=request.min_score, partial=partial, query=None,
                                 exclude=source.id, prefetched=prefetched)
        source_terms = legacy.analogy_terms(source.page)

        def shared(snapshot: LessonSnapshot) -> tuple[str, ...]:
            if snapshot.id in terms:
                return terms[snapshot.id]
            return legacy.shared_analogy_terms(source_terms, snapshot.page)

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
        matrix = self.service.provider.embed_documents([t for _, t in texts], facets=[f for f, _ in texts], retries=0,
                                               lane="query")
        self.service.refresher.hint_dirty(doc.lesson_id)
        return {facet: matrix[row] for row, (facet, _) in enumerate(texts)}
