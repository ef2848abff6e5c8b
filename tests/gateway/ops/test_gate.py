"""The one bounded-queue gate (gateway/ops/gate.py): queue rules, refusals, the priority lane.

The admission classes and the embedding gate build on it; their own tests
(test_admission.py, test_embedding.py) cover the 429/503 and EmbeddingSaturated
mappings. Waiting is observed through ``stats()["waiting"]``, never timings.
"""
from __future__ import annotations

import threading

import pytest

from gateway.ops.admission import AdmissionClass, AdmissionRejected
from gateway.ops.gate import QUEUE_FULL, QUEUE_TIMEOUT, BoundedGate, GateRejected
from gateway.retrieval.embedding.guard import EmbeddingGate
from gateway.retrieval.embedding.errors import EmbeddingSaturated


def _wait_for(predicate, what: str) -> None:
    event = threading.Event()
    for _ in range(5000):
        if predicate():
            return
        event.wait(0.001)
    raise AssertionError(f"never happened: {what}")


class _Waiter(threading.Thread):
    """Acquires ``gate`` in a thread and records the order in which waiters got a slot."""

    def __init__(self, gate: BoundedGate, label: str, order: list[str], *, priority: bool = False,
                 timeout: float = 10.0):
        super().__init__(daemon=True)
        self.gate, self.label, self.order, self.priority, self.timeout = gate, label, order, priority, timeout
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.gate.acquire(self.timeout, priority=self.priority)
        except BaseException as exc:  # recorded for the assertion
            self.error = exc
            return
        self.order.append(self.label)


def test_full_queue_and_timeout_are_refused_with_their_reason():
    gate = BoundedGate("g", 1, 1)
    gate.acquire(1.0)
    order: list[str] = []
    waiter = _Waiter(gate, "w", order)
    waiter.start()
    _wait_for(lambda: gate.stats()["waiting"] == 1, "the waiter queued")
    assert gate.saturated() and gate.stats()["state"] == "saturated"
    with pytest.raises(GateRejected) as full:  # the one queue place is taken
        gate.acquire(1.0)
    assert full.value.reason == QUEUE_FULL and full.value.gate == "g"
    gate.release()
    waiter.join(5)
    assert order == ["w"] and waiter.error is None
    with pytest.raises(GateRejected) as late:  # queue free again, but no slot within the wait
        gate.acquire(0.05)
    assert late.value.reason == QUEUE_TIMEOUT
    gate.release()
    stats = gate.stats()
    assert stats["in_use"] == 0 and stats["waiting"] == 0
    assert (stats["rejected_full"], stats["rejected_timeout"], stats["rejected"]) == (1, 1, 2)


def test_queued_caller_gets_the_released_slot_and_newcomers_queue_behind_it():
    gate = BoundedGate("g", 1, 2)
    gate.acquire(1.0)
    order: list[str] = []
    first = _Waiter(gate, "first", order)
    first.start()
    _wait_for(lambda: gate.stats()["waiting"] == 1, "first queued")
    assert not gate.try_acquire()  # never waits, never jumps the queue
    gate.release()
    first.join(5)
    assert order == ["first"] and gate.stats()["in_use"] == 1
    gate.release()
    assert gate.try_acquire()
    gate.release()
    assert gate.stats()["admitted"] == 3


def test_reserved_slots_are_kept_for_priority_callers():
    gate = BoundedGate("g", 2, 4, reserved=1)
    gate.acquire(1.0)                       # normal: 1 of the 1 normal slots
    assert not gate.try_acquire()           # the reserved slot is not for normal callers
    assert gate.try_acquire(priority=True)  # ... but a priority caller takes it at once
    assert gate.stats()["in_use"] == 2
    gate.release()
    gate.release()


def test_priority_waiter_passes_queued_normal_waiters():
    gate = BoundedGate("g", 1, 4)
    gate.acquire(1.0)
    order: list[str] = []
    normal = _Waiter(gate, "normal", order)
    normal.start()
    _wait_for(lambda: gate.stats()["waiting"] == 1, "normal queued")
    urgent = _Waiter(gate, "priority", order, priority=True)
    urgent.start()
    _wait_for(lambda: gate.stats()["waiting"] == 2, "priority queued")
    gate.release()
    urgent.join(5)
    assert order == ["priority"] and gate.stats()["waiting"] == 1
    gate.release()
    normal.join(5)
    assert order == ["priority", "normal"]
    gate.release()
    assert normal.error is None and urgent.error is None


def test_limits_are_checked():
    for args, kwargs in (((0, 1), {}), ((1, -1), {}), ((2, 1), {"reserved": 2}), ((1, 1), {"timeout_seconds": 0})):
        with pytest.raises(ValueError):
            BoundedGate("g", *args, **kwargs)
    with pytest.raises(ValueError):
        BoundedGate("g", 1, 1).acquire()  # no default timeout and none given


def test_admission_class_and_embedding_gate_are_this_gate_with_their_own_errors():
    klass = AdmissionClass("write", 1, 0, 1.0)
    embed = EmbeddingGate(1, 0)
    for gate in (klass, embed):
        assert isinstance(gate, BoundedGate)
        gate.acquire(1.0)
    with pytest.raises(AdmissionRejected) as refused:
        klass.acquire()
    assert refused.value.reason == QUEUE_FULL and refused.value.http_status == 429
    with pytest.raises(EmbeddingSaturated):
        embed.acquire(1.0)
    assert set(embed.stats()) == {"in_use", "waiting", "slots", "queue_limit", "rejected"}
    assert "slots" not in klass.stats()  # admission stats carry counts, not limits

