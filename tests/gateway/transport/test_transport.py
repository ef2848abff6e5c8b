"""HTTP-level tests of the MCP endpoint, one per transport rule (docs/transport.md#http-rules).

The real app (``create_app``) is driven through Flask's test client with
minimal closed tool schemas, so test tools have known output shapes.

Size: about 800 lines of short tests, one per transport rule, in sections
(lifecycle, method, JSON, header, write auth, dispatcher results, config,
registry, health) that share one app builder; the 2026-07-28 revision's tests
live beside it in ``test_request_rules.py`` and reuse that builder.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from support.schema_dirs import minimal_schema_dir, minimal_specs

from gateway.app import create_app
from gateway.config import DEFAULT_SCHEMA_DIR, ConfigError, GatewayConfig
from gateway.config.schema import load_schema
from gateway.core.errors import ToolError
from gateway.web.health import jobrunner_status
from gateway.tools.contract import OutputBudget
from support.tool_variants import refusing_handler
from gateway.tools.registry import READ_TOOLS, SchemaLoadError, ToolRegistry, WRITE_TOOLS, load_specs

TOKEN = "test-write-token-0123456789"
HOST = "127.0.0.1:8080"
ORIGIN = "http://127.0.0.1:8080"
HEADERS = {
    "Host": HOST,
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


def _env(schema_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        "S3RM_SCHEMA_DIR": str(schema_dir),
        "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(TOKEN.encode()).hexdigest(),
        "S3RM_MCP_ALLOWED_ORIGINS": "http://127.0.0.1:8081",
        "S3RM_MCP_ALLOWED_HOSTS": "gateway.internal:8080",
    }
    env.update(extra)
    return env


def _specs_with(**handlers):
    return minimal_specs(**handlers)


@pytest.fixture()
def schema_dir(tmp_path: Path) -> Path:
    return minimal_schema_dir(tmp_path / "schema")


def _make_app(schema_dir: Path, *, specs=None, **env):
    config = GatewayConfig.from_env(_env(schema_dir, **env))
    return create_app(config, wiki_probe=lambda: False, specs=specs)


@pytest.fixture()
def client(schema_dir: Path):
    # transport rules only: every tool is the not_implemented placeholder (the real
    # handlers need a repository and are tested in their own modules)
    placeholders = {name: refusing_handler(name) for name in READ_TOOLS + WRITE_TOOLS}
    return _make_app(schema_dir, specs=_specs_with(**placeholders)).test_client()


def rpc(method: str, params: dict | None = None, id_: int | str | None = 1) -> dict:
    msg: dict = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    if id_ is not None:
        msg["id"] = id_
    return msg


def post(client, payload, headers: dict | None = None, raw: bytes | None = None):
    hdrs = dict(HEADERS)
    hdrs.update(headers or {})
    hdrs = {k: v for k, v in hdrs.items() if v is not None}
    data = raw if raw is not None else json.dumps(payload).encode()
    return client.post("/mcp", data=data, headers=hdrs)


def assert_json(response) -> dict:
    assert response.mimetype == "application/json", response.data[:200]
    body = response.get_json()
    assert isinstance(body, dict)
    assert b"Traceback" not in response.data and b"<html" not in response.data.lower()
    return body


def tool_error(response) -> dict:
    body = assert_json(response)
    assert response.status_code == 200
    result = body["result"]
    assert result["isError"] is True
    assert "structuredContent" not in result
    return json.loads(result["content"][0]["text"])["error"]


INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


# ------------------------------------------------------------------ lifecycle
@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_initialize_echoes_supported_version(client, version):
    r = post(client, rpc("initialize", {**INIT, "protocolVersion": version}))
    body = assert_json(r)
    assert r.status_code == 200
    assert body["id"] == 1
    assert body["result"]["protocolVersion"] == version
    assert body["result"]["capabilities"]["tools"] == {"listChanged": False}
    assert body["result"]["serverInfo"]["name"] == "s3-research-memory"
    assert "mcp-session-id" not in {k.lower() for k in r.headers.keys()}


def test_initialize_unsupported_version_answers_latest(client):
    body = assert_json(post(client, rpc("initialize", {**INIT, "protocolVersion": "2024-11-05"})))
    assert body["result"]["protocolVersion"] == "2025-11-25"


def test_initialize_without_protocol_version_is_invalid_params(client):
    body = assert_json(post(client, rpc("initialize", {"capabilities": {}})))
    assert body["error"]["code"] == -32602


def test_notification_gets_202_without_body(client):
    r = post(client, rpc("notifications/initialized", id_=None), {"MCP-Protocol-Version": "2025-06-18"})
    assert r.status_code == 202
    assert r.data == b""


def test_client_response_message_gets_202(client):
    r = post(client, {"jsonrpc": "2.0", "id": 7, "result": {}})
    assert r.status_code == 202 and r.data == b""


def test_ping(client):
    body = assert_json(post(client, rpc("ping", id_="p-1")))
    assert body == {"jsonrpc": "2.0", "id": "p-1", "result": {}}


def test_tools_list_has_exactly_ten_tools_with_truthful_annotations(client):
    body = assert_json(post(client, rpc("tools/list")))
    tools = {t["name"]: t for t in body["result"]["tools"]}
    assert list(tools) == list(READ_TOOLS + WRITE_TOOLS)
    for name, tool in tools.items():
        ann = tool["annotations"]
        assert tool["title"] and tool["description"]
        assert "Content policy" in tool["description"] and "search_lessons first" in tool["description"]
        assert tool["inputSchema"]["additionalProperties"] is False
        assert tool["outputSchema"]["type"] == "object"
        assert ann["openWorldHint"] is False and ann["idempotentHint"] is True
        if name in READ_TOOLS:
            assert ann["readOnlyHint"] is True and ann["destructiveHint"] is False
        else:
            assert ann["readOnlyHint"] is False
            assert ann["destructiveHint"] is (name == "revise_lesson")


# -------------------------------------------------------------- method rules
def test_unknown_method_is_32601(client):
    r = post(client, rpc("logging/setLevel", {"level": "info"}))
    body = assert_json(r)
    assert r.status_code == 200
    assert body["id"] == 1 and body["error"]["code"] == -32601


def test_unknown_tool_is_32602(client):
    r = post(client, rpc("tools/call", {"name": "delete_everything", "arguments": {}}))
    body = assert_json(r)
    assert body["error"]["code"] == -32602
    assert "delete_everything" in body["error"]["message"]


def test_tools_call_with_non_object_arguments_is_32602(client):
    body = assert_json(post(client, rpc("tools/call", {"name": "get_lesson", "arguments": [1]})))
    assert body["error"]["code"] == -32602


def test_read_tool_placeholder_is_clean_not_implemented(client):
    err = tool_error(post(client, rpc("tools/call", {"name": "get_lesson", "arguments": {"id": "abc"}})))
    assert err["code"] == "not_implemented" and err["retryable"] is False


# ---------------------------------------------------------------- JSON rules
def test_malformed_json_is_32700_400(client):
    r = post(client, None, raw=b'{"jsonrpc": "2.0", "id": 1, "method": ')
    body = assert_json(r)
    assert r.status_code == 400 and body["error"]["code"] == -32700 and body["id"] is None


def test_non_utf8_body_is_parse_error(client):
    r = post(client, None, raw=b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xff"}')
    assert r.status_code == 400 and assert_json(r)["error"]["code"] == -32700


def test_nan_and_infinity_are_not_json(client):
    for constant in (b"NaN", b"Infinity", b"-Infinity"):
        raw = (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_lessons",'
               b'"arguments":{"query":"x","min_score":' + constant + b'}}}')
        r = post(client, None, raw=raw)
        assert r.status_code == 400 and assert_json(r)["error"]["code"] == -32700, constant


def test_deep_nesting_gets_a_clear_parse_error(client):
    raw = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + b"[" * 100000 + b"]" * 100000 + b"}}"
    r = post(client, None, raw=raw)
    body = assert_json(r)
    assert r.status_code in (400, 413) and body["error"]["code"] in (-32700, -32600)


def test_lone_surrogate_in_any_tool_argument_is_invalid_argument(client):
    raw = (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_lessons",'
           b'"arguments":{"query":"abc \\ud800 def"}}}')  # a JSON escape of a lone surrogate
    r = post(client, None, raw=raw)
    result = assert_json(r)["result"]
    err = json.loads(result["content"][0]["text"])["error"]
    assert result["isError"] and "structuredContent" not in result
    assert err["code"] == "invalid_argument" and err["field"] == "query" and err["rule"] == "unicode"


def test_batch_array_is_rejected_400(client):
    r = post(client, [rpc("ping", id_=1), rpc("ping", id_=2)])
    body = assert_json(r)
    assert r.status_code == 400 and body["error"]["code"] == -32600
    assert "batch" in body["error"]["message"].lower()


@pytest.mark.parametrize(
    "payload",
    [
        {"id": 1, "method": "ping"},  # no jsonrpc
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": 1},
        "ping",
        42,
    ],
)
def test_invalid_request_is_32600_400(client, payload):
    r = post(client, payload)
    assert r.status_code == 400
    assert assert_json(r)["error"]["code"] == -32600


# ------------------------------------------------------------- header rules
def test_get_and_delete_are_405_with_allow_post(client):
    for method in ("GET", "DELETE", "PUT"):
        r = client.open("/mcp", method=method, headers={"Host": HOST})
        assert r.status_code == 405
        assert r.headers["Allow"] == "POST"
        assert assert_json(r)["error"]["code"] == -32600


def test_unsupported_protocol_version_header_is_400(client):
    # MCP 2026-07-28 UnsupportedProtocolVersionError: -32022 with every served version (docs/transport.md)
    r = post(client, rpc("tools/list"), {"MCP-Protocol-Version": "1999-01-01"})
    body = assert_json(r)
    assert r.status_code == 400 and body["id"] == 1
    assert body["error"]["code"] == -32022 and "2025-11-25" in body["error"]["message"]
    assert body["error"]["data"] == {
        "supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"],
        "requested": "1999-01-01",
    }


def test_supported_or_absent_protocol_version_header_is_accepted(client):
    assert post(client, rpc("tools/list"), {"MCP-Protocol-Version": "2025-03-26"}).status_code == 200
    assert post(client, rpc("tools/list")).status_code == 200


@pytest.mark.parametrize("accept", [None, "text/event-stream", "text/html", "application/json;q=0"])
def test_accept_without_json_is_406(client, accept):
    r = post(client, rpc("ping"), {"Accept": accept})
    assert r.status_code == 406
    assert_json(r)


@pytest.mark.parametrize("accept", ["application/json", "*/*", "application/json; charset=utf-8, text/event-stream"])
def test_accept_admitting_json_is_ok(client, accept):
    assert post(client, rpc("ping"), {"Accept": accept}).status_code == 200


@pytest.mark.parametrize("ctype", [None, "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1"])
def test_wrong_content_type_is_415(client, ctype):
    r = post(client, rpc("ping"), {"Content-Type": ctype})
    assert r.status_code == 415
    assert_json(r)


def test_json_with_utf8_charset_is_accepted(client):
    r = post(client, rpc("ping"), {"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 200


@pytest.mark.parametrize("host", ["evil.example:8080", "127.0.0.1:9999", "localhost:8080"])
def test_unknown_host_is_421(client, host):
    r = post(client, rpc("ping"), {"Host": host})
    assert r.status_code == 421
    assert_json(r)


def test_extra_allowed_host_is_accepted(client):
    assert post(client, rpc("ping"), {"Host": "gateway.internal:8080"}).status_code == 200


def test_disallowed_origin_is_403_and_absent_origin_is_fine(client):
    r = post(client, rpc("ping"), {"Origin": "http://evil.example"})
    assert r.status_code == 403
    assert assert_json(r)["id"] is None
    assert post(client, rpc("ping")).status_code == 200


def test_origin_match_is_exact_no_slash_or_case_variants(client):
    allowed = post(client, rpc("ping"), {"Origin": "http://127.0.0.1:8081"})
    assert allowed.status_code == 200, "precondition: the configured wiki origin is allowed"
    for variant in ("http://127.0.0.1:8081/", "HTTP://127.0.0.1:8081", "http://127.0.0.1:8081/mcp"):
        assert post(client, rpc("ping"), {"Origin": variant}).status_code == 403, variant


def test_allowed_origins_get_cors_headers(client):
    for origin in (ORIGIN, "http://127.0.0.1:8081"):
        r = post(client, rpc("ping"), {"Origin": origin})
        assert r.status_code == 200
        assert r.headers["Access-Control-Allow-Origin"] == origin
    r = post(client, rpc("ping"))
    assert "Access-Control-Allow-Origin" not in r.headers


@pytest.mark.parametrize("path", ["/mcp", "/mcp/graph/data"])
def test_cors_preflight_for_allowed_origin(client, path):
    r = client.open(
        path,
        method="OPTIONS",
        headers={
            "Host": HOST,
            "Origin": "http://127.0.0.1:8081",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, authorization, mcp-protocol-version",
        },
    )
    assert r.status_code == 204
    assert r.headers["Access-Control-Allow-Origin"] == "http://127.0.0.1:8081"
    allowed = {h.strip().lower() for h in r.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"content-type", "authorization", "mcp-protocol-version", "accept"} <= allowed
    assert "POST" in r.headers["Access-Control-Allow-Methods"]


def test_cors_preflight_for_other_origin_is_403(client):
    r = client.open("/mcp", method="OPTIONS", headers={"Host": HOST, "Origin": "https://evil.example"})
    assert r.status_code == 403
    assert "Access-Control-Allow-Origin" not in r.headers
    assert_json(r)


def test_body_over_limit_is_413(schema_dir):
    client = _make_app(schema_dir, S3RM_MAX_BODY_BYTES="2048").test_client()
    big = rpc("tools/call", {"name": "search_lessons", "arguments": {"query": "x" * 4096}})
    r = post(client, big)
    assert r.status_code == 413
    assert_json(r)


def test_security_headers_on_every_response(client):
    for r in (post(client, rpc("ping")), client.get("/livez"), client.get("/nowhere"), client.get("/mcp", headers={"Host": HOST})):
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert r.headers["Referrer-Policy"] == "no-referrer"
        assert "default-src 'none'" in r.headers["Content-Security-Policy"]
        assert r.headers["Cache-Control"] == "no-store"


def test_flask_404_405_and_500_are_json(schema_dir):
    def boom(arguments, ctx):  # pragma: no cover - not called
        raise AssertionError

    app = _make_app(schema_dir)

    @app.route("/explode")
    def explode():
        raise RuntimeError("secret detail that must not leak")

    client = app.test_client()
    r = client.get("/does-not-exist")
    assert r.status_code == 404 and assert_json(r)["error"]["code"] == "not_found"
    r = client.get("/.well-known/oauth-protected-resource/mcp", headers={"Host": HOST})
    assert r.status_code == 404 and assert_json(r)
    r = client.get("/.well-known/oauth-protected-resource/mcp")  # a Host this server does not serve
    assert r.status_code == 421 and assert_json(r)["error"] == "misdirected_request"
    r = client.post("/livez")
    assert r.status_code == 405 and "GET" in r.headers["Allow"] and assert_json(r)
    r = client.get("/explode", headers={"Host": HOST})
    assert r.status_code == 500
    assert b"secret detail" not in r.data
    assert assert_json(r)["error"]["code"] == "internal_error"


# ---------------------------------------------------------------- write auth
WRITE_CALL = rpc("tools/call", {"name": "create_lesson_draft", "arguments": {"operation_id": "op-1"}})


def test_write_without_token_is_401(client):
    r = post(client, WRITE_CALL)
    body = assert_json(r)
    assert r.status_code == 401 and body["id"] == 1
    assert body["error"]["data"]["code"] == "missing_token"
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert "resource_metadata" not in r.headers["WWW-Authenticate"]


def test_write_with_wrong_token_is_403(client):
    r = post(client, WRITE_CALL, {"Authorization": "Bearer wrong"})
    assert r.status_code == 403
    assert assert_json(r)["error"]["data"]["code"] == "invalid_token"


def test_write_with_token_reaches_the_tool(client):
    err = tool_error(post(client, WRITE_CALL, {"Authorization": f"Bearer {TOKEN}"}))
    assert err["code"] == "not_implemented"


def test_token_mode_without_digest_refuses_writes(schema_dir):
    client = _make_app(schema_dir, S3RM_MCP_WRITE_TOKEN_SHA256="").test_client()
    r = post(client, WRITE_CALL, {"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 403
    assert assert_json(r)["error"]["data"]["code"] == "writes_disabled"


def test_reads_never_need_a_token(client):
    r = post(client, rpc("tools/call", {"name": "search_lessons", "arguments": {}}), {"Authorization": "Bearer wrong"})
    assert tool_error(r)["code"] == "not_implemented"


def test_open_mode_allows_writes_and_gives_ip_principal(schema_dir):
    seen = {}

    def handler(arguments, ctx):
        seen["principal"] = ctx.principal
        return {"results": []}

    app = _make_app(schema_dir, specs=_specs_with(link_lessons=handler), S3RM_MCP_WRITE_AUTH_MODE="open")
    r = post(app.test_client(), rpc("tools/call", {"name": "link_lessons", "arguments": {"operation_id": "x"}}))
    assert r.status_code == 200 and assert_json(r)["result"]["isError"] is False
    assert seen["principal"].kind == "ip"


def test_token_principal_reaches_the_context(schema_dir):
    seen = {}

    def handler(arguments, ctx):
        seen["principal"] = ctx.principal
        return {"results": []}

    app = _make_app(schema_dir, specs=_specs_with(attach_evidence=handler))
    post(app.test_client(), rpc("tools/call", {"name": "attach_evidence", "arguments": {"operation_id": "x"}}),
         {"Authorization": f"Bearer {TOKEN}"})
    assert seen["principal"].kind == "token"


# ------------------------------------------------------- dispatcher results
def test_input_validation_names_field_and_rule(client):
    r = post(client, rpc("tools/call", {"name": "search_lessons", "arguments": {"filters": {"confidence": "very"}}}))
    err = tool_error(r)
    assert err == {**err, "code": "invalid_argument", "field": "filters.confidence", "rule": "enum"}
    assert "very" not in err["message"]


@pytest.mark.parametrize(
    "arguments,field,rule",
    [
        ({"limit": 50}, "limit", "maximum"),
        ({"limit": "5"}, "limit", "type"),
        ({"bogus": 1}, "bogus", "additionalProperties"),
        ({"filters": {"x": 1}}, "filters.x", "additionalProperties"),
    ],
)
def test_input_validation_rules(client, arguments, field, rule):
    err = tool_error(post(client, rpc("tools/call", {"name": "search_lessons", "arguments": arguments})))
    assert (err["code"], err["field"], err["rule"]) == ("invalid_argument", field, rule)


def test_missing_required_argument(client):
    r = post(client, rpc("tools/call", {"name": "link_lessons", "arguments": {}}), {"Authorization": f"Bearer {TOKEN}"})
    err = tool_error(r)
    assert (err["field"], err["rule"]) == ("operation_id", "required")


def test_success_has_structured_content_and_identical_compact_text(schema_dir):
    def handler(arguments, ctx):
        return {"results": ["단편화로", "a|b}}"], "next_cursor": None}

    client = _make_app(schema_dir, specs=_specs_with(search_lessons=handler)).test_client()
    body = assert_json(post(client, rpc("tools/call", {"name": "search_lessons", "arguments": {"query": "단편화"}})))
    result = body["result"]
    assert result["isError"] is False
    assert result["structuredContent"] == {"results": ["단편화로", "a|b}}"], "next_cursor": None}
    text = result["content"][0]["text"]
    assert text == json.dumps(result["structuredContent"], separators=(",", ":"), ensure_ascii=False)


def test_output_schema_violation_is_internal_error_without_details(schema_dir, caplog):
    def handler(arguments, ctx):
        return {"results": ["ok"], "secret_field": "Lesson body text"}

    client = _make_app(schema_dir, specs=_specs_with(get_lesson=handler)).test_client()
    with caplog.at_level("INFO", logger="s3rm"):
        r = post(client, rpc("tools/call", {"name": "get_lesson", "arguments": {"id": "abc"}}))
    err = tool_error(r)
    assert err["code"] == "internal_error" and "details" not in err
    assert b"Lesson body text" not in r.data and b"secret_field" not in r.data
    assert "output schema" in caplog.text and "Lesson body text" not in caplog.text


def test_handler_exception_is_internal_error_and_never_logs_arguments(schema_dir, caplog):
    def handler(arguments, ctx):
        raise KeyError("private " + arguments["query"])

    client = _make_app(schema_dir, specs=_specs_with(search_lessons=handler)).test_client()
    with caplog.at_level("INFO", logger="s3rm"):
        r = post(client, rpc("tools/call", {"name": "search_lessons", "arguments": {"query": "비밀 질의"}}))
    err = tool_error(r)
    assert err["code"] == "internal_error"
    assert "비밀" not in r.get_data(as_text=True)
    assert "KeyError" in caplog.text and "비밀" not in caplog.text


def test_tool_error_passes_code_retryable_and_details(schema_dir):
    def handler(arguments, ctx):
        raise ToolError("invalid_cursor", "restart from the first page", retryable=False, details={"reason": "forged"})

    client = _make_app(schema_dir, specs=_specs_with(find_analogies=handler)).test_client()
    err = tool_error(post(client, rpc("tools/call", {"name": "find_analogies", "arguments": {"id": "a"}})))
    assert err == {"code": "invalid_cursor", "message": "restart from the first page", "retryable": False,
                   "details": {"reason": "forged"}}


def test_output_over_byte_cap_is_output_too_large(schema_dir):
    def handler(arguments, ctx):
        return {"results": ["가" * 2000]}

    client = _make_app(schema_dir, specs=_specs_with(search_lessons=handler), S3RM_OUTPUT_MAX_BYTES="4096").test_client()
    r = post(client, rpc("tools/call", {"name": "search_lessons", "arguments": {}}))
    assert tool_error(r)["code"] == "output_too_large"
    assert len(r.data) <= 4096


def budget_filling_client(schema_dir, cap: int):
    """A test client whose ``search_lessons`` fills ``cap`` bytes with a fit_prefix page; returns (client, sizes).

    ``sizes`` receives ``n`` (items kept) and ``remaining`` (bytes the budget says are left)."""
    sizes = {}

    def handler(arguments, ctx):
        items = [f"항목 {i} " + "x" * 300 for i in range(40)]
        obj, n = ctx.budget.fit_prefix(items, lambda part: {"results": list(part), "next_cursor": str(len(part))})
        sizes["n"], sizes["remaining"] = n, ctx.budget.remaining_bytes(obj)
        return obj

    app = _make_app(schema_dir, specs=_specs_with(search_lessons=handler), S3RM_OUTPUT_MAX_BYTES=str(cap))
    return app.test_client(), sizes


def test_budget_helper_shrinks_pages_to_fit_exactly(schema_dir):
    cap = 4096
    client, sizes = budget_filling_client(schema_dir, cap)
    r = post(client, rpc("tools/call", {"name": "search_lessons", "arguments": {}}, id_="req-42"))
    result = assert_json(r)["result"]
    assert result["isError"] is False
    assert 0 < sizes["n"] < 40 and len(result["structuredContent"]["results"]) == sizes["n"]
    # the budget measured exactly the bytes that were sent
    assert len(r.data) == cap - sizes["remaining"] and len(r.data) <= cap


def test_budget_fit_prefix_raises_when_nothing_fits():
    budget = OutputBudget(cap_bytes=50, request_id=1)
    with pytest.raises(ToolError) as info:
        budget.fit_prefix([1, 2], lambda part: {"results": list(part), "padding": "x" * 100})
    assert info.value.code == "output_too_large"


def test_repository_factory_is_lazy_and_shared(schema_dir):
    calls = []
    seen = []

    class Repo:
        def ping(self):
            return "pong"

    def factory(config):
        calls.append(config)
        return Repo()

    def handler(arguments, ctx):
        seen.append(ctx.repository.ping())
        return {"results": []}

    config = GatewayConfig.from_env(_env(schema_dir))
    app = create_app(config, repository_factory=factory, wiki_probe=lambda: False, specs=_specs_with(get_lesson=handler))
    assert calls == []
    client = app.test_client()
    for _ in range(3):
        post(client, rpc("tools/call", {"name": "get_lesson", "arguments": {"id": "a"}}))
    assert len(calls) == 1 and seen == ["pong"] * 3


def test_failing_repository_factory_is_retryable_backend_unavailable(schema_dir):
    def factory(config):
        raise ConnectionError("wiki down")

    def handler(arguments, ctx):
        return {"results": [ctx.repository.anything()]}

    config = GatewayConfig.from_env(_env(schema_dir))
    app = create_app(config, repository_factory=factory, wiki_probe=lambda: False, specs=_specs_with(get_lesson=handler))
    err = tool_error(post(app.test_client(), rpc("tools/call", {"name": "get_lesson", "arguments": {"id": "a"}})))
    assert err["code"] == "backend_unavailable" and err["retryable"] is True


# --------------------------------------------------------------- config rules
@pytest.mark.parametrize(
    "env,variable",
    [
        ({"S3RM_MCP_ALLOWED_HOSTS": "*.example.org"}, "S3RM_MCP_ALLOWED_HOSTS"),
        ({"S3RM_MCP_ALLOWED_ORIGINS": "https://*.example.org"}, "S3RM_MCP_ALLOWED_ORIGINS"),
        ({"S3RM_MCP_ALLOWED_ORIGINS": "*"}, "S3RM_MCP_ALLOWED_ORIGINS"),
        ({"S3RM_MCP_ALLOWED_ORIGINS": "https://a.example/path"}, "S3RM_MCP_ALLOWED_ORIGINS"),
        ({"S3RM_MCP_WRITE_AUTH_MODE": "oauth"}, "S3RM_MCP_WRITE_AUTH_MODE"),
        ({"S3RM_MCP_WRITE_TOKEN_SHA256": "abc"}, "S3RM_MCP_WRITE_TOKEN_SHA256"),
        ({"S3RM_MCP_PUBLIC_URL": "ftp://x/mcp"}, "S3RM_MCP_PUBLIC_URL"),
        ({"S3RM_OUTPUT_MAX_BYTES": "lots"}, "S3RM_OUTPUT_MAX_BYTES"),
        ({"S3RM_WIKI_TIMEOUT_SECONDS": "0"}, "S3RM_WIKI_TIMEOUT_SECONDS"),
        ({"S3RM_REVISION_HMAC_KEYS": "{not json"}, "S3RM_REVISION_HMAC_KEYS"),
        ({"S3RM_SEARCH_SCOPES_JSON": json.dumps({f"s{i}": {} for i in range(17)})}, "S3RM_SEARCH_SCOPES_JSON"),
    ],
)
def test_config_errors_name_the_variable(env, variable):
    with pytest.raises(ConfigError) as info:
        GatewayConfig.from_env(env)
    assert info.value.variable == variable
    assert variable in str(info.value)


def test_config_derives_allowlists_and_redacts_secrets():
    config = GatewayConfig.from_env(
        {
            "S3RM_MCP_PUBLIC_URL": "https://Wiki.Example.org/mcp",
            "S3RM_MCP_ALLOWED_HOSTS": "127.0.0.1:8080, gateway:8080",
            "S3RM_MCP_ALLOWED_ORIGINS": "http://127.0.0.1:8081",
            "S3RM_WIKI_PASSWORD": "hunter2-password",
            "S3RM_CURSOR_SECRET": "cursor-secret-0123456789",
            "S3RM_REVISION_HMAC_KEYS": json.dumps({"k1": "revision-secret-0123456789"}),
            "S3RM_REVISION_HMAC_ACTIVE_KEY_ID": "k1",
        }
    )
    assert config.allowed_hosts == {"wiki.example.org", "wiki.example.org:443", "127.0.0.1:8080", "gateway:8080"}
    assert config.allowed_origins == {"https://wiki.example.org", "http://127.0.0.1:8081"}
    text = repr(config) + str(config)
    for secret in ("hunter2-password", "cursor-secret", "revision-secret"):
        assert secret not in text
    assert config.cursor_secret_ephemeral is False


def test_cursor_secret_is_random_per_process_when_unset():
    a, b = GatewayConfig.from_env({}), GatewayConfig.from_env({})
    assert a.cursor_secret != b.cursor_secret and len(a.cursor_secret) == 32 and a.cursor_secret_ephemeral


# ---------------------------------------------------------------- registry
def _spec_with_input(body: dict):
    spec = load_specs()[1]  # get_lesson
    return (dataclasses.replace(spec, input_schema=lambda _fields: body),)


@pytest.mark.parametrize("body, message", [
    ({"type": "object"}, "must be closed"),
    ({"type": "array", "additionalProperties": False}, '"type": "object"'),
    ({"type": "object", "additionalProperties": False, "properties": {"x": {"type": 5}}}, "invalid JSON Schema"),
])
def test_registry_refuses_a_built_schema_that_is_open_or_invalid(body, message):
    with pytest.raises(SchemaLoadError, match=message) as caught:
        ToolRegistry.load(load_schema(DEFAULT_SCHEMA_DIR / "lesson.toml"), _spec_with_input(body))
    assert "gateway/tools/get_lesson.py input schema (schema/tools/get_lesson.input.schema.json)" in str(caught.value)


def test_committed_schema_files_equal_what_the_registry_serves():
    registry = ToolRegistry.load(load_schema(DEFAULT_SCHEMA_DIR / "lesson.toml"))
    assert registry.names == READ_TOOLS + WRITE_TOOLS
    tools = DEFAULT_SCHEMA_DIR / "tools"
    for entry in registry:
        for direction, served in (("input", entry.input_schema), ("output", entry.output_schema)):
            path = tools / f"{entry.spec.name}.{direction}.schema.json"
            assert json.loads(path.read_text(encoding="utf-8")) == served, f"{path} is stale: run s3rm schema generate"
    assert sorted(p.name for p in tools.iterdir()) == sorted(
        f"{name}.{d}.schema.json" for name in registry.names for d in ("input", "output"))


# ------------------------------------------------------------------- health
def test_livez_is_process_only(client):
    r = client.get("/livez")
    assert r.status_code == 200 and assert_json(r) == {"status": "ok"}


def _state_file(tmp_path: Path, last: datetime, ok: bool = True) -> Path:
    path = tmp_path / "jobrunner-state.json"
    path.write_text(json.dumps({"last_run_at": last.strftime("%Y-%m-%dT%H:%M:%SZ"), "ok": ok}))
    return path


def test_jobrunner_status_classification(tmp_path):
    now = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    assert jobrunner_status(None, 120, now) == "missing"
    assert jobrunner_status(tmp_path / "nope.json", 120, now) == "missing"
    assert jobrunner_status(_state_file(tmp_path, now - timedelta(seconds=30)), 120, now) == "ok"
    assert jobrunner_status(_state_file(tmp_path, now - timedelta(seconds=300)), 120, now) == "stale"
    assert jobrunner_status(_state_file(tmp_path, now, ok=False), 120, now) == "failed"
    assert jobrunner_status(_state_file(tmp_path, now + timedelta(hours=1)), 120, now) == "invalid"
    (tmp_path / "bad.json").write_text("[1]")
    assert jobrunner_status(tmp_path / "bad.json", 120, now) == "invalid"


def test_readyz_is_503_with_unreachable_wiki_even_when_jobrunner_fresh(schema_dir, tmp_path):
    state = _state_file(tmp_path, datetime.now(timezone.utc))
    config = GatewayConfig.from_env(
        _env(
            schema_dir,
            S3RM_WIKI_API_URL="http://127.0.0.1:9/api.php",
            S3RM_WIKI_USERNAME="Agent@gateway",
            S3RM_WIKI_PASSWORD="pw-not-shown-anywhere",
            S3RM_JOBRUNNER_STATE_FILE=str(state),
            S3RM_WIKI_TIMEOUT_SECONDS="1",
        )
    )
    client = create_app(config).test_client()  # the real login probe
    for path in ("/readyz", "/healthz"):
        r = client.get(path)
        body = assert_json(r)
        assert r.status_code == 503
        assert body["checks"] == {"wiki": "fail", "jobrunner": "ok"}
        assert b"pw-not-shown" not in r.data and b"127.0.0.1:9" not in r.data and b"Agent" not in r.data


def test_readyz_is_503_when_jobrunner_stale_even_if_wiki_ok(schema_dir, tmp_path):
    state = _state_file(tmp_path, datetime.now(timezone.utc) - timedelta(seconds=600))
    config = GatewayConfig.from_env(_env(schema_dir, S3RM_JOBRUNNER_STATE_FILE=str(state)))
    client = create_app(config, wiki_probe=lambda: True).test_client()
    r = client.get("/readyz")
    assert r.status_code == 503
    assert assert_json(r)["checks"] == {"wiki": "ok", "jobrunner": "stale"}


def test_readyz_reports_bounded_admission_and_semantic_state(schema_dir, tmp_path):
    state = _state_file(tmp_path, datetime.now(timezone.utc))
    config = GatewayConfig.from_env(_env(schema_dir, S3RM_JOBRUNNER_STATE_FILE=str(state)))
    client = create_app(
        config, wiki_probe=lambda: True, semantic_status=lambda: "some free text", admission_status=lambda: "ok"
    ).test_client()
    r = client.get("/readyz")
    body = assert_json(r)
    assert r.status_code == 200  # a semantic problem never fails readiness
    assert body == {
        "status": "ok",
        "checks": {"wiki": "ok", "jobrunner": "ok"},
        "admission": "ok",
        "admission_classes": {"read": "ok", "write": "ok", "semantic": "ok"},
        "semantic": "unknown",
    }


def test_readyz_with_the_real_dev_wiki(dev_wiki, schema_dir):
    env = _env(schema_dir, **dev_wiki.env())
    client = create_app(GatewayConfig.from_env(env)).test_client()
    r = client.get("/readyz")
    body = assert_json(r)
    assert body["checks"]["wiki"] == "ok", body
    assert r.status_code == (200 if body["checks"]["jobrunner"] == "ok" else 503)
    bad = dict(env, S3RM_WIKI_PASSWORD="definitely-wrong-password")
    r = create_app(GatewayConfig.from_env(bad)).test_client().get("/readyz")
    assert r.status_code == 503 and assert_json(r)["checks"]["wiki"] == "fail"


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
        "/.well-known/openid-configuration/mcp",
        "/.well-known/oauth-authorization-server/mcp",
        "/mcp/.well-known/openid-configuration",
    ],
)
def test_no_oauth_metadata_is_advertised(client, path):
    # docs/transport.md#oauth-probes: token/open modes are not OAuth; discovery ends in a JSON 404
    # whose OAuth-shaped error_description names the token header
    r = client.get(path, headers={"Host": HOST})
    body = assert_json(r)
    assert r.status_code == 404 and body["error"] == "invalid_request"
    assert "Authorization: Bearer <token>" in body["error_description"]
    assert "issuer" not in body and "registration_endpoint" not in body


@pytest.mark.parametrize("path", ["/register", "/token", "/authorize"])
def test_oauth_registration_probe_gets_the_token_message(client, path):
    r = client.post(path, json={"client_name": "x", "redirect_uris": ["http://localhost/cb"]}, headers={"Host": HOST})
    body = assert_json(r)
    assert r.status_code == 404 and "does not use OAuth" in body["error_description"]
    assert "Authorization: Bearer <token>" in body["error_description"]


def test_oauth_probe_message_in_open_mode_needs_no_credential(schema_dir):
    client = _make_app(schema_dir, S3RM_MCP_WRITE_AUTH_MODE="open").test_client()
    body = assert_json(client.post("/register", json={}, headers={"Host": HOST}))
    assert "needs no credential" in body["error_description"] and "Bearer" not in body["error_description"]


def test_head_on_mcp_is_405(client):
    r = client.head("/mcp", headers={"Host": HOST})
    assert r.status_code == 405 and r.headers["Allow"] == "POST"


def test_notification_with_unsupported_version_header_is_400(client):
    r = post(client, rpc("notifications/initialized", id_=None), {"MCP-Protocol-Version": "2024-11-05"})
    assert r.status_code == 400 and assert_json(r)["id"] is None
