"""Admission control (docs/operations.md#admission, docs/operations.md#health): per-class slots and queues, 429/503 with
Retry-After and a JSON-RPC body, isolated classes, semantic saturation → immediate legacy
fallback, admission state in health, the scope ACL and the open-mode rate limiter.

The real app is driven through Flask's test client from several threads; tool
handlers block on events so saturation is deterministic (no sleeps as timing).
"""
from __future__ import annotations

import hashlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.schema_dirs import minimal_schema_dir, minimal_specs

from gateway.ops.admission import Admission, AdmissionClass, AdmissionRejected, semantic_permit
from gateway.app import create_app
from gateway.config import ConfigError, GatewayConfig
from gateway.core.errors import ToolError
from gateway.core.principal import Principal
from gateway.ops.ratelimit import RateLimiter
from gateway.ops.access import check_scope_access, principal_hash

TOKEN = "admission-test-token-0123456789"
HEADERS = {"Host": "127.0.0.1:8080", "Accept": "application/json", "Content-Type": "application/json"}


def _env(schema_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        "S3RM_SCHEMA_DIR": str(schema_dir),
        "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(TOKEN.encode()).hexdigest(),
        "S3RM_GUNICORN_THREADS": "16",
        "S3RM_ADMISSION_READ_CONCURRENCY": "1",
        "S3RM_ADMISSION_READ_QUEUE": "1",
        "S3RM_ADMISSION_READ_TIMEOUT_SECONDS": "0.3",
        "S3RM_ADMISSION_WRITE_CONCURRENCY": "1",
        "S3RM_ADMISSION_WRITE_QUEUE": "0",
        "S3RM_ADMISSION_SEMANTIC_CONCURRENCY": "1",
    }
    env.update(extra)
    return env


class Gate:
    """A blocking tool handler: records entries, waits until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def handler(self, arguments, ctx):
        self.entered.release()
        assert self.release.wait(10), "test never released the gate"
        return {"results": ["slow"]}

    def wait_entered(self, n: int = 1) -> None:
        for _ in range(n):
            assert self.entered.acquire(timeout=10), "handler was never entered"


def _fast(arguments, ctx):
    return {"results": ["fast"]}


def _specs(**handlers):
    return minimal_specs(**handlers)


def _app(tmp_path: Path, specs=None, **env):
    config = GatewayConfig.from_env(_env(minimal_schema_dir(tmp_path / "schema"), **env))
    return create_app(config, wiki_probe=lambda: True, specs=specs)


def _call(app, tool: str, arguments: dict | None = None, token: str | None = None):
    headers = dict(HEADERS)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": arguments or {}}}
    return app.test_client().post("/mcp", data=json.dumps(body), headers=headers)


def _text(response) -> dict:
    return json.loads(response.get_json()["result"]["content"][0]["text"])


def _assert_overloaded(response, status: int, code: str, klass: str) -> None:
    assert response.status_code == status, response.data
    assert response.mimetype == "application/json"
    retry = response.headers.get("Retry-After")
    assert retry is not None and retry.isdigit() and int(retry) >= 1
    body = response.get_json()
    assert body["jsonrpc"] == "2.0" and body["id"] == 7
    assert body["error"]["code"] == -32003
    data = body["error"]["data"]
    assert data == {"code": code, "class": klass, "retryable": True, "retry_after_seconds": int(retry)}


# ------------------------------------------------------------------ unit level
def test_class_queue_full_is_429_and_wait_timeout_is_503():
    klass = AdmissionClass("read", 1, 1, 0.05)
    klass.acquire()
    results: list[BaseException | None] = []

    def waiter():
        try:
            klass.acquire()
            results.append(None)
        except AdmissionRejected as exc:
            results.append(exc)

    t = threading.Thread(target=waiter)
    t.start()
    # wait until the waiter occupies the single queue place
    for _ in range(1000):
        if klass.stats()["waiting"] == 1:
            break
        threading.Event().wait(0.001)
    assert klass.saturated()
    with pytest.raises(AdmissionRejected) as full:
        klass.acquire()
    assert full.value.http_status == 429 and full.value.reason == "queue_full"
    t.join(5)
    assert isinstance(results[0], AdmissionRejected)
    assert results[0].http_status == 503 and results[0].reason == "queue_timeout"
    assert results[0].headers == {"Retry-After": "1"}
    klass.release()
    stats = klass.stats()
    assert stats["in_use"] == 0 and stats["rejected_full"] == 1 and stats["rejected_timeout"] == 1


def _queue_waiters(klass: AdmissionClass, count: int, outcomes: list) -> list[threading.Thread]:
    """Start ``count`` threads that acquire ``klass`` (recording None or the refusal) and release at once;
    returns them once all of them wait."""
    def waiter():
        try:
            klass.acquire()
        except AdmissionRejected as exc:
            outcomes.append(exc)
            return
        outcomes.append(None)
        klass.release()

    threads = [threading.Thread(target=waiter) for _ in range(count)]
    for t in threads:
        t.start()
    for _ in range(5000):
        if klass.stats()["waiting"] == count:
            break
        threading.Event().wait(0.001)
    assert klass.stats()["waiting"] == count
    return threads


def test_a_read_queues_while_its_expected_wait_fits_the_deadline_and_no_longer():
    """docs/operations.md#admission: refused only when queue length × service time / slots > deadline."""
    klass = AdmissionClass("read", 2, 50, 10.0)
    klass.observe(4.0)  # one call held its slot 4 s: the estimate
    assert klass.stats()["service_seconds"] == 4.0
    klass.acquire()
    klass.acquire()
    outcomes: list = []
    # waiter p expects p × 4 / 2 s: 2, 4, 6, 8, 10 s fit the 10 s deadline, the 6th (12 s) does not
    threads = _queue_waiters(klass, 5, outcomes)
    assert klass.saturated() and klass.stats()["state"] == "saturated"
    with pytest.raises(AdmissionRejected) as refused:
        klass.acquire()
    assert refused.value.http_status == 429 and refused.value.reason == "queue_full"
    assert refused.value.headers["Retry-After"] == "10"  # the five waiting should drain in 5 × 4 / 2 s
    stats = klass.stats()
    assert stats["waiting"] == 5 and stats["rejected_full"] == 1 and stats["rejected_delay"] == 1
    klass.release()
    klass.release()
    for t in threads:
        t.join(10)
    assert outcomes == [None] * 5  # every queued read was served, none refused


