"""Site assets: Common.js / Common.css, the hand-written pages and the /mcp/graph route.

Static checks run everywhere; the ``dev_wiki`` tests render the pages in the
real MediaWiki (the sanitizer must keep the ids and data attributes the script
relies on, and the preload skeleton must survive its own save).

Size: about 700 lines: the static checks and the rendered-in-MediaWiki checks
of the same assets stay together so a selector the script relies on is tested
next to the page that must keep it.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from flask import Flask

from gateway.domain.codec import parse_page, serialize_page
from gateway.domain.repository import WikiUnavailable
from gateway.web.graphdata import DEFAULT_MAX_NODES, RELATIONS
from gateway.web.graph import create_graph_blueprint
from support.schema_dirs import SCHEMA
from support.memory import InMemoryRepository
from sync.variants import CAPABILITIES, load_manifest, render_page
from support.lessons import evidence, lesson, relation

ROOT = Path(__file__).resolve().parents[3]
SCHEMA_DIR = ROOT / "schema"
JS = SCHEMA_DIR / "site" / "Common.js"
CSS = SCHEMA_DIR / "site" / "Common.css"
MW_JSPARSER = Path("/usr/share/mediawiki/includes/libs/jsminplus.php")
PAGES = {p.title: p for p in load_manifest(SCHEMA_DIR)}
HOME_TITLE = "연구 메모리"
BANNER = "{{S3RM synced}}"
ALL_CAPS = frozenset(CAPABILITIES)


def js_text() -> str:
    return JS.read_text(encoding="utf-8")


# ------------------------------------------------------------------ Common.js

def test_common_js_parses_with_node():
    subprocess.run(["node", "--check", str(JS)], check=True, capture_output=True, timeout=60)


def test_common_js_passes_mediawiki_es5_validation(tmp_path):
    """MediaWiki 1.39 replaces a site script its ES5 parser rejects with an error stub."""
    runner = tmp_path / "check.php"
    runner.write_text(
        "<?php require '%s'; $p = new JSParser();"
        " try { @$p->parse(file_get_contents($argv[1]), 'Common.js', 1); echo 'OK'; }"
        " catch (Exception $e) { echo 'ERR ', $e->getMessage(); exit(1); }" % MW_JSPARSER
    )
    rendered = tmp_path / "Common.js"
    rendered.write_text(render_page(js_text(), (), {"S3RM_MCP_URL": "http://127.0.0.1:8080/mcp"}), encoding="utf-8")
    out = subprocess.run(["php", str(runner), str(rendered)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("OK"), out.stdout + out.stderr


def test_common_js_has_no_external_resources():
    text = js_text()
    assert "http://" not in text and "https://" not in text
    for banned in ("import ", "require(", "eval(", "new Function", "document.write", ".innerHTML", "<script",
                   "localStorage", "XMLHttpRequest"):
        assert banned not in text, banned
    # ES5 only (MediaWiki 1.39 validates site scripts as ECMAScript 5)
    code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    code = "\n".join(line for line in code.splitlines() if not line.strip().startswith("//"))
    assert not re.search(r"\b(let|const|class)\s", code)
    assert "=>" not in code and "`" not in code


def test_common_js_gateway_contract():
    text = js_text()
    assert "'MCP-Protocol-Version': PROTOCOL_VERSION" in text and "PROTOCOL_VERSION = '2025-06-18'" in text
    assert "Accept: 'application/json, text/event-stream'" in text
    assert "'Content-Type': 'application/json'" in text
    assert "method: 'tools/call'" not in text  # built through rpc('tools/call', …)
    assert "rpc( 'tools/call'" in text
    assert "retrieval_mode: 'hybrid_v1'" in text and "effective_mode" in text
    assert "mcpUrl() + '/graph'" in text and "data-mcp-url" in text
    assert "var CONFIGURED_MCP_URL = '%%S3RM_MCP_URL%%';" in text
    assert "mw.loader.using( [ 'mediawiki.util', 'mediawiki.api' ] )" in text
    assert "credentials: 'omit'" in text
    # stable hooks for browser tests and the benchmark
    for hook in ("s3rm-search-input", "s3rm-search-clear", "s3rm-search-results", "s3rm-graph-canvas",
                 "s3rm-graph-filter", "s3rm-graph-relation", "s3rm-graph-zoom-in", "s3rm-graph-zoom-out",
                 "s3rm-graph-fit", "s3rm-graph-inspector", "s3rm-create-id", "s3rm-create-submit",
                 "s3rm-graph-interactive", "data-node-count", "data-edge-count"):
        assert hook in text, hook
    assert "'검색 결과 해제'" in text
    assert "prefers-reduced-motion: reduce" in text


def test_common_js_relation_labels_match_the_schema():
    schema = SCHEMA
    text = js_text()
    for value in schema.enum("relation").values:
        assert f"{value}: '{schema.enum('relation').label(value)}'" in text, value
    for value in schema.enum("confidence").values:
        assert f"{value}: '{schema.enum('confidence').label(value)}'" in text, value


@pytest.mark.parametrize("value, ok", [
    ("gpu_allocator_fragmentation", True), ("a", True), ("x-1_2", True),
    ("", False), ("Lesson:gpu", False), ("lesson:gpu", False), ("GPU", False), ("two words", False),
    ("한글", False), ("a/b", False), ("a.b", False), ("a" * 121, False), ("a" * 120, True),
])
def test_browser_id_rule(value, ok):
    """docs/browser.md#id-check: the launcher's id check, run in node exactly as the browser runs it."""
    text = js_text()
    start = text.index("\tfunction validateLessonId(")
    end = text.index("\n\t}\n", start) + 3
    prelude = "var ID_PATTERN = /^[a-z0-9_-]+$/; var ID_MAX_LENGTH = 120;\n"
    script = prelude + text[start:end] + f"\nprocess.stdout.write(JSON.stringify(validateLessonId({json.dumps(value)})));"
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60, check=True)
    message = json.loads(out.stdout)
    assert (message == "") is ok, message
    if not ok:
        assert re.search(r"[가-힣]", message)  # explained in Korean


