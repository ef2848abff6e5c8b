"""The ONE bounded-queue gate: ``slots`` concurrent holders plus at most ``queue_limit`` waiters.

Two users build on :class:`BoundedGate`:

* the admission classes ``read`` / ``write`` / ``semantic``
  (:class:`gateway.ops.admission.AdmissionClass`, which turns a refusal into
  HTTP 429/503, see docs/operations.md#admission), and
* the embedding provider's shared gate
  (:class:`gateway.retrieval.embedding.client.EmbeddingGate`, which turns a refusal
  into ``EmbeddingSaturated``, see docs/retrieval.md#resource-isolation).

Rules (thread-safe; every wait is bounded):

* :meth:`BoundedGate.acquire` takes a slot at once when one is free and nobody
  waits; otherwise it joins the queue when fewer than ``queue_limit`` callers
  wait, and else it is refused with reason ``queue_full``. A queued caller that
  gets no slot within its timeout is refused with reason ``queue_timeout``.
  Each released slot wakes a waiter (order among waiters is not strictly FIFO).
* :meth:`BoundedGate.try_acquire` never waits: a free slot or ``False``.
* **Priority lane.** ``reserved`` of the ``slots`` are kept for callers that
  pass ``priority=True`` (for example query embeddings ahead of indexing): a
  normal caller is admitted only while fewer than ``slots - reserved`` slots
  are in use, and never while a priority caller waits; a priority caller may
  use every slot and passes queued normal callers. Both lanes share the one
  ``queue_limit``. With ``reserved=0`` and no priority callers (every current
  user) the gate behaves exactly as a plain bounded semaphore with a queue.

A refusal raises ``self.rejection(reason)``: :class:`GateRejected` here; users
override :meth:`BoundedGate.rejection` to raise their own error type. Counters
only grow; :meth:`BoundedGate.stats` reports counts (no request content).
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from gateway.core.errors import GatewayError

__all__ = ["BoundedGate", "GateRejected", "QUEUE_FULL", "QUEUE_TIMEOUT"]

#: Refusal reasons (also the ``data.code`` of an admission 429/503).
QUEUE_FULL = "queue_full"
QUEUE_TIMEOUT = "queue_timeout"


class GateRejected(GatewayError):
    """The gate refused a caller; ``gate`` names the gate, ``reason`` is ``queue_full`` | ``queue_timeout``."""

    def __init__(self, gate: str, reason: str) -> None:
        super().__init__(f"{gate}: {reason}")
        self.gate = gate
        self.reason = reason


class BoundedGate:
    """``slots`` holders, ``queue_limit`` waiters, optional ``reserved`` priority slots.

    Args:
        name: short identifier used in errors and logs (``read``, ``embedding``, ...).
        slots: concurrent holders, ≥ 1.
        queue_limit: callers allowed to wait, ≥ 0 (0: never wait).
        timeout_seconds: default wait of :meth:`acquire` in seconds (> 0), or
            ``None`` when every call passes its own ``timeout``.
        reserved: slots only priority callers may take, ``0 ≤ reserved < slots``.
        monotonic: clock in seconds (injectable for tests).

    Raises:
        ValueError: on limits outside those ranges.
    """

    def __init__(self, name: str, slots: int, queue_limit: int, *, timeout_seconds: float | None = None,
                 reserved: int = 0, monotonic: Callable[[], float] = time.monotonic):
        if slots < 1 or queue_limit < 0 or not (0 <= reserved < slots):
            raise ValueError("slots must be ≥ 1, queue_limit ≥ 0 and 0 ≤ reserved < slots")
        if timeout_seconds is not None and timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be > 0")
        self.name = name
        self.slots = slots
        self.queue_limit = queue_limit
        self.timeout_seconds = timeout_seconds
        self.reserved = reserved
        self._monotonic = monotonic
        self._cond = threading.Condition()
        self._in_use = 0
        self._waiting = 0
        self._waiting_priority = 0
        self.admitted = 0
        self.queued = 0
        self.rejected_full = 0
        self.rejected_timeout = 0
        self.max_wait_seconds = 0.0

    # ------------------------------------------------------------- refusal
    def rejection(self, reason: str) -> Exception:
        """The exception a refused caller gets (override point); ``reason`` is a ``QUEUE_*`` constant."""
        return GateRejected(self.name, reason)

    # ------------------------------------------------------------- acquire
    def _may_queue(self) -> bool:
        """Whether one more caller may join the queue (override point; called with the lock held).

        Here: fewer than ``queue_limit`` wait. :class:`gateway.ops.admission.AdmissionClass` adds
        its expected-wait rule (docs/operations.md#admission)."""
        return self._waiting < self.queue_limit

    def _free_for(self, priority: bool) -> bool:
        if priority:
            return self._in_use < self.slots
        return self._in_use < self.slots - self.reserved and self._waiting_priority == 0

    def acquire(self, timeout: float | None = None, *, priority: bool = False) -> None:
        """Take a slot, waiting at most ``timeout`` seconds (default ``timeout_seconds``) in the queue.

        Raises ``self.rejection("queue_full")`` when the queue is full and
        ``self.rejection("queue_timeout")`` when the wait runs out.
        """
        wait = self.timeout_seconds if timeout is None else max(0.0, timeout)
        if wait is None:
            raise ValueError(f"gate {self.name!r} has no default timeout; pass one")
        with self._cond:
            ahead = self._waiting_priority if priority else self._waiting
            if ahead == 0 and self._free_for(priority):
                self._in_use += 1
                self.admitted += 1
                return
            if not self._may_queue():
                self.rejected_full += 1
                raise self.rejection(QUEUE_FULL)
            self._waiting += 1
            self._waiting_priority += priority
            self.queued += 1
            started = self._monotonic()
            deadline = started + wait
            try:
                while not self._free_for(priority):
                    remaining = deadline - self._monotonic()
                    if remaining <= 0:
                        self.rejected_timeout += 1
                        raise self.rejection(QUEUE_TIMEOUT)
                    self._cond.wait(remaining)
                self._in_use += 1
                self.admitted += 1
                self.max_wait_seconds = max(self.max_wait_seconds, self._monotonic() - started)
            finally:
                self._waiting -= 1
                self._waiting_priority -= priority
                if priority and self._waiting_priority == 0:
                    self._cond.notify_all()  # normal waiters held back by this one may proceed

    def try_acquire(self, *, priority: bool = False) -> bool:
        """Take a free slot without waiting; ``False`` (counted as ``rejected_full``) when none is free."""
        with self._cond:
            if self._free_for(priority):
                self._in_use += 1
                self.admitted += 1
                return True
            self.rejected_full += 1
            return False

    def release(self) -> None:
        """Return a slot (exactly once per successful acquire)."""
        with self._cond:
            self._in_use = max(0, self._in_use - 1)
            if self.reserved or self._waiting_priority:
                self._cond.notify_all()  # the woken waiter must be one that may take this slot
            else:
                self._cond.notify()

    @contextmanager
    def slot(self, timeout: float | None = None, *, priority: bool = False) -> Iterator[None]:
        """``with gate.slot():`` — :meth:`acquire` (may raise the rejection), always :meth:`release`."""
        self.acquire(timeout, priority=priority)
        try:
            yield
        finally:
            self.release()

    # --------------------------------------------------------------- state
    def all_busy(self) -> bool:
        """True when every slot is held (the next caller would have to wait)."""
        with self._cond:
            return self._in_use >= self.slots

    def saturated(self) -> bool:
        """True when every slot is busy and the queue is full (the next caller is refused)."""
        with self._cond:
            return self._in_use >= self.slots and self._waiting >= self.queue_limit

    def stats(self) -> dict[str, Any]:
        """Counts and limits: ``state`` (``ok`` | ``busy`` | ``saturated``), ``in_use``, ``waiting``,
        ``slots``, ``queue_limit``, ``admitted``, ``queued``, ``rejected`` (= ``rejected_full`` +
        ``rejected_timeout``), ``rejected_full``, ``rejected_timeout``, ``max_wait_seconds``."""
        with self._cond:
            if self._in_use >= self.slots and self._waiting >= self.queue_limit:
                state = "saturated"
            elif self._in_use >= self.slots:
                state = "busy"
            else:
                state = "ok"
            return {
                "state": state,
                "in_use": self._in_use,
                "waiting": self._waiting,
                "slots": self.slots,
                "queue_limit": self.queue_limit,
                "admitted": self.admitted,
                "queued": self.queued,
                "rejected": self.rejected_full + self.rejected_timeout,
                "rejected_full": self.rejected_full,
                "rejected_timeout": self.rejected_timeout,
                "max_wait_seconds": round(self.max_wait_seconds, 4),
            }
