"""The ``hybrid_v1`` pipeline of ``search_lessons``: channels, revalidation, fusion, fallback.

Contract: docs/retrieval.md#fusion, docs/retrieval.md#revalidation,
docs/retrieval.md#fallback, docs/retrieval.md#semantic-status,
docs/retrieval.md#min-score and docs/retrieval.md#resource-isolation.
:meth:`SearchPipeline.run` receives the tool's
:class:`~gateway.retrieval.request.SearchRequest`:

1. An empty query never reaches the model (docs/retrieval.md#listing):
   :class:`~gateway.retrieval.hybrid.results.SemanticFallback` ``empty_query`` —
   the listing is the same in both modes.
2. Preflight (:meth:`gateway.retrieval.hybrid.stages.Stages.usable_snapshot`):
   ``disabled`` / ``building`` / ``unavailable`` fall back at once.
3. The query embedding starts on the provider's pool (one shared gate; a full
   queue fails at once → fallback ``saturated``) while MediaWiki full text runs
   on this pipeline's own workers.
4. Channels, each with a fixed cap (``partial`` when a cap is hit): full
   text (legacy's all-terms search, its partial matches taken from the
   read-ahead candidates, ``docs/hybrid-search.md#partial-full-text``); the in-process BM25 channel over the
   analysed whole text (``docs/hybrid-search.md#lexical-channel``); query vs
   situation/approach/mechanism/whole with the profile's cosine floor and a
   pre-filter on indexed scalars (a Hangul query ranks Korean and other
   Lessons separately per channel, ``docs/hybrid-search.md#ranking``); for a
   Hangul query the slot channel (query vs the Korean Lessons' passage-form
   whole vectors, weight 0, ``docs/hybrid-search.md#language-slots``).
5. Preliminary RRF order; only the first ``scan_limit`` ids (one cap over all
   channels) are revalidated: ``scanned`` = ids examined (docs/retrieval.md#fusion).
6. Canonical revalidation against fresh snapshots (batches of 50): missing →
   dropped and queued for index cleanup; tombstoned by the follower (deleted
   or moved away, not re-created since) → dropped (docs/hybrid-search.md#tombstones); retrieval_hash differs →
   semantic votes dropped, Lesson queued for re-embedding, status ``stale``; same hash,
   new revision/metadata → scalars refreshed without embedding (docs/retrieval.md#revalidation); filters
   re-applied to fresh data; exact-identifier test on fresh text.
7. Fusion (:mod:`gateway.retrieval.hybrid.fusion`), ``min_score`` on the service score, then
   the language slots of a Hangul query (:mod:`gateway.retrieval.hybrid.slots`).
8. While a shadow comparison runs, a sampled share of full requests is handed
   to :class:`~gateway.retrieval.hybrid.shadow.ShadowRunner` after step 4 (ranked on
   the shadow generation in the background; docs/operations.md#shadow-queries).

Steps 5–7 are :meth:`gateway.retrieval.hybrid.stages.Stages.finish`, shared with
:mod:`gateway.retrieval.hybrid.analogy_pipeline`.
"""
from __future__ import annotations

import time
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

from gateway.config.profiles import FACETS, INDEX_FACETS, WHOLE, WHOLE_PASSAGE
from gateway.domain.model import LessonSnapshot
from gateway.retrieval.embedding.errors import EmbeddingError
from gateway.retrieval.filters import SearchFilters, index_mask
from gateway.retrieval.hybrid import slots
from gateway.retrieval.hybrid.channels import decide_language, lexical_votes, semantic_votes
from gateway.retrieval.hybrid.fusion import (
    SEARCH,
    SEARCH_CHANNELS,
    RankContribution,
    RankingConfig,
    partial_share,
    preliminary_order,
)
from gateway.retrieval.hybrid.phrasings import fuse_phrasings
from gateway.retrieval.hybrid.results import HybridList, SemanticFallback
from gateway.retrieval.hybrid.shadow import ShadowProbe, ShadowRunner
from gateway.retrieval.hybrid.stages import Stages, votes_by_lesson
from gateway.retrieval.index.analyzer import analyze
from gateway.retrieval.indexing.projection import normalize_query
from gateway.retrieval.language import query_language
from gateway.retrieval.legacy import lexical, search as legacy
from gateway.retrieval.request import SearchRequest

__all__ = ["FULL_TEXT_WORKERS", "SearchPipeline"]

#: Full-text workers: twice the largest ``S3RM_ADMISSION_SEMANTIC_CONCURRENCY`` (each admitted
#: hybrid search runs its full-text search and at most one caller read ``beside`` it), so none
#: waits for one (threads start only when needed).
FULL_TEXT_WORKERS = 128


