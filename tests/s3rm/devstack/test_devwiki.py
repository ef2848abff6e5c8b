"""The development MediaWiki (s3rm/devstack/devwiki.py) against a real wiki (``dev_wiki``).

Tests that use ``dev_wiki`` get the ``wiki`` marker from tests/conftest.py.
"""
from __future__ import annotations

import os
import stat
import time
import uuid

import mwclient
from support.schema_dirs import SCHEMA
import pytest
from mwclient.errors import APIError, LoginError
from s3rm import cli
from s3rm.devstack import devwiki, packages, searchindex

ROLES = {"sync": "S3Admin", "agent": "S3Agent", "import": "S3Import"}


def _content(site: mwclient.Site, title: str) -> str | None:
    """Current wikitext of ``title`` read straight from the API (None if missing)."""
    res = site.api("query", prop="revisions", titles=title, rvprop="content",
                   rvslots="main", formatversion="2")
    page = res["query"]["pages"][0]
    if page.get("missing"):
        return None
    return page["revisions"][0]["slots"]["main"]["content"]


def _edit(site: mwclient.Site, title: str, text: str) -> dict:
    """Raw action=edit (no client-side permission guessing); returns the edit result."""
    return site.post("edit", title=title, text=text, summary="test", token=site.get_token("csrf"))["edit"]