# ----------------------------------------------------------------- Common.css

def test_common_css_essentials():
    css = CSS.read_text(encoding="utf-8")
    assert "@import" not in css and "http://" not in css and "https://" not in css
    assert re.search(r"\.s3rm-field-value\s*\{[^}]*white-space:\s*pre-wrap", css)
    assert "@media ( prefers-reduced-motion: reduce )" in css
    assert "max-width: 720px" in css  # responsive
    assert ".client-js .s3rm-noscript" in css
    for cls in (".s3rm-synced-banner", ".s3rm-confidence-high", ".s3rm-confidence-medium", ".s3rm-confidence-low",
                ".s3rm-lesson-fields", ".s3rm-evidence", ".s3rm-verification", ".s3rm-relation",
                ".s3rm-graph-canvas", ".s3rm-semantic-search", ".s3rm-summary-row", ".s3rm-empty-state"):
        assert cls in css, cls
    assert css.count("{") == css.count("}")


def test_generated_template_classes_are_styled():
    """Every class the generator's templates emit for the Lesson page layout has a rule."""
    css = CSS.read_text(encoding="utf-8")
    used = set()
    for path in (SCHEMA_DIR / "Templates").glob("*.wiki"):
        for attr in re.findall(r'class="([^"]*)"', path.read_text(encoding="utf-8")):
            used.update(c for c in attr.split() if c.startswith("s3rm-") and "{" not in c)
    needed = {c for c in used if c in {
        "s3rm-lesson", "s3rm-lesson-header", "s3rm-lesson-title", "s3rm-lesson-fields", "s3rm-field-label",
        "s3rm-field-value", "s3rm-record", "s3rm-record-head", "s3rm-record-fields", "s3rm-provenance",
        "s3rm-badge", "s3rm-evidence-digest", "s3rm-synced-banner", "s3rm-summary-row", "s3rm-relation-type"}}
    assert needed, "generator templates not found"
    for cls in needed:
        assert "." + cls in css, cls


# ---------------------------------------------------------------------- pages

def test_manifest_lists_every_page_file():
    listed = {p.path for p in PAGES.values()}
    on_disk = {p.resolve() for p in (SCHEMA_DIR / "pages").rglob("*.wiki")}
    assert on_disk <= listed, sorted(str(p) for p in on_disk - listed)
    assert PAGES["MediaWiki:Common.js"].content_model == "javascript"
    assert PAGES["MediaWiki:Common.css"].content_model == "css"
    mains = [p for p in PAGES.values() if p.main_page]
    assert [p.title for p in mains] == [HOME_TITLE]