class SearchPipeline:
    """Runs hybrid ``search_lessons`` requests (module doc) over the service :class:`Stages` serves.

    Owns the worker pool that runs each search's MediaWiki full-text channel (and the
    caller's read ``beside`` it) while the in-process channels rank; ``shadow`` samples
    requests for a shadow generation (step 8).
    """

    def __init__(self, stages: Stages, shadow: ShadowRunner):
        self.stages = stages
        self.service = stages.service
        self.shadow = shadow
        #: runs each hybrid search's MediaWiki full-text channel beside its in-process channels
        self._pool = ThreadPoolExecutor(max_workers=FULL_TEXT_WORKERS, thread_name_prefix="s3rm-full-text")
        #: ranks a request's other phrasings beside its query (a pool of its own: these wait on :attr:`_pool`)
        self._phrasing_pool = ThreadPoolExecutor(max_workers=FULL_TEXT_WORKERS, thread_name_prefix="s3rm-phrasing")

    def close(self) -> None:
        """Stop the workers; a request still running runs its full-text search (and its other phrasings)
        on its own thread."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._phrasing_pool.shutdown(wait=False, cancel_futures=True)

    def run(self, repository: Any, request: SearchRequest, *, continuation: bool = False,
            beside: Callable[[list[str]], Any] | None = None) -> HybridList:
        """The bounded hybrid result list of one ``search_lessons`` ``request`` (module docstring steps 1–8):
        its query, filters, ``min_score`` and facet; ``continuation`` for a hybrid cursor page.

        The full-text channel ranks as legacy does (:func:`gateway.retrieval.legacy.search.rank_candidates`:
        Korean stem prefixes, title weighted, fresh snapshots, filters) over legacy's all-terms
        hits and, in place of its single-term searches, the read-ahead candidates holding one of
        its fallback terms (docs/hybrid-search.md#partial-full-text), so exact identifiers and
        error strings keep their legacy rank as one channel.

        ``request.facet`` (``situation``, ``approach`` or ``mechanism``) narrows the request to ONE
        channel: the query against that facet only — no full text, no other facet — in that channel's
        order; the service score is then relative to a first rank in that channel, and a Hangul query
        decides its language from the ``whole`` vector and the BM25 list, which do not vote
        (docs/retrieval.md#facet-selector).
        ``beside(ids)``, when given, is called on this thread with the read-ahead ids (likely hits,
        in preliminary order) and may return a callable, which then runs on a worker while the
        full-text search runs; its result and errors are the caller's (docs/hybrid-search.md#read-ahead).
        With other phrasings (``request.phrasings``, docs/retrieval.md#phrasings) each phrasing is
        ranked on its own by these steps — the others on :attr:`_phrasing_pool`'s threads while the
        query's runs here, ``beside`` and the shadow sample with the query's only — and the lists are
        fused by :func:`~gateway.retrieval.hybrid.phrasings.fuse_phrasings`; any phrasing's fallback
        is the request's.

        Raises SemanticFallback (first page) or ToolError ``semantic_unavailable`` (continuation);
        ``ValueError`` for an unknown facet.
        """
        if not request.phrasings:
            return self._run_one(repository, request, continuation=continuation, beside=beside, shadow=True)
        phrased = [request.phrased(text) for text in request.phrasings]
        others = [self._submit_phrasing(repository, one, continuation) for one in phrased]
        try:
            lists = [self._run_one(repository, request.phrased(request.query), continuation=continuation,
                                   beside=beside, shadow=True)]
            for one, future in zip(phrased, others):
                try:
                    lists.append(future.result())
                except CancelledError:  # the service stopped meanwhile: this request still gets its answer
                    lists.append(self._run_one(repository, one, continuation=continuation, beside=None,
                                               shadow=False))
        except BaseException:
            for future in others:
                future.cancel()
            raise
        return fuse_phrasings(lists)

    def _submit_phrasing(self, repository: Any, request: SearchRequest, continuation: bool) -> Future:
        """:meth:`_run_one` of one other phrasing on :attr:`_phrasing_pool`; on the calling thread when
        the pool is shut down (its result or error then comes with the returned future)."""
        try:
            return self._phrasing_pool.submit(self._run_one, repository, request, continuation=continuation,
                                              beside=None, shadow=False)
        except RuntimeError:  # stop() shut the pool down while this request was running
            done: Future = Future()
            try:
                done.set_result(self._run_one(repository, request, continuation=continuation, beside=None,
                                              shadow=False))
            except Exception as exc:
                done.set_exception(exc)
            return done

    def _run_one(self, repository: Any, request: SearchRequest, *, continuation: bool,
                 beside: Callable[[list[str]], Any] | None, shadow: bool) -> HybridList:
        """Steps 1–8 of the module docstring for ``request.query`` alone (the shadow sample only when ``shadow``)."""
        query, filters, facet = request.query, request.filters, request.facet
        if facet is not None and facet not in FACETS:
            raise ValueError(f"unknown facet {facet!r}")
        q = normalize_query(query)
        if not q:
            raise SemanticFallback("empty_query", self.service.semantic_status())
        snap = self.stages.usable_snapshot(continuation)
        cfg = self.service.ranking.for_query(q)
        facets = INDEX_FACETS if facet is None else (facet,)
        # a facet request of a standardised language decides its language as the main ranking does, from the
        # ``whole`` vector and the BM25 list (docs/retrieval.md#facet-selector); neither votes
        decides = facet is not None and query_language(q) in cfg.standardized_languages
        try:
            pending = self.service.provider.begin_queries(q, (*facets, WHOLE) if decides else facets)
        except EmbeddingError as exc:
            self.stages.fallback(exc.code, self.stages.status_after_failure(), continuation)
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
                self.stages.observe("hybrid_stage_seconds", time.monotonic() - t0, stage="bm25")
            t0 = time.monotonic()
            try:
                vectors = pending.result()
            except EmbeddingError as exc:
                self.stages.fallback(exc.code, self.stages.status_after_failure(), continuation)
            self.stages.observe("hybrid_stage_seconds", time.monotonic() - t0, stage="embedding_wait")
            t0 = time.monotonic()
            floor = self.service.calibration.semantic_floor
            lexical_ids = [i for i, _ in channel_hits.get("bm25", [])]
            if decides:
                lexical_ids = [i for i, _ in lexical_votes(snap, tuple(analyze(q)), cfg.channel_caps["bm25"],
                                                           allowed, cfg.lexical_partial_below)[0]]
            cfg, plan = decide_language(snap, q, vectors, lexical_ids, allowed, self.service.ranking)
            if facet is not None:  # one channel: its own order, whatever weight its language gives it in the
                # main fusion (a weight of 0 would leave every score 0 and the order to the Lesson ids)
                cfg = replace(cfg, weights=MappingProxyType({**cfg.weights, f"semantic:{facet}": 1.0}))
            for name in facets:
                if name == WHOLE_PASSAGE:
                    continue
                channel = f"semantic:{name}"
                channel_hits[channel], capped = semantic_votes(snap, name, vectors[name], cfg.channel_caps[channel],
                                                               allowed, floor, plan, cfg.semantic_quality_floor)
                partial |= capped
            if facet is None and slots.applies(cfg, q):  # the order of the language slots (weight 0)
                channel_hits[slots.SLOT_CHANNEL] = slots.slot_votes(
                    snap, vectors[WHOLE_PASSAGE], cfg.channel_caps[slots.SLOT_CHANNEL], allowed,
                    cfg.semantic_quality_floor)
            self.stages.observe("hybrid_stage_seconds", time.monotonic() - t0, stage="candidates")
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
        if facet is None and shadow:  # a sampled copy runs against a shadow generation, off this request's path
            self.shadow.offer(snap, self.service.refresher.shadow_target(),
                              ShadowProbe(query_terms, vectors, index_mask(filters), cfg, floor, plan))
        channels = SEARCH_CHANNELS if facet is None else (f"semantic:{facet}",)
        return self.stages.finish(repository, snap, channel_hits, operation=SEARCH, channels=channels,
                                  filters=filters, min_score=request.min_score, partial=partial, query=q,
                                  prefetched=prefetched, config=cfg)

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
        self.stages.observe("hybrid_stage_seconds", time.monotonic() - t0, stage="full_text")
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
        ids = slots.scan_ids(preliminary_order(votes_by_lesson(channel_hits), cfg),
                             channel_hits.get(slots.SLOT_CHANNEL, ()), cfg)
        job = beside(list(ids)) if beside is not None and ids else None
        if job is not None:
            try:
                self._pool.submit(job)
            except RuntimeError:  # stop() shut the pool down: run it here, the caller waits for it anyway
                job()
        t0 = time.monotonic()
        out = repository.get_snapshots(ids) if ids else {}
        self.stages.observe("hybrid_stage_seconds", time.monotonic() - t0, stage="read_ahead")
        return ids, out

    def _matched_terms(self, terms, snapshot: LessonSnapshot) -> int:
        """How many query terms occur in the Lesson's text fields (all of them: a complete full-text match)."""
        words: set[str] = set()
        for name in self.stages.text_fields:
            words.update(lexical.words(snapshot.page.fields.get(name, "")))
        return sum(1 for term in terms if lexical.term_matches(term, words))