def _wait_for(predicate, timeout: float = 60.0, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


@pytest.mark.parametrize("role", sorted(ROLES))
def test_bot_password_login_works(dev_wiki: devwiki.DevWiki, role: str) -> None:
    site = dev_wiki.site(role)
    assert site.logged_in
    assert site.username == ROLES[role]
    assert dev_wiki.account(role).username.startswith(ROLES[role] + "@")


def test_wrong_bot_password_is_refused(dev_wiki: devwiki.DevWiki) -> None:
    wrong = devwiki.Credentials(dev_wiki.agent.username, "x" * 32)
    with pytest.raises(LoginError):
        dev_wiki.site(wrong)


def test_wiki_uses_its_own_free_port(dev_wiki: devwiki.DevWiki) -> None:
    assert dev_wiki.port != devwiki.DEFAULT_PORT
    assert dev_wiki.api_url == f"http://127.0.0.1:{dev_wiki.port}/api.php"
    assert dev_wiki.index_url == f"http://127.0.0.1:{dev_wiki.port}/index.php"
    assert dev_wiki.server_url == f"http://127.0.0.1:{dev_wiki.port}"


def test_agent_creates_lesson_page_and_reads_it_back(dev_wiki: devwiki.DevWiki) -> None:
    agent = dev_wiki.site("agent")
    title = f"Lesson:test_page_{uuid.uuid4().hex[:8]}"
    text = "{{Lesson\n|title=첫 교훈\n|question=왜?\n}}\n"
    assert _edit(agent, title, text)["result"] == "Success"
    # a fresh, anonymous client sees the saved text
    assert _content(dev_wiki.site(login=False), title) == text.rstrip("\n")
    assert _edit(agent, title, text + "more\n")["result"] == "Success"
    assert _content(agent, title) == (text + "more").rstrip("\n")


def test_anonymous_rights_equal_production(dev_wiki: devwiki.DevWiki) -> None:
    """What deploy/mediawiki/LocalSettings.php takes from anonymous readers, the dev wiki takes too
    (docs/operations.md#wiki-accounts): its rights list lacks each, and an anonymous save is refused."""
    import re

    from gateway.config.schema import REPO_ROOT
    from s3rm.devstack import settings

    prod = settings.shared_blocks((REPO_ROOT / "deploy" / "mediawiki" / "LocalSettings.php").read_text())["rights"]
    denied = set(re.findall(r"\$wgGroupPermissions\['\*'\]\['(\w+)'\] = false;", prod))
    assert {"edit", "createpage", "createaccount"} <= denied
    anon = dev_wiki.site(login=False)
    rights = set(anon.api("query", meta="userinfo", uiprop="rights", formatversion="2")["query"]["userinfo"]["rights"])
    assert "read" in rights and not rights & denied
    with pytest.raises(APIError) as refused:
        _edit(anon, f"Lesson:anon_{uuid.uuid4().hex[:8]}", "{{Lesson\n|title=x\n}}\n")
    assert refused.value.code in ("permissiondenied", "cantcreate-anon", "cantcreate")


def test_agent_cannot_edit_site_js(dev_wiki: devwiki.DevWiki) -> None:
    agent = dev_wiki.site("agent")
    before = _content(agent, "MediaWiki:Common.js")
    with pytest.raises(APIError) as err:
        _edit(agent, "MediaWiki:Common.js", "alert('agent');")
    assert err.value.code in {"protectednamespace-interface", "sitejsprotected", "permissiondenied"}
    assert _content(agent, "MediaWiki:Common.js") == before


def test_import_account_cannot_edit_site_css(dev_wiki: devwiki.DevWiki) -> None:
    with pytest.raises(APIError):
        _edit(dev_wiki.site("import"), "MediaWiki:Common.css", "body { color: red }")


def test_sync_account_edits_site_js_and_css(dev_wiki: devwiki.DevWiki) -> None:
    sync = dev_wiki.site("sync")
    marker = uuid.uuid4().hex
    js = f"// s3rm sync test {marker}\nmw.log('ok');"
    css = f"/* s3rm sync test {marker} */\nbody {{ margin: 0; }}"
    assert _edit(sync, "MediaWiki:Common.js", js)["result"] == "Success"
    assert _edit(sync, "MediaWiki:Common.css", css)["result"] == "Success"
    assert _content(sync, "MediaWiki:Common.js") == js
    assert _content(sync, "MediaWiki:Common.css") == css


def test_lesson_namespace_is_3000_content_and_case_sensitive(dev_wiki: devwiki.DevWiki) -> None:
    schema = SCHEMA
    assert schema.namespace_id == 3000  # the served id is the schema source's (s3rm/devstack/settings.py)
    info = devwiki.siteinfo(dev_wiki.api_url)
    ns = {n["id"]: n for n in info["namespaces"].values()}
    assert ns[schema.namespace_id]["canonical"] == schema.namespace == "Lesson"
    assert ns[schema.namespace_id]["name"] == "Lesson"
    assert ns[schema.namespace_id]["case"] == "case-sensitive"
    assert ns[schema.namespace_id]["content"] is True
    assert ns[schema.namespace_id + 1]["canonical"] == "Lesson talk"


def test_lesson_titles_keep_lowercase(dev_wiki: devwiki.DevWiki) -> None:
    agent = dev_wiki.site("agent")
    result = _edit(agent, "Lesson:abc_def", "lowercase id")
    assert result["title"] == "Lesson:abc def"
    res = agent.api("query", titles="Lesson:abc_def|Lesson:Abc_def", formatversion="2")
    pages = {p["title"]: p for p in res["query"]["pages"]}
    assert "missing" not in pages["Lesson:abc def"]
    assert pages["Lesson:Abc def"].get("missing") is True


def test_content_language_is_korean(dev_wiki: devwiki.DevWiki) -> None:
    general = devwiki.siteinfo(dev_wiki.api_url)["general"]
    assert general["lang"] == "ko"
    assert general["server"] == dev_wiki.server_url
    assert general["generator"].startswith("MediaWiki 1.39")


def test_parserfunctions_is_loaded(dev_wiki: devwiki.DevWiki) -> None:
    info = devwiki.siteinfo(dev_wiki.api_url)
    assert "ParserFunctions" in {e["name"] for e in info["extensions"]}
    html = dev_wiki.site(login=False).api(
        "parse", text="{{#if: x | yes-branch | no-branch}}", contentmodel="wikitext",
        prop="text", formatversion="2")["parse"]["text"]
    assert "yes-branch" in html and "no-branch" not in html


def test_saved_text_is_searchable_in_lesson_namespace(dev_wiki: devwiki.DevWiki) -> None:
    agent = dev_wiki.site("agent")
    word = "zq" + uuid.uuid4().hex[:12]
    _edit(agent, f"Lesson:search_{word}", f"교훈 본문 {word} 끝")

    def hits():
        return agent.api("query", list="search", srsearch=word, srwhat="text",
                         srnamespace=SCHEMA.namespace_id)["query"]["search"]

    found = _wait_for(hits)  # the search index is written by a deferred update, later on a busy machine
    assert [h["title"] for h in found] == [f"Lesson:search {word}"]


def test_job_runner_is_fresh_and_drains_the_queue(module_wiki: devwiki.DevWiki) -> None:
    # a wiki of this module's own (tests/conftest.py module_wiki): in the session wiki the queue
    # also holds the jobs of every other test's edits, so "drained" would depend on test order
    dev_wiki = module_wiki
    ok, age, data = devwiki.jobrunner_freshness(dev_wiki.jobrunner_state_file)
    assert ok and age is not None and age < 15, data
    assert data["last_run_at"].endswith("Z")
    agent = dev_wiki.site("agent")
    _edit(agent, "Lesson:job_probe", "[[Lesson:abc_def]] queues link jobs")

    # the edit queued link/cache jobs; $wgJobRunRate = 0, so only the runner drains them
    assert _wait_for(lambda: devwiki.pending_jobs(dev_wiki.dir) == 0, timeout=30, interval=0.5)
    after = devwiki.jobrunner_freshness(dev_wiki.jobrunner_state_file)
    assert after[0] and after[1] is not None and after[1] < 15
    assert devwiki.status(dev_wiki.dir).healthy


def test_the_running_job_runner_is_background_work(dev_wiki: devwiki.DevWiki) -> None:
    """docs/operations.md#job-priority: the real runner lowered itself and its session's autogroup."""
    from s3rm.devstack import wikiserver
    from s3rm.devstack.jobrunner import JOB_NICENESS
    from s3rm.devstack.procs import AUTOGROUP_FILE

    runner = wikiserver.jobrunner_pid(dev_wiki.dir)
    server = wikiserver.server_pid(dev_wiki.dir)
    assert runner is not None and server is not None
    assert os.getpriority(os.PRIO_PROCESS, runner) >= os.getpriority(os.PRIO_PROCESS, server) + min(
        JOB_NICENESS, 19 - os.getpriority(os.PRIO_PROCESS, server))
    if AUTOGROUP_FILE.exists():
        runner_group = open(f"/proc/{runner}/autogroup").read().split()
        server_group = open(f"/proc/{server}/autogroup").read().split()
        assert runner_group[0] != server_group[0]  # two sessions, so the autogroup value is what counts
        assert runner_group[-1] == str(JOB_NICENESS) and server_group[-1] == "0"


def test_job_runner_merges_the_fragmented_search_index(module_wiki: devwiki.DevWiki) -> None:
    dev_wiki = module_wiki
    agent = dev_wiki.site("agent")
    word = "merge" + uuid.uuid4().hex[:8]
    titles = [f"Lesson:merge probe {n}" for n in range(searchindex.SEGMENT_LIMIT + 3)]
    for title in titles:  # each save adds one FTS3 segment
        _edit(agent, title, f"{word} probe text")
    db = searchindex.database(dev_wiki.dir)

    # the next runJobs round merges them (s3rm/devstack/jobrunner.py)
    assert _wait_for(lambda: searchindex.segment_count(db) <= searchindex.SEGMENT_LIMIT, timeout=30, interval=0.5)
    found = agent.api("query", list="search", srsearch=word, srwhat="text", srnamespace=3000, srlimit=50,
                      formatversion="2")["query"]["search"]
    assert sorted(h["title"] for h in found) == sorted(titles)


def test_state_and_env_files_are_private(dev_wiki: devwiki.DevWiki) -> None:
    for name in ("state.json", "env"):
        mode = stat.S_IMODE(os.stat(dev_wiki.dir / name).st_mode)
        assert mode == 0o600, (name, oct(mode))
    env_text = (dev_wiki.dir / "env").read_text()
    for key, value in dev_wiki.env().items():
        assert f"export {key}=" in env_text
    assert dev_wiki.env()["S3RM_WIKI_USERNAME"] == "S3Agent@gateway"
    assert devwiki.wiki_from_state(dev_wiki.dir) == dev_wiki


def test_second_up_is_fast_and_keeps_the_server(dev_wiki: devwiki.DevWiki) -> None:
    pid_file = dev_wiki.dir / "run" / "server.pid"
    before = pid_file.read_text()
    again = devwiki.up(dev_wiki.dir, dev_wiki.port, install_packages=False, quiet=True)
    assert again == dev_wiki  # (fast because nothing is installed or restarted: the same server pid below)
    assert pid_file.read_text() == before


def test_cli_status_reports_healthy_wiki(dev_wiki: devwiki.DevWiki, capsys) -> None:
    assert cli.main(["dev", "wiki", "status", "--dir", str(dev_wiki.dir)]) == 0
    out = capsys.readouterr().out
    assert f"{dev_wiki.server_url}/  answers" in out


def test_cli_rejects_bad_port_without_traceback(tmp_path, capsys, monkeypatch) -> None:
    assert cli.main(["dev", "wiki", "up", "--dir", str(tmp_path / "w"), "--port", "http"]) == 2
    assert "--port='http' is not a port number" in capsys.readouterr().err
    monkeypatch.setenv(devwiki.PORT_ENV, "70000")
    assert cli.main(["dev", "wiki", "up", "--dir", str(tmp_path / "w")]) == 2
    assert f"{devwiki.PORT_ENV}=70000 is out of range" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_cli_status_of_missing_wiki_fails(tmp_path, capsys) -> None:
    assert cli.main(["dev", "wiki", "status", "--dir", str(tmp_path / "none")]) == 1
    assert "not installed" in capsys.readouterr().out


def test_reset_refuses_foreign_directory(tmp_path, capsys) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    assert cli.main(["dev", "wiki", "reset", "--dir", str(tmp_path), "--port", "1"]) == 2
    assert "refusing to delete" in capsys.readouterr().err
    assert (tmp_path / "precious.txt").exists()


def test_missing_mediawiki_is_a_clear_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(packages, "MW_ROOT", tmp_path / "no-mediawiki")
    with pytest.raises(devwiki.DevWikiError, match="MediaWiki not found"):
        devwiki.check_php()
    with pytest.raises(devwiki.DevWikiError, match="MediaWiki not found"):
        devwiki.start_test_wiki(tmp_path / "wiki", template_dir=tmp_path / "template")
    assert not (tmp_path / "template").exists()


def test_env_names_are_variables_the_tools_read(dev_wiki: devwiki.DevWiki) -> None:
    """Every variable the dev wiki hands to the gateway and the commands is one some reader reads.

    A misspelt name (the job-runner state file once became ``S3RM_wikiserver.…``) would leave the
    gateway's health check on ``jobrunner: missing`` while every name still looks plausible.
    """
    import re

    from gateway.config.schema import REPO_ROOT as repo
    readers = [p for p in (repo / "gateway").rglob("*.py")] + [
        p for p in (repo / "s3rm").rglob("*.py") if p.name != "devwiki.py"
    ]
    known = set()
    for path in readers:
        known.update(re.findall(r"S3RM_[A-Z0-9_]+", path.read_text(encoding="utf-8")))
    env = dev_wiki.env()
    assert env["S3RM_JOBRUNNER_STATE_FILE"] == str(dev_wiki.jobrunner_state_file)
    assert set(env) <= known, sorted(set(env) - known)
