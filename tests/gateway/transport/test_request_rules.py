"""HTTP-level tests of the MCP 2026-07-28 rules and of gzip (docs/transport.md#the-2026-07-28-request-rules).

Same app and placeholder tools as tests/gateway/transport/test_transport.py; every request here
is shaped as the 2026-07-28 Streamable HTTP page says (version in ``_meta`` and
in ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``).
"""
from __future__ import annotations

import base64
import gzip
import json

import pytest
from test_transport import HEADERS, HOST, TOKEN, assert_json, client, rpc, schema_dir  # noqa: F401

from gateway.tools.registry import READ_TOOLS, WRITE_TOOLS

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
SUPPORTED = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]


def modern(method: str, params: dict | None = None, *, meta: dict | None = META, id_=1) -> dict:
    body = dict(params or {})
    if meta is not None:
        body["_meta"] = meta
    return rpc(method, body, id_)


def send(client, payload, headers: dict | None = None, *, name: str | None = None):
    hdrs = dict(HEADERS)
    hdrs.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": payload.get("method")})
    if name is not None:
        hdrs["Mcp-Name"] = name
    hdrs.update(headers or {})
    hdrs = {k: v for k, v in hdrs.items() if v is not None}
    return client.post("/mcp", data=json.dumps(payload), headers=hdrs)


def error_of(response, status: int, code: int) -> dict:
    body = assert_json(response)
    assert response.status_code == status, body
    assert body["error"]["code"] == code, body
    return body["error"]


def test_server_discover_lists_both_eras_and_identifies_the_server(client):
    r = send(client, modern("server/discover"))
    result = assert_json(r)["result"]
    assert r.status_code == 200
    assert result["supportedVersions"] == SUPPORTED
    assert result["capabilities"]["tools"] == {"listChanged": False} and "resources" in result["capabilities"]
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "s3-research-memory"
    assert result["ttlMs"] >= 0 and result["cacheScope"] == "public"
    assert "write token" in result["instructions"]


def test_tools_list_without_initialize_carries_result_type_and_cache_hints(client):
    r = send(client, modern("tools/list"))
    result = assert_json(r)["result"]
    assert [t["name"] for t in result["tools"]] == list(READ_TOOLS + WRITE_TOOLS)
    assert result["resultType"] == "complete" and result["cacheScope"] == "public" and result["ttlMs"] == 300000
    assert "io.modelcontextprotocol/serverInfo" in result["_meta"]


def test_tools_call_read_and_write_in_the_modern_era(client):
    r = send(client, modern("tools/call", {"name": "get_lesson", "arguments": {"id": "x"}}), name="get_lesson")
    result = assert_json(r)["result"]
    assert r.status_code == 200 and result["resultType"] == "complete" and result["isError"] is True
    assert json.loads(result["content"][0]["text"])["error"]["code"] == "not_implemented"
    # a write without the token is refused at the HTTP level exactly as in the 2025 era
    r = send(client, modern("tools/call", {"name": "link_lessons", "arguments": {}}), name="link_lessons")
    assert r.status_code == 401 and assert_json(r)["error"]["data"]["code"] == "missing_token"
    r = send(client, modern("tools/call", {"name": "link_lessons", "arguments": {"operation_id": "o"}}),
             {"Authorization": f"Bearer {TOKEN}"}, name="link_lessons")
    assert r.status_code == 200 and assert_json(r)["result"]["resultType"] == "complete"


def test_unsupported_version_gets_32022_with_the_supported_list(client):
    meta = dict(META, **{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})
    r = send(client, modern("tools/list", meta=meta), {"MCP-Protocol-Version": "2099-01-01"})
    error = error_of(r, 400, -32022)
    assert error["data"] == {"supported": SUPPORTED, "requested": "2099-01-01"}
    assert assert_json(r)["id"] == 1


def test_a_handshake_version_inside_meta_is_unsupported_there(client):
    meta = dict(META, **{"io.modelcontextprotocol/protocolVersion": "2025-11-25"})
    r = send(client, modern("tools/list", meta=meta), {"MCP-Protocol-Version": None})
    error_of(r, 400, -32020)  # no header: mismatch first (a client that disagrees with itself is told so)


