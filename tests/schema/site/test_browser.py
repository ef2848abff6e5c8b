"""The browser experience (docs/browser.md) in a REAL browser on a REAL stack.

Stack (module fixture ``stack``): the session's ``dev_wiki`` MediaWiki; ``s3rm
sync push`` of every page with ``S3RM_MCP_PUBLIC_URL`` = a gateway started
here under gunicorn (``s3rm serve``'s command line) with the wiki's agent
credentials, the job-runner state file and the wiki's origin in
``S3RM_MCP_ALLOWED_ORIGINS`` (wiki and gateway differ in port, so every
search and graph request is a real cross-origin request); 60 cloud-incident
records imported with :class:`s3rm.importing.Importer`, three Korean synthetic
Lessons (one with a verification record) and 40 relations appended as
``{{Lesson relation}}`` records (see ``tests/support/browser.py``). The
embedding provider is disabled, so search answers in ``legacy`` and the page
says so ("전체 텍스트 검색").

Browser: Debian's Chromium (``/usr/bin/chromium``) headless via Python
Playwright, fresh profile, ``prefers-reduced-motion: reduce`` (graph moves are
then instant, so positions can be compared without waiting for animations).

Console: every page must log no error and throw nothing. The ONE ignored
message is the 404 for ``/favicon.ico`` (the dev wiki has no favicon; that is
MediaWiki's set-up, not our page).

Screenshots land in ``test-artifacts/browser/`` (git-ignored).

Size: about 900 lines because every test shares the one module-scoped stack
(wiki copy, pushed site, gunicorn gateway, Chromium); split modules would each
start that stack again, about 40 s of CI time apiece.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
import requests
from playwright import sync_api as playwright_api
from playwright.sync_api import expect

from gateway.domain.digests import evidence_digest
from gateway.wiki.client import WikiClient
from gateway.wiki.repository import MediaWikiRepository
from support.schema_dirs import SCHEMA
from support import browser as bh
from support.services import wait_until


@pytest.fixture(scope="module")
def dev_wiki(module_wiki):
    """This module's own wiki (tests/conftest.py ``module_wiki``): the home page shows the whole corpus (newest Lessons, graph, times)."""
    return module_wiki


pytestmark = [pytest.mark.wiki, pytest.mark.timeout(600)]

RECORDS = 60
RELATIONS = 40
#: The graph has stopped moving: no animation or redraw pending, fonts and recent list in place
#: (``data-settled``, docs/browser.md#graph-settled). Positions read after it are final until the test moves it.
GRAPH_SETTLED = "() => document.getElementById('s3rm-knowledge-graph')?.dataset.settled === 'true'"
GRAPH_READY = ("() => { const g = document.getElementById('s3rm-knowledge-graph');"
               " return !!(g && ['ready', 'empty', 'error'].includes(g.dataset.state)"
               " && window.mw && mw.s3rm && mw.s3rm.home && (mw.s3rm.home.graph || g.dataset.state !== 'ready')); }")


# ------------------------------------------------------------------ fixtures


@dataclass
class Stack:
    wiki: object
    gateway: object
    seeded: bh.Seeded

    def url(self, title: str, **query: str) -> str:
        return bh.wiki_url(self.wiki, title, **query)

    @property
    def home(self) -> str:
        return self.url(bh.HOME_TITLE)

    def graph(self) -> dict:
        return bh.graph_json(self.gateway.base)


@pytest.fixture(scope="module")
def stack(dev_wiki):
    gateway = bh.gateway_for(dev_wiki)
    bh.push_pages(dev_wiki, gateway.url)
    seeded = bh.seed(dev_wiki, records=RECORDS, relations=RELATIONS)
    gateway.start()
    try:
        yield Stack(dev_wiki, gateway, seeded)
    finally:
        gateway.stop()


@pytest.fixture(scope="module")
def playwright():
    with playwright_api.sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright, tmp_path_factory):
    context = bh.launch_chromium(playwright, tmp_path_factory.mktemp("chromium-anon"))
    yield context
    context.close()


class Console:
    """Console errors and uncaught exceptions of one page (the favicon 404 ignored)."""

    def __init__(self, page):
        self.problems: list[str] = []
        self.ignored: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.problems.append(f"uncaught: {exc}"))

    def _console(self, message) -> None:
        if message.type != "error":
            return
        where = (message.location or {}).get("url", "")
        text = f"{message.text} ({where})"
        if where.endswith("/favicon.ico") and "404" in message.text:
            self.ignored.append(text)
        else:
            self.problems.append(text)

    def assert_clean(self) -> None:
        assert not self.problems, "console errors:\n" + "\n".join(self.problems)


def _watched_page(context, request, size_name: str = "desktop"):
    """A new page of ``context`` whose console is checked and whose last state is saved at the end."""
    page = context.new_page()
    page.console = Console(page)  # type: ignore[attr-defined]
    page.size_name = size_name  # type: ignore[attr-defined]
    yield page
    try:
        bh.screenshot(page, f"last-{request.node.name}")
    finally:
        page.close()
    page.console.assert_clean()


@pytest.fixture
def page(browser, request):
    yield from _watched_page(browser, request)


def relation_labels() -> dict[str, str]:
    """The schema's Korean relation labels, in schema order."""
    return dict(SCHEMA.enums["relation"].labels)


def open_home(page, stack: Stack) -> None:
    """Load the home page and wait until its graph is drawn AND settled (positions read next are final)."""
    page.goto(stack.home)
    page.wait_for_function(GRAPH_READY, timeout=60_000)
    assert page.get_attribute("#s3rm-knowledge-graph", "data-state") == "ready"
    page.wait_for_function(GRAPH_SETTLED, timeout=60_000)


def wait_graph_filters(page, title: str, relation: str) -> None:
    """Wait until the graph has taken the title and relation filters in (its input/change handlers ran)."""
    page.wait_for_function("([t, r]) => { const g = mw.s3rm.home.graph;"
                           " return g.titleFilter === t && g.relationFilter === r; }",
                           arg=[title.strip().lower(), relation], timeout=30_000)


def graph_state(page) -> dict:
    return page.evaluate("""() => {
        const g = mw.s3rm.home.graph, out = {};
        out.width = g.width; out.height = g.height;
        out.nodes = g.model.nodes.map(n => {
            const p = g.screenPosition(n.id);
            return {id: n.id, x: p.x, y: p.y, degree: n.degree, active: g.isActive(n), title: n.title};
        });
        out.edges = g.model.edges.map(e => [g.model.nodes[e.a].id, e.relation, g.model.nodes[e.b].id]);
        return out;
    }""")


