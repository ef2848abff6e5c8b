"""The newcomer's first connection: one Claude Code line everywhere, and ``s3rm doctor``'s
write-free check of the URL and the token against a real gateway (s3rm/connect.py, s3rm/doctor.py,
docs/transport.md#checking-the-connection)."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import requests

from s3rm.cli import main
from s3rm.connect import claude_code_line
from s3rm.devstack.stack import ready_text
from s3rm.doctor import diagnose
from support.services import Gateway

REPO = Path(__file__).resolve().parents[2]
HELP = REPO / "schema" / "pages" / "help"
README_URL = "http://127.0.0.1:8080/mcp"
DOC_URL = "%%S3RM_MCP_DOC_URL%%"
TOKEN = "doctor-test-token-0123456789abcdef"


def _claude_lines(text: str) -> list[str]:
    return [m.group(0).strip() for m in re.finditer(r"claude mcp add [^\n<`]*", text)]


def test_the_claude_code_line_is_the_same_in_stack_up_readme_and_help_pages():
    line = claude_code_line(README_URL)
    assert "--scope user" in line and "'Authorization: Bearer ${S3RM_MCP_TOKEN}'" in line
    assert line in _claude_lines(ready_text(README_URL, "http://127.0.0.1:8081", "ready"))
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert line in _claude_lines(readme)
    token_mode_pages = ["main.wiki", "connect-linux.wiki", "connect-macos.wiki", "connect-windows.wiki"]
    for page in token_mode_pages:
        assert claude_code_line(DOC_URL) in _claude_lines((HELP / page).read_text(encoding="utf-8")), page
    # every other `claude mcp add` shown anywhere (github mode needs no header) registers in user scope too
    for path in [REPO / "README.md", REPO / "docs" / "operations.md", *HELP.glob("*.wiki")]:
        for shown in _claude_lines(path.read_text(encoding="utf-8")):
            assert "--scope user" in shown, (path.name, shown)


def test_every_inspector_command_shown_pins_the_tested_version():
    pinned = json.loads((REPO / "tests" / "clients" / "package.json").read_text())["dependencies"][
        "@modelcontextprotocol/inspector"]
    shown = 0
    for path in [REPO / "README.md", REPO / "docs" / "operations.md", *HELP.glob("*.wiki")]:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"npx (?:-y )?@modelcontextprotocol/inspector(@[0-9.]+)?", text):
            assert match.group(1) == f"@{pinned}", (path.name, match.group(0))
            shown += 1
    assert shown >= 3


def test_help_pages_describe_every_prompt_and_its_arguments():
    from gateway.transport.prompts import prompt_defs

    usage = (HELP / "usage.wiki").read_text(encoding="utf-8")
    section = usage[usage.index("== MCP 프롬프트 =="):]
    for prompt in prompt_defs("(the migration prompt)"):
        row = next(line for line in section.splitlines() if f"<code>{prompt.name}</code>" in line)
        for arg in prompt.args:
            if arg.name != "language":
                assert f"<code>{arg.name}</code>" + ("*" if arg.required else "") in row, (prompt.name, arg.name)
    assert "<code>language</code>" in section


@pytest.fixture(scope="module")
def gateway(module_wiki):
    env = {**module_wiki.env(), "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(TOKEN.encode()).hexdigest(),
           "S3RM_EMBEDDING_PROVIDER": "disabled", "S3RM_RETRIEVAL_DEFAULT_MODE": "legacy"}
    with Gateway(env, threads=4) as gw:
        yield gw


def _edit_count(wiki) -> int:
    answer = requests.get(wiki.api_url, params={"action": "query", "list": "recentchanges", "rclimit": "max",
                                                "format": "json", "formatversion": "2"}, timeout=30).json()
    return len(answer["query"]["recentchanges"])


@pytest.mark.parametrize("token, word, code", [(None, "missing", 1), ("not-the-token", "invalid", 1),
                                                (TOKEN, "accepted", 0)])
def test_doctor_tells_a_missing_a_wrong_and_the_right_token_apart_without_writing(
        gateway, module_wiki, monkeypatch, capsys, token, word, code):
    before = _edit_count(module_wiki)
    monkeypatch.delenv("S3RM_MCP_TOKEN", raising=False)
    if token is not None:
        monkeypatch.setenv("S3RM_MCP_TOKEN", token)
    assert main(["doctor", "--url", gateway.url, "--output", "json"]) == code
    out = json.loads(capsys.readouterr().out)
    assert out["token"] == word and out["mode"] == "token" and out["server"]["name"], out
    assert TOKEN not in json.dumps(out)
    assert _edit_count(module_wiki) == before


def test_whoami_states_the_refusal_a_write_would_get(gateway):
    wrong = requests.get(gateway.url + "/whoami", headers={"Authorization": "Bearer nope"}, timeout=30)
    assert wrong.status_code == 200 and wrong.headers["Cache-Control"] == "no-store"
    assert wrong.json() == {"mode": "token", "principal": "anonymous", "subject": "", "scopes": [],
                            "can_write": False, "problem": {"code": "invalid_token",
                                                            "message": "The write token was not accepted."}}
    right = requests.get(gateway.url + "/whoami", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30).json()
    assert right["can_write"] is True and right["principal"] == "token" and right["problem"] is None


def test_doctor_names_an_unreachable_or_wrong_url(gateway, capsys):
    assert main(["doctor", "--url", gateway.base + "/not-mcp"]) == 2
    assert "ends in /mcp" in capsys.readouterr().err
    with pytest.raises(Exception) as info:
        diagnose("http://127.0.0.1:9/mcp", None)
    assert "cannot reach" in str(info.value)
