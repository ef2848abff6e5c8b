"""``s3rm audit`` against a real wiki and a real gateway configured the way ``s3rm stack up``
configures it (s3rm/audit/__init__.py, docs/operations.md#audit).

The gateway runs under gunicorn with ``stack.gateway_env`` (its seal key from the stack's
``secrets.json``); the audit CLI is given no settings at all and must find the same wiki and
the same seal key in the stack's directory. A full MCP write session (every write tool,
``revise_lesson`` included) audits clean; a raw save that breaks rules is still reported; a
missing seal key is reported naming the setting.
"""
from __future__ import annotations

import json
import os
import shlex

import pytest

from gateway.domain.codec import parse_page, serialize_page
from gateway.wiki.client import WikiClient
from support.schema_dirs import SCHEMA
from support.services import Gateway, call_tool, tool_payload
from support.write_harness import claim_args, evidence_args, lesson_fields, unique
from s3rm import settings as cli_settings
from s3rm.devstack import stack
from s3rm.audit import main, settings


@pytest.fixture()
def dev_stack(dev_wiki, tmp_path, monkeypatch):
    """A dev stack directory for ``dev_wiki`` (``wiki/env``, ``secrets.json``) that the CLI reads as ``.dev``."""
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "env").write_text(
        "".join(f"export {k}={shlex.quote(v)}\n" for k, v in dev_wiki.env().items()))
    monkeypatch.setattr(cli_settings, "DEV_DIR", tmp_path)
    monkeypatch.setattr(stack, "SECRETS_FILE", tmp_path / "secrets.json")
    monkeypatch.setattr(stack, "TOKEN_FILE", tmp_path / "mcp-write-token")
    for name in [k for k in os.environ if k.startswith("S3RM_")]:
        monkeypatch.delenv(name)
    return tmp_path, stack.load_secrets()


def _stack_gateway(dev_wiki, sec) -> Gateway:
    env = {k: v for k, v in stack.gateway_env(dev_wiki, 0, 0, sec).items() if k.startswith("S3RM_")}
    for name in ("S3RM_BIND", "S3RM_MCP_PUBLIC_URL", "S3RM_MCP_ALLOWED_HOSTS"):
        env.pop(name)
    env.update(S3RM_EMBEDDING_PROVIDER="disabled", S3RM_RETRIEVAL_DEFAULT_MODE="legacy")
    return Gateway(env)


def _write(gw: Gateway, token: str, tool: str, **arguments) -> dict:
    out = tool_payload(call_tool(gw.url, tool, arguments, headers={"Authorization": f"Bearer {token}"}))
    assert "error" not in out, out
    return out


