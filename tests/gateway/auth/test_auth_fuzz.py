"""No input reaches a 5xx on github mode's OAuth endpoints (docs/transport.md#github-mode).

A real github-mode gunicorn gateway (SQLite state, the GitHub stand-in,
rate limits off so every request reaches its handler) gets raw HTTP/1.1
requests over a socket, so any byte can go anywhere: ``/authorize``,
``/token``, ``/register``, ``/revoke``, ``/oauth/github/callback`` and
``/authorize/consent`` with fuzzed query strings, urlencoded forms, JSON
bodies (deep nesting, wrong types, odd strings) and headers
(``Authorization`` Basic of arbitrary bytes, Bearer junk, cookies, content
types, origins), values drawn from invalid UTF-8, control characters, NUL,
quotes, backslashes, bidi marks, percent-escapes and the real client id.
Property: the status is below 500. Hypothesis runs on the suite's fixed-seed
profile (``S3RM_HYPOTHESIS=explore`` draws new examples, tests/conftest.py);
:data:`EXAMPLES` requests per run. The three inputs the issue reported are
also plain regression tests.
"""
from __future__ import annotations

import base64
import json
import socket
from urllib.parse import quote_from_bytes

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.github_standin import GithubStandIn, StandInUser
from support.services import Gateway

CLIENT_SECRET = "standin-secret-0123456789"
EXAMPLES = 600
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])
ENDPOINTS = [("GET", "/authorize"), ("POST", "/token"), ("POST", "/register"), ("POST", "/revoke"),
             ("GET", "/oauth/github/callback"), ("POST", "/authorize/consent")]
NAMES = [b"response_type", b"client_id", b"redirect_uri", b"scope", b"state", b"code_challenge",
         b"code_challenge_method", b"resource", b"grant_type", b"code", b"code_verifier", b"refresh_token",
         b"client_secret", b"token", b"token_type_hint", b"error", b"request_id", b"csrf_token", b"decision",
         b"", b"x\x00", b"\xff"]
SPECIAL = [b"\\", b'"', b"\x00", "\u202e".encode(), "\u200f".encode(), b"\xff\xfe", b"\xc3", b"\xed\xa0\x80",
           b"\x7f", b"\x1b[31m", b"%", b"%zz", b"%00", b"+", b"&", b"=", b";", b"\t", b" ", b"code", b"S256",
           b"plain", b"mcp:read", b"mcp:write", b"mcp:read mcp:write", b"refresh_token", b"authorization_code",
           b"approve", b"none", b"https://", b"https://127.0.0.1/x.json", b"javascript:alert(1)",
           b"http://127.0.0.1:1/cb", b"[" * 200, b"{" * 200, "가".encode(), "😀".encode(), b"a" * 3000]
VALUE = st.one_of(st.binary(max_size=24), st.text(max_size=24).map(str.encode), st.sampled_from(SPECIAL),
                  st.lists(st.sampled_from(SPECIAL), min_size=1, max_size=4).map(b"".join))
JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20),
                      st.sampled_from([s.decode("utf-8", "surrogateescape") for s in SPECIAL]))
JSON_VALUE = st.recursive(JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                          max_leaves=12)
REG_FIELDS = ["redirect_uris", "client_name", "token_endpoint_auth_method", "grant_types", "response_types",
              "scope", "client_uri", "logo_uri", "contacts", "software_id", "jwks", "jwks_uri"]


def _encode(pairs: list[tuple[bytes, bytes]], raw: bool) -> bytes:
    if raw:
        return b"&".join(k + b"=" + v for k, v in pairs)
    return b"&".join(quote_from_bytes(k, safe="").encode() + b"=" + quote_from_bytes(v, safe="").encode()
                     for k, v in pairs)


