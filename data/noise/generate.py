#!/usr/bin/env python3
"""Write ``data/noise/lessons.jsonl``: Lessons of the kinds a real wiki collects that answer nothing.

Deterministic (fixed seed); re-run after editing the kinds below. Every line has the
format of ``data/synthetic-ko/lessons.jsonl`` (``id``, ``title`` and the seven text
fields, all non-empty) and is imported with ``s3rm import synthetic-lessons
data/noise/lessons.jsonl`` (``record_origin=synthetic``). Field limits come from
``schema/lesson.toml``.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().with_name("lessons.jsonl")
FIELDS = ("question", "attempt", "context", "observation", "interpretation", "reusable_lesson", "applicability")
#: ``max_length`` of each text field in schema/lesson.toml (title 200).
LIMITS = {"title": 200, "reusable_lesson": 2000, **{f: 20000 for f in FIELDS if f != "reusable_lesson"}}
RNG = random.Random(20261203)

#: Code-point ranges for random text (letters of several scripts, no controls, no private use).
SCRIPTS = {
    "cyrillic": (0x0410, 0x044F), "greek": (0x0391, 0x03C9), "arabic": (0x0627, 0x064A),
    "devanagari": (0x0905, 0x0939), "thai": (0x0E01, 0x0E2E), "cjk": (0x4E00, 0x9FA5),
    "hangul": (0xAC00, 0xD7A3), "latin": (0x0061, 0x007A), "symbols": (0x2200, 0x22FF),
}
EMOJI = "😀😂🥲😍🤔🙏👍🔥🚀✨🎉💯❤️🥺😭😅🤖🐛⚠️✅❌📌📈🧪💡"
DOMAIN_EN = ("latency outage rollback cluster DNS GPU checkpoint quota region failover cache shard "
             "replica timeout throughput kernel gradient tokenizer batch deployment incident").split()
DOMAIN_KO = ("장애 지연 롤백 클러스터 스토리지 인증 학습률 체크포인트 배포 리전 캐시 타임아웃 "
             "그래디언트 배치 모니터링 로그 메모리 네트워크 데이터셋 재현").split()
LOREM = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut "
         "labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco.")
KO_FILLER = "가나다라마바사 아자차카타파하 가나다라마바사 아자차카타파하"


def rand_text(script: str | tuple[str, ...], n: int, words: bool = True) -> str:
    scripts = (script,) if isinstance(script, str) else script
    out = []
    for i in range(n):
        lo, hi = SCRIPTS[RNG.choice(scripts)]
        out.append(chr(RNG.randint(lo, hi)))
        if words and i % 6 == 5:
            out.append(" ")
    return "".join(out).strip()


def same(text: str) -> dict[str, str]:
    """Every field holds ``text`` (cut to the field's limit): a draft saved as it was typed."""
    return {"title": text[:LIMITS["title"]], **{f: text[:LIMITS[f]] for f in FIELDS}}


def title_only(title: str, filler: str) -> dict[str, str]:
    return {"title": title, **{f: filler for f in FIELDS}}


def repeated(ch: str) -> dict[str, str]:
    """One character repeated up to each field's limit."""
    return {name: ch * limit for name, limit in LIMITS.items()}


def salad(words: list[str], n: int) -> str:
    return " ".join(RNG.choice(words) for _ in range(n))


#: Fragments a write check mixes into random text (wikitext, markup, a little Korean and English).
WRITE_CHECK = ("{{Lesson}}", "한국어 메모", "* item", "''bold''", "<script>alert(1)</script>", "= heading =",
               " lead", "[[Category:Spam]]", "http://example.org/x", "cold start")
#: A Korean paragraph whose UTF-8 bytes are read in the wrong encoding (mojibake Lessons).
KO_PARAGRAPH = ("학습 중에 GPU 메모리가 부족해서 배치 크기를 줄였지만 단편화 때문에 다시 죽었다. 원인은 캐시 할당자가 "
                "큰 블록을 반환하지 않는 것이었고, 환경 변수로 분할 크기를 제한하니 해결되었다. 같은 증상이 보이면 "
                "먼저 메모리 스냅샷을 확인하고 로그에서 할당 실패 시점을 찾는다. 스토리지 장애나 DNS 장애와는 무관했다.")
#: Its own generator, so the Lessons above keep the texts they had before these kinds were added.
WRITE_CHECK_RNG = random.Random(20261204)


def write_check_text(pieces: int) -> str:
    """Random printable code points from every plane with write-check fragments between them (what a
    property-based write test leaves in a wiki)."""
    out = []
    for _ in range(pieces):
        run = []
        while len(run) < WRITE_CHECK_RNG.randint(2, 12):
            ch = chr(WRITE_CHECK_RNG.randint(0x20, 0x2FFFF))
            if ch.isprintable() and not 0xD800 <= ord(ch) <= 0xDFFF:
                run.append(ch)
        out.append("".join(run) + WRITE_CHECK_RNG.choice(WRITE_CHECK))
    return " ".join(out)[:LIMITS["title"]]


def mojibake(encoding: str) -> dict[str, str]:
    """Every field holds :data:`KO_PARAGRAPH`'s UTF-8 bytes decoded as ``encoding`` (undecodable bytes
    become U+FFFD, control characters are dropped as a browser shows them), cut to the field's limit."""
    text = KO_PARAGRAPH.encode("utf-8").decode(encoding, errors="replace")
    text = " ".join("".join(ch for ch in text if ch.isprintable() or ch.isspace()).split())
    return same(text)


def lessons() -> list[tuple[str, dict[str, str]]]:
    out = [
        ("noise-emoji-run-laugh", same("😂" * 40)),
        ("noise-emoji-run-mixed", same("".join(RNG.choice(EMOJI) for _ in range(60)))),
        ("noise-emoji-run-fire", title_only("🔥🔥🔥", "🚀" * 25)),
        ("noise-emoji-thumbs", same("👍")),
        ("noise-emoji-status", {"title": "✅✅❌⚠️", **{f: "".join(RNG.choice(EMOJI) for _ in range(12 + i))
                                                    for i, f in enumerate(FIELDS)}}),
        ("noise-emoji-hearts", same("❤️🥺❤️🥺❤️🥺❤️🥺")),
        ("noise-unicode-cyrillic-greek", {name: rand_text(("cyrillic", "greek"), 80) for name in ("title", *FIELDS)}),
        ("noise-unicode-arabic", {name: rand_text("arabic", 90) for name in ("title", *FIELDS)}),
        ("noise-unicode-devanagari-thai", {name: rand_text(("devanagari", "thai"), 90) for name in ("title", *FIELDS)}),
        ("noise-unicode-cjk", {name: rand_text("cjk", 70, words=False) for name in ("title", *FIELDS)}),
        ("noise-unicode-hangul", {name: rand_text("hangul", 80) for name in ("title", *FIELDS)}),
        ("noise-unicode-all-scripts", {name: rand_text(tuple(SCRIPTS), 120) for name in ("title", *FIELDS)}),
        ("noise-unicode-symbols", {name: rand_text("symbols", 60, words=False) for name in ("title", *FIELDS)}),
        ("noise-repeat-a", repeated("a")),
        ("noise-repeat-kieuk", repeated("ㅋ")),
        ("noise-repeat-hangul-a", repeated("아")),
        ("noise-repeat-dot", title_only("." * 200, "." * 500)),
        ("noise-placeholder-test", same("test")),
        ("noise-placeholder-asdf", same("asdf")),
        ("noise-placeholder-ko-test", same("테스트")),
        ("noise-placeholder-ko-keyboard", same("ㅁㄴㅇㄹ")),
        ("noise-placeholder-todo", title_only("TODO", "TBD")),
        ("noise-placeholder-untitled-ko", title_only("제목 없음", "내용 없음")),
        ("noise-placeholder-digits", same("1234")),
        ("noise-placeholder-test-ko-en", title_only("테스트 test", "test 테스트 test")),
        ("noise-lorem-ipsum", same(LOREM)),
        ("noise-lorem-ko", same(KO_FILLER)),
        ("noise-salad-en", {name: salad(DOMAIN_EN, 14) for name in ("title", *FIELDS)}),
        ("noise-salad-ko", {name: salad(DOMAIN_KO, 14) for name in ("title", *FIELDS)}),
        ("noise-salad-mixed", {name: salad(DOMAIN_EN + DOMAIN_KO, 14) for name in ("title", *FIELDS)}),
        ("noise-draft-outage", same("outage")),
        ("noise-draft-ko-incident", same("장애")),
        ("noise-draft-ko-memo", same("메모")),
        ("noise-draft-gpu", same("GPU")),
        ("noise-unicode-write-check", {name: write_check_text(30) for name in ("title", *FIELDS)}),
        ("noise-mojibake-latin1", mojibake("latin-1")),
        ("noise-mojibake-cp1252", mojibake("cp1252")),
        ("noise-mojibake-cp949", mojibake("cp949")),
    ]
    return out


def main() -> None:
    with OUT.open("w", encoding="utf-8") as fh:
        for lesson_id, fields in lessons():
            fh.write(json.dumps({"id": lesson_id, **fields}, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
