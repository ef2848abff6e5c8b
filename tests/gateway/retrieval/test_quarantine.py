"""One Lesson whose embedding keeps failing never degrades the whole index (docs/hybrid-search.md#quarantine).

The provider is a test double (:class:`support.embedding.PickyProvider`): deterministic
vectors, an HTTP-4xx-like failure for every text carrying a marker, and an outage switch.
The refresher, the index, the projection and the repository are the real ones.
"""
from __future__ import annotations

import argparse
import hashlib
import json

import pytest
import requests

from gateway.app import create_app
from gateway.config import GatewayConfig
from gateway.domain.codec import serialize_page
from gateway.retrieval.index.analyzer import analyze
from gateway.retrieval.indexing import refresher
from gateway.retrieval.hybrid.service import RetrievalService
from support.schema_dirs import SCHEMA
from support.memory import InMemoryRepository
from gateway.web.admin import RETRY_QUARANTINED
from gateway.retrieval.embedding.errors import EmbeddingTimeout, EmbeddingUnavailable
from support.embedding import POISON, PickyProvider, settings_for
from support.lessons import lesson
from support.services import AppServer, wait_until
from s3rm.index import cmd_retry_quarantined

WAIT = 120


def page(i: int, **fields):
    return lesson(f"q-{i:03d}", title=f"Lesson number {i}", observation=f"Observation {i} about topic {i % 17}.",
                  **fields)


def build(n: int, poisoned: int | None = None, **settings):
    repo = InMemoryRepository()
    for i in range(n):
        extra = {"attempt": f"Tried the {POISON} reagent."} if i == poisoned else {}
        repo.put_page(f"q-{i:03d}", serialize_page(page(i, **extra), SCHEMA))
    provider = PickyProvider()
    service = RetrievalService(settings_for("http://127.0.0.1:9/v1/embeddings", follow_seconds=0.0, **settings),
                               repo, provider=provider)
    return repo, provider, service


def refresh(service, full: bool = True) -> None:
    if full:
        service.refresher.request_reconcile()
    assert service.refresher.wait_idle(WAIT)


@pytest.fixture
def five_hundred():
    repo, provider, service = build(500, poisoned=123, quarantine_after=2)
    service.start()
    assert service.refresher.wait_idle(WAIT)
    yield repo, provider, service
    service.stop()


def test_one_failing_lesson_among_500_is_quarantined_and_the_rest_is_ready(five_hundred):
    repo, provider, service = five_hundred
    health = service.health()
    assert service.semantic_status() == "degraded"  # first strike: not quarantined yet
    assert (health["indexed"], health["failed"], health["quarantined"]) == (499, 1, 0)
    assert "q-123" not in service.refresher.current()

    refresh(service)  # second strike (S3RM_SEMANTIC_QUARANTINE_AFTER=2)
    health = service.health()
    assert service.semantic_status() == "ready"
    assert (health["indexed"], health["lessons"], health["failed"], health["quarantined"]) == (499, 500, 0, 1)
    assert service.quarantined_count() == 1
    assert "q-123" not in str(health) and POISON not in str(health)

    calls = provider.calls
    refresh(service)  # a quarantined Lesson is not retried while its text is unchanged
    assert provider.calls == calls and service.semantic_status() == "ready"

    snap = service.refresher.current()
    lexical = [h.lesson_id for h in snap.lexical_search(analyze(f"{POISON} reagent"), 5)]
    assert lexical[:1] == ["q-123"]  # still found by full text
    assert not snap.vector("whole", "q-123").any()  # and never by meaning
    query = provider._vector("passage: " + snap_text(service, repo, "q-123"))
    assert "q-123" not in [h.lesson_id for h in snap.search("whole", query, 10, min_score=0.01)]


def snap_text(service, repo, lesson_id: str) -> str:
    return service.builder.build_snapshot(repo.get_snapshots([lesson_id])[lesson_id]).text("whole")


def test_an_edit_of_a_quarantined_lesson_retries_it(five_hundred):
    repo, provider, service = five_hundred
    refresh(service)
    assert service.quarantined_count() == 1
    repo.put_page("q-123", serialize_page(page(123, attempt="Tried the plain reagent."), SCHEMA))
    service.hint_dirty("q-123")
    refresh(service, full=False)
    assert service.quarantined_count() == 0 and service.semantic_status() == "ready"
    assert service.health()["indexed"] == 500 and service.refresher.current().vector("whole", "q-123").any()


def test_an_edit_that_still_fails_goes_back_to_quarantine_at_once(five_hundred):
    repo, provider, service = five_hundred
    refresh(service)
    repo.put_page("q-123", serialize_page(page(123, attempt=f"Tried the {POISON} reagent twice."), SCHEMA))
    service.hint_dirty("q-123")
    refresh(service, full=False)
    assert service.quarantined_count() == 1 and service.semantic_status() == "ready"