def test_every_wikitext_page_carries_the_banner_first():
    """docs/browser.md#synced-pages: the do-not-edit banner on every page sync writes."""
    for title, page in PAGES.items():
        text = page.read()
        if page.content_model != "wikitext":
            assert "Do not edit this page on the wiki" in text[:600], title
            continue
        first = text.lstrip().replace("__NOTOC__\n", "", 1).lstrip()
        assert first.startswith(BANNER) or first.startswith("<noinclude>" + BANNER), title


B4_PAGES = {
    "Help:S3 연구 메모리": "main",
    "Help:S3 연구 메모리/시작하기": "getting started",
    "Help:S3 연구 메모리/macOS 연결": "macOS",
    "Help:S3 연구 메모리/Linux 연결": "Linux",
    "Help:S3 연구 메모리/Windows 연결": "Windows",
    "Help:S3 연구 메모리/MCP 클라이언트": "hosted clients",
    "Help:S3 연구 메모리/메모 사용법": "writing Lessons",
    "Help:S3 연구 메모리/근거와 검증": "evidence and verification",
    "Help:S3 연구 메모리/관계": "relations",
    "Help:S3 연구 메모리/메모 고치기": "revising",
    "Help:S3 연구 메모리/MCP 도구": "MCP tools",
    "Help:S3 연구 메모리/문제 해결": "troubleshooting",
    "Help:S3 연구 메모리/메모 옮기기": "migration prompt",
    "Help:S3 연구 메모리/중앙 서버 관리": "server management",
    "Help:S3 연구 메모리/설치와 검증": "install and verification",
    "Help:S3 연구 메모리/백업과 복원": "backup/restore/upgrade",
    "Help:S3 연구 메모리/보안": "security",
    "Help:S3 연구 메모리/아키텍처": "architecture",
    "Help:S3 연구 메모리/벡터·하이브리드 검색 설계": "hybrid-search design",
}


def help_text(title: str) -> str:
    return render_page(PAGES[title].read(), (), {"S3RM_MCP_URL": "https://wiki.lab.example/mcp"})


def test_b4_help_pages_exist_and_are_linked_from_the_main_help_page():
    main = PAGES["Help:S3 연구 메모리"].read()
    for title in B4_PAGES:
        assert title in PAGES, title
        if title != "Help:S3 연구 메모리":
            assert f"[[{title}|" in main, title
        assert re.search(r"[가-힣]{20}", PAGES[title].read().replace(" ", "")), title  # Korean text


def test_connection_pages_keep_the_token_out_of_files_and_chats():
    for os_name in ("macOS", "Linux", "Windows"):
        text = help_text(f"Help:S3 연구 메모리/{os_name} 연결")
        assert "read -rs" in text, os_name  # hidden prompt
        assert ".zshrc" in text and ".bashrc" in text, os_name  # right start-up file
        assert "'Authorization: Bearer ${S3RM_MCP_TOKEN}'" in text, os_name  # single quotes
        for client in ("claude mcp add", "codex", "Cursor"):
            assert client in text, (os_name, client)
    for title in PAGES:
        if title.startswith("Help:"):
            text = help_text(title)
            # docs/browser.md#client-setup: never a literal token or a double-quoted (expanded) header
            assert '"Authorization: Bearer $' not in text, title
            assert not re.search(r"Bearer [A-Za-z0-9_\-]{20,}", text), title


def test_hosted_clients_page_states_the_auth_limits():
    text = help_text("Help:S3 연구 메모리/MCP 클라이언트")
    for word in ("ChatGPT", "Claude", "Desktop", "조직", "읽기 전용", "open"):
        assert word in text, word


def test_migration_prompt_rules():
    text = help_text("Help:S3 연구 메모리/메모 옮기기")
    assert "최대 5건" in text and "search_lessons" in text and "근거 필요" in text
    assert "CI" in text
    report = text[text.index("보고"):]
    for n in ("1.", "2.", "3.", "4."):
        assert n in report


def test_w3_browser_saves_are_audited_after_the_fact():
    for title in ("Help:S3 연구 메모리", "Help:S3 연구 메모리/메모 사용법"):
        assert "미리 막지 못합니다" in help_text(title), title


def test_backup_page_never_backs_up_the_vector_index():
    text = help_text("Help:S3 연구 메모리/백업과 복원")
    assert "MariaDB" in text and "업로드" in text and "백업하지 않습니다" in text


def test_relations_page_lists_all_seven():
    text = help_text("Help:S3 연구 메모리/관계")
    for value in RELATIONS:
        assert f"<code>{value}</code>" in text, value