def pixel_alpha(page, points: list[tuple[float, float]], radius: int = 0) -> list[int]:
    """Alpha (0–255) of the graph canvas at CSS-pixel points (the canvas background is transparent);
    with ``radius`` the largest alpha in the (2r+1)² device pixels around each point; -1 outside."""
    # the graph redraws on the next animation frame after a change: let two frames pass first
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    return page.evaluate("""([points, r]) => {
        const c = document.getElementById('s3rm-graph-canvas'), ctx = c.getContext('2d');
        const k = c.width / c.getBoundingClientRect().width;
        return points.map(([x, y]) => {
            const px = Math.round(x * k), py = Math.round(y * k);
            if (px < 0 || py < 0 || px >= c.width || py >= c.height) return -1;
            const d = ctx.getImageData(px - r, py - r, 2 * r + 1, 2 * r + 1).data;
            let best = 0;
            for (let i = 3; i < d.length; i += 4) best = Math.max(best, d[i]);
            return best;
        });
    }""", [[list(p) for p in points], radius])


def settled_hub(page) -> tuple[dict, tuple[float, float]]:
    """Wait until the graph has settled, then pick :func:`_hub` from the positions it has NOW and return it with
    its viewport point: the page is scrolled so that the node sits mid-viewport (with Korean fonts the text
    above pushes the lower half of the graph below the fold, where a click reaches nothing), and the canvas
    box and the node's position are read in that same script, at click time."""
    page.wait_for_function(GRAPH_SETTLED, timeout=60_000)
    hub = _hub(graph_state(page))
    point = page.evaluate("""(id) => {
        const g = mw.s3rm.home.graph, p = g.screenPosition(id);
        const before = g.canvas.getBoundingClientRect();
        window.scrollBy({top: before.top + p.y - window.innerHeight / 2, left: 0, behavior: 'instant'});
        const box = g.canvas.getBoundingClientRect(), q = g.screenPosition(id);
        return [box.left + q.x, box.top + q.y, window.innerWidth, window.innerHeight];
    }""", hub["id"])
    assert 0 <= point[0] < point[2] and 0 <= point[1] < point[3], f"{hub['id']} is outside the viewport: {point}"
    return hub, (point[0], point[1])


def search(page, text: str) -> str:
    page.fill("#s3rm-search-input", text)
    page.click("#s3rm-search-submit")
    page.wait_for_function("() => ['results', 'empty', 'error'].includes("
                           "document.getElementById('s3rm-semantic-search').dataset.state)", timeout=30_000)
    return page.get_attribute("#s3rm-semantic-search", "data-state")


def result_ids(page) -> list[str]:
    return page.eval_on_selector_all("#s3rm-search-results li[data-id]", "els => els.map(e => e.dataset.id)")


def well_separated(nodes: list[dict], chosen: list[dict], others: list[dict], gap: float = 14.0) -> list[dict]:
    """Nodes of ``chosen`` with no node of ``others`` within ``gap`` CSS pixels (clean pixels to sample)."""
    out = []
    for n in chosen:
        if all((n["x"] - o["x"]) ** 2 + (n["y"] - o["y"]) ** 2 > gap * gap for o in others if o["id"] != n["id"]):
            out.append(n)
    return out


# ------------------------------------------------------------------ home page


def test_home_page_loads_without_console_errors(stack, page):
    open_home(page, stack)
    # home-page anchors, the three steps, shortcuts, "모든 메모" and the clear-results control
    for anchor in ("knowledge-graph", "quick-start", "create-a-lesson"):
        assert page.locator(f"#{anchor}").count() == 1, anchor
    steps = page.locator(".s3rm-onboarding-steps strong").all_inner_texts()
    assert steps == ["찾기", "연결 보기", "남기기"]
    assert page.locator("#s3rm-shortcut-search a").count() == 1
    assert page.locator("#s3rm-shortcut-new a").get_attribute("href").endswith("#create-a-lesson")
    all_link = page.locator("#recent-lessons .s3rm-section-link a")
    assert all_link.inner_text() == "모든 메모" and "Lesson" in requests.utils.unquote(all_link.get_attribute("href"))
    assert page.locator("#s3rm-search-clear").inner_text() == "검색 결과 해제"
    # the intro is transcluded from the main help page; no red links anywhere on the page
    assert "연구실이 함께 쓰는 배움의 기록장" in page.inner_text(".s3rm-home-intro")
    red = page.eval_on_selector_all("#mw-content-text a.new", "els => els.map(e => e.textContent)")
    assert not red, f"red links on the home page: {red}"
    # the search box is built by the script; the no-JS fallbacks are hidden
    assert page.locator("#s3rm-search-input").is_visible()
    assert not page.locator(".s3rm-graph-fallback").is_visible()
    # recent list: the 6 newest by updated_at, as /mcp/graph orders them (no SMW here)
    page.wait_for_selector("#s3rm-recent-list[data-state=ready]")
    recent = page.eval_on_selector_all("#s3rm-recent-list li[data-id]", "els => els.map(e => e.dataset.id)")
    newest = sorted(stack.graph()["nodes"], key=lambda n: n["updated_at"], reverse=True)
    assert len(recent) == 6
    assert [n["updated_at"] for n in newest[:6]] == sorted([next(n["updated_at"] for n in newest if n["id"] == r)
                                                            for r in recent], reverse=True)
    marks = page.evaluate("performance.getEntriesByType('mark').map(m => m.name)")
    assert {"s3rm-graph-data", "s3rm-graph-layout", "s3rm-graph-interactive"} <= set(marks)
    bh.screenshot(page, "home")
    page.console.assert_clean()