def test_fast_service_lets_the_queue_fill_its_places_and_the_estimate_follows_calls():
    klass = AdmissionClass("read", 1, 3, 1.0)
    for _ in range(50):
        klass.observe(0.01)
    assert klass.stats()["service_seconds"] == pytest.approx(0.01)
    klass.acquire()
    outcomes: list = []
    threads = _queue_waiters(klass, 3, outcomes)  # 3 × 0.01 s: far inside the deadline
    with pytest.raises(AdmissionRejected):
        klass.acquire()  # the places (the memory bound) are all taken
    assert klass.stats()["rejected_delay"] == 0
    klass.release()
    for t in threads:
        t.join(10)
    assert outcomes == [None] * 3
    for _ in range(60):
        klass.observe(0.8)  # calls got slow: two waiters (1.6 s) no longer fit 1 s
    klass.acquire()
    threads = _queue_waiters(klass, 1, outcomes)
    with pytest.raises(AdmissionRejected):
        klass.acquire()
    assert klass.stats()["rejected_delay"] == 1
    klass.release()
    for t in threads:
        t.join(10)


def test_admitted_calls_feed_the_service_estimate(tmp_path):
    app = _app(tmp_path, specs=_specs(get_lesson=_fast))
    assert _call(app, "get_lesson").status_code == 200
    read = app.extensions["s3rm"].admission.classes["read"].stats()
    assert read["service_seconds"] is not None and read["service_seconds"] >= 0


def test_a_queued_caller_gets_the_slot_when_it_frees():
    klass = AdmissionClass("write", 1, 1, 5.0)
    klass.acquire()
    done = threading.Event()

    def waiter():
        klass.acquire()
        done.set()
        klass.release()

    t = threading.Thread(target=waiter)
    t.start()
    assert not done.wait(0.05)
    klass.release()
    assert done.wait(5)
    t.join(5)
    assert klass.stats()["admitted"] == 2