def test_tools_page_lists_all_ten():
    text = help_text("Help:S3 연구 메모리/MCP 도구")
    for path in (SCHEMA_DIR / "tools").glob("*.input.schema.json"):
        assert path.name.split(".")[0] in text, path.name


def home(capabilities) -> str:
    return render_page(PAGES[HOME_TITLE].read(), capabilities, {"S3RM_MCP_URL": "http://127.0.0.1:8080/mcp"})


@pytest.mark.parametrize("capabilities", [frozenset(), ALL_CAPS, frozenset({"smw"}), frozenset({"pageforms"})])
def test_home_page_contract(capabilities):
    """docs/browser.md#home-page on every variant."""
    text = home(capabilities)
    for anchor in ('id="knowledge-graph"', 'id="quick-start"', 'id="create-a-lesson"',
                   'id="s3rm-semantic-search"', 'id="s3rm-knowledge-graph"'):
        assert anchor in text, anchor
    assert "{{:Help:S3 연구 메모리}}" in text
    for step in ("<strong>찾기</strong>", "<strong>연결 보기</strong>", "<strong>남기기</strong>"):
        assert step in text
    assert "[[Special:AllPages/Lesson:|모든 메모]]" in text
    assert "[[Special:Search|검색]]" in text and "[[#create-a-lesson|새 메모]]" in text
    assert 'class="s3rm-graph-loading"' in text and "s3rm-noscript s3rm-graph-fallback" in text
    assert 'data-mcp-url="http://127.0.0.1:8080/mcp"' in text
    assert "s3rm:" not in text  # markers gone
    assert "Lesson:" in text and "소문자" in text  # id rule explained in Korean


def test_home_page_plain_variant_needs_no_extension():
    text = home(frozenset())
    assert "{{#ask" not in text and "{{#forminput" not in text and "#set" not in text
    assert 'id="s3rm-recent-list"' in text and 'data-limit="6"' in text
    assert 'id="s3rm-create-form"' in text


def test_home_page_full_variant_uses_page_forms_and_the_gateway_recent_list():
    """With SMW the recent list is still the site script's (gateway search_lessons, DOM text): an
    #ask printout would re-parse stored values and sit in the parser cache (docs/browser.md#home-page)."""
    text = home(ALL_CAPS)
    assert "{{#ask" not in text
    assert 'id="s3rm-recent-list"' in text and 'data-limit="6"' in text
    form = text[text.index("{{#forminput:"):]
    assert "form=Lesson" in form and "query string=namespace=Lesson" in form and "|size=" not in form
    assert 'id="s3rm-create-form"' not in text


def preload_for_save(text: str, user: str, ts: str) -> str:
    """What the edit box holds after preload, with the save-time substitutions applied."""
    text = re.sub(r"<noinclude>.*?</noinclude>", "", text, flags=re.S)
    text = text.replace("<includeonly>", "").replace("</includeonly>", "")
    return (text.replace("{{subst:REVISIONUSER}}", user)
            .replace('{{subst:#time:Y-m-d"T"H:i:s"Z"}}', ts).strip())


def test_preload_skeleton_follows_the_schema():
    schema = SCHEMA
    raw = PAGES["Template:S3RM lesson preload"].read()
    saved = preload_for_save(raw, "S3Admin", "2026-01-02T03:04:05Z")
    page = parse_page(saved, schema)
    assert list(page.fields) == [f.name for f in schema.lesson.fields]
    assert [list(e) for e in page.evidence] == [[f.name for f in schema.evidence.fields]]
    assert page.fields["author"] == "S3Admin" and page.fields["created_at"] == page.fields["updated_at"]
    assert page.fields["record_origin"] == "lab" and page.fields["review_state"] == "Draft"
    assert page.evidence[0]["added_by"] == "S3Admin"
    # the skeleton writes every parameter in schema order, as the codec does
    assert saved == serialize_page(page, schema).strip()


# ------------------------------------------------------------------ /mcp/graph

class Config:
    allowed_origins = frozenset({"http://127.0.0.1:8081"})


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def graph_app(repo, **kwargs):
    app = Flask(__name__)
    clock = kwargs.pop("clock", Clock())
    kwargs.setdefault("background", False)
    bp = create_graph_blueprint(lambda: repo, Config(), clock=clock, **kwargs)
    app.register_blueprint(bp)
    return app, bp, clock


