"""Real MCP clients from PyPI and npm against ``s3rm serve`` on the real dev wiki (docs/transport.md#protocol-versions).

Every client lists the Lesson tools, calls a read tool (``search_lessons``: a
successful result, so the client's own outputSchema validation of
``structuredContent`` runs), and with the shared token makes a real write
(``create_lesson_draft``). The clients are pinned in
``tests/clients/package-lock.json`` and ``scripts/install.sh``
(``install_test_clients``, which this module runs when they are missing):

* python-sdk 2.x ``mcp.Client`` (its own venv, ``.dev/venv-mcp2``): auto mode
  (the recorded HTTP exchange has ``server/discover`` first and no
  ``initialize``), pinned to 2026-07-28 (no probe at all), legacy mode (2025-11-25);
* python-sdk 1.x (this environment): 2025-11-25, over HTTP and behind mcp-remote;
* ``@modelcontextprotocol/sdk`` 1.x and ``@modelcontextprotocol/client`` 2.x
  (legacy, auto, pinned) via ``tests/clients/ts_client.mjs``;
* the MCP Inspector CLI (``tools/list``, ``tools/call``);
* mcp-remote over stdio with the token header.

Without the header, Inspector and mcp-remote must show the server's own
sentence naming ``Authorization: Bearer <token>`` (docs/transport.md#oauth-probes).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from support.services import Gateway
from support.write_harness import evidence_args, lesson_fields, unique

from gateway.tools.registry import READ_TOOLS, WRITE_TOOLS
from support.clients import CLIENTS, INSPECTOR, MCP_REMOTE, NODE, PYTHON_SDK2

REPO = Path(__file__).resolve().parents[2]
TOKEN = "clients-test-token-0123456789"
TOOLS = list(READ_TOOLS + WRITE_TOOLS)
TOKEN_SENTENCE = "'Authorization: Bearer <token>'"
READ_ARGS = {"query": "allocator", "limit": 3}


@pytest.fixture(scope="module")
def stack(dev_wiki, installed_clients):
    """``s3rm serve`` in token mode on the dev wiki; yields the gateway."""
    env = dict(dev_wiki.env())
    env.update({
        "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(TOKEN.encode()).hexdigest(),
        "S3RM_CURSOR_SECRET": "clients-tests-cursor-secret-0123456",
        "S3RM_REVISION_HMAC_KEYS": json.dumps({"k1": "clients-tests-hmac-key-0123456789"}),
        "S3RM_REVISION_HMAC_ACTIVE_KEY_ID": "k1",
    })
    with Gateway(env, threads=4) as gateway:
        yield gateway


def write_args() -> dict:
    """Arguments of one new Lesson draft (fresh ids every call)."""
    return {**lesson_fields(), "operation_id": unique("op-client"), "lesson_id": unique("client"),
            "initial_evidence": evidence_args()}


def _node_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{NODE.parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_json(argv: list, *, cwd: Path = CLIENTS, env: dict | None = None, timeout: float = 120) -> dict:
    """Run a client command that prints one JSON object on its last stdout line."""
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env or _node_env(), capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_read_and_write(out: dict) -> None:
    """The client saw the Lesson tools, a validated read result and a created Lesson."""
    assert out["tools"] == TOOLS
    read = out["read"]
    assert read.get("isError") in (False, None), read
    assert isinstance(read["structuredContent"]["results"], list)
    write = out["write"]
    assert write.get("isError") in (False, None), write
    assert write["structuredContent"]["status"] == "created" and write["structuredContent"]["current_revision_id"] > 0


# ------------------------------------------------------------------ python-sdk 2.x
def sdk2(stack, mode: str) -> dict:
    return run_json([PYTHON_SDK2, CLIENTS / "python_sdk2.py", stack.url, mode, TOKEN, json.dumps(READ_ARGS),
                     json.dumps(write_args())], env=dict(os.environ))


def test_python_sdk2_auto_mode_negotiates_2026_with_no_fallback(stack):
    out = sdk2(stack, "auto")
    assert out["protocol_version"] == "2026-07-28" and out["server_name"] == "s3-research-memory"
    assert_read_and_write(out)
    exchange = out["exchange"]
    assert [(e["method"], e["mcp_method"], e["status"]) for e in exchange] == [
        ("POST", "server/discover", 200),
        ("POST", "tools/list", 200),
        ("POST", "tools/call", 200),
        ("POST", "tools/call", 200),
    ], exchange
    assert {e["protocol_version"] for e in exchange} == {"2026-07-28"}
    assert [e["mcp_name"] for e in exchange[2:]] == ["search_lessons", "create_lesson_draft"]


def test_python_sdk2_pinned_to_2026_connects_without_a_probe(stack):
    out = sdk2(stack, "2026-07-28")
    assert out["protocol_version"] == "2026-07-28"
    assert_read_and_write(out)
    assert [e["mcp_method"] for e in out["exchange"]] == ["tools/list", "tools/call", "tools/call"]


def test_python_sdk2_legacy_mode_negotiates_2025_11_25(stack):
    out = sdk2(stack, "legacy")
    assert out["protocol_version"] == "2025-11-25"
    assert_read_and_write(out)
    first = out["exchange"][0]
    assert first["mcp_method"] is None and first["protocol_version"] is None  # the initialize POST
    assert all(e["protocol_version"] in (None, "2025-11-25") for e in out["exchange"])


# ------------------------------------------------------------------ python-sdk 1.x
def _dump(result) -> dict:
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


async def _sdk1_session(session: ClientSession) -> dict:
    init = await session.initialize()
    listed = await session.list_tools()
    read = await session.call_tool("search_lessons", READ_ARGS)  # validates structuredContent
    write = await session.call_tool("create_lesson_draft", write_args())
    return {"protocol_version": init.protocolVersion, "tools": [t.name for t in listed.tools],
            "read": _dump(read), "write": _dump(write)}


def test_python_sdk1_over_http(stack):
    async def run():
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
            async with streamable_http_client(stack.url, http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    return await _sdk1_session(session)

    out = anyio.run(run)
    assert out["protocol_version"] == "2025-11-25"
    assert_read_and_write(out)


def _mcp_remote_params(url: str, token: str | None) -> StdioServerParameters:
    env = _node_env()
    env["HOME"] = str(Path(os.environ.get("TMPDIR", "/tmp")) / "s3rm-mcp-remote-home")  # its OAuth cache
    args = [str(MCP_REMOTE), url, "--transport", "http-only"]
    if token:
        # the README form: the header value comes from the environment, not the process arguments
        args += ["--header", "Authorization:${S3RM_AUTH_HEADER}"]
        env["S3RM_AUTH_HEADER"] = f"Bearer {token}"
    return StdioServerParameters(command=str(NODE), args=args, env=env, cwd=str(CLIENTS))


def test_mcp_remote_over_stdio_with_the_token_header(stack, tmp_path):
    async def run():
        with open(tmp_path / "mcp-remote.err", "w") as errlog:
            async with stdio_client(_mcp_remote_params(stack.url, TOKEN), errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    return await _sdk1_session(session)

    out = anyio.run(run)
    assert out["protocol_version"] == "2025-11-25"
    assert_read_and_write(out)


def test_mcp_remote_without_a_header_shows_the_token_message(stack, tmp_path):
    async def run():
        with open(tmp_path / "mcp-remote.err", "w") as errlog:
            async with stdio_client(_mcp_remote_params(stack.url, None), errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    assert len((await session.list_tools()).tools) == 10  # reads need no header
                    try:
                        await session.call_tool("create_lesson_draft", write_args())
                    except Exception as exc:  # McpError carrying mcp-remote's message
                        return str(exc)
                    return "no error"

    message = anyio.run(run)
    stderr = (tmp_path / "mcp-remote.err").read_text()
    assert "Dynamic Client Registration rejected (HTTP 404)" in message, message
    assert TOKEN_SENTENCE in message and TOKEN_SENTENCE in stderr


# ------------------------------------------------------------------ TypeScript SDKs
def ts(stack, package: str, mode: str = "-") -> dict:
    return run_json([NODE, CLIENTS / "ts_client.mjs", package, mode, stack.url, TOKEN, json.dumps(READ_ARGS),
                     json.dumps(write_args())])


def test_typescript_sdk1(stack):
    out = ts(stack, "sdk1")
    assert out["protocol_version"] == "2025-11-25"
    assert_read_and_write(out)


@pytest.mark.parametrize("mode, version", [("legacy", "2025-11-25"), ("auto", "2026-07-28"),
                                           ("2026-07-28", "2026-07-28")])
def test_typescript_client2(stack, mode, version):
    out = ts(stack, "client2", mode)
    assert out["protocol_version"] == version
    assert_read_and_write(out)
    methods = [e["mcp_method"] for e in out["exchange"] if e["method"] == "POST"]
    if version == "2026-07-28":
        assert methods[0] == "server/discover" and methods.count("server/discover") == 1
        assert {e["protocol_version"] for e in out["exchange"]} == {"2026-07-28"}
    else:
        assert "server/discover" not in methods


# ------------------------------------------------------------------ Inspector CLI
def inspector(stack, *args: str, header: bool = True, tty: bool = False) -> subprocess.CompletedProcess:
    env = _node_env()
    env["HOME"] = str(Path(os.environ.get("TMPDIR", "/tmp")) / "s3rm-inspector-home")
    env["MCP_INSPECTOR_SECRET_STORE"] = "memory"
    argv = [str(NODE), str(INSPECTOR), "--cli", stack.url, "--format", "json", "-q", *args]
    if header:
        argv += ["--header", f"Authorization: Bearer {TOKEN}"]
    if tty:  # the interactive OAuth path the Inspector takes for a person at a terminal
        argv = ["script", "-q", "-e", "-c", " ".join(_quote(a) for a in argv), "/dev/null"]
    return subprocess.run(argv, cwd=CLIENTS, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


@pytest.mark.parametrize("era", ["legacy", "auto"])
def test_inspector_cli_lists_reads_and_writes(stack, era):
    listed = inspector(stack, "--protocol-era", era, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    assert [t["name"] for t in json.loads(listed.stdout)["result"]["tools"]] == TOOLS
    read = inspector(stack, "--protocol-era", era, "--method", "tools/call", "--tool-name", "search_lessons",
                     "--tool-args-json", json.dumps(READ_ARGS))
    assert read.returncode == 0, read.stdout + read.stderr
    assert isinstance(json.loads(read.stdout)["result"]["structuredContent"]["results"], list)
    write = inspector(stack, "--protocol-era", era, "--method", "tools/call", "--tool-name", "create_lesson_draft",
                      "--tool-args-json", json.dumps(write_args()))
    assert write.returncode == 0, write.stdout + write.stderr
    assert json.loads(write.stdout)["result"]["structuredContent"]["status"] == "created"


def test_inspector_strict_finds_the_published_schemas_portable(stack):
    """MCP Inspector ``--strict`` lints every tool's input and output schema from tools/list:
    0 errors and 0 warnings (no type arrays; tests/sync/test_generate.py walks the rules too)."""
    listed = inspector(stack, "--method", "tools/list", "--strict")
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr
    envelope = json.loads(listed.stdout)
    assert [t["name"] for t in envelope["result"]["tools"]] == TOOLS
    assert "schemaFindings" not in envelope, envelope.get("schemaFindings")
    assert "Warning: tool" not in listed.stderr and "Error: tool" not in listed.stderr, listed.stderr


def test_inspector_cli_without_a_header_shows_the_token_message(stack):
    call = ("--method", "tools/call", "--tool-name", "create_lesson_draft", "--tool-args-json", json.dumps(write_args()))
    # at a terminal the Inspector tries OAuth: discovery, then registration, whose answer it prints
    interactive = inspector(stack, *call, header=False, tty=True)
    printed = interactive.stdout + interactive.stderr
    assert "Dynamic Client Registration rejected (HTTP 404)" in printed and TOKEN_SENTENCE in printed, printed
    # without a terminal it prints the 401's JSON-RPC error, which names the header too
    batch = inspector(stack, *call, "--stored-auth-only", header=False)
    assert batch.returncode != 0 and "Authorization: Bearer <token>" in batch.stdout + batch.stderr


# ------------------------------------------------------------------ resources, prompts, completions
@pytest.fixture(scope="module")
def surface_lesson(stack) -> str:
    """A Lesson written just now (so it heads resources/list); returns its id."""
    args = write_args()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "create_lesson_draft", "arguments": args}}
    r = httpx.post(stack.url, json=body, timeout=60, headers={
        "Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25"})
    assert r.status_code == 200 and r.json()["result"]["isError"] is False, r.text
    return args["lesson_id"]


def assert_surface(out: dict, lesson_id: str) -> None:
    """Resources listed (newest first) and read, the template, the four prompts, completions."""
    first = out["resources"]["resources"][0]
    assert first["uri"] == f"lesson://{lesson_id}" and first["mimeType"] == "application/json"
    contents = out["read"]["contents"][0]
    assert contents["uri"] == first["uri"] and json.loads(contents["text"])["id"] == lesson_id
    assert out["templates"]["resourceTemplates"][0]["uriTemplate"] == "lesson://{id}"
    assert out["prompts"] == ["record_lesson", "migrate_memory", "verify_evidence", "revise_lesson"]
    assert "search_lessons first" in out["prompt_text"] and "allocator" in out["prompt_text"]
    assert lesson_id in out["ids"] and all(i.startswith(lesson_id[:-2]) for i in out["ids"])
    assert out["relations"] == ["supports", "suggests", "supersedes"]


@pytest.mark.parametrize("mode, version", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_python_sdk2_resources_prompts_completions(stack, surface_lesson, mode, version):
    out = run_json([PYTHON_SDK2, CLIENTS / "surface_sdk2.py", stack.url, mode, surface_lesson[:-2]],
                   env=dict(os.environ))
    assert out["protocol_version"] == version
    assert_surface(out, surface_lesson)
    if version == "2026-07-28":
        assert out["resources"]["ttlMs"] <= 60000 and out["read"]["cacheScope"] == "public"


@pytest.mark.parametrize("mode, version", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_typescript_client2_resources_prompts_completions(stack, surface_lesson, mode, version):
    out = run_json([NODE, CLIENTS / "surface_ts.mjs", mode, stack.url, surface_lesson[:-2]])
    assert out["protocol_version"] == version
    assert_surface(out, surface_lesson)


@pytest.mark.parametrize("era", ["legacy", "auto"])
def test_inspector_cli_lists_and_reads_resources_and_prompts(stack, surface_lesson, era):
    def run(*args: str) -> dict:
        done = inspector(stack, "--protocol-era", era, *args)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return json.loads(done.stdout)["result"]

    assert run("--method", "resources/list")["resources"][0]["uri"] == f"lesson://{surface_lesson}"
    read = run("--method", "resources/read", "--uri", f"lesson://{surface_lesson}")
    assert json.loads(read["contents"][0]["text"])["id"] == surface_lesson
    assert run("--method", "resources/templates/list")["resourceTemplates"][0]["uriTemplate"] == "lesson://{id}"
    assert [p["name"] for p in run("--method", "prompts/list")["prompts"]][0] == "record_lesson"
    got = run("--method", "prompts/get", "--prompt-name", "verify_evidence", "--prompt-args",
              f"lesson_id={surface_lesson}", "language=en")
    assert surface_lesson in got["messages"][0]["content"]["text"]


# ------------------------------------------------------------------ README examples, run as written
README = REPO / "README.md"
README_URL = "http://127.0.0.1:8080/mcp"


def readme_example(name: str) -> str:
    """The fenced block after ``<!-- example: NAME -->`` in README.md, with the gateway URL it names."""
    text = README.read_text(encoding="utf-8")
    marker = f"<!-- example: {name} -->"
    assert text.count(marker) == 1, marker
    block = text.split(marker, 1)[1].split("```", 2)[1]
    return block.split("\n", 1)[1]  # drop the language tag line


def _example_env() -> dict[str, str]:
    env = _node_env()
    env["S3RM_MCP_TOKEN"] = TOKEN
    env["HOME"] = str(Path(os.environ.get("TMPDIR", "/tmp")) / "s3rm-inspector-home")
    env["MCP_INSPECTOR_SECRET_STORE"] = "memory"
    return env


def _run_example(argv: list, stack, stdin: str | None = None) -> str:
    done = subprocess.run([str(a) for a in argv], cwd=CLIENTS, env=_example_env(), capture_output=True, text=True,
                          timeout=180, input=stdin)
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.parametrize("name, python, version", [
    ("python-sdk-2", PYTHON_SDK2, "2026-07-28"),
    ("python-sdk-1", Path(sys.executable), "2025-11-25"),
])
def test_readme_python_examples_run(stack, name, python, version):
    code = readme_example(name)
    assert README_URL in code
    out = _run_example([python, "-c", code.replace(README_URL, stack.url)], stack)
    assert out.startswith(version), out


def test_readme_typescript_example_runs(stack):
    """Saved under the file name README gives, in a folder like `npm init -y` leaves (no "type")."""
    import tempfile

    code = readme_example("typescript")
    name = re.search(r"Save it as `([\w.-]+)` and run `node \1`", README.read_text(encoding="utf-8"))
    assert name and name.group(1).endswith(".mjs")
    with tempfile.TemporaryDirectory(dir=CLIENTS, prefix="readme-example-") as folder:  # resolves node_modules above
        (Path(folder) / "package.json").write_text('{"name": "example", "version": "1.0.0", "main": "index.js"}')
        script = Path(folder) / name.group(1)
        script.write_text(code.replace(README_URL, stack.url), encoding="utf-8")
        out = _run_example([NODE, script], stack)
    version, tools, results = out.split()
    assert (version, tools) == ("2026-07-28", "10") and int(results) >= 0, out


def test_readme_inspector_cli_example_runs(stack):
    script = readme_example("inspector-cli")
    out = _run_example(["bash", "-euo", "pipefail", "-c", script.replace(README_URL, stack.url)], stack)
    assert out.count('"search_lessons"') >= 1 and '"structuredContent"' in out, out[-2000:]


def test_readme_mcp_remote_example_runs(stack, tmp_path):
    config = json.loads(readme_example("mcp-remote"))["mcpServers"]["s3-research-memory"]
    env = _example_env()
    env["HOME"] = str(tmp_path)
    env.update({k: v.replace("<token>", TOKEN) for k, v in config["env"].items()})
    args = [a.replace(README_URL, stack.url) for a in config["args"]]
    params = StdioServerParameters(command=config["command"], args=args, env=env, cwd=str(CLIENTS))

    async def run():
        with open(tmp_path / "err.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    return await _sdk1_session(session)

    out = anyio.run(run)
    assert_read_and_write(out)
