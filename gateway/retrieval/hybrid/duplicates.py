"""Write-time duplicate candidates for ``create_lesson_draft`` (advisory, never blocking).

Contract: docs/hybrid-search.md#write-time-duplicate-candidates. One
similarity threshold always misses by a hair, and the moment of saving is the
cheapest time to catch a duplicate. So the write
response carries ``duplicate_candidates``: up to three existing Lessons whose
facets are close to the new one, in two labelled bands, with their scores.

Rules:

* computed AFTER the write succeeded, from the ready snapshot only, within a
  time budget (``S3RM_DUPLICATE_BUDGET_SECONDS``); nothing is merged;
* score = mean over the three facets of the cosine between the new Lesson's
  facet vector and the existing one's (empty facets count 0), so it lies in
  [-1, 1] and is reported clipped to [0, 1];
* bands from the profile calibration (ranking ``rrf_v10``): ``near_identical`` at or
  above ``Calibration.near_identical``, ``same_topic`` at or above
  ``Calibration.same_topic``; below that, nothing is listed;
* titles are read fresh from MediaWiki (the index holds no text, docs/retrieval.md#index-records);
  candidates that vanished are skipped;
* the field is always present with a ``status``: ``ok`` (ran; items may be
  empty), ``disabled`` (no provider), ``not_ready`` (no usable snapshot),
  ``saturated`` (embedding queue full or no checker slot free; the check
  waits in the ordinary embedding lane, behind queries, within its budget), ``timeout``
  (budget exhausted), ``skipped`` (nothing to compare: all facets empty),
  ``error`` (anything else). It never raises, blocks past its budget, or
  fails the write.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Mapping

import numpy as np

from gateway.domain.model import LessonPage
from gateway.retrieval.embedding.errors import EmbeddingError, EmbeddingSaturated
from gateway.config.profiles import FACETS

__all__ = ["DuplicateChecker", "MAX_CANDIDATES", "duplicate_scores", "band_of"]

log = logging.getLogger("s3rm.duplicates")

MAX_CANDIDATES = 3
#: Duplicate checks that may run at once; more are answered ``saturated`` at once.
MAX_CONCURRENT_CHECKS = 2


def duplicate_scores(snap: Any, vectors: Mapping[str, np.ndarray]) -> np.ndarray:
    """The duplicate score of every row of ``snap`` against a new Lesson: float32 ``(len(snap),)``.

    ``vectors`` maps each NON-EMPTY facet of the new Lesson (of :data:`FACETS`)
    to its ``(dims,)`` document vector; a facet left out (empty) adds 0, as
    does an empty facet of an indexed Lesson (its stored vector is all zero).
    The sum is divided by ``len(FACETS)`` always: the mean facet cosine, in
    [-1, 1], unclipped. Row order is the snapshot's (``snap.ids``).
    """
    scores = np.zeros(len(snap), dtype=np.float32)
    for facet, vector in vectors.items():
        scores += snap.scores(facet, vector)
    scores /= len(FACETS)
    return scores


def band_of(score: float, calibration: Any) -> str | None:
    """``near_identical`` / ``same_topic`` for a duplicate score under ``calibration``; None below both."""
    if score >= calibration.near_identical:
        return "near_identical"
    if score >= calibration.same_topic:
        return "same_topic"
    return None


class DuplicateChecker:
    """Finds duplicate candidates for a just-written Lesson using a :class:`RetrievalService`."""

    def __init__(self, service: Any):
        self.service = service
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT_CHECKS)
        self._pool = ThreadPoolExecutor(max_workers=MAX_CONCURRENT_CHECKS, thread_name_prefix="s3rm-dup")

    def check(self, repository: Any, lesson_id: str, page: LessonPage, *,
              budget_seconds: float | None = None) -> dict[str, Any]:
        """``{"status": ..., "items": [{"id", "title", "score", "band"}, ...]}`` within the budget.

        ``page`` is the Lesson as written; ``lesson_id`` is excluded from the
        candidates. Never raises.
        """
        budget = self.service.settings.duplicate_budget_seconds if budget_seconds is None else budget_seconds
        try:
            if not self.service.enabled:
                return _result("disabled")
            snap = self.service.refresher.current()
            if snap is None or self.service.semantic_status() in ("building", "unavailable", "disabled"):
                return _result("not_ready")
            if not self._slots.acquire(blocking=False):
                return _result("saturated")
        except Exception:  # pragma: no cover - advisory field only
            log.exception("duplicate check failed before it started")
            return _result("error")
        deadline = time.monotonic() + budget
        try:
            future = self._pool.submit(self._run, repository, snap, lesson_id, page, deadline)
        except RuntimeError:
            self._slots.release()
            return _result("error")
        future.add_done_callback(lambda _f: self._slots.release())
        try:
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            self._count("timeout")
            return _result("timeout")
        except Exception as exc:  # pragma: no cover - advisory field only
            log.warning("duplicate check failed exception=%s", type(exc).__name__)
            return _result("error")

    def _run(self, repository: Any, snap, lesson_id: str, page: LessonPage, deadline: float) -> dict[str, Any]:
        service = self.service
        doc = service.builder.build(lesson_id, page)
        texts = [(facet, doc.text(facet)) for facet in FACETS if doc.text(facet)]
        if not texts or len(snap) == 0:
            return _result("skipped" if not texts else "ok")
        try:
            matrix = service.provider.embed_documents([t for _, t in texts], facets=[f for f, _ in texts],
                                                      timeout=max(0.01, deadline - time.monotonic()), retries=0,
                                                      lane="background")
        except EmbeddingSaturated as exc:
            status = "timeout" if exc.waited else "saturated"  # the budget ran out waiting vs a full queue
            self._count(status)
            return _result(status)
        except EmbeddingError as exc:
            self._count(exc.code)
            return _result("timeout" if exc.code == "timeout" else "error")
        scores = duplicate_scores(snap, {facet: matrix[row] for row, (facet, _) in enumerate(texts)})
        cal = service.calibration
        hits = snap.top(scores, MAX_CANDIDATES, exclude=(lesson_id,), min_score=cal.same_topic)
        picked: list[tuple[str, float]] = [(hit.lesson_id, hit.score) for hit in hits]
        if not picked:
            return _result("ok")
        if time.monotonic() > deadline:
            return _result("timeout")
        fresh = repository.get_snapshots([i for i, _ in picked])
        items = []
        for other, score in picked:
            snapshot = fresh.get(other)
            if snapshot is None:
                continue
            items.append({
                "id": other,
                "title": snapshot.page.fields.get("title", "")[:200],
                "score": round(min(1.0, max(0.0, score)), 4),
                "band": band_of(score, cal),
            })
        self._count("ok")
        return {"status": "ok", "items": items}

    def _count(self, outcome: str) -> None:
        metrics = self.service.metrics
        if metrics is not None:
            metrics.incr("duplicate_checks", outcome=outcome)

    def close(self) -> None:
        """Stop the checker's threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def _result(status: str) -> dict[str, Any]:
    return {"status": status, "items": []}