def test_semantic_class_never_waits_and_continuing_cursor_gets_retryable_error():
    config = GatewayConfig.from_env({"S3RM_ADMISSION_SEMANTIC_CONCURRENCY": "1"})
    admission = Admission.from_config(config)
    with admission.semantic() as first:
        assert first is True
        with admission.semantic() as second:  # first page: immediate fallback signal
            assert second is False
        with pytest.raises(ToolError) as err:
            with admission.semantic(continuing=True):
                pass
        assert err.value.code == "semantic_saturated" and err.value.retryable
    with admission.semantic() as again:
        assert again is True


def test_embedding_gate_saturation_is_visible_to_the_semantic_class():
    admission = Admission.from_config(GatewayConfig.from_env({}))
    gate = {"in_use": 2, "slots": 2, "waiting": 8, "queue_limit": 8}
    admission.attach_semantic_gate(lambda: gate)
    assert admission.semantic_saturated()
    with admission.semantic() as admitted:
        assert admitted is False
    gate["waiting"] = 0
    with admission.semantic() as admitted:
        assert admitted is True
    admission.attach_semantic_gate(lambda: 1 / 0)  # a broken hook never blocks reads
    assert not admission.semantic_saturated()


def test_semantic_permit_outside_a_tool_call_admits():
    with semantic_permit() as admitted:
        assert admitted is True


def test_config_keeps_threads_free_and_rejects_limits_that_do_not_fit():
    config = GatewayConfig.from_env({})
    held = (config.admission_read_concurrency + config.admission_read_queue
            + config.admission_write_concurrency + config.admission_write_queue)
    assert held < config.gunicorn_threads
    for threads in ("2", "4", "8", "32"):
        c = GatewayConfig.from_env({"S3RM_GUNICORN_THREADS": threads})
        assert c.admission_read_concurrency >= 1 and c.admission_write_concurrency >= 1
    with pytest.raises(ConfigError) as err:
        GatewayConfig.from_env({"S3RM_GUNICORN_THREADS": "4", "S3RM_ADMISSION_READ_CONCURRENCY": "8"})
    assert err.value.variable == "S3RM_GUNICORN_THREADS"
    with pytest.raises(ConfigError):
        GatewayConfig.from_env({"S3RM_ADMISSION_READ_TIMEOUT_SECONDS": "0"})


# ---------------------------------------------------------------- HTTP level
def test_reads_over_capacity_get_429_then_503_with_retry_after_json(tmp_path):
    gate = Gate()
    app = _app(tmp_path, specs=_specs(get_lesson=gate.handler), S3RM_ADMISSION_READ_TIMEOUT_SECONDS="0.5")
    with ThreadPoolExecutor(4) as pool:
        running = pool.submit(_call, app, "get_lesson")
        gate.wait_entered()
        queued = pool.submit(_call, app, "get_lesson")
        state = app.extensions["s3rm"].admission.classes["read"]
        for _ in range(2000):
            if state.stats()["waiting"] == 1:
                break
            threading.Event().wait(0.001)
        _assert_overloaded(_call(app, "get_lesson"), 429, "queue_full", "read")
        health = app.test_client().get("/readyz").get_json()
        assert health["admission"] == "saturated"
        assert health["admission_classes"]["read"] == "saturated"
        _assert_overloaded(queued.result(10), 503, "queue_timeout", "read")
        gate.release.set()
        assert running.result(10).status_code == 200
    assert app.extensions["s3rm"].metrics.counter("admission_rejections", **{"class": "read", "reason": "queue_full"}) == 1
    assert app.test_client().get("/readyz").get_json()["admission"] == "ok"


def test_saturated_reads_never_block_writes_or_health(tmp_path):
    gate = Gate()
    app = _app(tmp_path, specs=_specs(get_lesson=gate.handler, link_lessons=_fast),
               S3RM_ADMISSION_READ_TIMEOUT_SECONDS="5")
    with ThreadPoolExecutor(4) as pool:
        running = pool.submit(_call, app, "get_lesson")
        gate.wait_entered()
        queued = pool.submit(_call, app, "get_lesson")
        write = _call(app, "link_lessons", {"operation_id": "op-1"}, token=TOKEN)
        assert write.status_code == 200 and _text(write) == {"results": ["fast"]}
        assert app.test_client().get("/livez").status_code == 200
        gate.release.set()
        assert running.result(10).status_code == 200
        assert queued.result(10).status_code == 200


