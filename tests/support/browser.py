"""A real stack for the browser tests and the home-page benchmark.

Used by ``tests/schema/site/test_browser.py`` and ``bench/bench_home.py``:

* :func:`seed` writes Lessons into a running dev/test wiki: the first *n*
  cloud-incident records through :class:`s3rm.importing.Importer` (the import
  account), a few Korean synthetic Lessons (one with a verification record),
  then relation records appended to existing Lessons with the codec, saved by
  the same import account (``created_by`` = that account, ``created_at`` =
  now, ``updated_at`` advanced) after the hooks_spec checker accepted them.
* :func:`push_pages` runs ``s3rm sync push`` with ``S3RM_MCP_PUBLIC_URL``
  pointing at the gateway, so the home page and Common.js call it.
* :func:`gateway_for` builds a :class:`support.services.Gateway`
  (gunicorn, as ``s3rm serve`` runs it) with the wiki's agent credentials,
  the job-runner state file and the wiki's origin in
  ``S3RM_MCP_ALLOWED_ORIGINS``. Embedding provider: disabled (search answers
  in ``legacy``).
* :func:`launch_chromium` starts Debian's Chromium (``/usr/bin/chromium``)
  headless through Playwright with a fresh user-data directory; nothing is
  downloaded (``playwright install`` is never needed).

Every loop is bounded; nothing here mocks anything.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from gateway.domain.codec import serialize_page
from gateway.domain.digests import evidence_digest
from gateway.domain.model import LessonPage
from gateway.domain.timestamps import format_ts, next_updated_at
from gateway.wiki.client import WikiClient
from gateway.wiki.repository import MediaWikiRepository
from gateway.domain.checker import check_revision
from s3rm.importing import Importer
from s3rm.importing.cloud_incidents import ImportRecord, read_records

from support.schema_dirs import SCHEMA
from support.services import Gateway

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "cloud-incidents" / "cloud_incidents.csv"
ARTIFACTS = REPO / "test-artifacts" / "browser"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
HOME_TITLE = "연구 메모리"
RELATION_SUMMARY = "S3RM browser-test fixture: relations on {lesson_id}"
RELATIONS = ("supports", "contradicts", "analogous_to", "failed_because", "works_when", "suggests", "supersedes")


# ------------------------------------------------------------------ Korean Lessons

#: Synthetic Korean Lessons (record_origin ``synthetic``): the corpus is English, and the
#: home page's Korean search needs something Korean to find in legacy (full-text) mode.
KOREAN_LESSONS = (
    {
        "id": "ko-retry-storm-after-deploy",
        "title": "배포 직후 재시도 폭주로 응답 지연이 커짐",
        "question": "배포 직후 응답 지연이 갑자기 커진 이유는 무엇이었나?",
        "attempt": "클라이언트 재시도 간격에 지수 백오프와 지터를 넣고 재시도 예산을 두었다.",
        "context": "사내 API 게이트웨이, 인스턴스 12대, 배포 중 절반이 재시작됨.",
        "observation": "재시작된 인스턴스로 가는 요청이 실패하면서 재시도가 한꺼번에 몰려 p99 지연이 8배가 되었다.",
        "interpretation": "고정 간격 재시도가 동시에 몰려 남은 인스턴스를 포화시켰다.",
        "reusable_lesson": "재시도에는 지수 백오프, 지터, 재시도 예산을 함께 둔다.",
        "applicability": "동기 호출이 많은 서비스의 순차 배포에 해당한다. 비동기 큐 소비자에는 그대로 맞지 않는다.",
        "evidence": "배포 당시 지연 그래프와 재시도 횟수 로그.",
    },
    {
        "id": "ko-expired-certificate-outage",
        "title": "인증서가 만료되어 내부 API 접속이 끊김",
        "question": "내부 API 접속이 한밤중에 한꺼번에 끊긴 이유는 무엇이었나?",
        "attempt": "만료 30일 전부터 경보를 보내고 인증서 갱신을 자동화했다.",
        "context": "사내 인증 기관이 발급한 서버 인증서, 수동 갱신, 담당자 휴가 중.",
        "observation": "인증서 만료 시각에 맞춰 모든 클라이언트의 TLS 연결이 실패했다.",
        "interpretation": "만료 일정을 사람이 기억하는 방식이라 갱신이 빠졌다.",
        "reusable_lesson": "인증서 만료는 경보와 자동 갱신으로 다루고 사람의 기억에 맡기지 않는다.",
        "applicability": "수동으로 갱신하는 모든 인증서에 해당한다.",
        "evidence": "TLS 오류 로그와 인증서 만료 시각.",
    },
    {
        "id": "ko-config-change-spread",
        "title": "설정을 바꾼 뒤 장애가 다른 지역으로 번짐",
        "question": "한 지역의 설정 변경이 왜 다른 지역 장애로 이어졌나?",
        "attempt": "설정 배포를 지역별 단계 배포로 바꾸고 자동 되돌리기를 넣었다.",
        "context": "세 지역에 같은 설정 저장소를 쓰는 서비스, 설정은 한 번에 전 지역으로 배포됨.",
        "observation": "잘못된 설정이 몇 분 안에 모든 지역에 퍼져 세 지역이 함께 멈췄다.",
        "interpretation": "설정 배포에 단계와 확인 절차가 없어 한 번의 실수가 전 지역에 퍼졌다.",
        "reusable_lesson": "설정 변경도 코드처럼 지역별로 나눠 배포하고 확인 뒤 넓힌다.",
        "applicability": "여러 지역이 설정을 공유하는 서비스에 해당한다.",
        "evidence": "설정 배포 기록과 지역별 오류율.",
        "verify": True,
    },
)
KOREAN_ACCOUNT_NOTE = "합성 예시: 브라우저 테스트를 위해 만든 메모입니다."


def _korean_page(spec: dict, account: str, now: str, schema) -> LessonPage:
    fields = {name: "" for name in schema.lesson.field_names}
    fields.update({k: v for k, v in spec.items() if k in schema.lesson.field_names})
    fields.update(confidence="low", record_origin="synthetic", author=account, reviewer="", review_state="Draft",
                  created_at=now, updated_at=now)
    ev = {name: "" for name in schema.evidence.field_names}
    ev.update(id="e1", citation=KOREAN_ACCOUNT_NOTE, url="", kind="log", verification_basis="partial_source",
              note="테스트용 자료", added_by=account, added_at=now)
    verifications: tuple[dict, ...] = ()
    if spec.get("verify"):
        ver = {name: "" for name in schema.verification.field_names}
        ver.update(id="v1", evidence_id="e1", evidence_digest=evidence_digest(ev, schema),
                   verification_basis="partial_source", source_identity="log:config-deploy",
                   source_sha256="b" * 64, source_locator="배포 기록 12–40행",
                   coverage="배포 기록 일부만 읽음", outcome="supports", claim_fields="observation",
                   verified_by=account, verified_at=now)
        verifications = (ver,)
    return LessonPage(fields=fields, evidence=(ev,), verifications=verifications)


# ------------------------------------------------------------------ seeding


@dataclass
class Seeded:
    """What :func:`seed` wrote (or found unchanged)."""

    lesson_ids: list[str]
    korean_ids: list[str]
    relations: list[tuple[str, str, str]]  # (from, relation, to)
    titles: dict[str, str] = field(default_factory=dict)
    import_seconds: float = 0.0
    relation_seconds: float = 0.0


def import_client(wiki) -> WikiClient:
    """A WikiClient logged in as the wiki's import bot password."""
    return WikiClient(wiki.api_url, wiki.importer.username, wiki.importer.password, timeout=60.0)


