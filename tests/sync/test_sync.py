"""``s3rm sync push|diff|check`` (sync/push.py, sync/pageset.py, sync/wikisite.py).

Offline: settings precedence, title identity across languages, capability
detection, the save normalisation and the page set itself.

On the real wiki (``dev_wiki``: Korean content language, no SMW, no Page
Forms), through the CLI exactly as an admin runs it: the first push creates
every page; a second push makes 0 edits; ``sync diff`` is empty; a template
edited in the wiki makes ``sync check`` exit 1 naming it; a push by the agent
account (not an interface admin) fails naming ``editsitejs``; pages land in
the right (localized) namespaces; ``Property:`` / ``Form:`` pages are never
sent to a wiki without those namespaces.
"""
from __future__ import annotations

import io
from pathlib import Path

import pytest
from support.schema_dirs import SCHEMA
from support.lessons import evidence, lesson, relation, verification

from gateway.domain.codec import serialize_page
from gateway.domain.repository import EditConflict, PermissionDenied, WikiUnavailable
from gateway.wiki.client import WikiClient
from s3rm import cli
from s3rm import settings as cli_settings
from s3rm import sync_verbs
from sync import pageset, push, wikisite
from sync.errors import SyncConfigError, SyncError
from sync.wikisite import ConnectionSettings, SiteInfo, TitleKey

MCP_URL = "http://127.0.0.1:8080/mcp"
CORE_NAMESPACES = {"Template": 10, "MediaWiki": 8, "Help": 12, "Category": 14, "Module": 828, "": 0}


# ---------------------------------------------------------------- offline

KOREAN_SITEINFO = {
    "general": {"generator": "MediaWiki 1.39.17", "lang": "ko"},
    "namespaces": {
        "0": {"id": 0, "case": "first-letter", "name": ""},
        "8": {"id": 8, "case": "first-letter", "name": "미디어위키", "canonical": "MediaWiki",
              "namespaceprotection": "editinterface"},
        "10": {"id": 10, "case": "first-letter", "name": "틀", "canonical": "Template"},
        "12": {"id": 12, "case": "first-letter", "name": "도움말", "canonical": "Help"},
        "3000": {"id": 3000, "case": "case-sensitive", "name": "Lesson", "canonical": "Lesson"},
    },
    "namespacealiases": [{"id": 6, "alias": "그림"}],
    "extensions": [{"name": "ParserFunctions"}],
}


def test_titles_match_by_namespace_id_not_localized_name() -> None:
    info = SiteInfo.from_query(KOREAN_SITEINFO)
    assert info.key("Template:Lesson evidence") == TitleKey(10, "Lesson evidence")
    assert info.key("template:Lesson_evidence") == info.key_in(10, "틀:Lesson evidence")
    assert info.key("틀:Lesson evidence") == info.key("Template:Lesson evidence")
    assert info.key("MediaWiki:Common.js") == info.key_in(8, "미디어위키:Common.js")
    assert info.key("Lesson:abc") == TitleKey(3000, "abc")  # case-sensitive namespace: no capital
    assert info.key("연구 메모리") == TitleKey(0, "연구 메모리")
    assert info.key("Property:Confidence") == TitleKey(0, "Property:Confidence")  # no such namespace here
    assert info.display(info.key("Help:S3 연구 메모리")) == "도움말:S3 연구 메모리"


def test_module_pages_are_pushed_before_the_templates_that_invoke_them() -> None:
    pages = pageset.build_page_set({"smw", "scribunto"}, placeholders={"S3RM_MCP_URL": "https://x/mcp"})
    titles = [p.title for p in pages]
    module = titles.index("Module:S3RM values")
    assert module < titles.index("Template:Lesson") and titles.index("Property:Confidence") < module
    assert titles.index("Module:S3RM entities") < module  # the table it loads
    assert pages[module].kind == "module" and pages[module].summary == "S3RM sync: Lua module"
    assert "Module:S3RM values" not in {p.title for p in pageset.build_page_set({"smw"}, placeholders={})}


