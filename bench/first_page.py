#!/usr/bin/env python3
"""The first page a new user sees: fixed everyday questions and the help pages' example searches, in both
retrieval modes, over a running gateway's ``/mcp`` (the official ``mcp`` client, read-only).

Not a test. Run it against the development stack with the Korean Lessons, the development set and the
noise Lessons imported (the commands are in docs/hybrid-search.md#first-page-as-a-new-user-sees-it)::

    python bench/first_page.py [--mcp-url URL] [--limit 5] [--phrasings]

For each question and mode it prints one row: the rank of the first expected Lesson in the first
``--limit`` hits (``–`` when none is there; an empty expectation means the corpus holds no answer and
only noise is judged), the number of noise Lessons (ids ``noise-…``) on the page, and the page's ids.
It ends with the Lessons that appear most often on pages that do not expect them, per mode (hubs).
``--phrasings`` also runs the English questions with a Korean phrasing in ``also_phrased_as``.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from s3rm.mcpsearch import McpSearch, resolve_mcp_url

DNS = ("synthetic-ko-dns-ttl-failover-delay", "aws-9", "azure-20190502-2", "azure-20200718-1",
       "azure-20200814-1", "azure-20210401-1")

#: (source, question, expected Lesson ids, a Korean phrasing for ``--phrasings`` or None). Sources:
#: ``everyday`` questions a lab member types, ``help`` the help pages' and README's example searches
#: (before and after this record), ``own`` further questions. The expectations were judged by reading
#: the Lessons (an empty tuple: no Lesson in the corpus answers it).
QUESTIONS: tuple[tuple[str, str, tuple[str, ...], str | None], ...] = (
    ("everyday", "GPU 메모리 부족으로 학습이 죽음", ("synthetic-ko-gpu-memory-fragmentation",), None),
    ("everyday", "학습률 워밍업 없이 손실 발산", ("synthetic-ko-warmup-loss-divergence",), None),
    ("everyday", "토크나이저 한글 자모 분리", (), None),
    ("everyday", "스토리지 장애로 서비스 중단", ("gcs-19002",), None),
    ("everyday", "DNS 장애", DNS, None),
    ("everyday", "학습 로그", (), None),
    ("everyday", "cold start", (), None),
    ("everyday", "Why did the speech recognizer invent 'thanks for watching' during long silence?",
     ("s3-asr-silence-hallucination",), "왜 음성 인식기가 긴 무음 구간에서 '시청해 주셔서 감사합니다'를 지어냈나?"),
    ("everyday", "Why did our learning rate search almost never try small learning rates?",
     ("s3-hpo-linear-lr-space",), "왜 학습률 탐색이 작은 학습률을 거의 시도하지 않았나?"),
    ("help", "체크포인트를 저장하다가 디스크가 가득 찬 적이 있나?", ("synthetic-ko-checkpoint-disk-full",), None),
    ("help", "체크포인트를 저장하다가 디스크가 가득 찬 적이 있나요?", ("synthetic-ko-checkpoint-disk-full",), None),
    ("help", "NCCL timeout", ("synthetic-ko-nccl-timeout-mtu",), None),
    ("help", "커넥션 풀 고갈", ("synthetic-ko-db-connection-pool-exhaustion",), None),
    ("help", "DNS resolution", DNS, None),
    ("help", "DNS outage", DNS, None),
    ("help", "cache stampede", ("synthetic-ko-cache-stampede",), "캐시 스탬피드"),
    ("help", "학습 시작 직후 loss가 NaN이 됨",
     ("synthetic-ko-fp16-loss-scale-nan", "synthetic-ko-warmup-loss-divergence"), None),
    ("help", "재시도 폭주로 복구 중인 서비스가 다시 죽음", ("aws-5",), None),
    ("help", "NCCL timeout이 한 노드에서만 남", ("synthetic-ko-nccl-timeout-mtu",), None),
    ("help", "DNS TTL 때문에 장애 조치가 늦어짐", ("synthetic-ko-dns-ttl-failover-delay",), None),
    ("own", "데이터로더 워커 수를 늘렸더니 공유 메모리 에러가 나요", ("synthetic-ko-dataloader-shm-exhaustion",), None),
    ("own", "시드를 고정했는데도 결과가 재현이 안 돼요", ("synthetic-ko-cudnn-nondeterminism",), None),
    ("own", "배포 직후 5xx가 급증했어요", ("s3-serving-readiness-before-load",), None),
    ("own", "음성 인식 모델이 무음 구간에서 없는 말을 만들어냄", ("s3-asr-silence-hallucination",), None),
    ("own", "Our A/B test showed a big lift in week one that disappeared later", ("s3-ab-novelty-effect",),
     "A/B 테스트에서 첫 주에 크게 올랐던 효과가 나중에 사라졌다"),
    ("own", "Why is our int8 quantized model slower than fp32 on an old CPU?", ("s3-cpu-int8-no-vnni",), None),
)
MODES = ("hybrid_v1", "legacy")


def first_rank(ids: list[str], expected: tuple[str, ...]) -> int | None:
    """1-based rank of the first expected id in ``ids``, or None."""
    return next((i for i, x in enumerate(ids, 1) if x in expected), None)


async def run(url: str, limit: int, phrasings: bool) -> None:
    """Print one row per question and mode, then the hubs per mode."""
    hubs = {m: collections.Counter() for m in MODES}
    pages = collections.Counter()
    print("| source | question | mode | answered by | rank | noise | first ids |")
    print("|---|---|---|---|---|---|---|")
    async with McpSearch(url) as search:
        for source, question, expected, korean in QUESTIONS:
            variants = [(question, None)] + ([(question, korean)] if phrasings and korean else [])
            for text, other in variants:
                for mode in MODES:
                    args = {"query": text, "limit": limit, "retrieval_mode": mode}
                    if other:
                        args["also_phrased_as"] = [other]
                    answer = await search.call(args)
                    ids = [hit["id"] for hit in answer["results"]]
                    rank = first_rank(ids, expected) if expected else None
                    noise = sum(x.startswith("noise-") for x in ids)
                    if other is None:
                        pages[mode] += 1
                        hubs[mode].update(x for x in ids if x not in expected)
                    label = question if other is None else f"{question} + also_phrased_as {other}"
                    answered = f"{answer.get('effective_mode')} {answer.get('ranking_version')}"
                    shown = "n/a" if not expected else (rank or "–")
                    print(f"| {source} | {label} | {mode} | {answered} | {shown} | {noise} | {', '.join(ids)} |")
    for mode in MODES:
        worst = ", ".join(f"{i} {n}/{pages[mode]}" for i, n in hubs[mode].most_common(5))
        print(f"{mode}: most frequent unexpected Lessons on the first pages: {worst}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mcp-url", default=None, help="the gateway's /mcp (default: the running dev stack)")
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--phrasings", action="store_true", help="also send the Korean phrasings")
    args = parser.parse_args(argv)
    asyncio.run(run(resolve_mcp_url(args.mcp_url), args.limit, args.phrasings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
