"""Form:Lesson and the site script in Chromium against Page Forms-shaped markup, saving into a REAL wiki.

What docs/browser.md#form-rules promises. CI has no Page Forms, so
``tests/support/page_forms.py`` rebuilds what Page Forms would serve for the generated
``schema/Forms/Lesson.wiki`` (read in Page Forms 5.9.1 and 6.0.10): the page around it is the real
wiki's (skin, ResourceLoader, jQuery, ``mw.hook``, ``mw.Api``, the real ``MediaWiki:Common.js``
that ``s3rm sync push`` wrote), the form is Page Forms' markup for the stored page, and the
browser's POST is turned into the page text Page Forms writes and saved to the wiki as the editing
account. ``s3rm audit`` then judges those saves.

Wiki: this module's own copy holding an imported Lesson (cloud incidents through the importer), a
synthetic Lesson (record_origin ``synthetic``) and a lab Lesson, one of each kind.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from urllib.parse import parse_qsl, quote

import pytest
import requests
from playwright import sync_api as playwright_api

from gateway.domain.codec import parse_page
from gateway.domain.model import LessonPage
from gateway.domain.timestamps import format_ts
from gateway.wiki.repository import MediaWikiRepository
from sync.variants import render_page
from support import browser as bh
from support import page_forms as pf
from support.schema_dirs import SCHEMA
from support.services import wait_until

pytestmark = [pytest.mark.wiki, pytest.mark.timeout(900)]

REPO = bh.REPO
FORM_TEXT = (REPO / "schema" / "Forms" / "Lesson.wiki").read_text(encoding="utf-8")
LAB_ID = "lab_gpu_oom_note"


@pytest.fixture(scope="module")
def dev_wiki(module_wiki):
    """This module's own wiki: the audit judges every revision it holds."""
    return module_wiki


class Stack:
    """The seeded wiki, the parsed form definition and the editing account (``S3Admin``)."""

    def __init__(self, wiki):
        self.wiki = wiki
        self.start = format_ts(datetime.now(timezone.utc))
        bh.push_pages(wiki, "http://127.0.0.1:9/mcp")  # site script and pages; no gateway is called here
        seeded = bh.seed(wiki, records=2, relations=0)
        self.imported = seeded.lesson_ids[0]
        self.synthetic = seeded.korean_ids[0]
        self.site = wiki.site("sync")
        self.user = wiki.sync.username.split("@", 1)[0]
        self.repo = MediaWikiRepository(bh.import_client(wiki), SCHEMA)
        self._write_lab()
        self.definition, self.info = pf.parse_definition(wiki, FORM_TEXT)
        self.labels = pf.label_maps(SCHEMA)
        self.saved: list[str] = []

    def _write_lab(self) -> None:
        """A lab Lesson (the gateway's kind) with one evidence and a relation to the imported one."""
        account = self.wiki.importer.username.split("@", 1)[0]
        now = format_ts(datetime.now(timezone.utc))
        fields = {n: "" for n in SCHEMA.lesson.field_names} | {
            "title": "GPU OOM | 큰 배치", "question": "왜 OOM이 났나?", "attempt": "배치를 줄였다.", "context": "A100 80GB",
            "observation": "배치 64에서 OOM", "interpretation": "활성값 메모리", "reusable_lesson": "배치를 먼저 줄인다.",
            "applicability": "학습 작업", "confidence": "low", "evidence": "로그", "record_origin": "lab",
            "author": account, "review_state": "Draft", "created_at": now, "updated_at": now}
        ev = {n: "" for n in SCHEMA.evidence.field_names} | {
            "id": "run_log_1", "citation": "runs/2024-05 | step 40", "url": "https://example.org/run?a=1&b=2",
            "kind": "log", "verification_basis": "partial_source", "note": "줄 40–80", "added_by": account,
            "added_at": now}
        rel = {n: "" for n in SCHEMA.relation.field_names} | {
            "from": LAB_ID, "relation": "works_when", "to": self.imported, "note": "비슷한 조건", "created_by": account,
            "created_at": now}
        page = LessonPage(fields=fields, evidence=(ev,), relations=(rel,))
        if LAB_ID not in self.repo.get_snapshots([LAB_ID]):
            bh._save_checked(self.repo, account, LAB_ID, page, "S3RM test fixture: lab Lesson", None, {self.imported})

    def text(self, lesson_id: str) -> str | None:
        page = self.site.pages[f"Lesson:{lesson_id}"]
        return page.text() if page.exists else None

    def lesson(self, lesson_id: str) -> LessonPage:
        return parse_page(self.text(lesson_id), SCHEMA)

    def audit(self, since: str) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("S3RM_")}
        env.update(self.wiki.env())
        proc = subprocess.run([sys.executable, "-m", "s3rm", "audit", "--format", "json", "--since", since],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-3000:]
        return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def stack(dev_wiki):
    return Stack(dev_wiki)


