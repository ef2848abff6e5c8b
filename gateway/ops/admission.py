"""Admission control: bounded concurrency and queues per class (read, write, semantic).

Contract: docs/operations.md#admission, docs/operations.md#health,
docs/retrieval.md#resource-isolation and docs/retrieval.md#fallback.

Three independent classes, each with its own limits (``GatewayConfig``):

===========  ==============================  ===========================================
class        limits                          over capacity
===========  ==============================  ===========================================
``read``     S3RM_ADMISSION_READ_*           expected wait over the deadline, or queue
                                             places all taken → HTTP 429; wait ran out → 503
``write``    S3RM_ADMISSION_WRITE_*          the same rule with the write limits
``semantic`` S3RM_ADMISSION_SEMANTIC_*       never waits, never an HTTP error: a first
                                             page falls back to legacy at once (docs/retrieval.md#resource-isolation); a
                                             continued hybrid cursor gets the retryable
                                             tool error ``semantic_saturated``
===========  ==============================  ===========================================

A 429/503 is :class:`AdmissionRejected`, a :class:`~gateway.core.errors.JsonRpcError`
with code :data:`OVERLOADED` (-32003), ``data = {"code": "queue_full" |
"queue_timeout", "class": "read" | "write", "retryable": true,
"retry_after_seconds": n}`` and a ``Retry-After: n`` header. The classes
share nothing, so saturating one never delays another. A semantic call also
holds a read slot (it is a read), but never waits for a semantic slot.

The hybrid path (owned by the retrieval layer) asks for a semantic slot with
:func:`semantic_permit`; the dispatcher publishes the process
:class:`Admission` for the duration of each tool call in a context variable,
so handlers need no extra argument::

    with semantic_permit(continuing=cursor is not None) as admitted:
        if not admitted:          # first page only: answer from legacy now
            return legacy_page(..., fallback_cause="saturated")
        ...                        # hybrid work

``semantic_permit`` also reports saturation of the embedding provider's own
shared gate when the retrieval layer attached its stats
(:meth:`Admission.attach_semantic_gate`). The wiki connection pool is not a
shared bottleneck: :class:`~gateway.wiki.client.WikiClient` keeps one HTTP
session per thread, so connections never outnumber the gunicorn threads
(which exceed read + write concurrency plus queue places, ``GatewayConfig``
enforces it) plus the threads that fan one request's MediaWiki calls out: the
repository's search pool and hybrid's full-text workers
(docs/hybrid-search.md#read-ahead).

Logs and metrics carry class names, counts and reasons only.
"""
from __future__ import annotations

import contextvars
import logging
import math
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

from gateway.core.errors import JsonRpcError, ToolError
from gateway.ops.gate import QUEUE_FULL, QUEUE_TIMEOUT, BoundedGate

__all__ = [
    "OVERLOADED",
    "CLASSES",
    "Admission",
    "AdmissionClass",
    "AdmissionRejected",
    "semantic_permit",
    "semantic_saturated",
    "current_admission",
]

log = logging.getLogger("s3rm.admission")

#: JSON-RPC error code of every 429/503 answered by admission control or rate limiting.
OVERLOADED = -32003
#: The admission classes, in reporting order.
CLASSES = ("read", "write", "semantic")

#: The keys of :meth:`AdmissionClass.stats` (the /metrics ``admission`` entries).
_CLASS_STATS = ("state", "in_use", "waiting", "admitted", "queued", "rejected_full", "rejected_timeout",
                "max_wait_seconds")
#: Weight of the newest call in the service-time estimate of :class:`AdmissionClass` (about the last 10 calls).
SERVICE_WEIGHT = 0.1
#: A longer call counts as this many seconds in the estimate (one stuck call must not refuse a class for long).
MAX_SERVICE_SAMPLE_SECONDS = 60.0
#: At most one "admission refused" log line per class and reason per this many seconds.
REFUSAL_LOG_SECONDS = 1.0

_CURRENT: contextvars.ContextVar["Admission | None"] = contextvars.ContextVar("s3rm_admission", default=None)


