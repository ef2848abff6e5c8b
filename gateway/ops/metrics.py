"""In-process metrics (counters, latency summaries) and the observability view of them.

Labels are restricted to short identifiers (tool name, outcome code, stage,
class, cause); never query text, arguments or Lesson content (docs/retrieval.md#privacy,
docs/operations.md#observability). Thread-safe; one :class:`Metrics` per process.

The ``GET /metrics`` endpoint (:mod:`gateway.web.metrics_endpoint`) serves
:meth:`Metrics.snapshot` and :func:`observability`.

``observability`` names every item of docs/operations.md#observability; values come from the
process counters and from the hybrid layer's status callable
(``create_app(semantic_stats=...)``); an item nobody reports yet is ``null``.
"""
from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from typing import Any, Mapping


__all__ = ["Metrics", "P2_ITEMS", "bounded", "observability"]

_MAX_LABEL_LEN = 64
#: Latency histogram bucket upper bounds (seconds) for p50/p95 estimates.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _key(name: str, labels: dict[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted((k, str(v)[:_MAX_LABEL_LEN]) for k, v in labels.items()))


def _quantile(buckets: list[int], count: int, q: float) -> float | None:
    if count == 0:
        return None
    rank = q * count
    seen = 0
    for bound, n in zip(_BUCKETS + (float("inf"),), buckets):
        seen += n
        if seen >= rank:
            return bound if bound != float("inf") else _BUCKETS[-1]
    return _BUCKETS[-1]


def _capped(bound: float | None, maximum: float) -> float | None:
    return None if bound is None else min(bound, maximum)


class Metrics:
    """Process-wide counters (``incr``) and latency summaries (``observe``, seconds)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[Any, int] = defaultdict(int)
        # count, sum, max, bucket counts
        self._timings: dict[Any, list] = defaultdict(lambda: [0, 0.0, 0.0, [0] * (len(_BUCKETS) + 1)])

    def incr(self, name: str, amount: int = 1, **labels: str) -> None:
        """Add ``amount`` to counter ``name`` with the given short labels."""
        with self._lock:
            self._counters[_key(name, labels)] += amount

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        """Record one duration (seconds) for timer ``name``."""
        with self._lock:
            entry = self._timings[_key(name, labels)]
            entry[0] += 1
            entry[1] += seconds
            entry[2] = max(entry[2], seconds)
            entry[3][bisect.bisect_left(_BUCKETS, seconds)] += 1

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Return a JSON-friendly copy: ``{"counters": [...], "timings": [...]}``.

        A timing is ``{"name", "labels", "count", "sum_seconds", "max_seconds",
        "p50_seconds", "p95_seconds"}`` (quantiles are histogram bucket upper
        bounds, capped at the maximum seen).
        """
        with self._lock:
            counters = [{"name": n, "labels": dict(l), "value": v} for (n, l), v in self._counters.items()]
            timings = [
                {
                    "name": n,
                    "labels": dict(l),
                    "count": c,
                    "sum_seconds": s,
                    "max_seconds": m,
                    "p50_seconds": _capped(_quantile(b, c, 0.5), m),
                    "p95_seconds": _capped(_quantile(b, c, 0.95), m),
                }
                for (n, l), (c, s, m, b) in self._timings.items()
            ]
        return {"counters": counters, "timings": timings}

    def counter(self, name: str, **labels: str) -> int:
        """Current value of one counter (0 when never incremented)."""
        with self._lock:
            return self._counters.get(_key(name, labels), 0)

    def total(self, name: str, **match: str) -> int:
        """Sum of counter ``name`` over every label set that includes ``match``."""
        want = {k: str(v) for k, v in match.items()}
        with self._lock:
            return sum(
                v for (n, labels), v in self._counters.items()
                if n == name and all(dict(labels).get(k) == val for k, val in want.items())
            )

    def by_label(self, name: str, label: str) -> dict[str, int]:
        """Counter ``name`` summed per value of ``label`` (e.g. fallbacks per cause)."""
        out: dict[str, int] = defaultdict(int)
        with self._lock:
            for (n, labels), v in self._counters.items():
                if n == name:
                    out[dict(labels).get(label, "")] += v
        return dict(out)