@pytest.fixture(scope="module")
def playwright():
    with playwright_api.sync_playwright() as p:
        yield p


class FormPage:
    """One Chromium page showing Form:Lesson for a Lesson as Page Forms would, on the real wiki."""

    def __init__(self, stack: Stack, context, lesson_id: str, *, page_text: str | None = None, new: bool = False):
        self.stack = stack
        wiki = stack.wiki
        self.lesson_id = lesson_id
        self.new = new
        self.page_text = None if new else (page_text if page_text is not None else stack.text(lesson_id))
        title = f"Lesson:{lesson_id}"
        if new:
            self.url = bh.wiki_url(wiki, f"Special:FormEdit/Lesson/{title}")
            self.config = {"wgCanonicalSpecialPageName": "FormEdit", "wgAction": "view"}
            heading = f"{stack.info['create title']}: {title.replace('_', ' ')}"
        else:
            self.url = bh.wiki_url(wiki, title, action="formedit")
            self.config = {"wgAction": "formedit"}
            heading = f"{stack.info['edit title']}: {title.replace('_', ' ')}"
        self.heading = heading
        self.posts: list[list[tuple[str, str]]] = []
        self.page = context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.route(lambda url: url == self.url, self._route)  # the form's page and its POST target
        self.page.goto(self.url)
        self.page.wait_for_function("() => window.__pfReady === true && window.mw && mw.s3rm")

    def _shell(self) -> str:
        return requests.get(self.url, timeout=60).text  # the wiki's own page: skin, RLCONF, modules

    def _form(self, posted=None, preview: str = "") -> str:
        return pf.inject(self._shell(), preview + pf.render_form(
            self.stack.wiki, FORM_TEXT, self.page_text, self.stack.user, self.url, posted=posted,
            labels=self.stack.labels, definition=self.stack.definition), self.config, self.heading)

    def _route(self, route) -> None:
        request = route.request
        if request.method != "POST":
            route.fulfill(status=200, content_type="text/html; charset=utf-8", body=self._form())
            return
        pairs = parse_qsl(request.post_data or "", keep_blank_values=True)
        self.posts.append(pairs)
        keys = {k for k, _ in pairs}
        if "wpSave" in keys:
            text = pf.wikitext_from_post(self.stack.definition, pairs)
            summary = dict(pairs).get("wpSummary", "")
            self.stack.site.pages[f"Lesson:{self.lesson_id}"].edit(text, summary=summary)
            self.stack.saved.append(self.lesson_id)
            route.fulfill(status=302, headers={"Location": bh.wiki_url(self.stack.wiki, f"Lesson:{self.lesson_id}")})
            return
        # preview / show changes: Page Forms shows the form again, filled from the POST
        note = '<div id="wikiPreview" class="s3rm-test-preview">미리 보기</div>'
        route.fulfill(status=200, content_type="text/html; charset=utf-8", body=self._form(posted=pairs, preview=note))

    def value(self, name: str) -> str:
        return self.page.eval_on_selector(f'[name="{name}"]', "e => e.value")

    def save(self) -> None:
        self.page.click("button[name=wpSave]")

    def submit_and_wait(self, button: str) -> None:
        """Click 저장 / 미리 보기 / 차이 보기 and wait for the next page to be ready."""
        with self.page.expect_navigation():
            self.page.click(f"button[name={button}]")
        if button != "wpSave":
            self.page.wait_for_function("() => window.__pfReady === true && window.mw && mw.s3rm")

    def problems(self) -> str:
        self.page.wait_for_selector(".s3rm-form-problems")
        return self.page.inner_text(".s3rm-form-problems")