def seeded_repo(n: int = 6) -> InMemoryRepository:
    repo = InMemoryRepository()
    for i in range(n):
        rels = []
        if i > 0 and i < 4:
            rels.append(relation(f"l{i}", RELATIONS[i % len(RELATIONS)], f"l{i - 1}"))
        if i == 2:
            rels.append(relation("l2", "supports", "missing_target"))  # dangling: dropped
            rels.append(relation("l2", "supports", "l1"))  # duplicate of nothing yet; kept once
            rels.append(relation("l2", "supports", "l1"))
        repo.put_page(f"l{i}", serialize_page(lesson(
            f"l{i}", title=f"제목 {i}", updated_at=f"2026-01-0{i + 1}T00:00:00Z", created_at="2026-01-01T00:00:00Z",
            confidence=("low", "medium", "high")[i % 3], evidence_items=[evidence("e1")], relations=rels), SCHEMA))
    return repo


def test_graph_contract_and_bounds():
    repo = seeded_repo()
    app, _, _ = graph_app(repo)
    response = app.test_client().get("/mcp/graph")
    assert response.status_code == 200 and response.mimetype == "application/json"
    data = response.get_json()
    assert set(data) >= {"nodes", "edges", "generated_at", "truncated"}
    assert data["truncated"] is False and data["stale"] is False
    assert [n["id"] for n in data["nodes"]] == ["l5", "l4", "l3", "l2", "l1", "l0"]  # newest first
    assert data["nodes"][0] == {"id": "l5", "title": "제목 5", "confidence": "high", "updated_at": "2026-01-06T00:00:00Z"}
    ids = {n["id"] for n in data["nodes"]}
    assert all(e["from"] in ids and e["to"] in ids and e["relation"] in RELATIONS for e in data["edges"])
    assert {(e["from"], e["to"], e["relation"]) for e in data["edges"]} == {
        ("l1", "l0", RELATIONS[1]), ("l2", "l1", RELATIONS[2]), ("l2", "l1", "supports"), ("l3", "l2", RELATIONS[3])}
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", data["generated_at"])
    assert response.headers["Cache-Control"] == "no-cache" and response.headers["ETag"]


def test_graph_node_cap_sets_truncated():
    app, _, _ = graph_app(seeded_repo(), max_nodes=3)
    data = app.test_client().get("/mcp/graph").get_json()
    assert len(data["nodes"]) == 3 and data["truncated"] is True
    ids = {n["id"] for n in data["nodes"]}
    assert all(e["from"] in ids and e["to"] in ids for e in data["edges"])
    assert DEFAULT_MAX_NODES == 2000
    app, _, _ = graph_app(seeded_repo(2), max_nodes=5000)
    assert app.test_client().get("/mcp/graph").get_json()["max_nodes"] == 2000


def test_graph_scan_is_bounded_in_batches():
    repo = seeded_repo(3)
    calls = []
    original = repo.scan_snapshots

    def spy(cursor, limit):
        calls.append(limit)
        return original(cursor, limit)

    repo.scan_snapshots = spy
    app, _, _ = graph_app(repo)
    client = app.test_client()
    client.get("/mcp/graph")
    client.get("/mcp/graph")
    assert calls == [50]  # one batch, and the second request came from the cache