class AdmissionRejected(JsonRpcError):
    """A read or write call refused before it ran: 429 (queue full) or 503 (queue wait timed out).

    ``headers`` holds ``Retry-After`` (whole seconds); the JSON-RPC error body
    carries ``data.code`` (``queue_full`` | ``queue_timeout`` | ``rate_limited``),
    ``data.class``, ``data.retryable`` (always true) and ``data.retry_after_seconds``.
    """

    def __init__(self, klass: str, reason: str, status: int, retry_after: int, message: str):
        super().__init__(
            OVERLOADED,
            message,
            http_status=status,
            data={"code": reason, "class": klass, "retryable": True, "retry_after_seconds": retry_after},
        )
        self.klass = klass
        self.reason = reason
        self.retry_after = retry_after
        self.headers = {"Retry-After": str(retry_after)}


class AdmissionClass(BoundedGate):
    """One class: a :class:`~gateway.ops.gate.BoundedGate` of ``concurrency`` slots plus a queue that a
    caller joins only while its expected wait fits its deadline (docs/operations.md#admission).

    The rule: with every slot busy, a caller that would be ``p``-th in the
    queue expects to wait ``p × s / concurrency`` seconds, ``s`` being the
    recent service time of this class (an exponentially weighted mean of
    the seconds a slot was held, :meth:`observe`, weight :data:`SERVICE_WEIGHT`
    per call; unknown before the first call ends, then the caller queues). It queues when that
    is at most ``timeout_seconds`` (its deadline) and fewer than ``queue``
    callers wait; ``queue`` is the memory bound (each waiting call holds a
    gunicorn thread), not the rule. Otherwise it gets 429 ``queue_full`` at
    once; a queued caller that gets no slot by the deadline gets 503
    ``queue_timeout``.

    :meth:`acquire` admits, queues or raises :class:`AdmissionRejected`;
    :meth:`try_acquire` never waits (the semantic class). Thread-safe; counters only grow.
    """

    def __init__(self, name: str, concurrency: int, queue: int, timeout_seconds: float, *,
                 monotonic: Callable[[], float] = time.monotonic):
        if concurrency < 1 or queue < 0 or timeout_seconds <= 0:
            raise ValueError("concurrency must be ≥ 1, queue ≥ 0 and timeout > 0")
        super().__init__(name, concurrency, queue, timeout_seconds=timeout_seconds, monotonic=monotonic)
        self.service_seconds: float | None = None
        self.rejected_delay = 0
        self.rejected_early = 0

    def observe(self, seconds: float) -> None:
        """Fold the seconds one admitted call held its slot into the service-time estimate."""
        seconds = min(max(0.0, seconds), MAX_SERVICE_SAMPLE_SECONDS)
        with self._cond:
            s = self.service_seconds
            self.service_seconds = seconds if s is None else s + SERVICE_WEIGHT * (seconds - s)

    def expected_wait(self, position: int) -> float:
        """Seconds the ``position``-th waiter (1 = next) should wait with every slot busy; 0 when unknown."""
        s = self.service_seconds
        return 0.0 if s is None else position * s / self.slots

    def _too_slow(self) -> bool:
        """The next waiter's expected wait exceeds the deadline (lock held)."""
        return self.expected_wait(self._waiting + 1) > self.timeout_seconds

    def _may_queue(self) -> bool:
        if not super()._may_queue():
            return False
        if self._too_slow():
            self.rejected_delay += 1
            return False
        return True

    def refuse_now(self) -> AdmissionRejected | None:
        """The 429 ``queue_full`` a caller arriving now gets, counted as one (``rejected_full``,
        ``rejected_delay`` by the rule, and ``rejected_early``), or ``None`` — nothing counted, nothing
        held — when it would take a slot or queue. Never waits: the gateway's worker asks it before a
        request thread is taken (docs/operations.md#early-refusal); a request it lets through
        decides again in :meth:`acquire`."""
        with self._cond:
            if (self._waiting == 0 and self._free_for(False)) or self._may_queue():
                return None
            self.rejected_full += 1
            self.rejected_early += 1
            return self.rejection(QUEUE_FULL)

    def saturated(self) -> bool:
        """True when every slot is busy and the next caller would be refused (places or expected wait)."""
        with self._cond:
            return self._in_use >= self.slots and (self._waiting >= self.queue_limit or self._too_slow())

    @property
    def concurrency(self) -> int:
        """Slots of this class (``S3RM_ADMISSION_<CLASS>_CONCURRENCY``)."""
        return self.slots

    @property
    def queue(self) -> int:
        """Queue places of this class (``S3RM_ADMISSION_<CLASS>_QUEUE``)."""
        return self.queue_limit

    @property
    def retry_after(self) -> int:
        """Seconds a refused caller should wait: the time the callers waiting now should take to drain
        (waiting × service time / slots), rounded up, at least 1 and at most the deadline rounded up."""
        drain = self.expected_wait(self._waiting)
        return max(1, min(math.ceil(self.timeout_seconds), math.ceil(drain)))

    def rejection(self, reason: str) -> AdmissionRejected:
        """429 for ``queue_full``, 503 for ``queue_timeout``, both with ``Retry-After``."""
        if reason == QUEUE_FULL:
            return AdmissionRejected(
                self.name, QUEUE_FULL, 429, self.retry_after,
                f"Too Many Requests: the server is at capacity for {self.name} calls; "
                f"retry after {self.retry_after} s",
            )
        return AdmissionRejected(
            self.name, QUEUE_TIMEOUT, 503, self.retry_after,
            f"Service Unavailable: no {self.name} slot became free within "
            f"{self.timeout_seconds:g} s; retry after {self.retry_after} s",
        )

    def stats(self) -> dict[str, Any]:
        """Counts only: ``in_use``, ``waiting``, ``admitted``, ``queued``, ``rejected_full`` (every 429,
        of which ``rejected_delay`` by the expected-wait rule and ``rejected_early`` answered before a
        request thread, :meth:`refuse_now`), ``rejected_timeout``, ``max_wait_seconds``,
        ``service_seconds`` (the estimate, None before a call ended) and the bounded ``state`` word
        (``ok`` | ``busy`` | ``saturated``). Limits are configuration and are not included."""
        counts = super().stats()
        out = {key: counts[key] for key in _CLASS_STATS}
        if out["state"] == "busy" and self.saturated():
            out["state"] = "saturated"
        with self._cond:
            out["rejected_delay"] = self.rejected_delay
            out["rejected_early"] = self.rejected_early
            out["service_seconds"] = None if self.service_seconds is None else round(self.service_seconds, 4)
        return out