@pytest.mark.parametrize(
    "headers, why",
    [
        ({"MCP-Protocol-Version": None}, "MCP-Protocol-Version header is missing"),
        ({"Mcp-Method": None}, "Mcp-Method header is missing"),
        ({"Mcp-Method": "tools/call"}, "does not match the body's method"),
        ({"Mcp-Method": "tools/list\u00e9"}, "outside visible ASCII"),
    ],
)
def test_header_mismatch_is_32020(client, headers, why):
    r = send(client, modern("tools/list"), headers)
    assert why in error_of(r, 400, -32020)["message"]


def test_protocol_version_header_must_equal_meta(client):
    meta = dict(META, **{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})
    r = send(client, modern("tools/list", meta=meta))
    assert "does not match the body's _meta version" in error_of(r, 400, -32020)["message"]


def test_mcp_name_is_checked_plain_and_base64_encoded(client):
    call = modern("tools/call", {"name": "get_lesson", "arguments": {"id": "x"}})
    assert send(client, call, name="get_lesson").status_code == 200
    encoded = "=?base64?" + base64.b64encode(b"get_lesson").decode() + "?="
    assert send(client, call, name=encoded).status_code == 200
    assert "does not match" in error_of(send(client, call, name="search_lessons"), 400, -32020)["message"]
    assert "missing" in error_of(send(client, call), 400, -32020)["message"]
    wrong = "=?base64?" + base64.b64encode(b"search_lessons").decode() + "?="
    error_of(send(client, call, name=wrong), 400, -32020)
    assert "not valid" in error_of(send(client, call, name="=?base64?@@@?="), 400, -32020)["message"]


def test_non_ascii_tool_name_travels_base64_encoded(client):
    name = "\u0434\u043e\u043a"  # not a tool: the header check passes, the dispatcher refuses it
    encoded = "=?base64?" + base64.b64encode(name.encode()).decode() + "?="
    r = send(client, modern("tools/call", {"name": name}), name=encoded)
    assert r.status_code == 200 and assert_json(r)["error"]["code"] == -32602


@pytest.mark.parametrize("meta", [None, {}, {"io.modelcontextprotocol/protocolVersion": MODERN}, "x"])
def test_incomplete_meta_is_32602(client, meta):
    payload = modern("tools/list", meta=meta)
    r = send(client, payload)
    if meta is None or meta == {} or meta == "x":
        # without a _meta version the header alone routes to the modern rules
        error_of(r, 400, -32602)
    else:
        assert "clientCapabilities" in error_of(r, 400, -32602)["message"]


def test_meta_version_without_any_header_is_modern_and_refused(client):
    r = client.post("/mcp", data=json.dumps(modern("tools/list")), headers=HEADERS)
    assert "MCP-Protocol-Version header is missing" in error_of(r, 400, -32020)["message"]


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "resources/subscribe",
                                    "resources/unsubscribe", "unknown/method"])
def test_methods_unknown_to_2026_are_404(client, method):
    # what the conformance suite's server-stateless scenario sends: _meta only, the 2026-07-28 header
    r = send(client, modern(method, id_=500))
    assert error_of(r, 404, -32601) and assert_json(r)["id"] == 500


def test_initialize_at_2026_is_removed_but_a_2025_initialize_still_negotiates(client):
    # sent at 2026-07-28 (header, or _meta alone) it is a removed method, whatever the body asks for
    error_of(send(client, modern("initialize", {"protocolVersion": MODERN})), 404, -32601)
    r = client.post("/mcp", data=json.dumps(modern("initialize", {"protocolVersion": "2025-11-25"})), headers=HEADERS)
    error_of(r, 400, -32020)  # modern by its _meta, so the routing headers are required
    # a 2025 client: no header, or a 2025 header; an unknown body version gets 2025-11-25
    for hdrs in ({}, {"MCP-Protocol-Version": "2025-06-18"}):
        r = client.post("/mcp", data=json.dumps(rpc("initialize", {"protocolVersion": MODERN})),
                        headers=dict(HEADERS, **hdrs))
        assert r.status_code == 200 and assert_json(r)["result"]["protocolVersion"] == "2025-11-25"