def _audit(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_audit_after_a_full_mcp_write_session_is_clean_and_still_catches_a_raw_save(dev_wiki, dev_stack, capsys):
    _, sec = dev_stack
    token = sec["write_token"]
    with _stack_gateway(dev_wiki, sec) as gw:
        since = dev_wiki_now(dev_wiki)  # after the gateway's start: earlier tests' saves are outside the window
        a = _write(gw, token, "create_lesson_draft", operation_id=unique("op"), lesson_id=unique("audit-a"),
                   initial_evidence=evidence_args(), initial_verification=claim_args(), **lesson_fields())
        b = _write(gw, token, "create_lesson_draft", operation_id=unique("op"), lesson_id=unique("audit-b"),
                   initial_evidence=evidence_args(), **lesson_fields(confidence="low"))
        ev = _write(gw, token, "attach_evidence", operation_id=unique("op"), lesson_id=a["id"], **evidence_args())
        vr = _write(gw, token, "record_evidence_verification", operation_id=unique("op"), lesson_id=a["id"],
                    evidence_id=ev["evidence_id"], expected_revision_id=ev["current_revision_id"],
                    expected_evidence_digest=ev["evidence_digest"], **claim_args())
        link = _write(gw, token, "link_lessons", operation_id=unique("op"),
                      **{"from": a["id"], "relation": "analogous_to", "to": b["id"]})
        assert link["current_revision_id"] > vr["current_revision_id"]
        rev = _write(gw, token, "revise_lesson", operation_id=unique("op"), lesson_id=a["id"],
                     expected_revision_id=link["current_revision_id"], basis_evidence_ids=a["evidence_ids"],
                     changes={"interpretation": "Fragmentation of cached blocks under variable shapes."},
                     reason="the second trace shows the shape dependence")
        assert rev["status"] == "revised"
    code, report = _audit(capsys, "--since", since)
    assert (code, report["violation_count"], report["unreadable"]) == (0, 0, 0), report
    assert report["scanned"] >= 6

    # a browser-style raw save that rewrites an append-only record is still reported
    client = WikiClient(dev_wiki.api_url, dev_wiki.importer.username, dev_wiki.importer.password)
    data = client.get({"action": "query", "prop": "revisions", "titles": f"Lesson:{a['id']}",
                       "rvprop": "ids|content", "rvslots": "main"})
    current = data["query"]["pages"][0]["revisions"][0]
    page = parse_page(current["slots"]["main"]["content"], SCHEMA)
    edited = page.evolve(evidence=({**page.evidence[0], "citation": "rewritten"}, *page.evidence[1:]))
    raw = client.post({"action": "edit", "title": f"Lesson:{a['id']}", "text": serialize_page(edited, SCHEMA),
                       "summary": "tidy", "baserevid": current["revid"], "nocreate": True}, token="csrf")
    code, report = _audit(capsys, "--since", since)
    assert code == 1
    assert {v["revision_id"] for v in report["violations"]} == {raw["edit"]["newrevid"]}
    assert "HS21" in {v["rule_id"] for v in report["violations"]}


def test_a_missing_seal_key_is_reported_naming_the_setting(dev_wiki, dev_stack, capsys):
    dev_dir, sec = dev_stack
    with _stack_gateway(dev_wiki, sec) as gw:
        since = dev_wiki_now(dev_wiki)
        a = _write(gw, sec["write_token"], "create_lesson_draft", operation_id=unique("op"),
                   lesson_id=unique("audit-k"), initial_evidence=evidence_args(), **lesson_fields())
        _write(gw, sec["write_token"], "revise_lesson", operation_id=unique("op"), lesson_id=a["id"],
               expected_revision_id=a["current_revision_id"], basis_evidence_ids=a["evidence_ids"],
               changes={"title": "Sealed title"}, reason="clearer title")
    (dev_dir / "secrets.json").unlink()
    code, report = _audit(capsys, "--since", since)
    (finding,) = [v for v in report["violations"] if v["lesson_id"] == a["id"]]
    assert code == 1 and finding["rule_id"] == "HS44"
    assert "unknown key id 'dev1': S3RM_REVISION_HMAC_KEYS is not set" in finding["message"]


def test_seal_keys_come_from_the_environment_or_from_the_stack_of_the_audited_wiki():
    dev = {"S3RM_WIKI_API_URL": "http://127.0.0.1:8081/api.php", "S3RM_WIKI_USERNAME": "S3Agent@gateway",
           "S3RM_REVISION_HMAC_KEYS": '{"dev1": "x"}', "S3RM_REVISION_HMAC_ACTIVE_KEY_ID": "dev1"}
    assert settings({}, dev=dev)["S3RM_REVISION_HMAC_KEYS"] == '{"dev1": "x"}'
    other = settings({"S3RM_WIKI_API_URL": "https://wiki.example.org/api.php"}, dev=dev)
    assert "S3RM_REVISION_HMAC_KEYS" not in other and other["S3RM_WIKI_USERNAME"] == "S3Agent@gateway"
    assert "S3RM_REVISION_HMAC_KEYS" not in settings({}, "https://wiki.example.org/api.php", dev=dev)
    mine = settings({"S3RM_REVISION_HMAC_KEYS": '{"p": "y"}'}, dev=dev)
    assert (mine["S3RM_REVISION_HMAC_KEYS"], "S3RM_REVISION_HMAC_ACTIVE_KEY_ID" in mine) == ('{"p": "y"}', False)


def dev_wiki_now(dev_wiki) -> str:
    """The wiki's clock now (the audit window starts here)."""
    client = WikiClient(dev_wiki.api_url, None, None)
    return client.get({"action": "query", "meta": "siteinfo", "siprop": "general"})["query"]["general"]["time"]


# ---------------------------------------------------------------- the documented schedule
REPO = cli_settings.REPO_ROOT


def _audit_args(argv: list[str]):
    import argparse

    from s3rm.audit import register

    parser = argparse.ArgumentParser(prog="s3rm", exit_on_error=False)
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def _cron_commands(text: str) -> list[str]:
    """The commands of the cron lines (five time fields, optionally a user) in ``text``."""
    import re

    return [m.group(1) for m in re.finditer(r"(?:^|<code>)\d+ \d+ \* \* \* (?:root )?cd \S+ && (.+?)(?:</code>.*)?$", text, re.M)]


def test_the_documented_audit_schedule_runs_the_real_command():
    """docs/operations.md#audit and the admin help page give the same cron lines; each runs either
    ``s3rm audit`` with arguments its parser accepts or the compose service ``audit`` (checked against
    the resolved compose file by tests/deploy/test_compose.py)."""
    doc = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    section = doc[doc.index('<a id="audit"></a>'):doc.index('<a id="sqlite-search-index"></a>')]
    help_page = (REPO / "schema" / "pages" / "help" / "server.wiki").read_text(encoding="utf-8")
    help_section = help_page[help_page.index("== 감사 정기 실행 =="):].split("\n==", 1)[0]
    commands = _cron_commands(section)
    assert len(commands) == 2 and _cron_commands(help_section) == commands
    for command in commands:
        argv = shlex.split(command)
        if argv[0] == "s3rm":
            assert _audit_args(argv[1:]).command == "audit"
        else:
            assert argv == ["docker", "compose", "--profile", "audit", "run", "--rm", "audit"]