def test_graph_renders_every_lesson_and_relation(stack, page):
    open_home(page, stack)
    data = stack.graph()
    node_ids = {n["id"] for n in data["nodes"]}
    edges = {(e["from"], e["relation"], e["to"]) for e in data["edges"]}
    # the gateway's graph holds everything the fixture wrote
    assert set(stack.seeded.lesson_ids) | set(stack.seeded.korean_ids) <= node_ids
    assert set(stack.seeded.relations) <= edges
    assert not data["truncated"]
    # the page draws exactly that graph
    root = page.locator("#s3rm-knowledge-graph")
    assert int(root.get_attribute("data-node-count")) == len(node_ids)
    assert int(root.get_attribute("data-edge-count")) == len(edges)
    state = graph_state(page)
    assert {n["id"] for n in state["nodes"]} == node_ids
    assert {tuple(e) for e in state["edges"]} == edges
    # every node is inside the canvas and painted there; every edge's midpoint is painted
    for n in state["nodes"]:
        assert 0 <= n["x"] <= state["width"] and 0 <= n["y"] <= state["height"], n
    alphas = pixel_alpha(page, [(n["x"], n["y"]) for n in state["nodes"]])
    unpainted = [n["id"] for n, a in zip(state["nodes"], alphas) if a < 200]
    assert not unpainted, f"nodes not painted: {unpainted}"
    pos = {n["id"]: n for n in state["nodes"]}
    mids = [((pos[a]["x"] + pos[b]["x"]) / 2, (pos[a]["y"] + pos[b]["y"]) / 2) for a, _, b in state["edges"]]
    blank = [e for e, a in zip(state["edges"], pixel_alpha(page, mids, radius=1)) if a == 0]
    assert not blank, f"edges not painted at their midpoint: {blank}"
    # titles of connected Lessons are visible from the start; the status line counts everything
    assert int(root.get_attribute("data-visible-labels")) > 0
    assert page.inner_text("#s3rm-graph-stats").startswith(f"메모 {len(node_ids)}개 · 관계 {len(edges)}개")
    # the list view (keyboard/screen-reader alternative) lists every Lesson
    page.click("#s3rm-graph-list summary")
    expect(page.locator("#s3rm-graph-list li")).to_have_count(len(node_ids))  # filled on the async toggle event
    # connected Lessons in the middle, unconnected ones on rings around them: the layout's promise is
    # that every ring lies beyond the farthest node of the core (measured from the layout's origin,
    # in the page's own classification — with similarity shown, a Lesson with a similar one is core)
    layout = page.evaluate("""() => {
        const g = mw.s3rm.home.graph, m = g.model;
        return {origin: {x: g.view.x, y: g.view.y}, nodes: m.nodes.map(n => ({id: n.id,
            core: n.degree > 0 || (m.showSimilar && n.similar.length > 0)}))};
    }""")
    core = {n["id"] for n in layout["nodes"] if n["core"]}
    assert {n["id"] for n in state["nodes"] if n["degree"] > 0} <= core

    def dist(n):
        return ((n["x"] - layout["origin"]["x"]) ** 2 + (n["y"] - layout["origin"]["y"]) ** 2) ** 0.5

    rim = [dist(n) for n in state["nodes"] if n["id"] not in core]
    if rim:
        assert min(rim) > max(dist(n) for n in state["nodes"] if n["id"] in core)
    bh.screenshot(page, "graph")
    page.console.assert_clean()


