"""Security of the MCP endpoint under gunicorn against the REAL dev wiki (docs/transport.md#http-rules).

Every hostile request gets the right status and a JSON body (never HTML or a
stack trace), carries the security headers, and — checked against the wiki
itself at the end of the module — writes nothing: the target Lesson keeps its
revision, the Lessons a request tried to create do not exist, and the Lesson
namespace has no new revision.

Covered: wrong Host / Origin, missing or wrong token, oversized bodies (with
Content-Length and chunked), malformed JSON-RPC, batch arrays, header
injection (CR/LF and obs-fold in raw header lines, encoded CR/LF in Origin,
Authorization and the JSON-RPC id), spoofed client-address headers without
(or with a wrong) proxy secret in open mode, and — behind the production
Caddyfile run by the real Caddy binary — forged client-address and
proxy-secret headers overwritten, ``/mcp`` reaching the gateway unchanged and
every other path (``/metrics`` included) going to MediaWiki.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import time

import pytest
import requests
from support.lessons import agent_client, lesson, write_pages
from support.services import MCP_HEADERS, REPO, Gateway, call_tool, free_port, rpc

from gateway.ops.ratelimit import CLIENT_IP_HEADER, PROXY_SECRET_HEADER

pytestmark = pytest.mark.timeout(600)  # a hang guard: gateway and caddy starts alone may take minutes under load

TOKEN = "security-test-write-token-0123456789"
PROXY_SECRET = "security-test-proxy-secret-0123456789"
TARGET = "sec-target"
MAX_BODY = 4096
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store", "X-Frame-Options": "DENY"}


def _draft(lesson_id: str, operation_id: str) -> dict:
    return {
        "operation_id": operation_id, "lesson_id": lesson_id, "title": "Injected", "question": "q",
        "attempt": "a", "context": "c", "observation": "o", "interpretation": "i", "reusable_lesson": "r",
        "applicability": "w", "confidence": "low", "evidence": "e",
        "initial_evidence": {"citation": "log 1", "kind": "log", "verification_basis": "partial_source"},
    }


def _revise(operation_id: str) -> dict:
    return {"operation_id": operation_id, "id": TARGET, "expected_revision_id": 1, "basis_evidence_ids": ["e1"],
            "changes": {"title": "Hijacked"}}


def _wiki_state(client) -> dict:
    info = client.get({"action": "query", "prop": "info", "titles": f"Lesson:{TARGET}|Lesson:sec-injected"})
    pages = {p["title"]: p for p in info["query"]["pages"]}
    rc = client.get({"action": "query", "list": "recentchanges", "rcnamespace": 3000, "rclimit": 500,
                     "rcprop": "ids"})
    return {
        "target_rev": pages[f"Lesson:{TARGET}"].get("lastrevid"),
        "injected_missing": bool(pages["Lesson:sec-injected"].get("missing")),
        "lesson_revisions": max((c["revid"] for c in rc["query"]["recentchanges"]), default=0),
    }


@pytest.fixture(scope="module")
def wiki(dev_wiki):
    client = agent_client(dev_wiki)
    write_pages(client, {TARGET: lesson(TARGET, title="Security target")})
    before = _wiki_state(client)
    assert before["target_rev"] and before["injected_missing"]
    yield dev_wiki
    after = _wiki_state(client)
    assert after == before, "a hostile request changed the wiki"


def _env(wiki, **extra: str) -> dict[str, str]:
    env = dict(wiki.env())
    env.update({
        "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(TOKEN.encode()).hexdigest(),
        "S3RM_MCP_ALLOWED_ORIGINS": "http://127.0.0.1:8081",
        "S3RM_MAX_BODY_BYTES": str(MAX_BODY),
        "S3RM_CURSOR_SECRET": "security-tests-cursor-secret-0123",
        "S3RM_REVISION_HMAC_KEYS": json.dumps({"k1": "security-tests-hmac-key-0123456789"}),
        "S3RM_REVISION_HMAC_ACTIVE_KEY_ID": "k1",
    })
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def gw(wiki):
    with Gateway(_env(wiki)) as gateway:
        yield gateway


def _json_error(r: requests.Response, status: int) -> dict:
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    assert "<html" not in r.text.lower() and "Traceback" not in r.text
    for key, value in SECURITY_HEADERS.items():
        assert r.headers.get(key) == value, key
    body = r.json()
    assert isinstance(body, dict) and "error" in body
    return body["error"]


AUTH = {"Authorization": f"Bearer {TOKEN}"}


# -------------------------------------------------------- Host and Origin
def test_wrong_host_is_421_even_with_a_valid_token(gw):
    r = call_tool(gw.url, "create_lesson_draft", _draft("sec-injected", "sec-op-1"),
                  headers={**AUTH, "Host": "evil.example:8080"})
    assert _json_error(r, 421)["code"] == -32600


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:8081.evil.example", "null",
                                    "http://127.0.0.1:8081/%0d%0aSet-Cookie:%20x=1"])
def test_wrong_origin_is_403_even_with_a_valid_token(gw, origin):
    r = call_tool(gw.url, "revise_lesson", _revise("sec-op-2"), headers={**AUTH, "Origin": origin})
    _json_error(r, 403)
    assert "Access-Control-Allow-Origin" not in r.headers and "Set-Cookie" not in r.headers


# ------------------------------------------------------------------ tokens
def test_missing_token_is_401_and_wrong_token_403(gw):
    r = call_tool(gw.url, "create_lesson_draft", _draft("sec-injected", "sec-op-3"))
    err = _json_error(r, 401)
    assert err["data"]["code"] == "missing_token" and r.headers["WWW-Authenticate"].startswith("Bearer")
    for value in ("Bearer wrong-token", f"Bearer {TOKEN}x", f"Basic {TOKEN}", f"Bearer {TOKEN}%0d%0aX-Admin: 1"):
        r = call_tool(gw.url, "create_lesson_draft", _draft("sec-injected", "sec-op-4"),
                      headers={"Authorization": value})
        assert _json_error(r, 403)["data"]["code"] == "invalid_token"
        assert "X-Admin" not in r.headers


# ---------------------------------------------------------------- bodies
def test_oversized_body_is_413_with_and_without_content_length(gw):
    big = _draft("sec-injected", "sec-op-5")
    big["context"] = "x" * (MAX_BODY * 2)
    r = call_tool(gw.url, "create_lesson_draft", big, headers=AUTH)
    assert _json_error(r, 413)["code"] == -32600

    def chunks():
        payload = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                              "params": {"name": "create_lesson_draft", "arguments": big}}).encode()
        for i in range(0, len(payload), 1000):
            yield payload[i:i + 1000]

    host = gw.base.split("//", 1)[1]
    r = requests.post(gw.url, data=chunks(), headers={**MCP_HEADERS, **AUTH, "Host": host}, timeout=30)
    _json_error(r, 413)


def test_malformed_json_and_batches_are_400(gw):
    host = gw.base.split("//", 1)[1]
    headers = {**MCP_HEADERS, **AUTH, "Host": host}
    r = requests.post(gw.url, data=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {',
                      headers=headers, timeout=30)
    assert _json_error(r, 400)["code"] == -32700
    r = requests.post(gw.url, data=b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xff\xfe"}', headers=headers,
                      timeout=30)
    assert _json_error(r, 400)["code"] == -32700
    batch = [{"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": "create_lesson_draft", "arguments": _draft("sec-injected", f"sec-b{i}")}}
             for i in range(2)]
    r = requests.post(gw.url, data=json.dumps(batch), headers=headers, timeout=30)
    assert _json_error(r, 400)["code"] == -32600
    for payload in ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/call"}, {"jsonrpc": "2.0", "method": 7},
                    {"jsonrpc": "1.0", "id": 1, "method": "tools/call"}, "tools/call"):
        r = requests.post(gw.url, data=json.dumps(payload), headers=headers, timeout=30)
        assert _json_error(r, 400)["code"] == -32600


def test_deeply_nested_json_is_a_clean_400(gw):
    host = gw.base.split("//", 1)[1]
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + b"[" * 1500 + b"]" * 1500 + b"}"
    r = requests.post(gw.url, data=body, headers={**MCP_HEADERS, "Host": host}, timeout=30)
    assert r.status_code in (200, 400)
    assert r.headers["Content-Type"].startswith("application/json") and "Traceback" not in r.text


# -------------------------------------------------------- header injection
def _raw(gw, request: bytes) -> bytes:
    port = int(gw.base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        out = b""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                data = s.recv(65536)
            except socket.timeout:
                break
            if not data:
                break
            out += data
            if b"\r\n\r\n" in out and b"Connection: close" in out.split(b"\r\n\r\n", 1)[0]:
                break
    return out


@pytest.mark.parametrize(
    "bad_header",
    [
        b"X-Evil: a\rSet-Cookie: x=1",      # bare CR inside a value
        b"X-Evil: a\nSet-Cookie: x=1",      # bare LF line ending a header early
        b"X-Evil: a\r\n Set-Cookie: x=1",   # obs-fold continuation line
        b"X-Ev\x00il: a",                   # NUL in a field name
    ],
)
def test_raw_header_injection_is_refused_and_never_reflected(gw, bad_header):
    host = gw.base.split("//", 1)[1].encode()
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "create_lesson_draft",
                                  "arguments": _draft("sec-injected", "sec-op-raw")}}).encode()
    request = (b"POST /mcp HTTP/1.1\r\nHost: " + host + b"\r\n" + bad_header + b"\r\n"
               b"Authorization: Bearer " + TOKEN.encode() + b"\r\nAccept: application/json\r\n"
               b"Content-Type: application/json\r\nConnection: close\r\nContent-Length: "
               + str(len(body)).encode() + b"\r\n\r\n" + body)
    response = _raw(gw, request)
    head = response.split(b"\r\n\r\n", 1)[0]
    status = int(head.split(b" ", 2)[1])
    # refused by gunicorn's HTTP parser before the app (400), never executed, answered in JSON
    assert status == 400, response[:300]
    assert b"set-cookie" not in head.lower()
    assert b"Content-Type: application/json" in head
    body = json.loads(response.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == -32600 and body["id"] is None
    assert b"Evil" not in response and b"evil" not in response  # the offending header is never echoed


def test_jsonrpc_id_and_method_are_echoed_only_as_json(gw):
    evil = "</script><script>alert(1)</script>\r\nSet-Cookie: x=1"
    r = rpc(gw.url, "no/such<b>method", id_=evil)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    assert r.json()["id"] == evil and "Set-Cookie" not in r.headers
    assert r.headers["X-Content-Type-Options"] == "nosniff"


# ------------------------------------------- spoofed client address, open mode
@pytest.fixture(scope="module")
def open_gw(wiki):
    env = _env(wiki, S3RM_MCP_WRITE_AUTH_MODE="open", S3RM_RATE_LIMIT_PER_SECOND="0.01",
               S3RM_RATE_LIMIT_BURST="3", S3RM_PROXY_SECRET=PROXY_SECRET)
    with Gateway(env) as gateway:
        yield gateway


def _spend(gw, n: int, headers: dict) -> list[int]:
    return [rpc(gw.url, "ping", headers=headers).status_code for _ in range(n)]


def test_spoofed_client_ip_without_the_proxy_secret_is_ignored(open_gw):
    # every request claims another address; without the secret they all share the peer's bucket
    codes = [rpc(open_gw.url, "ping", headers={"X-Forwarded-For": f"198.51.100.{i}",
                                                CLIENT_IP_HEADER: f"203.0.113.{i}"}).status_code
             for i in range(5)]
    assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429]
    r = rpc(open_gw.url, "ping", headers={CLIENT_IP_HEADER: "203.0.113.99", PROXY_SECRET_HEADER: "wrong-secret"})
    err = _json_error(r, 429)
    assert err["data"]["code"] == "rate_limited" and int(r.headers["Retry-After"]) >= 1


def test_client_ip_is_trusted_with_the_proxy_secret(open_gw):
    proxied = {PROXY_SECRET_HEADER: PROXY_SECRET}
    assert _spend(open_gw, 3, {**proxied, CLIENT_IP_HEADER: "192.0.2.10"}) == [200, 200, 200]
    assert _spend(open_gw, 1, {**proxied, CLIENT_IP_HEADER: "192.0.2.10"}) == [429]
    # another proxied client has its own bucket; a malformed forwarded value falls back to the peer
    assert _spend(open_gw, 1, {**proxied, CLIENT_IP_HEADER: "192.0.2.11"}) == [200]
    assert _spend(open_gw, 1, {**proxied, CLIENT_IP_HEADER: "192.0.2.12, 10.0.0.1"}) in ([200], [429])


def test_metrics_are_loopback_only_and_carry_no_secrets(gw):
    r = requests.get(f"{gw.base}/metrics", timeout=10)
    assert r.status_code == 200
    text = r.text
    for secret in (TOKEN, hashlib.sha256(TOKEN.encode()).hexdigest(), "security-tests-cursor-secret"):
        assert secret not in text
    body = r.json()
    assert set(body["admission"]) == {"read", "write", "semantic"}
    assert "byte_cap_hits" in body["observability"]


# ------------------------------------------------ end to end behind real Caddy
def _caddy_in_front(tmp_path, gateway_port: int, wiki) -> tuple[subprocess.Popen, str]:
    """The production Caddyfile with loopback addresses (plain HTTP, no admin API); returns (proc, base URL)."""
    port = free_port()
    text = (REPO / "deploy/caddy/Caddyfile").read_text()
    text = (text.replace("{$S3RM_PUBLIC_DOMAIN}", f"http://127.0.0.1:{port}")
                .replace("mcp-http:8080", f"127.0.0.1:{gateway_port}")
                .replace("mediawiki:80", f"{wiki.host}:{wiki.port}")
                .replace("admin {$S3RM_CADDY_ADMIN:127.0.0.1:2019}", "admin off"))
    config = tmp_path / "Caddyfile"
    config.write_text(text)
    env = {**os.environ, "S3RM_PROXY_SECRET": PROXY_SECRET, "HOME": str(tmp_path),
           "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    proc = subprocess.Popen([shutil.which("caddy"), "run", "--config", str(config), "--adapter", "caddyfile"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120  # caddy answers in a second when idle; much later on a busy machine
    while time.monotonic() < deadline:
        try:
            requests.get(f"{base}/mcp", timeout=5)
            return proc, base
        except requests.RequestException:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("caddy did not start")


def test_behind_caddy_client_headers_are_overwritten_and_paths_route(wiki, tmp_path):
    env = _env(wiki, S3RM_MCP_WRITE_AUTH_MODE="open", S3RM_RATE_LIMIT_PER_SECOND="0.01",
               S3RM_RATE_LIMIT_BURST="3", S3RM_PROXY_SECRET=PROXY_SECRET)
    with Gateway(env) as gateway:
        proc, base = _caddy_in_front(tmp_path, gateway.port, wiki)
        try:
            # the gateway's Host allowlist holds its own loopback address; Caddy passes Host unchanged
            host = gateway.base.split("//", 1)[1]
            url = f"{base}/mcp"
            # a client that knows the proxy secret still cannot choose its address: Caddy overwrites both
            forged = {CLIENT_IP_HEADER: "", PROXY_SECRET_HEADER: PROXY_SECRET, "Host": host}
            codes = []
            for i in range(5):
                forged[CLIENT_IP_HEADER] = f"198.51.100.{i}"
                codes.append(rpc(url, "ping", headers=forged).status_code)
            assert codes == [200, 200, 200, 429, 429]
            r = rpc(url, "ping", headers=forged)
            assert r.status_code == 429 and r.headers["Content-Type"].startswith("application/json")
            assert r.json()["error"]["data"]["code"] == "rate_limited"
            # /mcp reached the gateway with its path unchanged; other paths go to MediaWiki
            wiki_page = requests.get(f"{base}/api.php", params={"action": "query", "meta": "siteinfo",
                                                                "format": "json"}, timeout=30)
            assert wiki_page.status_code == 200 and "general" in wiki_page.json()["query"]
            metrics = requests.get(f"{base}/metrics", timeout=30)
            assert "observability" not in metrics.text  # never the gateway's /metrics through the proxy
        finally:
            proc.terminate()
            proc.wait(10)