def test_duplicated_routing_header_is_a_mismatch(client):
    environ = {"HTTP_MCP_METHOD": "tools/list, tools/list"}
    r = client.post("/mcp", data=json.dumps(modern("tools/list")),
                    headers=dict(HEADERS, **{"MCP-Protocol-Version": MODERN}), environ_overrides=environ)
    error_of(r, 400, -32020)


def test_notification_is_202_and_get_delete_are_405(client):
    r = send(client, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": META}})
    assert r.status_code == 202 and r.data == b""
    for method in ("GET", "DELETE"):
        r = client.open("/mcp", method=method, headers={"Host": HOST, "MCP-Protocol-Version": MODERN})
        assert r.status_code == 405 and r.headers["Allow"] == "POST"


def test_2025_era_is_untouched_by_meta_keys_it_does_not_know(client):
    # a 2025-11-25 request with a progress token in _meta and the legacy header stays legacy
    r = client.post("/mcp", data=json.dumps(rpc("tools/list", {"_meta": {"progressToken": 1}})),
                    headers=dict(HEADERS, **{"MCP-Protocol-Version": "2025-11-25"}))
    result = assert_json(r)["result"]
    assert "resultType" not in result and "ttlMs" not in result and "_meta" not in result


def test_cors_preflight_allows_the_2026_headers(client):
    r = client.open("/mcp", method="OPTIONS", headers={
        "Host": HOST, "Origin": "http://127.0.0.1:8081", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, authorization, mcp-protocol-version, mcp-method, mcp-name",
    })
    allowed = {h.strip().lower() for h in r.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"content-type", "authorization", "mcp-protocol-version", "mcp-method", "mcp-name", "accept"} <= allowed


@pytest.mark.parametrize("accept_encoding, compressed", [
    ("gzip, deflate", True), ("br;q=1, gzip;q=0.5", True), ("*", True),
    ("gzip;q=0", False), ("identity", False), (None, False),
])
def test_tools_list_is_gzipped_when_accepted(client, accept_encoding, compressed):
    hdrs = dict(HEADERS)
    if accept_encoding is not None:
        hdrs["Accept-Encoding"] = accept_encoding
    r = client.post("/mcp", data=json.dumps(rpc("tools/list")), headers=hdrs)
    assert r.status_code == 200 and "Accept-Encoding" in r.headers.get("Vary", "")
    if compressed:
        assert r.headers["Content-Encoding"] == "gzip"
        body = json.loads(gzip.decompress(r.data))
        assert int(r.headers["Content-Length"]) == len(r.data) < len(gzip.decompress(r.data))
    else:
        assert "Content-Encoding" not in r.headers
        body = json.loads(r.data)
    assert len(body["result"]["tools"]) == 10


def test_small_answers_are_not_compressed(client):
    r = client.post("/mcp", data=json.dumps(rpc("ping")), headers=dict(HEADERS, **{"Accept-Encoding": "gzip"}))
    assert r.status_code == 200 and "Content-Encoding" not in r.headers and r.get_json()["result"] == {}


def test_output_cap_counts_the_2026_members_exactly(schema_dir):
    # the budget measures the bytes sent, resultType and _meta included (docs/transport.md#tool-results)
    from test_transport import budget_filling_client

    cap = 4096
    client, sizes = budget_filling_client(schema_dir, cap)
    r = send(client, modern("tools/call", {"name": "search_lessons", "arguments": {}}, id_="req-42"),
             name="search_lessons")
    result = assert_json(r)["result"]
    assert result["isError"] is False and result["resultType"] == "complete" and "_meta" in result
    assert 0 < sizes["n"] < 40 and len(r.data) == cap - sizes["remaining"] and len(r.data) <= cap
