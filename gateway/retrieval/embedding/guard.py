"""What stands between callers and the embedding server: the shared gate and the circuit breaker.

* :class:`EmbeddingGate` — the provider's one bounded gate for the three
  :data:`LANES` (queries ahead of index batches ahead of write-time duplicate
  checks), a :class:`~gateway.ops.gate.BoundedGate` that refuses with
  :class:`~gateway.retrieval.embedding.errors.EmbeddingSaturated`
  (docs/retrieval.md#resource-isolation);
* :class:`CircuitBreaker` — opens after :data:`BREAKER_FAILURES` consecutive
  failures and lets one trial call through after :data:`BREAKER_RESET_SECONDS`.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from gateway.ops.gate import QUEUE_FULL, BoundedGate
from gateway.retrieval.embedding.errors import CircuitOpen, EmbeddingSaturated

__all__ = ["LANES", "EmbeddingGate", "CircuitBreaker", "BREAKER_FAILURES", "BREAKER_RESET_SECONDS"]

BREAKER_FAILURES = 5
BREAKER_RESET_SECONDS = 30.0

#: Embedding lanes, in priority order: read requests, the index refresher, write-time duplicate checks.
LANES = ("query", "index", "background")


# ------------------------------------------------------------ admission gate
class EmbeddingGate(BoundedGate):
    """The provider's ONE shared gate (a :class:`~gateway.ops.gate.BoundedGate`) for queries and indexing.

    ``acquire(timeout)`` waits at most ``timeout`` seconds for one of
    ``slots`` slots. When ``queue_limit`` callers are already waiting, or the
    wait runs out, it raises :class:`EmbeddingSaturated`
    (docs/retrieval.md#resource-isolation). ``release()`` frees a slot. Thread-safe.
    """

    def __init__(self, slots: int, queue_limit: int, *, reserved: int = 0):
        super().__init__("embedding", slots, queue_limit, reserved=reserved)

    def rejection(self, reason: str) -> EmbeddingSaturated:
        """:class:`EmbeddingSaturated` for a full queue or a wait that ran out."""
        if reason == QUEUE_FULL:
            return EmbeddingSaturated("embedding queue is full")
        error = EmbeddingSaturated("no embedding slot became free in time")
        error.waited = True
        return error

    def stats(self) -> dict[str, int]:
        """``{"in_use", "waiting", "slots", "queue_limit", "rejected"}`` (counts only)."""
        counts = super().stats()
        return {key: counts[key] for key in ("in_use", "waiting", "slots", "queue_limit", "rejected")}


# ----------------------------------------------------------- circuit breaker
# Ours, not pybreaker's: pybreaker wraps one whole call under its lock (calls through a breaker would run
# one at a time; ours is asked before a gate slot is taken and told when the pooled HTTP call ends), has no
# way to hand back a half-open trial that was never sent (abandon), and reads a clock tests cannot set.
class CircuitBreaker:
    """Consecutive-failure breaker: ``closed`` → ``open`` → ``half_open`` → ``closed``.

    After ``failures`` consecutive failures the breaker opens for
    ``reset_seconds``; then exactly one trial call may pass (half-open). Its
    success closes the breaker, its failure re-opens it. ``clock`` is
    ``time.monotonic`` (injectable for tests).
    """

    def __init__(self, failures: int = BREAKER_FAILURES, reset_seconds: float = BREAKER_RESET_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.failures = failures
        self.reset_seconds = reset_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._consecutive = 0
        self._opened_at: float | None = None
        self._trial_running = False

    @property
    def state(self) -> str:
        """``closed``, ``open`` or ``half_open``."""
        with self._lock:
            return self._state_locked()

    def _state_locked(self) -> str:
        if self._opened_at is None:
            return "closed"
        if self._clock() - self._opened_at >= self.reset_seconds:
            return "half_open"
        return "open"

    def before_call(self) -> bool:
        """Raise :class:`CircuitOpen` unless a call may proceed now; True when this call is the
        half-open trial (hand it back with :meth:`abandon` if it is never sent)."""
        with self._lock:
            state = self._state_locked()
            if state == "closed":
                return False
            if state == "half_open" and not self._trial_running:
                self._trial_running = True
                return True
            raise CircuitOpen("embedding provider circuit is open")

    def record_success(self) -> None:
        """A call succeeded: close the breaker."""
        with self._lock:
            self._consecutive = 0
            self._opened_at = None
            self._trial_running = False

    def abandon(self) -> None:
        """The half-open trial (``before_call`` returned True) was never sent (e.g. no gate slot):
        the next call may try instead. Counts neither success nor failure."""
        with self._lock:
            self._trial_running = False

    def record_failure(self) -> None:
        """A call failed (unavailable or timed out): count it, open when the threshold is hit."""
        with self._lock:
            self._consecutive += 1
            if self._trial_running or self._consecutive >= self.failures:
                self._opened_at = self._clock()
            self._trial_running = False