def test_capabilities_come_from_extension_names() -> None:
    plain = SiteInfo.from_query(KOREAN_SITEINFO)
    assert (plain.smw, plain.pageforms, plain.capabilities) == (False, False, frozenset())
    full = SiteInfo.from_query({**KOREAN_SITEINFO, "extensions": [{"name": "SemanticMediaWiki"},
                                                                   {"name": "Page Forms"}]})
    assert full.capabilities == {"smw", "pageforms"}
    assert "Semantic MediaWiki: yes" in full.describe()
    lua = SiteInfo.from_query({**KOREAN_SITEINFO, "extensions": [{"name": "Scribunto"}]})
    assert lua.capabilities == {"scribunto"} and "Scribunto: yes" in lua.describe()


def test_normalize_text_matches_the_save_path() -> None:
    assert wikisite.normalize_text("a\r\nb\rc \n\n\t ") == "a\nb\nc"
    assert wikisite.normalize_text("e\u0301") == "\u00e9"
    assert wikisite.normalize_text("a\0b\u3000") == "ab\u3000"  # PHP rtrim keeps U+3000


def test_settings_precedence_and_env_file(tmp_path: Path) -> None:
    env_file = tmp_path / "env"
    env_file.write_text("export S3RM_WIKI_API_URL=http://file/api.php\n"
                        "export S3RM_SYNC_USERNAME='S3Admin@sync'\nexport S3RM_SYNC_PASSWORD=secret\n")
    s = sync_verbs.resolve_settings(None, {"S3RM_SYNC_PASSWORD": "from-env"}, env_file)
    assert (s.api_url, s.username, s.password) == ("http://file/api.php", "S3Admin@sync", "from-env")
    assert s.from_env_file == ("S3RM_WIKI_API_URL", "S3RM_SYNC_USERNAME")
    s = sync_verbs.resolve_settings("http://flag/api.php", {"S3RM_WIKI_API_URL": "http://env/api.php"}, env_file)
    assert s.api_url == "http://flag/api.php"
    with pytest.raises(SyncConfigError, match="S3RM_SYNC_USERNAME, S3RM_SYNC_PASSWORD"):
        sync_verbs.resolve_settings(None, {"S3RM_WIKI_API_URL": "http://x/api.php"}, tmp_path / "absent")


@pytest.mark.parametrize("url, expected", [
    ("http://127.0.0.1:8081/api.php", ("http", "127.0.0.1:8081", "/")),
    ("https://wiki.example.org/w/api.php", ("https", "wiki.example.org", "/w/")),
])
def test_split_api_url(url: str, expected: tuple[str, str, str]) -> None:
    assert wikisite.split_api_url(url) == expected


@pytest.mark.parametrize("url", ["ftp://x/api.php", "http://x/index.php", "not a url"])
def test_split_api_url_rejects(url: str) -> None:
    with pytest.raises(SyncConfigError):
        wikisite.split_api_url(url)


def test_page_set_for_a_plain_wiki() -> None:
    pages = pageset.build_page_set(set(), placeholders={"S3RM_MCP_URL": MCP_URL})
    by_title = {p.title: p for p in pages}
    for title in ("Template:Lesson", "Template:Lesson evidence", "Template:Lesson evidence verification",
                  "Template:Lesson relation", "MediaWiki:Common.js",
                  "MediaWiki:Common.css", "MediaWiki:Mainpage"):
        assert title in by_title, title
    assert not [t for t in by_title if t.startswith(("Property:", "Form:"))]
    home = [p for p in pages if p.kind == "home"]
    assert len(home) == 1 and by_title["MediaWiki:Mainpage"].text == home[0].title == "연구 메모리"
    assert f'data-mcp-url="{MCP_URL}"' in home[0].text
    assert any(p.kind == "help" for p in pages)
    assert by_title["MediaWiki:Common.js"].summary == "S3RM sync: site script"
    assert by_title["Template:Lesson"].summary == "S3RM sync: template"
    for page in pages:  # the plain variant renders cleanly: no SMW / Page Forms calls
        assert "{{#set:" not in page.text and "{{#subobject:" not in page.text and "{{#forminput:" not in page.text


def test_page_set_with_smw_and_page_forms() -> None:
    titles = {p.title for p in pageset.build_page_set({"smw", "pageforms"}, placeholders={})}
    assert "Property:Confidence" in titles and "Form:Lesson" in titles