class Admission:
    """The process's three admission classes (one instance per process, built by ``create_app``).

    ``metrics`` (optional :class:`~gateway.ops.metrics.Metrics`) receives
    ``admission_rejections{class,reason}`` and ``semantic_fallbacks{cause}``.
    """

    def __init__(self, read: AdmissionClass, write: AdmissionClass, semantic: AdmissionClass, *,
                 metrics: Any = None):
        self.classes: dict[str, AdmissionClass] = {"read": read, "write": write, "semantic": semantic}
        self.metrics = metrics
        self._gate_stats: Callable[[], Mapping[str, Any]] | None = None
        self._log_lock = threading.Lock()
        self._refusals: dict[tuple[str, str], tuple[float | None, int]] = {}

    @classmethod
    def from_config(cls, config, *, metrics: Any = None) -> "Admission":
        """Build the three classes from ``GatewayConfig`` (``admission_*`` fields)."""
        return cls(
            AdmissionClass("read", config.admission_read_concurrency, config.admission_read_queue,
                           config.admission_read_timeout_seconds),
            AdmissionClass("write", config.admission_write_concurrency, config.admission_write_queue,
                           config.admission_write_timeout_seconds),
            # the semantic class never queues; its timeout only feeds Retry-After-style hints
            AdmissionClass("semantic", config.admission_semantic_concurrency, 0, 1.0),
            metrics=metrics,
        )

    # ------------------------------------------------------- read / write
    @contextmanager
    def slot(self, kind: str) -> Iterator[None]:
        """Hold a ``read`` or ``write`` slot for one tool call; raises :class:`AdmissionRejected`."""
        klass = self.classes[kind]
        try:
            klass.acquire()
        except AdmissionRejected as exc:
            self._refused(exc)
            raise
        token = _CURRENT.set(self)
        started = time.monotonic()
        try:
            yield
        finally:
            _CURRENT.reset(token)
            klass.observe(time.monotonic() - started)
            klass.release()

    def shedding(self) -> bool:
        """True when the read or the write class refuses callers now (cheap; nothing counted)."""
        return self.classes["read"].saturated() or self.classes["write"].saturated()

    def refuse_now(self, kind: str) -> AdmissionRejected | None:
        """The 429 a ``read`` or ``write`` call arriving now gets (counted and logged as every refusal),
        or ``None`` when it would be admitted or queued: :meth:`AdmissionClass.refuse_now`."""
        refusal = self.classes[kind].refuse_now()
        if refusal is not None:
            self._refused(refusal)
        return refusal

    def _refused(self, exc: AdmissionRejected) -> None:
        self._count("admission_rejections", **{"class": exc.klass, "reason": exc.reason})
        self._log_refusal(exc.klass, exc.reason)

    def _log_refusal(self, kind: str, reason: str) -> None:
        """One log line per class and reason per :data:`REFUSAL_LOG_SECONDS` at most, with the count
        since the last line: under overload a line per refusal would cost more than the refusal."""
        now = time.monotonic()
        with self._log_lock:
            last, count = self._refusals.get((kind, reason), (None, 0))
            if last is not None and now - last < REFUSAL_LOG_SECONDS:
                self._refusals[(kind, reason)] = (last, count + 1)
                return
            self._refusals[(kind, reason)] = (now, 0)
        log.warning("admission refused class=%s reason=%s (%d more since the last line)", kind, reason, count)

    # ----------------------------------------------------------- semantic
    def attach_semantic_gate(self, stats: Callable[[], Mapping[str, Any]]) -> None:
        """Let :meth:`semantic_saturated` see the embedding provider's shared gate.

        ``stats()`` returns the retrieval layer's gate counts with at least
        ``in_use``, ``slots``, ``waiting`` and ``queue_limit`` (as
        :meth:`gateway.ops.gate.BoundedGate.stats`).
        """
        self._gate_stats = stats

    def _gate_saturated(self) -> bool:
        if self._gate_stats is None:
            return False
        try:
            s = self._gate_stats()
            return s["in_use"] >= s["slots"] and s["waiting"] >= s["queue_limit"]
        except Exception:  # a broken stats hook must never fail a read
            return False

    def semantic_saturated(self) -> bool:
        """True when the semantic class or the embedding gate cannot take one more caller now."""
        return self.classes["semantic"].all_busy() or self._gate_saturated()

    @contextmanager
    def semantic(self, *, continuing: bool = False) -> Iterator[bool]:
        """Yield ``True`` with a semantic slot held, or ``False`` at once when saturated (first page).

        With ``continuing=True`` (a hybrid cursor was already issued) saturation
        raises :class:`~gateway.core.errors.ToolError` ``semantic_saturated``
        (retryable) instead, so the order of a paged result never changes (docs/retrieval.md#resource-isolation).
        """
        klass = self.classes["semantic"]
        admitted = not self._gate_saturated() and klass.try_acquire()
        if not admitted:
            self._count("semantic_fallbacks", cause="saturated")
            if continuing:
                self._count("cursor_invalidations", reason="semantic_saturated")
                raise ToolError(
                    "semantic_saturated",
                    "Semantic search is at capacity right now; retry this page shortly, or restart from the "
                    "first page (which falls back to full-text search when semantic capacity is short).",
                    retryable=True,
                )
            yield False
            return
        try:
            yield True
        finally:
            klass.release()

    # -------------------------------------------------------------- state
    def status(self) -> str:
        """``saturated`` when the read or write class is refusing callers, else ``ok`` (health word)."""
        if self.classes["read"].saturated() or self.classes["write"].saturated():
            return "saturated"
        return "ok"

    def class_states(self) -> dict[str, str]:
        """Bounded state word per class (``ok`` | ``busy`` | ``saturated``) for /healthz and /readyz."""
        states = {name: klass.stats()["state"] for name, klass in self.classes.items()}
        if states["semantic"] != "saturated" and self.semantic_saturated():
            states["semantic"] = "saturated"
        return states

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Counts per class for the metrics endpoint (no limits, no request content)."""
        out = {name: klass.stats() for name, klass in self.classes.items()}
        out["semantic"]["state"] = self.class_states()["semantic"]
        return out

    def _count(self, name: str, **labels: str) -> None:
        if self.metrics is not None:
            self.metrics.incr(name, **labels)


# ------------------------------------------------------------ module API
def current_admission() -> Admission | None:
    """The :class:`Admission` of the tool call running in this thread (``None`` outside one)."""
    return _CURRENT.get()


@contextmanager
def semantic_permit(*, continuing: bool = False) -> Iterator[bool]:
    """The hybrid path's entry point: see :meth:`Admission.semantic`.

    Outside an admitted tool call (unit tests, scripts) it yields ``True``.
    """
    admission = _CURRENT.get()
    if admission is None:
        yield True
        return
    with admission.semantic(continuing=continuing) as admitted:
        yield admitted


def semantic_saturated() -> bool:
    """True when a semantic request made now would be refused (lets a caller skip work early)."""
    admission = _CURRENT.get()
    return admission.semantic_saturated() if admission is not None else False