def test_saturated_writes_never_block_reads(tmp_path):
    gate = Gate()
    app = _app(tmp_path, specs=_specs(link_lessons=gate.handler, get_lesson=_fast))
    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(_call, app, "link_lessons", {"operation_id": "op-1"}, TOKEN)
        gate.wait_entered()
        _assert_overloaded(_call(app, "link_lessons", {"operation_id": "op-2"}, token=TOKEN), 429, "queue_full",
                           "write")
        read = _call(app, "get_lesson")
        assert read.status_code == 200 and _text(read) == {"results": ["fast"]}
        gate.release.set()
        assert running.result(10).status_code == 200


def test_unauthorised_writes_never_take_a_write_slot(tmp_path):
    gate = Gate()
    app = _app(tmp_path, specs=_specs(link_lessons=gate.handler))
    assert _call(app, "link_lessons", {"operation_id": "x"}).status_code == 401
    assert app.extensions["s3rm"].admission.classes["write"].stats()["admitted"] == 0


def test_semantic_saturation_makes_first_pages_fall_back_at_once(tmp_path):
    """With the semantic class full, a first page answers from legacy at once (docs/retrieval.md#resource-isolation)."""
    gate = threading.Event()
    entered = threading.Semaphore(0)

    def hybrid_search(arguments, ctx):
        with semantic_permit(continuing=bool(arguments.get("id"))) as admitted:
            if not admitted:
                return {"results": ["legacy-fallback"]}
            entered.release()
            assert gate.wait(10)
            return {"results": ["hybrid"]}

    app = _app(tmp_path, specs=_specs(search_lessons=hybrid_search, find_analogies=hybrid_search),
               S3RM_ADMISSION_READ_CONCURRENCY="4", S3RM_ADMISSION_READ_QUEUE="0")
    with ThreadPoolExecutor(2) as pool:
        holder = pool.submit(_call, app, "search_lessons")
        assert entered.acquire(timeout=10)
        fallback = _call(app, "find_analogies")
        assert fallback.status_code == 200 and _text(fallback) == {"results": ["legacy-fallback"]}
        continued = _call(app, "find_analogies", {"id": "page-2"})  # stands for "a hybrid cursor was issued"
        assert continued.status_code == 200
        err = _text(continued)["error"]
        assert err["code"] == "semantic_saturated" and err["retryable"] is True
        states = app.test_client().get("/readyz").get_json()["admission_classes"]
        assert states["semantic"] == "saturated" and states["read"] == "ok"
        gate.set()
        assert _text(holder.result(10)) == {"results": ["hybrid"]}
    metrics = app.extensions["s3rm"].metrics
    assert metrics.counter("semantic_fallbacks", cause="saturated") == 2
    assert metrics.counter("cursor_invalidations", reason="semantic_saturated") == 1


# -------------------------------------------------------------- scope ACL
def _acl_config(**extra):
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    env = {
        "S3RM_MCP_WRITE_TOKEN_SHA256": digest,
        "S3RM_SEARCH_SCOPES_JSON": json.dumps({"lab": {"record_origin": "lab"}, "open": {}}),
        "S3RM_SEARCH_SCOPE_PRINCIPALS_JSON": json.dumps({"lab": [digest[:16]]}),
    }
    env.update(extra)
    return GatewayConfig.from_env(env), digest