# --------------------------------------------------------------- observability view
#: Every observability item (docs/operations.md#observability) → its sources (values of several sources are merged).
#: ``("semantic", key)`` reads the hybrid layer's status dict (dotted keys); ``("counter", name, label)``
#: a process counter summed per label value; ``("where", name, label, value)`` one label value of a
#: counter; ``("timing", name, label)`` latency summaries per label value.
P2_ITEMS: Mapping[str, tuple] = {
    "recent_changes_lag_seconds": (("semantic", "recent_changes_lag_seconds"),),
    "unprocessed_revisions": (("semantic", "pending"),),
    "last_poll_age_seconds": (("semantic", "last_poll_age_seconds"),),
    "last_reconcile_age_seconds": (("semantic", "last_reconcile_age_seconds"),),
    "lessons_canonical": (("semantic", "lessons"),),
    "lessons_indexed": (("semantic", "indexed"),),
    "active_generation": (("semantic", "generation"),),
    "missing_count": (("semantic", "missing"),),
    "orphan_count": (("semantic", "orphans"),),
    "stale_hash_count": (("semantic", "stale_hashes"),),
    "failed_count": (("semantic", "failed"),),
    "latency_by_stage": (("timing", "hybrid_stage_seconds", "stage"),),
    "latency_by_tool": (("timing", "tool_call_seconds", "tool"),),
    "embedding_queue_depth": (("semantic", "queue.waiting"),),
    "embedding_in_use": (("semantic", "queue.in_use"),),
    "embedding_rejections": (("semantic", "queue.rejected"),),
    "embedding_failures_by_code": (("counter", "embedding_failures", "code"),),
    "breaker_state": (("semantic", "breaker"),),
    "document_breaker_state": (("semantic", "document_breaker"),),  # docs/hybrid-search.md#document-server
    "fallbacks_by_cause": (("counter", "hybrid_fallbacks", "cause"), ("counter", "semantic_fallbacks", "cause")),
    "candidates_examined": (("counter", "hybrid_candidates", "operation"),),
    "candidates_dropped": (("counter", "hybrid_dropped", "reason"),),
    "build_progress": (("semantic", "build_progress"), ("semantic", "refreshing")),
    "builds_by_outcome": (("counter", "semantic_refreshes", "outcome"),),
    "active_model": (("semantic", "model"),),
    "projection_version": (("semantic", "projection_version"),),
    "ranking_version": (("semantic", "ranking_version"),),
    "cursor_invalidations": (("where", "tool_calls", "outcome", "invalid_cursor"),
                             ("counter", "cursor_invalidations", "reason")),
    "byte_cap_hits": (("counter", "output_cap_hits", "tool"),),
    "admission_rejections": (("counter", "admission_rejections", "reason"),),
    "rate_limit_rejections": (("where", "rate_limit_rejections", "", ""),),
    "tool_outcomes": (("counter", "tool_calls", "outcome"),),
    "generation_states": (("semantic", "lifecycle.states"),),
    "lifecycle_steps": (("semantic", "lifecycle.steps"),),
    "generations_kept_fresh": (("counter", "index_propagated_rows", "target"),),
    "shadow_probes": (("counter", "shadow_probes", "outcome"),),
    "shadow_mean_overlap": (("semantic", "shadow.mean_overlap"),),
    "shadow_latency": (("timing", "shadow_rank_seconds", "role"),),
}


def _dig(data: Mapping[str, Any] | None, dotted: str) -> Any:
    cur: Any = data
    for part in dotted.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return bounded(cur)


def bounded(value: Any) -> Any:
    """Numbers, booleans and short words pass; anything else (text, containers) is dropped to ``None``."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value[:_MAX_LABEL_LEN]
    if isinstance(value, Mapping):
        return {str(k)[:_MAX_LABEL_LEN]: bounded(v) for k, v in list(value.items())[:64]}
    return None


def _source_value(metrics: Metrics, semantic: Mapping[str, Any] | None, source: tuple) -> Any:
    kind = source[0]
    if kind == "semantic":
        return _dig(semantic, source[1])
    if kind == "counter":
        return metrics.by_label(source[1], source[2]) or None
    if kind == "where":
        total = metrics.total(source[1], **({source[2]: source[3]} if source[2] else {}))
        return {source[3] or source[1]: total} if total else None
    stages = [t for t in metrics.snapshot()["timings"] if t["name"] == source[1]]
    return {
        t["labels"].get(source[2], ""): {k: t[k] for k in ("count", "p50_seconds", "p95_seconds", "max_seconds")}
        for t in stages
    } or None


def observability(metrics: Metrics, semantic: Mapping[str, Any] | None) -> dict[str, Any]:
    """The observability view: one entry per :data:`P2_ITEMS` name, ``None`` when nothing reports it.

    A scalar source wins alone; dict sources are merged (e.g. fallbacks by
    cause from the hybrid layer and from admission control).
    """
    out: dict[str, Any] = {}
    for item, sources in P2_ITEMS.items():
        value: Any = None
        for source in sources:
            part = _source_value(metrics, semantic, source)
            if part is None:
                continue
            if isinstance(part, dict) and isinstance(value, dict):
                value = {**value, **{k: value.get(k, 0) + v if isinstance(v, int) and isinstance(value.get(k), int)
                                     else v for k, v in part.items()}}
            elif value is None:
                value = part
        out[item] = value
    return out