def test_every_synced_wikitext_page_carries_the_banner() -> None:
    """docs/browser.md#synced-pages: help, home and schema pages say "synchronised from the repository"."""
    banner = "{{" + SCHEMA.meta.get("banner_template", "S3RM synced") + "}}"
    for page in pageset.build_page_set({"smw", "pageforms"}, placeholders={}):
        if page.kind in ("site-script", "site-style", "interface"):
            continue  # JS/CSS say it in a comment; MediaWiki:Mainpage is a bare message
        if page.title == "Template:S3RM synced":
            continue  # the banner itself
        assert banner in page.text, page.title


# ---------------------------------------------------------------- on the real wiki


def run_cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    """Run ``s3rm sync …``; return (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = cli.main(["sync", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def admin_environment(dev_wiki) -> dict[str, str]:
    """What an admin exports to run sync against the test wiki."""
    return {"S3RM_WIKI_API_URL": dev_wiki.api_url, "S3RM_SYNC_USERNAME": dev_wiki.sync.username,
            "S3RM_SYNC_PASSWORD": dev_wiki.sync.password, "S3RM_MCP_PUBLIC_URL": MCP_URL}


def apply_environment(mp: pytest.MonkeyPatch, dev_wiki) -> None:
    """Set the admin environment; never fall back to the interactive wiki's .dev/wiki/env."""
    for name, value in admin_environment(dev_wiki).items():
        mp.setenv(name, value)
    mp.delenv("S3RM_SCHEMA_DIR", raising=False)
    mp.setattr(cli_settings, "DEV_ENV_FILE", Path("/nonexistent/s3rm-env"))


@pytest.fixture
def sync_env(dev_wiki, monkeypatch: pytest.MonkeyPatch):
    """The admin environment for one test (see :func:`apply_environment`)."""
    apply_environment(monkeypatch, dev_wiki)
    return dev_wiki


def connect_as(dev_wiki, role: str) -> wikisite.WikiSite:
    creds = dev_wiki.account(role)
    return wikisite.connect(ConnectionSettings(dev_wiki.api_url, creds.username, creds.password))


def desired_pages(wiki: wikisite.WikiSite) -> list[pageset.DesiredPage]:
    return pageset.build_page_set(wiki.info.capabilities, placeholders={"S3RM_MCP_URL": MCP_URL})


def last_revisions(wiki: wikisite.WikiSite, pages) -> dict[TitleKey, int | None]:
    return {key: page.revid for key, page in wiki.fetch(p.title for p in pages).items()}


@pytest.fixture(scope="module")
def first_push(dev_wiki) -> dict:
    """The first push of this session, run through the CLI; records what was missing before."""
    wiki = connect_as(dev_wiki, "sync")
    pages = desired_pages(wiki)
    before = wiki.fetch(p.title for p in pages)
    missing = {wiki.info.key(p.title) for p in pages
               if wiki.info.key(p.title) in before and not before[wiki.info.key(p.title)].exists}
    with pytest.MonkeyPatch.context() as mp:
        apply_environment(mp, dev_wiki)
        out, err = io.StringIO(), io.StringIO()
        args = cli.build_parser().parse_args(["sync", "push"])
        code = sync_verbs.cmd_push(args, out, err)
    return {"code": code, "out": out.getvalue(), "err": err.getvalue(), "missing": missing, "pages": pages,
            "wiki": wiki}


def test_push_creates_every_page(first_push) -> None:
    wiki, pages = first_push["wiki"], first_push["pages"]
    assert first_push["code"] == 0, first_push["err"]
    stored = wiki.fetch(p.title for p in pages)
    for page in pages:
        remote = stored[wiki.info.key(page.title)]
        assert remote.exists, page.title
        assert remote.text == wikisite.normalize_text(page.text), page.title
    created = [line for line in first_push["out"].splitlines() if line.strip().startswith("created")]
    assert len(created) == len(first_push["missing"])
    assert f"{len(created)} created" in first_push["out"]
    assert "Semantic MediaWiki: no; Page Forms: no" in first_push["err"]


def test_second_push_makes_no_edits(first_push, sync_env, capsys) -> None:
    wiki, pages = first_push["wiki"], first_push["pages"]
    revisions = last_revisions(wiki, pages)
    code, out, err = run_cli(capsys, "push")
    assert code == 0, err
    assert "0 edit(s)" in out and f"{len(pages)} unchanged" in out
    assert last_revisions(wiki, pages) == revisions