@pytest.fixture
def context(playwright, tmp_path):
    ctx = bh.launch_chromium(playwright, tmp_path / "chromium")
    yield ctx
    ctx.close()


def _unique(prefix: str) -> str:
    return f"{prefix}_{time.time_ns() % 10**9}"


# ------------------------------------------------------------------ B + acceptance


def test_form_save_of_each_lesson_kind_keeps_it_and_the_audit_is_clean(stack, context):
    """Acceptance: 양식으로 편집 → 저장 of an imported, a synthetic and a lab Lesson —
    unchanged, and with a record appended — writes back the same record_origin (B: synthetic stayed
    synthetic, not lab) and ``s3rm audit`` then reports 0 violations for the whole wiki."""
    kinds = {stack.imported: "imported", stack.synthetic: "synthetic", LAB_ID: "lab"}
    bench = _unique("bench")
    for lesson_id, origin in kinds.items():
        before = stack.lesson(lesson_id)
        assert before.fields["record_origin"] == origin
        form = FormPage(stack, context, lesson_id)
        assert form.value("Lesson[record_origin]") == origin
        if lesson_id == LAB_ID:  # append a relation and evidence through the form
            form.page.click(".s3rm-form-evidence .multipleTemplateAdder")
            new = ".s3rm-form-evidence .multipleTemplateInstance:last-of-type"
            form.page.fill(f'{new} [name$="[id]"]', bench)
            form.page.fill(f'{new} [name$="[citation]"]', "bench/run-2 | 80GB")
            form.page.fill(f'{new} [name$="[url]"]', "https://example.org/bench 2".replace(" ", "%20"))
            form.page.select_option(f'{new} select[name$="[kind]"]', "benchmark")
            form.page.select_option(f'{new} select[name$="[verification_basis]"]', "full_text")
            assert form.page.eval_on_selector(f'{new} select[name$="[verification_basis]"] option[value=not_recorded]',
                                              "o => o.disabled")
        form.submit_and_wait("wpSave")
        assert form.errors == []
        after = stack.lesson(lesson_id)
        assert after.fields["record_origin"] == origin
        assert after.fields["created_at"] == before.fields["created_at"]
        assert after.fields["updated_at"] > before.fields["updated_at"]
        assert after.evidence[:len(before.evidence)] == before.evidence
        assert after.relations == before.relations
        form.page.close()
    assert stack.lesson(LAB_ID).evidence[-1]["id"] == bench
    report = stack.audit(stack.start)
    assert report["violation_count"] == 0, report["violations"]
    assert report["scanned"] >= 7


# ------------------------------------------------------------------ C


def _fill_new_lesson(form: FormPage, **over: str) -> None:
    values = {"title": "새 메모", "question": "질문 | 앞뒤", "attempt": "시도", "context": "조건", "observation": "결과",
              "interpretation": "해석", "reusable_lesson": "교훈", "applicability": "범위", "evidence": "개요"}
    for name, value in values.items():
        form.page.fill(f'[name="Lesson[{name}]"]', value)
    form.page.select_option('[name="Lesson[confidence]"]', over.get("confidence", "low"))
    form.page.select_option('[name="Lesson[record_origin]"]', "imported")
    first = ".s3rm-form-evidence .multipleTemplateInstance"
    form.page.fill(f'{first} [name$="[id]"]', over.get("evidence_id", "run_log_1"))
    form.page.fill(f'{first} [name$="[citation]"]', "runs/7 | step 3")
    form.page.fill(f'{first} [name$="[url]"]', over.get("url", ""))
    form.page.select_option(f'{first} select[name$="[kind]"]', "log")
    form.page.select_option(f'{first} select[name$="[verification_basis]"]', "partial_source")