@st.composite
def oauth_requests(draw, client_id: str, redirect_uri: str):
    """(method, path, query, headers, body) — one fuzzed request to an OAuth endpoint."""
    method, path = draw(st.sampled_from(ENDPOINTS))
    known = st.sampled_from([client_id.encode(), redirect_uri.encode()])
    pair = st.tuples(st.sampled_from(NAMES), st.one_of(VALUE, known))
    query = _encode(draw(st.lists(pair, max_size=6)), raw=draw(st.booleans()) and draw(st.booleans()))
    kind = draw(st.sampled_from(["none", "form", "json", "nested", "bytes"]))
    headers: list[tuple[bytes, bytes]] = []
    if kind == "form":
        body = _encode(draw(st.lists(pair, max_size=8)), raw=draw(st.booleans()))
        headers.append((b"Content-Type", b"application/x-www-form-urlencoded"))
    elif kind == "json":
        obj = draw(st.one_of(JSON_VALUE, st.dictionaries(st.sampled_from(REG_FIELDS), JSON_VALUE, max_size=6)))
        body = json.dumps(obj).encode()
        headers.append((b"Content-Type", b"application/json"))
    elif kind == "nested":
        depth = draw(st.sampled_from([1000, 20000, 100000]))
        body = draw(st.sampled_from([b"[" * depth, b'{"a":' * (depth // 5), b"[" * depth + b"]" * depth]))
        headers.append((b"Content-Type", draw(st.sampled_from([b"application/json",
                                                                b"application/x-www-form-urlencoded"]))))
    elif kind == "bytes":
        body = draw(st.binary(max_size=64))
        headers.append((b"Content-Type", draw(st.sampled_from([b"application/json", b"text/plain",
                                                                b"application/x-www-form-urlencoded; charset=latin1",
                                                                b"multipart/form-data; boundary=x"]))))
    else:
        body = b""
    safe = VALUE.map(lambda v: v.replace(b"\r", b"").replace(b"\n", b""))
    if draw(st.booleans()):
        credentials = draw(st.one_of(st.binary(max_size=24), st.sampled_from([b"\xff:\xfe", b"a:\xff", b":", b""])))
        headers.append((b"Authorization", draw(st.sampled_from([
            b"Basic " + base64.b64encode(credentials), b"Basic " + credentials.replace(b"\r", b"").replace(b"\n", b""),
            b"Bearer " + base64.b64encode(credentials), b"basic", b"Basic  " + base64.b64encode(credentials)]))))
    if draw(st.booleans()):
        headers.append((b"Cookie", b"s3rm_oauth_session=" + draw(safe)))
    if draw(st.booleans()):
        headers.append((b"Origin", draw(safe)))
    return method, path, query, headers, body


def _send(gw: Gateway, method: str, path: str, query: bytes, headers, body: bytes) -> int:
    """One raw HTTP/1.1 request on its own connection; the response status."""
    target = path.encode() + (b"?" + query if query else b"")
    head = [method.encode() + b" " + target + b" HTTP/1.1", f"Host: 127.0.0.1:{gw.port}".encode(),
            b"Connection: close", f"Content-Length: {len(body)}".encode()]
    head += [name + b": " + value for name, value in headers]
    with socket.create_connection(("127.0.0.1", gw.port), timeout=60) as sock:
        sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


@pytest.fixture(scope="module")
def oauth_gateway(tmp_path_factory):
    """(gateway, client id, redirect URI): github mode, rate limits off, one registered public client."""
    db = tmp_path_factory.mktemp("fuzz-oauth") / "oauth.sqlite3"
    gw = Gateway({"S3RM_MCP_WRITE_AUTH_MODE": "github", "S3RM_OAUTH_STATE_DB": str(db),
                  "S3RM_GITHUB_READ_ORGS": "s3lab", "S3RM_CURSOR_SECRET": "fuzz-cursor-secret-0123456789",
                  "S3RM_OAUTH_RATE_LIMIT_PER_SECOND": "0"}, threads=4)
    users = [StandInUser("alice", 5001, {"s3lab"})]
    with GithubStandIn("Iv1.standin", CLIENT_SECRET, f"{gw.base}/oauth/github/callback", users) as standin:
        gw.env.update(standin.env())
        with gw:
            redirect_uri = "http://127.0.0.1:9/callback"
            reg = requests.post(f"{gw.base}/register", json={"redirect_uris": [redirect_uri], "client_name": "fuzz",
                                                             "token_endpoint_auth_method": "none"}, timeout=30)
            assert reg.status_code == 201, reg.text
            yield gw, reg.json()["client_id"], redirect_uri


def test_the_three_reported_inputs_are_4xx(oauth_gateway):
    gw, client_id, _ = oauth_gateway
    for value in (b"\\", b'"', b"\x00", "\u202e".encode(), b"code\\"):
        status = _send(gw, "GET", "/authorize", b"response_type=" + quote_from_bytes(value, safe="").encode() +
                       b"&client_id=" + client_id.encode(), [], b"")
        assert status == 400, value
    answer = requests.post(f"{gw.base}/register", data=b"[" * 100000, timeout=30,
                           headers={"Content-Type": "application/json"})
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_client_metadata"
    answer = requests.post(f"{gw.base}/token", data={"grant_type": "refresh_token", "refresh_token": "x"},
                           headers={"Authorization": "Basic " + base64.b64encode(b"\xff\xfe:\xff").decode()},
                           timeout=30)
    assert answer.status_code == 401 and answer.json()["error"] == "invalid_client"


def test_no_oauth_input_reaches_a_5xx(oauth_gateway):
    gw, client_id, redirect_uri = oauth_gateway
    statuses: list[int] = []

    @FUZZ
    @given(request=oauth_requests(client_id, redirect_uri))
    def check(request):
        status = _send(gw, *request)
        statuses.append(status)
        assert status < 500, request

    check()
    assert len(statuses) >= EXAMPLES // 2
    assert "unhandled error" not in gw.log_text()