def test_diff_is_empty_and_check_passes(first_push, sync_env, capsys) -> None:
    code, out, err = run_cli(capsys, "diff")
    assert (code, out) == (0, ""), err
    code, out, err = run_cli(capsys, "check")
    assert code == 0 and out.startswith("in sync:"), out + err


def test_pages_land_in_the_right_namespaces(first_push, dev_wiki) -> None:
    wiki, pages = first_push["wiki"], first_push["pages"]
    site = dev_wiki.site("agent")
    for page in pages:
        info = site.get("query", titles=page.title, prop="info", formatversion=2)["query"]["pages"][0]
        assert info["ns"] == CORE_NAMESPACES[page.namespace], page.title
        assert not info.get("missing"), page.title
        if page.namespace:  # the Korean wiki answers with its localized prefix
            assert info["title"].startswith(wiki.info.namespace_by_canonical(page.namespace).name + ":")
    assert {"틀", "미디어위키", "도움말"} <= {ns.name for ns in wiki.info.namespaces.values()}
    main = site.get("query", list="allpages", apnamespace=0, aplimit="max", formatversion=2)["query"]["allpages"]
    leaked = [p["title"] for p in main if p["title"].startswith(("Property:", "Form:", "Template:", "MediaWiki:",
                                                                  "Help:", "Category:"))]
    assert leaked == []  # nothing landed in the main namespace under an English prefix
    main_page = site.get("query", meta="siteinfo", siprop="general", formatversion=2)["query"]["general"]
    assert main_page["mainpage"] == "연구 메모리"


def test_property_and_form_pages_are_not_sent_without_their_extensions(first_push, dev_wiki) -> None:
    wiki = first_push["wiki"]
    pages = pageset.build_page_set({"smw", "pageforms"}, placeholders={"S3RM_MCP_URL": MCP_URL})
    plans = push.plan_sync(wiki, pages)
    skipped = {p.page.title: p.reason for p in plans if p.action == push.SKIP}
    assert "Property:Confidence" in skipped and "Semantic MediaWiki is not installed" in skipped["Property:Confidence"]
    assert "Form:Lesson" in skipped and "Page Forms is not installed" in skipped["Form:Lesson"]
    assert all(t.startswith(("Property:", "Form:")) for t in skipped)
    out = io.StringIO()
    report = push.push(wiki, [p for p in plans if p.action == push.SKIP], dry_run=True, out=out)
    assert report.skipped == len(skipped) and report.edits == 0
    assert "skipped       Property:Confidence  — the wiki has no Property: namespace" in out.getvalue()


def test_template_edited_in_the_wiki_is_drift(first_push, sync_env, dev_wiki, capsys) -> None:
    admin = dev_wiki.site("sync")
    title = "Template:Lesson evidence"
    page = admin.pages[title]
    page.edit(page.text() + "\n<!-- edited by hand -->", "edited in the wiki")
    try:
        code, out, err = run_cli(capsys, "check")
        assert code == 1
        assert "Template:Lesson evidence [틀:Lesson evidence]: differs" in out
        assert "Template:Lesson relation" not in out
        code, out, err = run_cli(capsys, "diff")
        assert code == 0
        assert "--- wiki/Template:Lesson evidence\n+++ repo/Template:Lesson evidence\n" in out
        assert "-<!-- edited by hand -->" in out
        code, out, err = run_cli(capsys, "push", "--dry-run")
        assert code == 0 and "would update  Template:Lesson evidence" in out and "nothing was edited" in out
        code, out, err = run_cli(capsys, "check")
        assert code == 1  # the dry run changed nothing
    finally:
        code, out, err = run_cli(capsys, "push")
    assert code == 0 and "1 edit(s): 0 created, 1 updated" in out
    assert "updated       Template:Lesson evidence" in out
    assert run_cli(capsys, "check")[0] == 0