def test_preview_and_show_changes_before_the_first_save_change_nothing_the_save_depends_on(stack, context):
    """차이 보기 and 미리 보기 of a new Lesson post the form and get it back filled from
    the POST. They fill no time stamp and lock no field, so the later save still has created_at =
    updated_at = the save's time (HS14, HS16) and 자료 출처 stays choosable."""
    lesson_id = _unique("preview_first")
    form = FormPage(stack, context, lesson_id, new=True)
    _fill_new_lesson(form)
    form.submit_and_wait("wpDiff")
    diff_post = dict(form.posts[-1])
    assert diff_post["Lesson[created_at]"] == "" and diff_post["Lesson[updated_at]"] == ""
    assert diff_post["Lesson evidence[0a][added_at]"] == ""
    assert form.value("Lesson[created_at]") == ""
    options = form.page.eval_on_selector_all('[name="Lesson[record_origin]"] option', "os => os.map(o => [o.value, o.disabled])")
    assert options == [["lab", False], ["imported", False], ["synthetic", True]]
    posted_at = time.time()
    wait_until(lambda: time.time() >= int(posted_at) + 1.05, timeout=10, what="the clock's next second")
    form.submit_and_wait("wpPreview")
    assert dict(form.posts[-1])["Lesson[updated_at]"] == ""
    form.submit_and_wait("wpSave")
    saved = stack.lesson(lesson_id)
    assert saved.fields["created_at"] == saved.fields["updated_at"] == saved.evidence[0]["added_at"]
    assert saved.fields["created_at"] >= format_ts(datetime.fromtimestamp(int(posted_at) + 1, timezone.utc))
    assert saved.fields["record_origin"] == "imported" and form.errors == []
    report = stack.audit(stack.start)
    assert [v for v in report["violations"] if v["lesson_id"] == lesson_id] == []


# ------------------------------------------------------------------ E


def test_form_refuses_what_the_rules_refuse_with_korean_messages(stack, context):
    """an evidence id `Run Log 2`, the URL `ftp://example.org/x y` and confidence high
    without a verification are refused before anything is posted, each with a Korean message; fixed,
    the same form saves and the audit finds nothing."""
    lesson_id = _unique("refused_first")
    form = FormPage(stack, context, lesson_id, new=True)
    _fill_new_lesson(form, evidence_id="Run Log 2")
    form.save()
    assert "“Run Log 2”은(는) 쓸 수 없습니다" in form.problems() and "run_log_2" in form.problems()
    assert form.posts == []
    first = ".s3rm-form-evidence .multipleTemplateInstance"
    form.page.fill(f'{first} [name$="[id]"]', "run_log_2")
    form.page.fill(f'{first} [name$="[url]"]', "ftp://example.org/x y")
    form.save()
    form.page.wait_for_function("() => document.querySelector('.s3rm-form-problems').innerText.includes('URL')")
    assert "http:// 또는 https://" in form.problems() and form.posts == []
    form.page.fill(f'{first} [name$="[url]"]', "https://example.org/x%20y")
    form.page.select_option('[name="Lesson[confidence]"]', "high")
    form.save()
    form.page.wait_for_function("() => document.querySelector('.s3rm-form-problems').innerText.includes('신뢰도')")
    assert "근거 검증 기록" in form.problems() and form.posts == []
    assert form.page.get_attribute('[name="Lesson[confidence]"]', "aria-invalid") == "true"
    form.page.select_option('[name="Lesson[confidence]"]', "medium")
    form.submit_and_wait("wpSave")
    saved = stack.lesson(lesson_id)
    assert saved.evidence[0]["id"] == "run_log_2" and saved.evidence[0]["url"] == "https://example.org/x%20y"
    report = stack.audit(stack.start)
    assert [v for v in report["violations"] if v["lesson_id"] == lesson_id] == [] and form.errors == []


# ------------------------------------------------------------------ H


def test_stored_records_are_read_only_and_a_changed_or_removed_one_is_refused(stack, context):
    """evidence and relations already on the page cannot be typed into, re-chosen,
    removed or moved in the form; a change made anyway (here by script) or a removal is refused
    with a warning before anything is posted."""
    form = FormPage(stack, context, LAB_ID)
    stored = ".s3rm-form-evidence .multipleTemplateInstance.s3rm-record-locked"
    assert form.page.eval_on_selector(f'{stored} [name$="[citation]"]', "e => e.readOnly")
    assert form.page.eval_on_selector(f"{stored} .removeButton", "e => getComputedStyle(e).visibility") == "hidden"
    choices = form.page.eval_on_selector_all(f'{stored} select', "ss => ss.map(s => Array.from(s.options).filter(o => !o.disabled).length)")
    assert choices and set(choices) == {1}  # the stored value only
    assert "저장된 기록이라" in form.page.inner_text(stored)
    form.page.eval_on_selector(f'{stored} [name$="[citation]"]', "e => { e.readOnly = false; e.value = 'changed'; }")
    form.save()
    assert "바뀌었습니다" in form.problems() and form.posts == []
    form.page.close()

    form = FormPage(stack, context, LAB_ID)
    form.page.eval_on_selector(".s3rm-form-relation .multipleTemplateInstance .removeButton", "e => e.click()")
    form.save()
    assert "지워졌습니다" in form.problems() and form.posts == []