def corpus_records(count: int | None = None) -> list[ImportRecord]:
    """Cloud-incident records: all 356, or ``count`` spread evenly over the file (all providers)."""
    records, failures = read_records(CORPUS)
    assert not failures, failures
    if count is None or count >= len(records):
        return records
    step = len(records) / count
    return [records[int(i * step)] for i in range(count)]


def plan_relations(ids: list[str], count: int, seed: int = 7) -> list[tuple[str, str, str]]:
    """``count`` distinct (from, relation, to) triples over ``ids``: every relation type, no self-edges,
    a few hubs (so the graph has a connected core) and ``analogous_to`` never stored twice for one pair."""
    rng = random.Random(seed)
    hubs = ids[: max(3, len(ids) // 12)]
    out: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str, str]] = set()
    pairs: set[frozenset] = set()
    for attempt in range(count * 50):
        if len(out) >= count:
            break
        relation = RELATIONS[len(out) % len(RELATIONS)]
        source = rng.choice(hubs) if rng.random() < 0.35 else rng.choice(ids)
        target = rng.choice(hubs) if rng.random() < 0.35 else rng.choice(ids)
        key = (source, relation, target)
        if source == target or key in seen or frozenset((source, target)) in pairs:
            continue
        seen.add(key)
        pairs.add(frozenset((source, target)))
        out.append(key)
    assert len(out) == count, f"could only plan {len(out)} relations"
    return out