def _assert_highlighted(page, ids: list[str], mode_text: str) -> dict:
    """Results gathered at the centre of the canvas, every other Lesson dimmed, result links listed."""
    state = graph_state(page)
    wanted = set(ids)
    assert page.get_attribute("#s3rm-knowledge-graph", "data-search-results") == str(len(wanted))
    assert page.inner_text("#s3rm-search-mode") == mode_text
    links = page.eval_on_selector_all("#s3rm-search-results li a.s3rm-semantic-result-link",
                                      "els => els.map(e => decodeURIComponent(e.getAttribute('href')))")
    assert len(links) == len(ids) and all(f"Lesson:{i}" in link for i, link in zip(ids, links))
    results = [n for n in state["nodes"] if n["id"] in wanted]
    others = [n for n in state["nodes"] if n["id"] not in wanted]
    assert all(n["active"] for n in results) and not any(n["active"] for n in others)
    # at the centre: the results' centroid is the canvas centre, all of them inside the canvas
    cx = sum(n["x"] for n in results) / len(results)
    cy = sum(n["y"] for n in results) / len(results)
    assert abs(cx - state["width"] / 2) < state["width"] * 0.1 and abs(cy - state["height"] / 2) < state["height"] * 0.1
    for n in results:
        assert 0 <= n["x"] <= state["width"] and 0 <= n["y"] <= state["height"]
    # painted bright vs dimmed: sample nodes with no neighbour close by
    bright = pixel_alpha(page, [(n["x"], n["y"]) for n in well_separated(state["nodes"], results, state["nodes"])])
    visible_others = [n for n in others if 0 <= n["x"] <= state["width"] and 0 <= n["y"] <= state["height"]]
    dim = [a for a in pixel_alpha(page, [(n["x"], n["y"]) for n in
                                         well_separated(state["nodes"], visible_others, state["nodes"])]) if a >= 0]
    assert bright and all(a >= 240 for a in bright), bright
    # a dimmed node is painted at 18 % opacity (alpha ≈ 46); one lying under a result's label or on a
    # bright edge between two results reads brighter, so judge the bulk, not every sample
    assert dim and sorted(dim)[len(dim) // 2] < 80 and sum(a < 120 for a in dim) >= 0.85 * len(dim), dim
    return state


def test_english_query_highlights_results(stack, page):
    open_home(page, stack)
    before = {n["id"]: (n["x"], n["y"]) for n in graph_state(page)["nodes"]}
    assert search(page, "storage service disruption") == "results"
    ids = result_ids(page)
    assert ids and set(ids) & set(stack.seeded.lesson_ids)
    assert page.inner_text("#s3rm-search-heading") == f"관련 메모 {len(ids)}건"
    _assert_highlighted(page, ids, "전체 텍스트 검색")
    bh.screenshot(page, "search-english")
    # 검색 결과 해제 restores the graph exactly and empties the panel
    page.click("#s3rm-search-clear")
    assert page.get_attribute("#s3rm-knowledge-graph", "data-search-results") is None
    assert not page.locator("#s3rm-search-feedback").is_visible()
    assert page.get_attribute("#s3rm-semantic-search", "data-state") is None
    after = graph_state(page)
    assert all(n["active"] for n in after["nodes"])
    moved = [n["id"] for n in after["nodes"]
             if abs(n["x"] - before[n["id"]][0]) > 0.5 or abs(n["y"] - before[n["id"]][1]) > 0.5]
    assert not moved, f"not restored: {moved[:5]}"
    page.console.assert_clean()


def test_superseded_and_contradicted_lessons_are_marked(stack, page):
    """docs/tools.md#standing: a search hit another Lesson corrects carries a badge, and the graph marks
    every Lesson a stored supersedes / contradicts relation points at."""
    graph = stack.graph()
    corrected = {}
    for edge in graph["edges"]:
        if edge["relation"] in ("supersedes", "contradicts") and edge["from"] != edge["to"]:
            corrected.setdefault(edge["to"], set()).add(edge["relation"])
    assert corrected, "the seeded relations hold no supersedes or contradicts edge"
    open_home(page, stack)
    assert page.get_attribute("#s3rm-knowledge-graph", "data-corrected-count") == str(len(corrected))
    target = sorted(corrected)[0]
    title = next(n["title"] for n in graph["nodes"] if n["id"] == target)
    repo = MediaWikiRepository(WikiClient(stack.wiki.api_url, stack.wiki.agent.username, stack.wiki.agent.password), SCHEMA)
    wait_until(lambda: repo.find_incoming_edges([target], corrected[target])[0][target], 120,
               "the job runner's link-table update")  # standing reads the link tables
    assert search(page, title) == "results"
    badge = page.locator(f"#s3rm-search-results li[data-id='{target}'] .s3rm-standing")
    expect(badge).to_have_count(1)
    words = {"supersedes": "대체됨", "contradicts": "반박됨"}
    for relation in corrected[target]:
        assert words[relation] in badge.inner_text()
    page.console.assert_clean()


def test_korean_query_highlights_results(stack, page):
    open_home(page, stack)
    # the first example question is a button that runs the search
    example = page.locator(".s3rm-semantic-example").first
    question = example.inner_text()
    example.click()
    page.wait_for_function("() => ['results', 'empty', 'error'].includes("
                           "document.getElementById('s3rm-semantic-search').dataset.state)")
    assert page.input_value("#s3rm-search-input") == question
    assert page.get_attribute("#s3rm-semantic-search", "data-state") == "results"
    assert "ko-retry-storm-after-deploy" in result_ids(page)
    assert search(page, "인증서가 만료되어 접속이 끊긴 일") == "results"
    ids = result_ids(page)
    assert "ko-expired-certificate-outage" in ids[:3]
    _assert_highlighted(page, ids, "전체 텍스트 검색")
    bh.screenshot(page, "search-korean")
    # a Korean question nothing matches: the empty state, not an error
    assert search(page, "양자 컴퓨터 냉각 장치가 고장 난 사례") == "empty"
    assert "에 맞는 메모를 찾지 못했습니다." in page.inner_text("#s3rm-search-heading")
    assert result_ids(page) == []
    assert page.get_attribute("#s3rm-knowledge-graph", "data-search-results") == "0"
    bh.screenshot(page, "search-empty")
    page.focus("#s3rm-search-input")
    page.keyboard.press("Escape")  # Escape in the search box clears too
    assert page.get_attribute("#s3rm-knowledge-graph", "data-search-results") is None
    page.console.assert_clean()


def test_title_and_relation_filters(stack, page):
    open_home(page, stack)
    data = stack.graph()
    titles = {n["id"]: n["title"] for n in data["nodes"]}
    word = "google compute"
    page.fill("#s3rm-graph-filter", "Google Compute")
    wait_graph_filters(page, "Google Compute", "")
    expected = {i for i, t in titles.items() if word in f"{t} {i}".lower()}
    assert expected and len(expected) < len(titles)
    state = graph_state(page)
    assert {n["id"] for n in state["nodes"] if n["active"]} == expected
    page.click("#s3rm-graph-list summary")
    expect(page.locator("#s3rm-graph-list li")).to_have_count(len(expected))  # filled on the async toggle event
    bh.screenshot(page, "filter-title")
    page.fill("#s3rm-graph-filter", "")
    page.click("#s3rm-graph-list summary")
    # relation filter: only Lessons with a "contradicts" edge (either end) stay bright
    options = page.eval_on_selector_all("#s3rm-graph-relation option", "els => els.map(e => [e.value, e.textContent])")
    counts = {}
    for e in data["edges"]:
        counts[e["relation"]] = counts.get(e["relation"], 0) + 1
    assert options[0] == ["", "모든 관계"]
    labels = relation_labels()
    assert [v for v, _ in options[1:]] == list(labels)
    for value, text in options[1:]:
        assert text == f"{labels[value]} ({counts.get(value, 0)})"
    page.select_option("#s3rm-graph-relation", "contradicts")
    wait_graph_filters(page, "", "contradicts")
    ends = {e["from"] for e in data["edges"] if e["relation"] == "contradicts"} | \
        {e["to"] for e in data["edges"] if e["relation"] == "contradicts"}
    state = graph_state(page)
    assert ends and {n["id"] for n in state["nodes"] if n["active"]} == ends
    bh.screenshot(page, "filter-relation")
    page.select_option("#s3rm-graph-relation", "")
    assert all(n["active"] for n in graph_state(page)["nodes"])
    page.console.assert_clean()


def _hub(state: dict) -> dict:
    """The best-connected node that has no other node within 8 px (a click lands on it)."""
    candidates = sorted(state["nodes"], key=lambda n: (-n["degree"], n["id"]))
    for n in candidates:
        if well_separated(state["nodes"], [n], state["nodes"], gap=8.0):
            return n
    return candidates[0]


def test_click_shows_degree_and_relation_types(stack, page):
    open_home(page, stack)
    data = stack.graph()
    hub, point = settled_hub(page)
    mine = [e for e in data["edges"] if hub["id"] in (e["from"], e["to"])]
    page.mouse.click(*point)
    page.wait_for_selector("#s3rm-inspector-degree", timeout=60_000)
    assert page.inner_text("#s3rm-graph-inspector .s3rm-inspector-title") == hub["title"]
    assert page.inner_text("#s3rm-inspector-degree") == f"연결 {len(mine)}개"
    shown = dict(page.eval_on_selector_all(
        "#s3rm-graph-inspector .s3rm-inspector-relations li",
        "els => els.map(e => [e.querySelector('.s3rm-relation-label').textContent,"
        " Number(e.querySelector('strong').textContent)])"))
    labels = relation_labels()
    expected: dict[str, int] = {}
    for e in mine:
        expected[labels[e["relation"]]] = expected.get(labels[e["relation"]], 0) + 1
    assert shown == expected
    bh.screenshot(page, "click-inspector")
    # keyboard: Escape clears the selection, arrows pick a Lesson, Enter would open it
    page.focus("#s3rm-graph-canvas")
    page.keyboard.press("Escape")
    assert page.locator("#s3rm-inspector-degree").count() == 0
    page.keyboard.press("ArrowRight")
    assert page.locator("#s3rm-inspector-degree").count() == 1
    assert "선택됨" in page.inner_text("#s3rm-graph-announcer")
    page.console.assert_clean()


def test_double_click_opens_the_lesson(stack, page):
    open_home(page, stack)
    hub, point = settled_hub(page)
    page.mouse.dblclick(*point)
    page.wait_for_url(re.compile(r".*Lesson:" + re.escape(hub["id"]) + r"$"), timeout=60_000)
    assert page.locator(".s3rm-lesson-title").inner_text() == hub["title"]
    page.console.assert_clean()


# ------------------------------------------------------------------ Lesson page


def test_lesson_page_shows_every_section(stack, page):
    schema = SCHEMA
    lesson_id = "ko-config-change-spread"  # evidence, a verification record and a relation
    repo = MediaWikiRepository(WikiClient(stack.wiki.api_url, stack.wiki.agent.username, stack.wiki.agent.password), SCHEMA)
    snap = repo.get_snapshot(lesson_id)
    page.goto(stack.url(f"Lesson:{lesson_id}"))
    page.wait_for_selector(".s3rm-evidence-digest[data-state=ready]", timeout=20_000)
    # header and confidence badge
    assert page.inner_text(".s3rm-lesson-title") == snap.page.fields["title"]
    assert page.inner_text(".s3rm-lesson-header .s3rm-badge") == "신뢰도 · 낮음"
    # fields as a table with the schema's Korean labels; reviewer/review_state not shown
    labels = page.eval_on_selector_all(".s3rm-lesson-fields th", "els => els.map(e => e.textContent.trim())")
    hidden = {"reviewer", "review_state"}
    shown_fields = [f for f in schema.lesson.fields
                    if f.name not in hidden | {"title", "confidence"} and f.settable in ("client", "origin")]
    assert labels == [f.label for f in shown_fields]
    body = page.inner_text("#mw-content-text")
    assert "검토자" not in body and "검토 상태" not in body and "review_state" not in body and "Draft" not in body
    for name in ("question", "observation", "reusable_lesson"):
        assert snap.page.fields[name] in body
    # provenance and the history link
    history = page.locator(".s3rm-history-link a")
    assert "action=history" in history.get_attribute("href")
    # evidence block: digest computed by the gateway, filled by the script, equal to ours
    ev = snap.page.evidence[0]
    assert page.locator(f".s3rm-evidence[data-evidence-id='{ev['id']}']").count() == 1
    digest = page.inner_text(f".s3rm-evidence-digest[data-evidence-id='{ev['id']}']")
    assert digest == evidence_digest(ev, schema)
    assert page.locator(".s3rm-digest-copy").count() == 1
    # verification record section (and its stored digest is the same evidence's)
    ver = page.locator(".s3rm-verification")
    assert ver.count() == 1 and "근거 검증 기록" in ver.inner_text() and "판정 · 뒷받침함" in ver.inner_text()
    assert snap.page.verifications[0]["evidence_digest"] == digest
    # relations with Korean labels
    labels_ko = relation_labels()
    rels = page.eval_on_selector_all(".s3rm-relation .s3rm-relation-type",
                                     "els => els.map(e => [e.dataset.relation, e.textContent])")
    assert rels and rels == [[r["relation"], labels_ko[r["relation"]]] for r in snap.page.relations]
    bh.screenshot(page, "lesson-page")
    page.console.assert_clean()


def test_imported_lesson_page_lists_every_relation(stack, page):
    counts: dict[str, list] = {}
    for source, relation, target in stack.seeded.relations:
        counts.setdefault(source, []).append((relation, target))
    source = max(sorted(counts), key=lambda s: len(counts[s]))
    page.goto(stack.url(f"Lesson:{source}"))
    page.wait_for_selector(".s3rm-evidence-digest[data-state=ready]", timeout=20_000)
    shown = page.eval_on_selector_all(
        ".s3rm-relation", "els => els.map(e => [e.querySelector('.s3rm-relation-type').dataset.relation,"
                          " e.querySelector('.s3rm-relation-to').textContent.trim(),"
                          " e.querySelector('.s3rm-relation-type').textContent])")
    labels = relation_labels()
    assert sorted((r, t) for r, t, _ in shown) == sorted(counts[source])
    assert all(text == labels[r] for r, _, text in shown)
    assert page.inner_text(".s3rm-lesson-header .s3rm-badge") == "신뢰도 · 보통"
    page.console.assert_clean()


# ------------------------------------------------------------------ id launcher (docs/browser.md#id-check)


@pytest.mark.parametrize("bad, message", [
    ("Lesson:gpu_fragmentation", "Lesson:"),
    ("gpu fragmentation", "빈칸"),
    ("GPU_fragmentation", "대문자"),
    ("gpu.fragmentation", "영문 소문자"),
    ("메모", "영문 소문자"),
    ("a" * 121, "120자"),
])
def test_id_launcher_refuses_invalid_ids(stack, page, bad, message):
    page.goto(stack.home)
    page.wait_for_selector("#s3rm-create-launcher[data-state=ready], #s3rm-create-launcher")
    url = page.url
    page.fill("#s3rm-create-id", bad)
    page.click("#s3rm-create-submit")
    page.wait_for_selector("#s3rm-create-launcher[data-state=invalid]", timeout=30_000)
    assert page.url == url  # the form did not open
    assert page.get_attribute("#s3rm-create-id", "aria-invalid") == "true"
    assert message in page.inner_text("#s3rm-create-message")
    page.console.assert_clean()


def test_id_launcher_existing_id(stack, page):
    page.goto(stack.home)
    page.wait_for_selector("#s3rm-create-id")
    existing = stack.seeded.lesson_ids[0]
    page.fill("#s3rm-create-id", existing)
    page.click("#s3rm-create-submit")
    page.wait_for_function("() => document.getElementById('s3rm-create-message').textContent.includes('이미 같은 ID')")
    assert page.locator("#s3rm-create-message a").get_attribute("href").endswith(f"Lesson:{existing}")
    # (the logged-out path follows the wiki's rights: test_write_button_follows_the_wikis_rights)
    page.console.assert_clean()


# ------------------------------------------------------------------ a browser save (docs/browser.md#freshness)

SAVED_ID = "browser-saved-lesson"
SAVED_VALUES = {
    "title": "브라우저에서 저장한 메모: 캐시 무효화 누락으로 오래된 설정이 남음",
    "question": "설정을 바꿨는데 일부 서버가 예전 값을 계속 쓴 이유는?",
    "attempt": "설정 캐시에 버전 번호를 넣고 바뀌면 무효화했다.",
    "context": "설정 서버 1대, 애플리케이션 서버 6대, 캐시 TTL 1시간.",
    "observation": "변경 후 한 시간 동안 서버 두 대가 예전 설정으로 동작했다.",
    "interpretation": "캐시 무효화 신호가 없어 TTL이 끝날 때까지 예전 값이 남았다.",
    "reusable_lesson": "설정 캐시는 TTL만 믿지 말고 버전으로 무효화한다.",
    "applicability": "설정을 캐시하는 모든 서비스.",
    "confidence": "low",
    "evidence": "서버별 설정 버전 로그.",
}
SAVED_EVIDENCE = {"citation": "서버별 설정 버전 로그 (브라우저 테스트)", "kind": "log",
                  "verification_basis": "partial_source", "note": "테스트용"}


def _fill_skeleton(text: str, relation_to: str) -> str:
    for name, value in {**SAVED_VALUES}.items():
        text, n = re.subn(rf"^\|{name}=$", f"|{name}={value}", text, count=1, flags=re.M)
        assert n == 1, name
    start = text.index("{{Lesson evidence")
    head, tail = text[:start], text[start:]
    for name, value in SAVED_EVIDENCE.items():
        tail, n = re.subn(rf"^\|{name}=$", f"|{name}={value}", tail, count=1, flags=re.M)
        assert n == 1, name
    relation = ("{{Lesson relation\n|from=" + SAVED_ID + "\n|relation=suggests\n|to=" + relation_to
                + "\n|note=같은 원인(설정 전파)\n|created_by={{subst:REVISIONUSER}}\n"
                '|created_at={{subst:#time:Y-m-d"T"H:i:s"Z"}}\n}}\n')
    return head + tail.rstrip("\n") + "\n" + relation


def test_lesson_saved_in_the_browser_appears_at_once(stack, playwright, tmp_path):
    context = bh.launch_chromium(playwright, tmp_path / "chromium-user")
    page = context.new_page()
    console = Console(page)
    try:
        # log in with the wiki's main account, then use the launcher like a person would
        page.goto(stack.url("Special:UserLogin"))
        page.fill("#wpName1", stack.wiki.admin.username)
        page.fill("#wpPassword1", stack.wiki.admin.password)
        page.click("#wpLoginAttempt")
        page.wait_for_load_state()
        open_home(page, stack)
        nodes_before = int(page.get_attribute("#s3rm-knowledge-graph", "data-node-count"))
        edges_before = int(page.get_attribute("#s3rm-knowledge-graph", "data-edge-count"))
        assert page.inner_text("#s3rm-create-submit") == "쓰기 시작"
        page.fill("#s3rm-create-id", SAVED_ID)
        page.wait_for_selector("#s3rm-create-launcher[data-state=ok]")  # the box asks the wiki first
        assert "쓸 수 있는 ID입니다" in page.inner_text("#s3rm-create-message")
        page.click("#s3rm-create-submit")
        page.wait_for_url(re.compile(r".*action=edit.*preload=.*"))
        skeleton = page.input_value("#wpTextbox1")
        assert skeleton.startswith("{{Lesson\n") and "{{Lesson evidence" in skeleton
        target = "ko-config-change-spread"
        page.fill("#wpTextbox1", _fill_skeleton(skeleton, target))
        bh.screenshot(page, "b5-edit-form")
        page.fill("#wpSummary", "브라우저 테스트: 새 메모")
        page.click("#wpSave")
        page.wait_for_url(re.compile(r".*Lesson:" + re.escape(SAVED_ID) + r"$"), timeout=20_000)
        assert page.inner_text(".s3rm-lesson-title") == SAVED_VALUES["title"]
        page.wait_for_selector(".s3rm-evidence-digest[data-state=ready]", timeout=20_000)
        # straight back home: recent list, graph and search know it already
        open_home(page, stack)
        page.wait_for_selector("#s3rm-recent-list[data-state=ready]")
        recent = page.eval_on_selector_all("#s3rm-recent-list li[data-id]", "els => els.map(e => e.dataset.id)")
        assert recent[0] == SAVED_ID
        assert int(page.get_attribute("#s3rm-knowledge-graph", "data-node-count")) == nodes_before + 1
        assert int(page.get_attribute("#s3rm-knowledge-graph", "data-edge-count")) == edges_before + 1
        state = graph_state(page)
        assert [SAVED_ID, "suggests", target] in state["edges"]
        assert search(page, "캐시 무효화") == "results"
        assert SAVED_ID in result_ids(page)
        bh.screenshot(page, "b5-home-after-save")
        console.assert_clean()
    finally:
        context.close()


def test_noscript_fallback(stack, playwright, tmp_path):
    context = playwright.chromium.launch_persistent_context(
        str(tmp_path / "chromium-nojs"), executable_path=bh.CHROMIUM, headless=True, args=bh.CHROMIUM_ARGS,
        java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(stack.home)
        assert page.locator(".s3rm-graph-fallback").is_visible()
        assert "JavaScript" in page.inner_text(".s3rm-graph-fallback")
        assert page.locator("#s3rm-search-input").count() == 0
        # no "loading…" placeholder that would never finish without a script
        for selector in ("#s3rm-semantic-search", ".s3rm-graph-loading", ".s3rm-recent-loading"):
            assert not page.locator(selector).is_visible(), selector
        assert page.locator("#s3rm-recent-list .s3rm-noscript").is_visible()
        bh.screenshot(page, "home-noscript")
    finally:
        context.close()


# ------------------------------------------------------------------ phones, logo, similarity, cards, rights, times
#
# Each runs at the desktop size and at a phone's 390 × 844 (a touch device that honours the
# page's viewport meta, as a phone browser does).

SIZES = {"desktop": bh.DESKTOP, "phone": bh.PHONE}
LONG_WORD = "kube-apiserver-" + "x" * 40 + "-etcd-compaction-" + "y" * 40
SAME_TITLE = "같은 제목을 가진 두 메모: 설정 캐시가 오래 남음"
CARD_LESSONS = [
    dict(bh.KOREAN_LESSONS[0], id="ko-long-word-title", title=f"긴 낱말 {LONG_WORD} 때문에 카드가 넘침"),
    dict(bh.KOREAN_LESSONS[1], id="ko-same-title-a", title=SAME_TITLE),
    dict(bh.KOREAN_LESSONS[2], id="ko-same-title-b", title=SAME_TITLE),
]


@pytest.fixture(scope="module")
def cards(stack):
    bh.write_lessons(stack.wiki, CARD_LESSONS)
    return CARD_LESSONS


@pytest.fixture(scope="module", params=sorted(SIZES))
def sized(request, playwright, tmp_path_factory):
    """(size name, context) for both sizes; the phone context is a touch device."""
    name = request.param
    context = bh.launch_chromium(playwright, tmp_path_factory.mktemp(f"chromium-{name}"), viewport=SIZES[name],
                                 phone=name == "phone", timezone_id="Asia/Seoul")
    yield name, context
    context.close()


@pytest.fixture
def spage(sized, request):
    name, context = sized
    yield from _watched_page(context, request, name)


@pytest.mark.parametrize("where", ["home", "lesson"])
def test_usable_on_a_phone(stack, spage, where):
    url = stack.home if where == "home" else stack.url("Lesson:ko-config-change-spread")
    spage.goto(url)
    if where == "home":
        spage.wait_for_function(GRAPH_READY, timeout=30_000)
        spage.wait_for_selector("#s3rm-recent-list[data-state=ready]")
    else:
        spage.wait_for_selector(".s3rm-evidence-digest[data-state=ready]", timeout=20_000)
    report = spage.evaluate(bh.MOBILE_REPORT_JS)
    bh.screenshot(spage, f"{where}-{spage.size_name}")
    # the skin is responsive: a device-width viewport, so a phone does not shrink a 1000 px page
    assert report["viewport"] and "width=device-width" in report["viewport"], report["viewport"]
    assert report["scroll_width"] <= report["client_width"], "horizontal scroll"
    if spage.size_name == "phone":
        assert report["client_width"] == bh.PHONE[0]
        assert not report["small_text"], f"text under 14 px: {report['small_text'][:10]}"
        assert not report["small_targets"], f"tap targets under 40 px: {report['small_targets'][:10]}"
        # the search box is a real target too
        if where == "home":
            box = spage.locator("#s3rm-search-input").bounding_box()
            assert box["height"] >= 40 and box["width"] >= 200


def test_logo_is_the_project_svg(stack, spage):
    spage.goto(stack.home)
    logo = spage.locator(".mw-logo-icon, #p-logo a").first
    expect(logo).to_be_visible()
    src = logo.get_attribute("src") or ""
    assert src.endswith("/s3rm-assets/s3rm-logo.svg"), src
    assert spage.evaluate("() => { const i = document.querySelector('.mw-logo-icon'); return i.complete && i.naturalWidth; }") > 0
    served = requests.get(stack.wiki.server_url + src, timeout=10)
    assert served.status_code == 200 and served.headers["Content-Type"].startswith("image/svg+xml")
    assert served.content == (bh.REPO / "deploy/mediawiki/assets/s3rm-logo.svg").read_bytes()
    assert "change-your-logo" not in spage.content()


def test_graph_draws_similarity_apart_from_relations(stack, spage):
    data = stack.graph()
    assert data["similar"] and data["similar_basis"] == "lexical-tfidf-v1"
    ids = {n["id"] for n in data["nodes"]}
    assert all(p["from"] in ids and p["to"] in ids and p["from"] < p["to"] and 0 < p["score"] <= 1
               for p in data["similar"])
    open_home(spage, stack)
    root = spage.locator("#s3rm-knowledge-graph")
    # few stored relations (fewer than one per two Lessons, counted on the page's own model of the data:
    # the session wiki holds other tests' Lessons too) → similarity shown by default
    model = spage.evaluate("(d) => { const m = mw.s3rm.home.buildModel(d); "
                           "return {edges: m.edges.length, nodes: m.nodes.length}; }", data)
    few = 2 * model["edges"] < model["nodes"]
    assert root.get_attribute("data-similar-shown") == ("true" if few else "false")
    # with no stored relation at all (an imported corpus) the same data is shown by default
    assert spage.evaluate("(d) => mw.s3rm.home.buildModel(d).showSimilar",
                          {"nodes": data["nodes"], "edges": [], "similar": data["similar"]}) is True
    edges_before = root.get_attribute("data-edge-count")
    toggle = spage.locator("label[for=s3rm-graph-similar]")
    if few:  # shown by default: the toggle hides it first
        toggle.click()
        assert root.get_attribute("data-similar-shown") == "false"
    toggle.click()
    assert root.get_attribute("data-similar-shown") == "true"
    assert int(root.get_attribute("data-similar-count")) == len(data["similar"])
    # labelled as similarity, never as a stored relation: legend, status line, counts
    assert "저장된 관계 아님" in spage.inner_text("#s3rm-legend-similar")
    assert f"비슷한 내용 연결 {len(data['similar'])}개 (추정)" in spage.inner_text("#s3rm-graph-stats")
    assert root.get_attribute("data-edge-count") == edges_before
    assert spage.inner_text("#s3rm-graph-stats").startswith(f"메모 {len(ids)}개 · 관계 {len(data['edges'])}개")
    # drawn: dashed grey lines, painted at midpoints that no stored relation crosses
    state = graph_state(spage)
    pos = {n["id"]: n for n in state["nodes"]}
    stored_pairs = {frozenset((a, b)) for a, _, b in state["edges"]}
    mids = [((pos[p["from"]]["x"] + pos[p["to"]]["x"]) / 2, (pos[p["from"]]["y"] + pos[p["to"]]["y"]) / 2)
            for p in data["similar"] if frozenset((p["from"], p["to"])) not in stored_pairs]
    inside = [(x, y) for x, y in mids if 0 <= x <= state["width"] and 0 <= y <= state["height"]]
    painted = [a for a in pixel_alpha(spage, inside, radius=3) if a > 0]
    assert len(painted) >= 0.8 * len(inside), (len(painted), len(inside))
    # the layout uses them: Lessons without a stored relation but with a similar one leave the rim
    # (they now sit among the connected ones); the inspector lists them under the similarity heading
    node = next(n for n in state["nodes"] if n["degree"] == 0 and any(
        n["id"] in (p["from"], p["to"]) for p in data["similar"]))
    spage.evaluate("(id) => mw.s3rm.home.graph.select(mw.s3rm.home.graph.model.index[id], false)", node["id"])
    assert spage.inner_text("#s3rm-inspector-degree") == "아직 연결된 메모가 없습니다"
    assert "저장된 관계 아님" in spage.inner_text(".s3rm-inspector-similar-head")
    assert spage.locator(".s3rm-inspector-similar li").count() >= 1
    assert spage.locator(".s3rm-inspector-relations").count() == 0
    bh.screenshot(spage, f"graph-similarity-{spage.size_name}")
    # and off again: the stored-relations picture is back
    spage.locator("label[for=s3rm-graph-similar]").click()
    assert root.get_attribute("data-similar-shown") == "false"
    assert spage.locator("#s3rm-legend-similar").count() == 0


def _inside(inner: dict, outer: dict, slack: float = 1.0) -> bool:
    return (inner["x"] >= outer["x"] - slack and inner["y"] >= outer["y"] - slack
            and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + slack
            and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + slack)


def test_long_words_wrap_and_equal_titles_show_ids(stack, cards, spage):
    open_home(spage, stack)
    assert search(spage, "긴 낱말 카드가 넘침") == "results"
    card = spage.locator("#s3rm-search-results li[data-id='ko-long-word-title']")
    expect(card).to_have_count(1)
    box = card.bounding_box()
    for part in (".s3rm-semantic-result-link", ".s3rm-badge", ".s3rm-lesson-id"):
        assert _inside(card.locator(part).bounding_box(), box), part
    assert card.evaluate("e => e.scrollWidth <= e.clientWidth")
    assert card.locator(".s3rm-lesson-id").inner_text() == "ko-long-word-title"
    # two Lessons with one title: both listed, told apart by their ids
    assert search(spage, SAME_TITLE) == "results"
    rows = spage.eval_on_selector_all(
        "#s3rm-search-results li[data-id]",
        "els => els.map(e => [e.querySelector('.s3rm-semantic-result-link').textContent,"
        " e.querySelector('.s3rm-lesson-id').textContent])")
    same = [r for r in rows if r[0] == SAME_TITLE]
    assert sorted(i for _, i in same) == ["ko-same-title-a", "ko-same-title-b"], rows
    # the recent list shows ids too, and its long title stays inside its row
    spage.click("#s3rm-search-clear")
    recent = spage.locator("#s3rm-recent-list li[data-id]")
    for i in range(recent.count()):
        row = recent.nth(i)
        assert row.locator(".s3rm-lesson-id").inner_text() == row.get_attribute("data-id")
        assert _inside(row.locator(".s3rm-summary-title").bounding_box(), row.bounding_box())
    # the Lesson page header too
    spage.goto(stack.url("Lesson:ko-long-word-title"))
    header = spage.locator(".s3rm-lesson-header")
    assert _inside(header.locator(".s3rm-lesson-title").bounding_box(), header.bounding_box())
    assert _inside(header.locator(".s3rm-badge").bounding_box(), header.bounding_box())
    assert spage.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    bh.screenshot(spage, f"long-word-{spage.size_name}")


def _launch(page, stack, rights: str, button: str, lesson_id: str) -> None:
    """Open home, check what the write button says, submit a free id."""
    page.goto(stack.home)
    page.wait_for_selector("#s3rm-create-form[data-state=ready]")
    assert page.get_attribute("#s3rm-create-form", "data-rights") == rights
    assert page.inner_text("#s3rm-create-submit") == button
    page.fill("#s3rm-create-id", lesson_id)
    page.click("#s3rm-create-submit")


def test_write_button_follows_the_wikis_rights(stack, spage):
    # the development wiki refuses anonymous edits like production (docs/operations.md#wiki-accounts):
    # the button logs in first
    _launch(spage, stack, "login", "로그인하고 쓰기", "browser_logged_out_probe")
    spage.wait_for_url(re.compile(r".*returnto=.*"))
    assert "returnto=Lesson%3Abrowser_logged_out_probe" in spage.url
    # a wiki that lets anonymous readers edit (MediaWiki's default): no forced login
    local = stack.wiki.dir / "S3RM.local.php"
    local.write_text("<?php\n$wgGroupPermissions['*']['edit'] = true;\n$wgGroupPermissions['*']['createpage'] = true;\n")
    try:
        _launch(spage, stack, "write", "쓰기 시작", "browser_anonymous_probe")
        spage.wait_for_url(re.compile(r".*Lesson:browser_anonymous_probe.*action=edit.*"))
        assert "UserLogin" not in spage.url and "preload" in requests.utils.unquote(spage.url)
    finally:
        local.unlink()


def test_the_new_lesson_box_says_available_only_for_a_free_id(stack, spage):
    """While an id is typed the box asks the wiki; an existing id is never called available."""
    spage.goto(stack.home)
    spage.wait_for_selector("#s3rm-create-form[data-state=ready]")
    spage.fill("#s3rm-create-id", "ko-config-change-spread")
    spage.wait_for_selector("#s3rm-create-launcher[data-state=invalid]")
    text = spage.inner_text("#s3rm-create-message")
    assert "이미 같은 ID의 메모가 있습니다" in text and "쓸 수 있는" not in text
    assert "Lesson:ko-config-change-spread" in requests.utils.unquote(spage.get_attribute("#s3rm-create-message a", "href"))
    spage.fill("#s3rm-create-id", "browser-free-id-probe")
    spage.wait_for_selector("#s3rm-create-launcher[data-state=ok]")
    assert spage.inner_text("#s3rm-create-message") == "쓸 수 있는 ID입니다: Lesson:browser-free-id-probe"


def test_times_are_local_with_utc_available(stack, spage):
    from datetime import datetime, timedelta

    def expected_parts(iso: str) -> tuple[str, str]:
        kst = datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ") + timedelta(hours=9)
        return f"{kst.year}. {kst.month}. {kst.day}.", f"{kst.minute:02d}"

    open_home(spage, stack)
    spage.wait_for_selector("#s3rm-recent-list[data-state=ready]")
    times = spage.eval_on_selector_all("#s3rm-recent-list time",
                                       "els => els.map(e => [e.getAttribute('datetime'), e.title, e.textContent])")
    assert times
    for iso, title, text in times:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", iso) and title == f"UTC {iso}"
        day, minute = expected_parts(iso)
        assert day in text and f":{minute}" in text and "GMT+9" in text and iso not in text, (iso, text)
    # Lesson page: the template prints UTC; the script shows it local with the UTC value kept
    spage.goto(stack.url("Lesson:ko-config-change-spread"))
    spage.wait_for_selector(".s3rm-evidence-digest[data-state=ready]", timeout=20_000)
    for cls in ("s3rm-created-at", "s3rm-updated-at", "s3rm-added-at", "s3rm-verified-at"):
        iso, title, text = spage.eval_on_selector(
            f".{cls} time", "e => [e.getAttribute('datetime'), e.title, e.textContent]")
        day, minute = expected_parts(iso)
        assert title == f"UTC {iso}" and day in text and "GMT+9" in text, (cls, iso, text)
