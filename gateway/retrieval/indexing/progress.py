"""How far the running refresh is: Lessons ready, Lessons in it, an estimate of the time left.

:class:`BuildProgress` is fed by the embedding provider
(:meth:`~gateway.retrieval.embedding.client.EmbeddingProvider.reporting`) while the
refresher embeds, and read by ``/readyz`` and the ranked tools
(docs/hybrid-search.md#build-progress). Counts only, never text.

* ``total`` — Lessons the refresh examined (a full build: every Lesson);
* ``indexed`` — those whose vectors are ready: the unchanged ones at once,
  the changed ones in proportion to their facet texts resolved so far (from
  the memo, the vector cache or the model);
* ``eta_seconds`` — facet texts still to embed × the model's seconds per text
  in this refresh so far; None until the model has answered once.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from gateway.config.profiles import INDEX_FACETS

__all__ = ["BuildProgress", "MAX_BUILD_LESSONS", "MAX_ETA_SECONDS"]

#: Upper bound of ``total`` (the refresher's scan bound: 20,000 batches of 50 Lessons).
MAX_BUILD_LESSONS = 1_000_000
#: Estimates beyond 30 days are reported as 30 days.
MAX_ETA_SECONDS = 30 * 86400


class BuildProgress:
    """The progress of the one refresh being embedded (thread-safe)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._run: dict[str, Any] | None = None

    @contextmanager
    def tracking(self, provider: Any, examined: int, upserts: Sequence[Any]) -> Iterator[None]:
        """Track the embedding of ``upserts`` (projections) out of ``examined`` Lessons during the block."""
        texts = sum(1 for doc in upserts for facet in INDEX_FACETS if doc.text(facet))
        with self._lock:
            self._run = {"examined": examined, "changed": len(upserts), "texts": texts, "done": 0,
                         "sent": 0, "started": self._clock()}
        try:
            with provider.reporting(self._advance):
                yield
        finally:
            with self._lock:
                self._run = None

    def _advance(self, count: int, sent: bool) -> None:
        with self._lock:
            run = self._run
            if run is None:
                return
            if not sent and run["sent"] == 0:
                run["started"] = self._clock()  # the model's rate counts from after the cached texts
            run["done"] += count
            if sent:
                run["sent"] += count

    def view(self) -> dict[str, Any] | None:
        """``{"indexed", "total", "eta_seconds"}`` of the refresh being embedded, None when none is."""
        with self._lock:
            run = self._run
            if run is None:
                return None
            texts, done = run["texts"], min(run["done"], run["texts"])
            ready = run["changed"] if texts == 0 else run["changed"] * done // texts
            eta = None
            if run["sent"]:
                per_text = (self._clock() - run["started"]) / run["sent"]
                eta = min(MAX_ETA_SECONDS, round((texts - done) * per_text))
            return {"indexed": run["examined"] - run["changed"] + ready, "total": run["examined"],
                    "eta_seconds": eta}

    def fields(self, serving: int, lessons: int | None, building: bool) -> dict[str, Any]:
        """The ``indexed`` / ``total`` / ``eta_seconds`` health fields.

        ``serving`` is the active snapshot's size. While no snapshot serves
        (``building``), ``indexed`` follows the build; otherwise it stays the
        serving count and only ``total``/``eta_seconds`` follow a running refresh.
        """
        run = self.view()
        if run is None:
            return {"indexed": serving, "total": lessons, "eta_seconds": None}
        return {"indexed": run["indexed"] if building else serving, "total": run["total"],
                "eta_seconds": run["eta_seconds"]}