def _save_checked(repo: MediaWikiRepository, account: str, lesson_id: str, page: LessonPage, summary: str,
                  previous, existing: set[str]) -> None:
    text = serialize_page(page, SCHEMA)
    violations = check_revision(previous.wikitext if previous else None, text, account, page.fields["updated_at"],
                                summary, lesson_id=lesson_id, existing_lessons=existing, schema=SCHEMA)
    assert not violations, f"{lesson_id}: fixture refused by the hooks checker: {violations}"
    repo.save_page(lesson_id, text, summary, base_revision_id=previous.revision_id if previous else None)


def write_relations(wiki, relations: list[tuple[str, str, str]], *, workers: int = 6) -> None:
    """Append the relations to their source Lessons (one revision per source Lesson, import account)."""
    schema = SCHEMA
    account = wiki.importer.username.split("@", 1)[0]
    by_source: dict[str, list[tuple[str, str]]] = {}
    for source, relation, target in relations:
        by_source.setdefault(source, []).append((relation, target))
    existing = {s for s, _, _ in relations} | {t for _, _, t in relations}
    repo = MediaWikiRepository(import_client(wiki), schema)
    snapshots = repo.get_snapshots(sorted(by_source))

    def one(source: str) -> None:
        current = snapshots[source]
        now_dt = datetime.now(timezone.utc)
        now = format_ts(now_dt)
        have = {(r.get("relation"), r.get("to")) for r in current.page.relations}
        added = []
        for relation, target in by_source[source]:
            if (relation, target) in have:
                continue  # written by an earlier run of the same fixture
            added.append({name: "" for name in schema.relation.field_names} | {
                "from": source, "relation": relation, "to": target,
                "note": f"browser-test fixture: {relation}", "created_by": account, "created_at": now})
        if not added:
            return
        fields = dict(current.page.fields)
        fields["updated_at"] = next_updated_at(now_dt, fields.get("updated_at"))
        page = current.page.evolve(fields=fields, relations=tuple(current.page.relations) + tuple(added))
        _save_checked(repo, account, source, page, RELATION_SUMMARY.format(lesson_id=source), current, existing)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, sorted(by_source)))