def test_push_without_interface_admin_names_editsitejs(first_push, sync_env, dev_wiki, capsys,
                                                      monkeypatch) -> None:
    admin = dev_wiki.site("sync")
    for title in ("MediaWiki:Common.js", "Template:S3RM synced"):
        admin.pages[title].edit(admin.pages[title].text() + "\n/* drift */", "drift for a test")
    monkeypatch.setenv("S3RM_SYNC_USERNAME", dev_wiki.agent.username)
    monkeypatch.setenv("S3RM_SYNC_PASSWORD", dev_wiki.agent.password)
    try:
        code, out, err = run_cli(capsys, "push")
        assert code == 2
        assert "`editsitejs`" in err and "interface-admin" in err and "MediaWiki:Common.js" in err
        assert "Traceback" not in err
        assert "updated" not in out  # checked before the first edit: the template stayed drifted
        wiki = first_push["wiki"]
        plans = push.plan_sync(wiki, [p for p in first_push["pages"] if p.title == "Template:S3RM synced"])
        assert plans[0].action == push.UPDATE
        # the API's own refusal is reported the same way
        agent = connect_as(dev_wiki, "agent")
        current = agent.fetch(["MediaWiki:Common.js"])[agent.info.key("MediaWiki:Common.js")]
        with pytest.raises(wikisite.MissingRightsError, match="editsitejs") as refused:
            agent.edit("MediaWiki:Common.js", "/* x */", "test", base=current)
        assert isinstance(refused.value, PermissionDenied) and sync_verbs.exit_code(refused.value) == 2
    finally:
        monkeypatch.setenv("S3RM_SYNC_USERNAME", dev_wiki.sync.username)
        monkeypatch.setenv("S3RM_SYNC_PASSWORD", dev_wiki.sync.password)
        code, out, err = run_cli(capsys, "push")
    assert code == 0 and "2 updated" in out


def _raw_edit(client: WikiClient, title: str, text: str, **extra) -> dict:
    """A plain ``action=edit`` (no base revision unless ``extra`` names one); returns the edit result."""
    return client.post({"action": "edit", "title": title, "text": text, "summary": "raced edit",
                        "nocreate": True, **extra})["edit"]


def _latest(client: WikiClient, title: str) -> tuple[int, str, str]:
    """(revision id, timestamp, text) of the page's latest revision."""
    data = client.get({"action": "query", "prop": "revisions", "titles": title,
                       "rvprop": "ids|timestamp|content", "rvslots": "main"})
    rev = data["query"]["pages"][0]["revisions"][0]
    return rev["revid"], rev["timestamp"], rev["slots"]["main"]["content"]


@pytest.mark.parametrize("racer", ["agent", "sync"])
def test_push_never_overwrites_a_page_edited_after_planning(first_push, sync_env, dev_wiki, capsys,
                                                           racer) -> None:
    """An edit made between planning and saving is an edit conflict, whoever made it — another
    account, or the sync account itself (the case ``basetimestamp`` lets MediaWiki overwrite)."""
    title = "Template:Lesson relation"
    wiki = connect_as(dev_wiki, "sync")
    # generous per-request timeouts: on a busy machine (S3RM_TEST_LOAD) the one php -S process of the wiki copy
    # can take longer than the client's 10 s default to accept a connection, which is not what this test is about
    admin = WikiClient(dev_wiki.api_url, dev_wiki.sync.username, dev_wiki.sync.password, timeout=120)
    other = WikiClient(dev_wiki.api_url, dev_wiki.account(racer).username, dev_wiki.account(racer).password,
                       timeout=120)
    page = next(p for p in first_push["pages"] if p.title == title)
    try:
        _raw_edit(admin, title, page.text + "\n<!-- drift -->")
        plans = push.plan_sync(wiki, [page])
        assert plans[0].action == push.UPDATE
        raced = page.text + f"\n<!-- raced by {racer} -->"
        _raw_edit(other, title, raced)
        raced_rev = _latest(admin, title)[0]
        with pytest.raises(EditConflict) as conflict:
            push.push(wiki, plans, out=io.StringIO())
        assert conflict.value.current_revision_id == raced_rev
        assert _latest(admin, title)[0] == raced_rev  # nothing saved on top of the raced edit
        assert _latest(admin, title)[2] == wikisite.normalize_text(raced)
        assert sync_verbs.exit_code(conflict.value) == 1
    finally:
        code, out, err = run_cli(capsys, "push")
    assert code == 0 and "1 updated" in out, out + err
    assert run_cli(capsys, "check")[0] == 0