def test_graph_etag_revalidation():
    app, _, _ = graph_app(seeded_repo())
    client = app.test_client()
    first = client.get("/mcp/graph")
    again = client.get("/mcp/graph", headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304 and not again.data


def test_graph_cors_only_for_allowlisted_origins():
    app, _, _ = graph_app(seeded_repo())
    client = app.test_client()
    ok = client.get("/mcp/graph", headers={"Origin": "http://127.0.0.1:8081"})
    assert ok.status_code == 200 and ok.headers["Access-Control-Allow-Origin"] == "http://127.0.0.1:8081"
    assert "Origin" in ok.headers.get("Vary", "")
    bad = client.get("/mcp/graph", headers={"Origin": "http://evil.example"})
    assert bad.status_code == 403 and "Access-Control-Allow-Origin" not in bad.headers
    plain = client.get("/mcp/graph")
    assert plain.status_code == 200 and "Access-Control-Allow-Origin" not in plain.headers
    pre = client.options("/mcp/graph", headers={"Origin": "http://127.0.0.1:8081",
                                                "Access-Control-Request-Method": "GET"})
    assert pre.status_code == 204 and pre.headers["Access-Control-Allow-Origin"] == "http://127.0.0.1:8081"
    assert client.options("/mcp/graph", headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.post("/mcp/graph").status_code == 405


def test_graph_sees_mcp_writes_at_once_via_invalidate():
    repo = seeded_repo(2)
    app, bp, clock = graph_app(repo, probe_seconds=1000)  # no probing: only the hook can refresh
    client = app.test_client()
    assert len(client.get("/mcp/graph").get_json()["nodes"]) == 2
    repo.put_page("fresh", serialize_page(lesson("fresh", evidence_items=[evidence("e1")],
                                                 relations=[relation("fresh", "suggests", "l0")]), SCHEMA))
    assert len(client.get("/mcp/graph").get_json()["nodes"]) == 2  # cached
    bp.graph_cache.invalidate()
    data = client.get("/mcp/graph").get_json()
    assert "fresh" in {n["id"] for n in data["nodes"]}
    assert {"from": "fresh", "to": "l0", "relation": "suggests"} in data["edges"]


def test_graph_sees_browser_saves_through_the_recent_probe():
    repo = seeded_repo(3)
    app, bp, clock = graph_app(repo)
    client = app.test_client()
    client.get("/mcp/graph")
    builds = bp.graph_cache.builds
    # a browser save does not pass through the gateway
    repo.put_page("browser_note", serialize_page(lesson("browser_note", title="브라우저 메모",
                                                        evidence_items=[evidence("e1")],
                                                        relations=[relation("browser_note", "contradicts", "l1")]), SCHEMA))
    clock.now += 1.5  # past the probe interval, well inside the TTL
    data = client.get("/mcp/graph").get_json()
    assert "browser_note" in {n["id"] for n in data["nodes"]}
    assert {"from": "browser_note", "to": "l1", "relation": "contradicts"} in data["edges"]
    assert bp.graph_cache.builds == builds  # patched in place, no full rescan
    # an edit to an existing Lesson changes its title
    repo.put_page("l0", serialize_page(lesson("l0", title="고친 제목", evidence_items=[evidence("e1")]), SCHEMA))
    clock.now += 1.5
    titles = {n["id"]: n["title"] for n in client.get("/mcp/graph").get_json()["nodes"]}
    assert titles["l0"] == "고친 제목"
    # deletions are caught by the TTL rebuild
    repo.delete_page("browser_note")
    clock.now += 11
    assert "browser_note" not in {n["id"] for n in client.get("/mcp/graph").get_json()["nodes"]}


def test_graph_wiki_failure():
    repo = seeded_repo(2)
    app, bp, clock = graph_app(repo)
    client = app.test_client()

    def broken(*args, **kwargs):
        raise WikiUnavailable("down")

    good = client.get("/mcp/graph").get_json()
    repo.scan_snapshots = broken
    repo.list_recent = broken
    clock.now += 60
    stale = client.get("/mcp/graph").get_json()
    assert stale["stale"] is True and stale["nodes"] == good["nodes"]

    empty = InMemoryRepository()
    empty.scan_snapshots = broken
    app2, _, _ = graph_app(empty)
    response = app2.test_client().get("/mcp/graph")
    assert response.status_code == 503 and response.get_json()["error"]["code"] == "wiki_unavailable"


def test_graph_empty_wiki():
    app, _, _ = graph_app(InMemoryRepository())
    data = app.test_client().get("/mcp/graph").get_json()
    assert data["nodes"] == [] and data["edges"] == [] and data["truncated"] is False


def test_graph_ask_source():
    """With SMW the graph comes from two bounded ask queries (shape of SMW's action=ask JSON)."""
    queries = []

    def ask(query):
        queries.append(query)
        if query.startswith("[[Category:Lessons]]"):
            return {"query": {"results": {
                "Lesson:a": {"fulltext": "Lesson:a", "printouts": {
                    "Lesson title": ["가"], "Confidence": ["high"], "Updated at": [{"timestamp": "1767225600", "raw": "x"}]}},
                "Lesson:b": {"fulltext": "Lesson:b", "printouts": {
                    "Lesson title": ["나"], "Confidence": [], "Updated at": []}},
            }}}
        return {"query": {"results": {
            "Lesson:a#relation-supports-b": {"printouts": {
                "Relation from": [{"fulltext": "Lesson:a"}], "Relation type": ["supports"],
                "Relation to": [{"fulltext": "Lesson:b"}]}},
            "Lesson:a#relation-supports-zz": {"printouts": {
                "Relation from": [{"fulltext": "Lesson:a"}], "Relation type": ["supports"],
                "Relation to": [{"fulltext": "Lesson:zz"}]}},
        }}}

    app, _, _ = graph_app(None, ask=ask)
    data = app.test_client().get("/mcp/graph").get_json()
    assert data["source"] == "ask"
    assert data["nodes"][0] == {"id": "a", "title": "가", "confidence": "high", "updated_at": "2026-01-01T00:00:00Z"}
    assert data["edges"] == [{"from": "a", "to": "b", "relation": "supports"}]
    assert all("|limit=500|offset=0" in q for q in queries) and len(queries) == 2


# ------------------------------------------------------------ the real wiki

@pytest.fixture(scope="module")
def wiki_pages(dev_wiki):
    """The test wiki with the banner template and the plain variants of our pages saved (as sync would)."""
    site = dev_wiki.site("sync")
    banner = (SCHEMA_DIR / "Templates" / "S3RM synced.wiki").read_text(encoding="utf-8")
    site.pages["Template:S3RM synced"].edit(banner, summary="test_site_assets: banner")
    values = {"S3RM_MCP_URL": "http://127.0.0.1:8080/mcp"}
    for title in ("Help:S3 연구 메모리", "Template:S3RM lesson preload", HOME_TITLE):  # transcluded page first
        site.pages[title].edit(render_page(PAGES[title].read(), (), values), summary="test_site_assets")
    return site


def _parse(site, title: str) -> str:
    return site.post("parse", page=title, prop="text", disablelimitreport=1, formatversion=2)["parse"]["text"]


@pytest.mark.wiki
def test_home_page_renders_in_the_wiki(wiki_pages):
    html = _parse(wiki_pages, HOME_TITLE)
    for needle in ('id="knowledge-graph"', 'id="quick-start"', 'id="create-a-lesson"', 'id="s3rm-knowledge-graph"',
                   'id="s3rm-semantic-search"', 'id="s3rm-recent-list"', 'id="s3rm-create-form"', 'data-limit="6"',
                   "s3rm-synced-banner", "s3rm-noscript", "연구실이 함께 쓰는", "모든 메모"):
        assert needle in html, needle
    assert 'title="특수:모든문서/Lesson:"' in html or 'title="Special:AllPages/Lesson:"' in html
    url = re.search(r'data-mcp-url="([^"]*)"', html).group(1)
    assert url.replace("&#58;", ":") == "http://127.0.0.1:8080/mcp"
    assert 'class="error' not in html and "{{" not in html


@pytest.mark.wiki
def test_preload_skeleton_keeps_its_substitutions(wiki_pages, dev_wiki):
    """Saving the preload page must not expand its subst: calls; a Lesson saved from it gets real values."""
    stored = wiki_pages.pages["Template:S3RM lesson preload"].text()
    assert "{{subst:REVISIONUSER}}" in stored and '{{subst:#time:Y-m-d"T"H:i:s"Z"}}' in stored
    html = _parse(wiki_pages, "Template:S3RM lesson preload")
    assert "s3rm-synced-banner" in html and "s3rm-lesson" not in html  # the page itself is no Lesson
    # what the edit box gets (noinclude dropped, includeonly unwrapped), saved as a person would
    body = re.sub(r"<noinclude>.*?</noinclude>", "", stored, flags=re.S)
    body = body.replace("<includeonly>", "").replace("</includeonly>", "").strip()
    body = body.replace("|title=\n", "|title=프리로드 시험\n", 1)
    agent = dev_wiki.site("agent")
    agent.pages["Lesson:preload_probe"].edit(body, summary="test_site_assets: preload")
    saved = parse_page(agent.pages["Lesson:preload_probe"].text(), SCHEMA)
    assert saved.fields["author"] == dev_wiki.agent.username.split("@")[0]
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", saved.fields["created_at"])
    assert saved.fields["created_at"] == saved.fields["updated_at"] == saved.evidence[0]["added_at"]


def test_help_links_point_at_pages_we_push():
    known = set(PAGES) | {"Special:Search", "Special:AllPages/Lesson:", "Special:UserLogin", "Special:RecentChanges",
                           "Category:Lessons"}
    for title, page in PAGES.items():
        if page.content_model != "wikitext":
            continue
        for target in re.findall(r"\[\[([^|\]]+)", page.read()):
            target = target.split("#", 1)[0].strip()
            if target:
                assert target in known, (title, target)


def test_help_pages_have_no_stray_wikitext():
    """No unescaped template braces or subst: outside <pre>/<nowiki> (they would run on save)."""
    for title, page in PAGES.items():
        if page.content_model != "wikitext" or title == "Template:S3RM lesson preload":
            continue
        text = re.sub(r"<pre>.*?</pre>|<nowiki>.*?</nowiki>", "", page.read(), flags=re.S)
        text = text.replace(BANNER, "").replace("{{:Help:S3 연구 메모리}}", "")
        text = re.sub(r"<!-- s3rm:if smw -->.*?<!-- s3rm:end -->", "", text, flags=re.S)
        text = re.sub(r"<!-- s3rm:if pageforms -->.*?<!-- s3rm:else -->", "", text, flags=re.S)
        assert "{{" not in text and "}}" not in text, title


@pytest.mark.wiki
def test_help_pages_render_in_the_wiki(wiki_pages):
    values = {"S3RM_MCP_URL": "http://127.0.0.1:8080/mcp"}
    for title, page in PAGES.items():
        if not title.startswith("Help:") or title == "Help:S3 연구 메모리":
            continue
        text = render_page(page.read(), (), values)
        parsed = wiki_pages.post("parse", text=text, title=title, contentmodel="wikitext", prop="text",
                                 disablelimitreport=1, formatversion=2)["parse"]["text"]
        assert "s3rm-synced-banner" in parsed, title
        prose = re.sub(r"<pre>.*?</pre>|<code>.*?</code>", "", parsed, flags=re.S)
        assert 'class="error' not in parsed and "{{" not in prose, title
        assert "%%" not in parsed, title


def test_graph_background_rebuild_serves_previous_data_meanwhile():
    import threading

    repo = seeded_repo(2)
    gate = threading.Event()
    original = repo.scan_snapshots

    def slow(cursor, limit):
        gate.wait(10)
        return original(cursor, limit)

    app, bp, clock = graph_app(repo, background=True, probe_seconds=1000)
    client = app.test_client()
    first = client.get("/mcp/graph").get_json()
    repo.delete_page("l1")
    repo.scan_snapshots = slow
    clock.now += 11
    during = client.get("/mcp/graph").get_json()  # returns at once with the old data
    assert during["nodes"] == first["nodes"]
    gate.set()
    bp.graph_cache.wait_idle()
    after = client.get("/mcp/graph").get_json()
    assert [n["id"] for n in after["nodes"]] == ["l0"]


@pytest.mark.wiki
def test_graph_on_the_real_wiki_sees_a_save_at_once(dev_wiki):
    """docs/browser.md#freshness: a save that bypasses the gateway shows up in the very next graph response."""
    from gateway.wiki.repository import MediaWikiRepository
    from support.lessons import agent_client, write_pages

    client = agent_client(dev_wiki)
    repo = MediaWikiRepository(client, SCHEMA)
    write_pages(client, {
        "graph-a": lesson("graph-a", title="그래프 A", evidence_items=[evidence("e1")]),
        "graph-b": lesson("graph-b", title="그래프 B", evidence_items=[evidence("e1")],
                          relations=[relation("graph-b", "supports", "graph-a")]),
    })
    app = Flask(__name__)
    # a TTL longer than any run: under load the write below can take more than the default 10 s, and an
    # expired graph is rebuilt whole, which is not what this test is about
    bp = create_graph_blueprint(lambda: repo, Config(), probe_seconds=0, ttl_seconds=3600, background=False)
    app.register_blueprint(bp)
    http = app.test_client()
    data = http.get("/mcp/graph").get_json()
    ids = {n["id"] for n in data["nodes"]}
    assert {"graph-a", "graph-b"} <= ids
    assert {"from": "graph-b", "to": "graph-a", "relation": "supports"} in data["edges"]
    # a "browser" save: straight to the wiki, not through the gateway
    write_pages(client, {"graph-c": lesson("graph-c", title="그래프 C", evidence_items=[evidence("e1")],
                                           relations=[relation("graph-c", "contradicts", "graph-b")])})
    data = http.get("/mcp/graph").get_json()
    assert "graph-c" in {n["id"] for n in data["nodes"]}
    assert {"from": "graph-c", "to": "graph-b", "relation": "contradicts"} in data["edges"]
    assert bp.graph_cache.builds == 1  # patched by the probe, not rebuilt


def test_graph_prewarm_builds_in_the_background():
    app, bp, _ = graph_app(seeded_repo(2))
    bp.graph_cache.prewarm()
    bp.graph_cache.wait_idle()
    assert bp.graph_cache.builds == 1
    assert len(app.test_client().get("/mcp/graph").get_json()["nodes"]) == 2
    assert bp.graph_cache.builds == 1