def seed(wiki, *, records: int | None, relations: int, korean: bool = True, workers: int = 6,
         relation_seed: int = 7) -> Seeded:
    """Import ``records`` corpus Lessons (None: all), the Korean Lessons, then ``relations`` relations."""
    schema = SCHEMA
    account = wiki.importer.username.split("@", 1)[0]
    recs = corpus_records(records)
    repo = MediaWikiRepository(import_client(wiki), schema)
    t0 = time.monotonic()
    report = Importer(repo, account, "cloud-incidents").run(recs, workers=workers)
    assert not report.failed, report.failed[:5]
    korean_ids: list[str] = []
    titles = {r.lesson_id: r.fields["title"] for r in recs}
    if korean:
        current = repo.get_snapshots([spec["id"] for spec in KOREAN_LESSONS])
        for spec in KOREAN_LESSONS:
            korean_ids.append(spec["id"])
            titles[spec["id"]] = spec["title"]
            if spec["id"] in current:
                continue
            page = _korean_page(spec, account, format_ts(datetime.now(timezone.utc)), schema)
            _save_checked(repo, account, spec["id"], page, f"S3RM browser-test fixture: {spec['id']}", None, set())
    import_seconds = time.monotonic() - t0
    ids = [r.lesson_id for r in recs]
    planned = plan_relations(ids, max(0, relations - len(korean_ids)), seed=relation_seed)
    if korean_ids:
        # connect the Korean Lessons to the core so a Korean search lands on connected nodes too
        planned += [(korean_ids[0], "analogous_to", korean_ids[2]), (korean_ids[1], "suggests", ids[0]),
                    (korean_ids[2], "supports", ids[1])][: relations - len(planned)]
    t1 = time.monotonic()
    write_relations(wiki, planned, workers=workers)
    return Seeded(lesson_ids=ids, korean_ids=korean_ids, relations=planned, titles=titles,
                  import_seconds=import_seconds, relation_seconds=time.monotonic() - t1)


# ------------------------------------------------------------------ pages and gateway


def push_pages(wiki, mcp_url: str) -> str:
    """``s3rm sync push`` of every page with ``S3RM_MCP_PUBLIC_URL=mcp_url``; returns its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("S3RM_")}
    env.update(wiki.env())
    env["S3RM_MCP_PUBLIC_URL"] = mcp_url
    proc = subprocess.run([sys.executable, "-m", "s3rm", "sync", "push"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout


def gateway_for(wiki, **extra: str) -> Gateway:
    """A (not yet started) gunicorn gateway on a free port for ``wiki`` (see the module docstring)."""
    env = dict(wiki.env())
    env.update({
        "S3RM_MCP_ALLOWED_ORIGINS": wiki.server_url.rstrip("/"),
        "S3RM_CURSOR_SECRET": "browser-tests-cursor-secret-0123456789",
        "S3RM_EMBEDDING_PROVIDER": "disabled",
    })
    env.update(extra)
    return Gateway(env)


def wiki_url(wiki, title: str, **query: str) -> str:
    """``index.php?title=…`` URL of a wiki page."""
    url = f"{wiki.index_url}?title={quote(title.replace(' ', '_'), safe=':/')}"
    for key, value in query.items():
        url += f"&{key}={quote(value, safe='')}"
    return url


# ------------------------------------------------------------------ browser


#: The two screen sizes the browser tests run at: a desktop and a phone (CSS px).
DESKTOP = (1280, 900)
PHONE = (390, 844)


def launch_chromium(playwright, user_data_dir: str | Path | None = None, *, viewport=DESKTOP, phone: bool = False,
                    timezone_id: str = "UTC"):
    """A persistent Chromium context (fresh temp profile unless ``user_data_dir`` is given).

    ``phone``: a touch device with a device-pixel ratio of 3 that honours the page's viewport
    meta (what a phone browser does); ``timezone_id``: the reader's time zone (IANA name).
    """
    profile = str(user_data_dir or tempfile.mkdtemp(prefix="s3rm-chromium-"))
    extra = {"is_mobile": True, "has_touch": True, "device_scale_factor": 3} if phone else {}
    context = playwright.chromium.launch_persistent_context(
        profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
        viewport={"width": viewport[0], "height": viewport[1]}, locale="ko-KR", timezone_id=timezone_id,
        reduced_motion="reduce", **extra,
    )
    # every wait is on an event (a selector, a data-state, a URL); these are only the bounds on a busy
    # machine (S3RM_TEST_LOAD, xdist workers), where a page load can take many times its idle length
    if not asyncio.iscoroutine(context):  # the async API hands back a coroutine: its caller awaits it
        context.set_default_timeout(60_000)
        context.set_default_navigation_timeout(90_000)
    return context


def write_lessons(wiki, specs: list[dict]) -> None:
    """Save synthetic Lessons (``KOREAN_LESSONS``-shaped dicts) as the import account, unless present."""
    schema = SCHEMA
    account = wiki.importer.username.split("@", 1)[0]
    repo = MediaWikiRepository(import_client(wiki), schema)
    current = repo.get_snapshots([spec["id"] for spec in specs])
    for spec in specs:
        if spec["id"] not in current:
            page = _korean_page(spec, account, format_ts(datetime.now(timezone.utc)), schema)
            _save_checked(repo, account, spec["id"], page, f"S3RM browser-test fixture: {spec['id']}", None, set())


def graph_json(gateway_base: str) -> dict:
    """``GET /mcp/graph`` straight from the gateway."""
    import requests

    response = requests.get(f"{gateway_base}/mcp/graph", timeout=60)
    response.raise_for_status()
    return response.json()


def screenshot(page, name: str) -> Path:
    """Save a full-page screenshot under test-artifacts/browser/ and return its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")
    if len(slug) > 80:
        slug = slug[:64] + "-" + hashlib.sha256(name.encode()).hexdigest()[:12]
    path = ARTIFACTS / f"{slug}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def dump_json(name: str, data) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