def test_the_admin_retry_embeds_quarantined_lessons_once_more(five_hundred):
    repo, provider, service = five_hundred
    refresh(service)
    assert service.retry_quarantined() == 1
    refresh(service, full=False)
    assert service.quarantined_count() == 1  # the text still fails: back in quarantine
    strict = provider.embed_documents  # the server learns to embed that text
    provider.embed_documents = lambda texts, **kw: strict([t.replace(POISON, "") for t in texts], **kw)
    assert service.retry_quarantined() == 1
    refresh(service, full=False)
    assert service.quarantined_count() == 0 and service.health()["indexed"] == 500
    assert service.refresher.current().vector("whole", "q-123").any()


def test_an_admin_retry_that_meets_a_busy_provider_is_not_used_up(five_hundred):
    """The operator's retry is one more attempt at the text; a timeout says nothing about the text, so the
    retry stays queued and the next refresh (here a reconcile) makes it once the provider answers."""
    repo, provider, service = five_hundred
    refresh(service)
    assert service.quarantined_count() == 1
    strict = provider.embed_documents  # the server learns to embed that text, but is busy with it for now
    provider.embed_documents = lambda texts, **kw: strict([t.replace(POISON, "") for t in texts], **kw)
    provider.busy_on = {"Observation 123 "}
    assert service.retry_quarantined() == 1
    refresh(service, full=False)
    assert service.quarantined_count() == 1 and service.semantic_status() == "ready"
    provider.busy_on = set()
    refresh(service)
    assert service.quarantined_count() == 0 and service.health()["indexed"] == 500
    assert service.refresher.current().vector("whole", "q-123").any()


def test_an_outage_quarantines_nothing():
    repo, provider, service = build(40, poisoned=7, quarantine_after=1)
    provider.down = True
    service.start()
    try:
        assert service.refresher.wait_idle(WAIT)
        for _ in range(3):
            refresh(service)
        health = service.health()
        assert service.semantic_status() == "unavailable" and health["quarantined"] == 0
        assert health["error"] == "unavailable"
        provider.down = False
        refresh(service)
        health = service.health()  # back: only the one bad Lesson is quarantined (after one strike here)
        assert (service.semantic_status(), health["indexed"], health["quarantined"]) == ("ready", 39, 1)
        provider.down = True
        repo.put_page("q-008", serialize_page(page(8, attempt="Changed during the outage."), SCHEMA))
        service.hint_dirty("q-008")
        refresh(service, full=False)
        assert service.semantic_status() == "degraded" and service.health()["quarantined"] == 1
    finally:
        service.stop()


@pytest.mark.parametrize("busy_error", [
    lambda: EmbeddingTimeout("embedding request timed out"),
    lambda: EmbeddingUnavailable("embedding provider answered HTTP 503", status=503),
    lambda: EmbeddingUnavailable("embedding provider answered HTTP 429", status=429),
    lambda: EmbeddingUnavailable("embedding provider unreachable"),
], ids=["timeout", "http_503", "http_429", "no_connection"])
def test_a_busy_provider_failing_some_lessons_quarantines_none_of_them(busy_error):
    """A loaded server answers the short batches and times out (or sheds) the long ones: those Lessons are
    failed and retried, never quarantined, and are indexed once the server answers them again."""
    repo, provider, service = build(40, poisoned=7, quarantine_after=1)
    provider.busy_on, provider.busy_error = {"Observation 12 ", "Observation 30 "}, busy_error
    service.start()
    try:
        assert service.refresher.wait_idle(WAIT)
        for _ in range(3):  # three strikes would have quarantined them three times over
            refresh(service)
            health = service.health()
            assert service.semantic_status() == "degraded"
            assert (health["indexed"], health["failed"], health["quarantined"]) == (37, 2, 1)  # q-007: bad text
        assert service.quarantined_count() == 1
        provider.busy_on = set()  # the load is gone
        refresh(service)
        health = service.health()
        assert (service.semantic_status(), health["indexed"], health["failed"], health["quarantined"]) == \
            ("ready", 39, 0, 1)
        assert service.refresher.current().vector("whole", "q-012").any()
    finally:
        service.stop()


@pytest.mark.parametrize("full", [True, False], ids=["reconcile", "dirty"])
@pytest.mark.parametrize("busy", [True, False], ids=["busy", "struck"])
def test_a_failed_lesson_deleted_before_it_was_ever_indexed_no_longer_counts(busy, full):
    """A Lesson that failed to embed (busy provider or a strike) and is deleted before any vector of it
    was indexed is not in the snapshot, so no refresh 'removes' it: it must still leave ``failed``,
    or the status stays ``degraded`` for the life of the process."""
    repo, provider, service = build(40, poisoned=None if busy else 7, quarantine_after=3)
    if busy:
        provider.busy_on = {"Observation 7 "}
        provider.busy_error = lambda: EmbeddingTimeout("embedding request timed out")
    service.start()
    try:
        assert service.refresher.wait_idle(WAIT)
        assert (service.semantic_status(), service.health()["failed"]) == ("degraded", 1)
        assert "q-007" not in service.refresher.current()
        repo.delete_page("q-007")
        if not full:
            service.hint_dirty("q-007")
        refresh(service, full=full)
        health = service.health()
        assert (service.semantic_status(), health["failed"], health["indexed"]) == ("ready", 0, 39)
    finally:
        service.stop()


