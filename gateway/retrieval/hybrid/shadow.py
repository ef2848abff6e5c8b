"""Shadow queries: a sampled share of live hybrid searches also ranked on a candidate generation.

Contract: docs/operations.md#shadow-queries, docs/retrieval.md#privacy.

While a shadow comparison runs (``s3rm index shadow --start GENERATION``),
``search_lessons`` hands every full hybrid request's analysed query terms,
query vectors, index pre-filter and ranking configuration to
:meth:`ShadowRunner.offer` after its own channels ran. With probability
``sample`` the runner queues a :class:`ShadowProbe` for its one background
thread (a full queue drops the probe and counts it); the request never waits.

The thread ranks the probe on the active view and on the shadow view with the
same index channels (:mod:`gateway.retrieval.hybrid.channels`: BM25 complete /
partial, one semantic channel per facet) and the preliminary RRF order, then
compares the first ``k`` ids: ``overlap`` = shared ids / ids in the active
top ``k`` (1.0 when both are empty), and the wall time of each ranking.
Revalidation against MediaWiki is not repeated (the shadow must not add wiki
load). The resulting :class:`ShadowSample` holds generation names, counts and
milliseconds only — never query text, terms or vectors — and goes to the
target's ``record`` callable (for the shared store, a row in PostgreSQL).
"""
from __future__ import annotations

import logging
import queue
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from gateway.config.profiles import RANKED_FACETS
from gateway.retrieval.index.backend import SemanticIndex
from gateway.retrieval.hybrid.channels import lexical_votes, semantic_votes
from gateway.retrieval.hybrid.cross_language import LanguagePlan
from gateway.retrieval.hybrid.fusion import RankingConfig, preliminary_order
from gateway.retrieval.index.records import FilterMask

__all__ = ["SHADOW_K", "ShadowProbe", "ShadowRunner", "ShadowSample", "ShadowTarget", "compare", "index_order"]

log = logging.getLogger("s3rm.shadow")

#: Ids compared per query (overlap@k).
SHADOW_K = 10
#: Probes waiting for the shadow thread at most; more are dropped (counted).
QUEUE_LIMIT = 16


@dataclass(frozen=True)
class ShadowProbe:
    """What a sampled request hands over: analysed ``query_terms``, ``vectors`` ``{facet: (dims,)}``,
    the index pre-filter ``mask`` (None: none), the ranking ``config`` (the query's, decided), the semantic
    cosine ``floor`` and the semantic channels' language ``plan``
    (:class:`~gateway.retrieval.hybrid.cross_language.LanguagePlan`)."""

    query_terms: tuple[str, ...]
    vectors: Mapping[str, np.ndarray]
    mask: FilterMask | None
    config: RankingConfig
    floor: float | None
    plan: LanguagePlan


@dataclass(frozen=True)
class ShadowSample:
    """One compared query: generation names, ``k``, hits per side, ``overlap`` (0–1) and milliseconds per side."""

    generation: str
    active: str
    k: int
    active_hits: int
    shadow_hits: int
    overlap: float
    active_ms: float
    shadow_ms: float


@dataclass(frozen=True)
class ShadowTarget:
    """A running comparison: the shadow ``view``, the ``sample`` share (0–1] and where samples go."""

    view: SemanticIndex
    sample: float
    record: Callable[[ShadowSample], None]


def index_order(snap: SemanticIndex, probe: ShadowProbe) -> list[str]:
    """Lesson ids of ``snap`` in preliminary RRF order over the index channels of ``probe``."""
    cfg = probe.config
    allowed = snap.allowed_rows(probe.mask)
    channels: dict[str, list] = {}
    channels["bm25"], channels["bm25_partial"], _ = lexical_votes(
        snap, probe.query_terms, cfg.channel_caps["bm25"], allowed, cfg.lexical_partial_below)
    for facet in RANKED_FACETS:
        if facet in probe.vectors:
            name = f"semantic:{facet}"
            channels[name], _ = semantic_votes(snap, facet, probe.vectors[facet], cfg.channel_caps[name], allowed,
                                               probe.floor, probe.plan, cfg.semantic_quality_floor)
    votes: dict[str, list] = {}
    for hits in channels.values():
        for lesson_id, vote in hits:
            votes.setdefault(lesson_id, []).append(vote)
    return preliminary_order(votes, cfg)


def compare(active: SemanticIndex, shadow: SemanticIndex, probe: ShadowProbe, k: int = SHADOW_K) -> ShadowSample:
    """Rank ``probe`` on both views and compare their top ``k`` (module docstring)."""
    t0 = time.perf_counter()
    base = index_order(active, probe)[:k]
    t1 = time.perf_counter()
    other = index_order(shadow, probe)[:k]
    t2 = time.perf_counter()
    overlap = 1.0 if not base and not other else len(set(base) & set(other)) / max(1, len(base))
    return ShadowSample(generation=getattr(shadow, "generation", "?"), active=getattr(active, "generation", "?"),
                        k=k, active_hits=len(base), shadow_hits=len(other), overlap=overlap,
                        active_ms=1000 * (t1 - t0), shadow_ms=1000 * (t2 - t1))


class ShadowRunner:
    """Samples probes and compares them on one daemon thread (module docstring).

    Args:
        metrics: optional ``gateway.ops.metrics.Metrics`` (``shadow_probes{outcome}`` with outcome
            ``ok`` / ``dropped`` / ``error``, ``shadow_rank_seconds{role}`` with role ``active`` / ``shadow``).
        rand: uniform [0, 1) source (injectable).
    """

    def __init__(self, metrics: Any = None, *, rand: Callable[[], float] = random.random):
        self.metrics = metrics
        self.rand = rand
        self._queue: queue.Queue = queue.Queue(QUEUE_LIMIT)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._samples = 0
        self._overlap_sum = 0.0

    def stats(self) -> dict[str, Any]:
        """This process's comparisons so far: ``samples`` and ``mean_overlap`` (None before the first)."""
        with self._lock:
            n, total = self._samples, self._overlap_sum
        return {"samples": n, "mean_overlap": round(total / n, 4) if n else None}

    def offer(self, active: SemanticIndex, target: ShadowTarget | None, probe: ShadowProbe) -> bool:
        """Queue ``probe`` for comparison with probability ``target.sample``; True when queued. Never raises
        or blocks."""
        try:
            if target is None or target.view is active or self.rand() >= target.sample:
                return False
            self._ensure_thread()
            self._queue.put_nowait((active, target, probe))
            return True
        except queue.Full:
            self._count("dropped")
            return False
        except Exception:  # pragma: no cover - a shadow must never fail a search
            log.exception("shadow offer failed")
            return False

    def close(self) -> None:
        """Stop the thread after the probes already queued."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(5.0)

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="s3rm-shadow", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            active, target, probe = item
            try:
                sample = compare(active, target.view, probe)
                target.record(sample)
            except Exception as exc:  # a store outage or a retired view: count, keep going
                log.warning("shadow comparison failed: %s", type(exc).__name__)
                self._count("error")
                continue
            self._count("ok")
            with self._lock:
                self._samples += 1
                self._overlap_sum += sample.overlap
            if self.metrics is not None:
                self.metrics.observe("shadow_rank_seconds", sample.active_ms / 1000, role="active")
                self.metrics.observe("shadow_rank_seconds", sample.shadow_ms / 1000, role="shadow")

    def _count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.incr("shadow_probes", outcome=outcome)