# ------------------------------------------------------------------ phone-size checks

#: Evaluated in the page: what a phone reader meets. Returns
#: ``{"viewport": <meta content>, "scroll_width", "client_width",
#:   "small_text": [[selector-ish, px, text]], "small_targets": [[selector-ish, w, h, text]]}``.
#: Text: every visible element with its own non-blank text node inside the content area or the
#: skin header. Tap targets: visible buttons, inputs, selects, summaries and links that stand
#: alone (a link that is the only content of its parent; links inside running text are exempt,
#: as WCAG 2.5.8 exempts inline targets) inside the content area and the skin header.
MOBILE_REPORT_JS = r"""() => {
    const meta = document.querySelector('meta[name=viewport]');
    const roots = [document.getElementById('mw-content-text'), document.querySelector('.vector-header, .mw-header')]
        .filter(Boolean);
    const visible = e => {
        const r = e.getBoundingClientRect(), s = getComputedStyle(e);
        return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none' &&
            !e.closest('[hidden], .s3rm-visually-hidden, .mw-editsection, noscript');
    };
    const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
        (e.className && typeof e.className === 'string' ? '.' + e.className.trim().split(/\s+/).join('.') : '');
    const smallText = [], smallTargets = [], seen = new Set();
    for (const root of roots) {
        for (const e of root.querySelectorAll('*')) {
            if (seen.has(e)) continue;
            seen.add(e);
            if (!visible(e)) continue;
            const own = Array.from(e.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
            const px = parseFloat(getComputedStyle(e).fontSize);
            if (own && px < 14) smallText.push([name(e), px, e.textContent.trim().slice(0, 40)]);
            let target = e.matches('button, select, textarea, summary, [role=button], input:not([type=hidden])');
            if (e.matches('input[type=checkbox], input[type=radio]')) target = false;  // the label is the target
            if (e.matches('label') && e.querySelector('input[type=checkbox], input[type=radio]')) target = true;
            if (e.matches('a[href]')) {
                const parent = e.parentElement;
                target = parent && parent.textContent.trim() === e.textContent.trim() &&
                    !parent.matches('p, td, dd');
            }
            if (target) {
                const r = e.getBoundingClientRect();
                if (r.height < 40 || r.width < 40) smallTargets.push([name(e), Math.round(r.width), Math.round(r.height),
                                                                    e.textContent.trim().slice(0, 30)]);
            }
        }
    }
    return {viewport: meta ? meta.content : null, scroll_width: document.documentElement.scrollWidth,
            client_width: document.documentElement.clientWidth, small_text: smallText, small_targets: smallTargets};
}"""
