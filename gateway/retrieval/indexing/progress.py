"""How far the index is: Lessons ready, Lessons it will hold, an estimate of the time left.

:class:`BuildProgress` is fed by the embedding provider
(:meth:`~gateway.retrieval.embedding.client.EmbeddingProvider.reporting`) while the
refresher embeds, and read by ``/readyz`` and the ranked tools
(docs/hybrid-search.md#build-progress). Counts only, never text. The two counts
mean the same in every state (a first build, a full reconcile, a refresh of
Lessons just created or edited, idle):

* ``total`` — Lessons the index holds once the refresh being embedded is
  swapped in (a full build or reconcile: every Lesson it examined; a refresh of
  some Lessons: the serving index's Lessons plus the new ones among them; idle:
  the Lesson count of the last scan, kept current by later refreshes);
* ``indexed`` — those of them searchable by meaning at their current text:
  the serving index's Lessons, less the quarantined ones and those whose new
  text is being embedded, plus the refresh's Lessons in proportion to their
  facet texts resolved so far (from the memo, the vector cache or the model);
* ``eta_seconds`` — facet texts still to embed × the model's seconds per text
  in this refresh so far; None until the model has answered once.

Lessons of a refresh not resolved yet count as ``pending`` too
(:meth:`BuildProgress.remaining`).
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
    def tracking(self, provider: Any, examined: int, upserts: Sequence[Any], *, new: int | None = None,
                 full: bool = True) -> Iterator[None]:
        """Track the embedding of ``upserts`` (projections) out of ``examined`` Lessons during the block;
        ``new`` of the upserts are not in the serving index (default: all of them); ``full`` says the
        refresh examined every Lesson (a build or reconcile), not only some."""
        texts = sum(1 for doc in upserts for facet in INDEX_FACETS if doc.text(facet))
        with self._lock:
            self._run = {"examined": examined, "changed": len(upserts), "texts": texts, "done": 0,
                         "sent": 0, "started": self._clock(), "full": full,
                         "new": len(upserts) if new is None else new}
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

    def _ready(self, run: dict[str, Any]) -> int:
        """Lessons of ``run`` whose vectors are ready (in proportion to its facet texts resolved)."""
        texts, done = run["texts"], min(run["done"], run["texts"])
        return run["changed"] if texts == 0 else run["changed"] * done // texts

    def remaining(self) -> int | None:
        """Lessons of the refresh being embedded whose vectors are not ready yet; None when none is."""
        with self._lock:
            run = self._run
            return None if run is None else run["changed"] - self._ready(run)

    def view(self) -> dict[str, Any] | None:
        """``{"examined", "changed", "new", "ready", "full", "eta_seconds"}`` of the refresh being
        embedded, None when none is."""
        with self._lock:
            run = self._run
            if run is None:
                return None
            texts, done = run["texts"], min(run["done"], run["texts"])
            eta = None
            if run["sent"]:
                per_text = (self._clock() - run["started"]) / run["sent"]
                eta = min(MAX_ETA_SECONDS, round((texts - done) * per_text))
            return {"examined": run["examined"], "changed": run["changed"], "new": run["new"],
                    "ready": self._ready(run), "full": run["full"], "eta_seconds": eta}

    def fields(self, held: int, jailed: int, lessons: int | None) -> dict[str, Any]:
        """The ``indexed`` / ``total`` / ``eta_seconds`` health fields (module docstring).

        ``held`` is the serving snapshot's size (0 while none serves), ``jailed``
        its quarantined Lessons, ``lessons`` the Lesson count of the last scan.
        """
        run = self.view()
        if run is None:
            return {"indexed": held - jailed, "total": lessons, "eta_seconds": None}
        unready = run["changed"] - run["ready"]
        if run["full"]:
            total = run["examined"]
            indexed = total - unready - jailed
        else:
            total = held + run["new"]
            indexed = held - jailed - (run["changed"] - run["new"]) + run["ready"]
        return {"indexed": max(0, min(indexed, total)), "total": total, "eta_seconds": run["eta_seconds"]}
