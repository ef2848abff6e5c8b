"""In-process metrics: counters and latency summaries with bounded labels.

Labels are restricted to short identifiers (tool name, outcome code, stage);
never query text, arguments or Lesson content (DESIGN.md §4 "Privacy",
CHECKLIST P2). Thread-safe; one instance per process.
"""
from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

__all__ = ["Metrics"]

_MAX_LABEL_LEN = 64


def _key(name: str, labels: dict[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted((k, str(v)[:_MAX_LABEL_LEN]) for k, v in labels.items()))


class Metrics:
    """Process-wide counters (``incr``) and latency summaries (``observe``, seconds)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[Any, int] = defaultdict(int)
        self._timings: dict[Any, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])  # count, sum, max

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

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Return a JSON-friendly copy: ``{"counters": [...], "timings": [...]}``."""
        with self._lock:
            counters = [{"name": n, "labels": dict(l), "value": v} for (n, l), v in self._counters.items()]
            timings = [
                {"name": n, "labels": dict(l), "count": c, "sum_seconds": s, "max_seconds": m}
                for (n, l), (c, s, m) in self._timings.items()
            ]
        return {"counters": counters, "timings": timings}

    def counter(self, name: str, **labels: str) -> int:
        """Current value of one counter (0 when never incremented)."""
        with self._lock:
            return self._counters.get(_key(name, labels), 0)
