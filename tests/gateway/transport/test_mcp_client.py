"""End to end: ``s3rm serve`` (real gunicorn, one gthread worker) + the official MCP SDK client over HTTP."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from gateway.config import DEFAULT_SCHEMA_DIR
from support.services import Gateway
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from gateway.tools.registry import READ_TOOLS, WRITE_TOOLS

REPO = Path(__file__).resolve().parents[3]
TOKEN = "client-test-token-abcdef"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """Run the gateway with ``s3rm serve`` on a free loopback port; yield its base URL."""
    tmp = tmp_path_factory.mktemp("gateway")
    env = {
        "S3RM_SCHEMA_DIR": str(DEFAULT_SCHEMA_DIR),
        "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(TOKEN.encode()).hexdigest(),
        "S3RM_WIKI_API_URL": "http://127.0.0.1:9/api.php",
    }
    with Gateway(env, threads=4, via_cli=True) as gateway:
        yield {"base": gateway.base, "log": gateway.log_path, "pid": gateway.pid}


async def _session_run(url: str, fn, headers: dict | None = None):
    async with httpx.AsyncClient(headers=headers or {}, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                return init, await fn(session)


def test_sdk_client_initializes_and_lists_ten_tools(gateway):
    async def body(session):
        return await session.list_tools()

    init, listed = anyio.run(_session_run, f"{gateway['base']}/mcp", body)
    assert init.protocolVersion == "2025-11-25"
    assert init.serverInfo.name == "s3-research-memory"
    assert init.capabilities.tools is not None
    names = [tool.name for tool in listed.tools]
    assert names == list(READ_TOOLS + WRITE_TOOLS)
    for tool in listed.tools:
        assert tool.title and tool.description and tool.annotations is not None
        assert tool.inputSchema["type"] == "object" and tool.inputSchema.get("additionalProperties") is False
        assert tool.outputSchema is not None and tool.outputSchema["type"] == "object"
        assert tool.annotations.readOnlyHint is (tool.name in READ_TOOLS)
        assert tool.annotations.openWorldHint is False


def test_sdk_client_calls_a_read_tool_and_gets_a_clean_retryable_error_without_a_wiki(gateway):
    # this gateway's wiki URL points at a closed port: the tool answers a retryable error result
    async def body(session):
        return await session.call_tool("search_lessons", {})

    _, result = anyio.run(_session_run, f"{gateway['base']}/mcp", body)
    assert result.isError is True
    assert result.structuredContent is None
    error = json.loads(result.content[0].text)["error"]
    assert error["code"] in ("wiki_unavailable", "backend_unavailable")
    assert error["retryable"] is True


def test_sdk_client_write_with_token_reaches_the_tool(gateway):
    async def body(session):
        # An empty call passes auth and then gets a tool-level result: invalid_argument
        # (naming the first missing field) or not_implemented — never an HTTP error.
        return await session.call_tool("link_lessons", {})

    _, result = anyio.run(
        _session_run, f"{gateway['base']}/mcp", body, {"Authorization": f"Bearer {TOKEN}"}
    )
    assert result.isError is True
    error = json.loads(result.content[0].text)["error"]
    assert error["code"] in ("invalid_argument", "not_implemented")
    if error["code"] == "invalid_argument":
        assert error["field"] and error["rule"]


def test_gunicorn_runs_one_worker_process_with_threads(gateway):
    # the master has exactly one worker child (docs/retrieval.md#one-process)
    log = gateway["log"].read_text()
    assert "JsonErrorThreadWorker" in log  # gunicorn's gthread worker with JSON error pages
    assert log.count("Booting worker") == 1


def test_http_rules_hold_under_gunicorn(gateway):
    base = gateway["base"]
    r = httpx.get(f"{base}/mcp")
    assert r.status_code == 405 and r.headers["allow"] == "POST" and r.json()["error"]
    r = httpx.post(
        f"{base}/mcp",
        content=b"{",
        headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700
    r = httpx.post(f"{base}/mcp", json={}, headers={"Host": "evil.example"})
    assert r.status_code == 421 and r.headers["content-type"].startswith("application/json")
    r = httpx.get(f"{base}/readyz")
    assert r.status_code == 503 and r.json()["checks"]["wiki"] == "fail"


def test_serve_check_validates_configuration(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("S3RM_")}
    env["S3RM_SCHEMA_DIR"] = str(DEFAULT_SCHEMA_DIR)
    ok = subprocess.run([sys.executable, "-m", "s3rm", "serve", "--check"], cwd=REPO, env=env,
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "gunicorn" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "s3rm", "serve", "--check"], cwd=REPO,
                         env=dict(env, S3RM_MCP_ALLOWED_ORIGINS="https://*.example.org"),
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "S3RM_MCP_ALLOWED_ORIGINS" in bad.stderr