def test_scope_acl_refuses_anonymous_and_unlisted_principals():
    config, digest = _acl_config()
    token = Principal("token", "shared-write-token")
    assert principal_hash(token, config) == digest[:16]
    assert principal_hash(Principal("ip", "203.0.113.9"), config) is None
    check_scope_access(None, Principal(), config)
    check_scope_access("open", Principal(), config)  # no ACL on this scope
    check_scope_access("lab", token, config)
    with pytest.raises(ToolError) as anon:
        check_scope_access("lab", Principal(), config)
    assert anon.value.code == "scope_requires_authentication" and not anon.value.retryable
    with pytest.raises(ToolError) as ip:
        check_scope_access("lab", Principal("ip", "203.0.113.9"), config)
    assert ip.value.code == "scope_requires_authentication"
    other, _ = _acl_config(S3RM_SEARCH_SCOPE_PRINCIPALS_JSON=json.dumps({"lab": ["0123456789abcdef"]}))
    with pytest.raises(ToolError) as forbidden:
        check_scope_access("lab", token, other)
    assert forbidden.value.code == "scope_forbidden"
    assert digest not in str(forbidden.value) and TOKEN not in str(forbidden.value)


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps({"nosuch": ["0123456789abcdef"]}),
        json.dumps({"lab": [TOKEN]}),  # a raw credential instead of a short hash
        json.dumps({"lab": "0123456789abcdef"}),
        "not json",
    ],
)
def test_scope_acl_config_is_validated_without_echoing_values(raw):
    with pytest.raises(ConfigError) as err:
        _acl_config(S3RM_SEARCH_SCOPE_PRINCIPALS_JSON=raw)
    assert err.value.variable == "S3RM_SEARCH_SCOPE_PRINCIPALS_JSON"
    assert TOKEN not in str(err.value)


# ------------------------------------------------------------ rate limiter
def test_token_bucket_refills_and_is_bounded():
    now = [0.0]
    limiter = RateLimiter(2.0, 3, max_principals=2, monotonic=lambda: now[0])
    for _ in range(3):
        limiter.check("ip:a")
    with pytest.raises(AdmissionRejected) as err:
        limiter.check("ip:a")
    assert err.value.http_status == 429 and err.value.reason == "rate_limited"
    assert err.value.headers["Retry-After"] == "1"
    limiter.check("ip:b")  # another principal has its own bucket
    now[0] += 0.5  # one token back
    limiter.check("ip:a")
    limiter.check("ip:c")
    assert len(limiter) == 2  # least recently used bucket evicted


def test_open_mode_rate_limit_answers_429_with_retry_after(tmp_path):
    app = _app(tmp_path, specs=_specs(get_lesson=_fast), S3RM_MCP_WRITE_AUTH_MODE="open",
               S3RM_RATE_LIMIT_PER_SECOND="0.01", S3RM_RATE_LIMIT_BURST="2")
    assert _call(app, "get_lesson").status_code == 200
    assert _call(app, "get_lesson").status_code == 200
    r = _call(app, "get_lesson")
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    assert r.get_json()["error"]["data"]["code"] == "rate_limited"
    # token mode has no rate limiter
    assert _app(tmp_path / "t", specs=_specs(get_lesson=_fast)).extensions["s3rm"].rate_limiter is None


# ----------------------------------------------------------------- metrics
def test_metrics_endpoint_is_loopback_or_token_only_and_lists_every_p2_item(tmp_path):
    from gateway.ops.metrics import P2_ITEMS

    token = "metrics-token-0123456789"
    app = _app(tmp_path, specs=_specs(get_lesson=_fast),
               S3RM_METRICS_TOKEN_SHA256=hashlib.sha256(token.encode()).hexdigest())
    _call(app, "get_lesson")
    client = app.test_client()
    remote = {"REMOTE_ADDR": "203.0.113.9"}
    assert client.get("/metrics", environ_base=remote).status_code == 404
    assert client.get("/metrics", environ_base=remote, headers={"Authorization": "Bearer wrong"}).status_code == 404
    assert client.get("/metrics", environ_base=remote,
                      headers={"Authorization": f"Bearer {token}"}).status_code == 200
    r = client.get("/metrics", environ_base={"REMOTE_ADDR": "127.0.0.1"})
    assert r.status_code == 200 and r.mimetype == "application/json"
    body = r.get_json()
    assert set(body["observability"]) == set(P2_ITEMS)
    assert body["observability"]["latency_by_tool"]["get_lesson"]["count"] == 1
    assert body["admission"]["read"]["admitted"] == 1
    assert body["semantic"] is None  # no hybrid layer in this app: reported absent
    assert token not in r.get_data(as_text=True)