def test_basetimestamp_lets_mediawiki_overwrite_the_same_accounts_edit(first_push, dev_wiki) -> None:
    """Why the one edit policy never sends ``basetimestamp`` (gateway/wiki/edit.py): MediaWiki 1.39
    drops the conflict when the same account made every edit since that time."""
    title = "Help:S3RM basetimestamp probe"
    admin = WikiClient(dev_wiki.api_url, dev_wiki.sync.username, dev_wiki.sync.password)
    admin.post({"action": "edit", "title": title, "text": "first", "summary": "probe"})
    base_rev, base_ts, _ = _latest(admin, title)
    _raw_edit(admin, title, "second, by the same account")
    result = _raw_edit(admin, title, "third, from the stale base", basetimestamp=base_ts)
    assert result["result"] == "Success"  # no conflict: "second" was overwritten
    assert _latest(admin, title)[2] == "third, from the stale base"
    # the same stale write by base revision id is refused
    with pytest.raises(EditConflict):
        _raw_edit(admin, title, "fourth, from the stale base", baserevid=base_rev)


def test_wiki_errors_map_to_exit_codes() -> None:
    assert sync_verbs.exit_code(EditConflict("x", current_revision_id=1)) == 1
    assert sync_verbs.exit_code(WikiUnavailable("x")) == 2
    assert sync_verbs.exit_code(PermissionDenied("x")) == 2
    assert sync_verbs.exit_code(SyncConfigError("x")) == 2
    assert sync_verbs.exit_code(SyncError("x")) == 1


def test_bad_settings_are_clear_errors(sync_env, monkeypatch, capsys) -> None:
    monkeypatch.setenv("S3RM_SYNC_PASSWORD", "wrong-password")
    code, out, err = run_cli(capsys, "check")
    assert code == 2 and "refused the login" in err and "Traceback" not in err
    monkeypatch.delenv("S3RM_SYNC_PASSWORD")
    code, out, err = run_cli(capsys, "push")
    assert code == 2 and "S3RM_SYNC_PASSWORD" in err
    monkeypatch.setenv("S3RM_SYNC_PASSWORD", "x")
    code, out, err = run_cli(capsys, "diff", "--api-url", "http://127.0.0.1:9/api.php")
    assert code == 2 and "cannot reach the wiki" in err


def test_pushed_pages_render_cleanly(first_push, dev_wiki) -> None:
    """Every pushed wikitext page — and a Lesson using every record template — parses
    without error output and shows no raw ``{{#…}}`` parser-function text."""
    site = dev_wiki.site("agent")
    sample = lesson("sync-render-check", evidence_items=[evidence("e1")],
                    verifications=[verification("v1", "e1")], relations=[relation("sync-render-check", "supports", "x")])
    site.post("edit", title="Lesson:sync-render-check", text=serialize_page(sample, SCHEMA), summary="render check",
              token=site.get_token("csrf"), formatversion=2)
    # a Lua module renders as its source code, not as wikitext
    titles = [p.title for p in first_push["pages"] if p.kind not in ("site-script", "site-style", "interface", "module")]
    for title in titles + ["Lesson:sync-render-check"]:
        parsed = site.post("parse", page=title, prop="text|parsewarnings", disablelimitreport=1,
                           formatversion=2)["parse"]
        assert 'class="error' not in parsed["text"], title
        assert "{{#" not in parsed["text"], title
        assert not parsed.get("parsewarnings"), (title, parsed["parsewarnings"])


def test_text_changed_by_the_pre_save_transform_is_reported(first_push) -> None:
    """A source MediaWiki rewrites on save (here a ~~~~ signature) would be pushed again
    on every run; push names it instead of hiding it."""
    wiki = first_push["wiki"]
    page = pageset.DesiredPage("Help:S3RM sync signature test", "signed ~~~~", "help", "test")
    report = push.push(wiki, push.plan_sync(wiki, [page]), out=io.StringIO())
    assert report.created == 1 and report.transformed == ("Help:S3RM sync signature test",)
    assert push.plan_sync(wiki, [page])[0].action == push.UPDATE


def test_first_push_leaves_no_red_links_between_pushed_pages(first_push, dev_wiki) -> None:
    """Pages pushed in the same second as pages they include/link are purged afterwards."""
    site = dev_wiki.site("agent")
    for page in first_push["pages"]:
        if page.namespace not in ("Help", "", "Category"):
            continue
        html = site.get("parse", page=page.title, prop="text", formatversion=2)["parse"]["text"]
        assert 'class="new"' not in html, page.title