def test_an_unknown_stored_relation_type_is_refused_not_replaced(stack, context):
    """a relation type the form does not know (written outside the gateway) would show
    as the first choice and be saved as `supports`; the form says so and refuses the save."""
    text = stack.text(LAB_ID).replace("|relation=works_when", "|relation=related_to")
    form = FormPage(stack, context, LAB_ID, page_text=text)
    form.save()
    problems = form.problems()
    assert "‘관계’ 값은 양식이 모르는 값" in problems and form.posts == []


# ------------------------------------------------------------------ J


def test_form_fits_a_phone_and_its_heading_shows_the_id(stack, playwright, tmp_path):
    """on a 390 px phone the form is no wider than the screen, and the heading shows
    the Lesson id (`lab_gpu_oom_note`), not the page name with spaces."""
    ctx = bh.launch_chromium(playwright, tmp_path / "phone", viewport=bh.PHONE, phone=True)
    try:
        form = FormPage(stack, ctx, LAB_ID)
        size = form.page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert size[0] <= size[1], size
        heading = form.page.inner_text("#firstHeading")
        assert "Lesson:lab_gpu_oom_note" in heading and "lab gpu oom note" not in heading
        view = ctx.new_page()  # the Lesson page itself, as MediaWiki serves it
        view.goto(bh.wiki_url(stack.wiki, f"Lesson:{LAB_ID}"))
        view.wait_for_function("() => window.mw && mw.s3rm")
        assert view.inner_text("#firstHeading").strip() == f"Lesson:{LAB_ID}"
        form = FormPage(stack, ctx, "phone_new_lesson", new=True)
        form.page.click(".s3rm-form-relation .multipleTemplateAdder")
        size = form.page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert size[0] <= size[1], size
    finally:
        ctx.close()


# ------------------------------------------------------------------ F


def test_home_page_opens_at_the_top_with_the_page_forms_launcher(stack, playwright, tmp_path):
    """the home page's {{#forminput}} (Page Forms variant) must not take the focus, which
    scrolled the page down to the new-Lesson box; the page opens at its top on a desktop and a phone."""
    source = (REPO / "schema" / "pages" / "home.wiki").read_text(encoding="utf-8")
    text = render_page(source, {"smw", "pageforms", "scribunto"}, {"S3RM_MCP_URL": "http://127.0.0.1:9/mcp"})
    params = pf.forminput_params(text)
    held = text.replace(text[text.index("{{#forminput:"):text.index("}}", text.index("{{#forminput:")) + 2],
                        "S3RMFORMINPUTX")
    parsed = requests.post(stack.wiki.api_url, data={
        "action": "parse", "format": "json", "formatversion": "2", "contentmodel": "wikitext", "text": held,
        "title": bh.HOME_TITLE, "disableeditsection": "1", "disablelimitreport": "1", "prop": "text"},
        timeout=60).json()["parse"]["text"]
    launcher = pf.render_forminput(params).replace("{FORMSTART}", bh.wiki_url(stack.wiki, "Special:FormStart"))
    home = bh.wiki_url(stack.wiki, bh.HOME_TITLE)
    for viewport, phone in ((bh.DESKTOP, False), (bh.PHONE, True)):
        ctx = bh.launch_chromium(playwright, tmp_path / f"home{phone}", viewport=viewport, phone=phone)
        try:
            page = ctx.new_page()
            page.route(lambda url: url == home, lambda route: route.fulfill(
                status=200, content_type="text/html; charset=utf-8",
                body=pf.inject(requests.get(home, timeout=60).text, parsed.replace("S3RMFORMINPUTX", launcher), {})))
            page.goto(home)
            page.wait_for_function("() => window.__pfReady === true")
            page.wait_for_selector(".pfFormInput [name=page_name]")
            assert page.evaluate("() => window.scrollY") == 0
            assert page.evaluate("() => document.activeElement && document.activeElement.name") != "page_name"
        finally:
            ctx.close()