def test_a_lesson_a_server_error_500_answers_every_time_is_still_quarantined():
    """HTTP 500 may be the text's own failure (a server crashing on one input): it counts strikes as before."""
    repo, provider, service = build(40, quarantine_after=2)
    provider.busy_on = {"Observation 12 "}
    provider.busy_error = lambda: EmbeddingUnavailable("embedding provider answered HTTP 500", status=500)
    service.start()
    try:
        assert service.refresher.wait_idle(WAIT)
        refresh(service)
        assert service.quarantined_count() == 1 and service.semantic_status() == "ready"
    finally:
        service.stop()


def test_a_failed_first_build_is_tried_again_without_any_request(monkeypatch):
    """An embedding server still loading or timing out when the gateway starts: the build resumes by
    itself, so `s3rm stack up --wait-semantic` and an unqueried gateway reach `ready`."""
    monkeypatch.setattr(refresher, "FAILURE_RETRY_SECONDS", 0.2)
    repo, provider, service = build(20)
    provider.down = True
    service.start()
    try:
        wait_until(lambda: service.health()["error"] == "unavailable", WAIT, "the failed first build")
        assert service.semantic_status() == "unavailable"
        provider.down = False  # nothing queries, nothing hints: only the worker's own retry
        wait_until(lambda: service.semantic_status() == "ready", WAIT, "the retried build")
        assert service.health()["indexed"] == 20
    finally:
        service.stop()


def test_lessons_a_busy_provider_failed_are_tried_again_without_any_request(monkeypatch):
    """The first build of a loaded machine timed some Lessons out; nothing queries (``s3rm stack up
    --wait-semantic`` only reads /readyz): the worker retries those Lessons by itself and reaches ``ready``."""
    monkeypatch.setattr(refresher, "FAILURE_RETRY_SECONDS", 0.2)
    repo, provider, service = build(20)
    provider.busy_on = {"Observation 7 ", "Observation 11 "}
    service.start()
    try:
        wait_until(lambda: service.health()["failed"] == 2, WAIT, "the first build with two busy failures")
        assert service.semantic_status() == "degraded"
        provider.busy_on = set()  # nothing queries, nothing hints: only the worker's own retry
        wait_until(lambda: service.semantic_status() == "ready", WAIT, "the retried Lessons")
        assert (service.health()["indexed"], service.health()["failed"]) == (20, 0)
    finally:
        service.stop()


# ---------------------------------------------------------------- through the gateway
def _search(url: str, query: str) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "search_lessons", "arguments": {"query": query, "retrieval_mode": "hybrid_v1"}}}
    r = requests.post(url, json=body, headers={"Accept": "application/json"}, timeout=30)
    assert r.status_code == 200, r.text
    return json.loads(r.json()["result"]["content"][0]["text"])


def test_readyz_search_and_the_admin_verb_report_and_retry_the_quarantine(capsys, monkeypatch):
    repo, provider, service = build(30, poisoned=4, quarantine_after=1)
    service.start()
    assert service.refresher.wait_idle(WAIT)
    apps = []

    def build_app(port: int):
        config = GatewayConfig.from_env({"S3RM_MCP_PUBLIC_URL": f"http://127.0.0.1:{port}/mcp",
                                         "S3RM_METRICS_TOKEN_SHA256": hashlib.sha256(b"ops-token-0123").hexdigest()})
        apps.append(create_app(config, repository_factory=lambda _: repo, wiki_probe=lambda: True, retrieval=service))
        return apps[0]

    try:
        with AppServer(build_app) as server:
            app = apps[0]
            ready = requests.get(server.base + "/readyz", timeout=10).json()
            assert ready["semantic"] == "ready"
            assert ready["semantic_index"]["quarantined"] == 1 and ready["semantic_index"]["indexed"] == 29
            page = _search(server.url, f"{POISON} reagent")
            assert page["semantic_status"] == "ready" and page["semantic_quarantined"] == 1
            assert page["results"][0]["id"] == "q-004"  # full text still finds it

            client = app.test_client()
            remote = {"REMOTE_ADDR": "203.0.113.9"}
            assert client.post(RETRY_QUARANTINED, environ_base=remote).status_code == 404
            assert client.post(RETRY_QUARANTINED, environ_base=remote,
                               headers={"Authorization": "Bearer ops-token-0123"}).status_code == 200

            assert service.refresher.wait_idle(WAIT)
            provider.down = False
            strict = provider.embed_documents  # the server learns to embed that text; the operator retries
            provider.embed_documents = lambda texts, **kw: strict([t.replace(POISON, "") for t in texts], **kw)
            monkeypatch.delenv("S3RM_METRICS_TOKEN", raising=False)
            assert cmd_retry_quarantined(argparse.Namespace(url=server.url)) == 0
            assert capsys.readouterr().out.startswith("queued=")
            assert service.refresher.wait_idle(WAIT)
            assert "semantic_quarantined" not in _search(server.url, "Observation 4")
            assert requests.get(server.base + "/readyz", timeout=10).json()["semantic_index"]["quarantined"] == 0
    finally:
        service.stop()
