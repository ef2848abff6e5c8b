"""github mode under attack: each attack replayed against a real gunicorn github-mode gateway.

The GitHub stand-in (``support.github_standin``) is the upstream; every test
runs on the SQLite and on the PostgreSQL state store. The slow-metadata
attack uses ``support.tls_servers.DripServer`` (HTTPS that sends one header
line every half second) on 127.0.0.1, admitted through
``S3RM_OAUTH_CIMD_ALLOW_NETWORKS`` and trusted through ``S3RM_OAUTH_CIMD_CA_FILE``.
Contract: docs/operations.md#github-limits, #github-credential, #github-ids, #github-cut-off.
"""
from __future__ import annotations

import concurrent.futures
import os
import re
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from support.github_standin import GithubStandIn, StandInUser
from support.services import Gateway, call_tool, free_port
from support.source_address import session_from
from support.tls_servers import DripServer
from support.write_harness import evidence_args, lesson_fields, unique
from test_github_mode import CLIENT_SECRET, Login, bearer, lesson_exists, page_error, register

from gateway.app import create_app
from gateway.config import load_config

pytestmark = pytest.mark.wiki
REPO = Path(__file__).resolve().parents[3]
DEADLINE = 2.0  # S3RM_OAUTH_CIMD_TIMEOUT_SECONDS of these gateways


def _users() -> list[StandInUser]:
    return [StandInUser("alice", 5001, {"s3lab"}, {"s3lab/writers"}), StandInUser("bob", 5002, {"s3lab"}),
            StandInUser("carol", 5010), StandInUser("dave", 5011)]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def attacked(request, dev_wiki, tmp_path_factory):
    """(gateway, stand-in, drip server, env): one github-mode gateway per state store."""
    folder = tmp_path_factory.mktemp(f"attack-{request.param}")
    drip = DripServer(folder)
    env = dict(dev_wiki.env())
    env.update({"S3RM_MCP_WRITE_AUTH_MODE": "github", "S3RM_OAUTH_STATE_DB": str(folder / "oauth.sqlite3"),
                "S3RM_GITHUB_READ_ORGS": "s3lab", "S3RM_GITHUB_WRITE_TEAMS": "s3lab/writers",
                "S3RM_GITHUB_WRITE_USERS": "carol,5011",  # carol by login (needs a pin), dave by id
                "S3RM_CURSOR_SECRET": "github-tests-cursor-secret-0123456",
                "S3RM_OAUTH_CIMD_TIMEOUT_SECONDS": str(DEADLINE), "S3RM_OAUTH_CIMD_MAX_CONCURRENT": "2",
                "S3RM_OAUTH_CIMD_ALLOW_NETWORKS": "127.0.0.1/32", "S3RM_OAUTH_CIMD_CA_FILE": str(drip.cert),
                "S3RM_GITHUB_MEMBERSHIP_CHECK_SECONDS": "0", "S3RM_OAUTH_RATE_LIMIT_PER_SECOND": "0"})
    if request.param == "postgres":
        cluster = request.getfixturevalue("pg_cluster")
        env.update({"S3RM_AUTH_STORE": "postgres",
                    "S3RM_PG_DSN": cluster.create_database(f"s3rm_attack_{secrets.token_hex(4)}")})
    gateway = Gateway(env, threads=6)
    with GithubStandIn("Iv1.standin", CLIENT_SECRET, f"{gateway.base}/oauth/github/callback", _users()) as standin:
        gateway.env.update(standin.env())
        with gateway:
            yield gateway, standin, drip
    drip.close()


def _s3rm(gw, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **gw.env, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "s3rm", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


def _own_gateway(gw, request, tmp_path, **settings: str) -> Gateway:
    """Another gateway like ``gw`` with ``settings`` on a fresh state store of the same kind."""
    env = {**gw.env, **settings, "S3RM_OAUTH_STATE_DB": str(tmp_path / "own.sqlite3")}
    if env.get("S3RM_AUTH_STORE") == "postgres":
        env["S3RM_PG_DSN"] = request.getfixturevalue("pg_cluster").create_database(f"s3rm_own_{secrets.token_hex(4)}")
    for name in ("S3RM_BIND", "S3RM_MCP_PUBLIC_URL"):
        env.pop(name)
    return Gateway(env, threads=8)


# ----------------------------------------------------------------- attack 1
def test_slow_metadata_documents_cannot_stall_the_gateway(attacked):
    gw, standin, drip = attacked
    tag = secrets.token_hex(3)
    urls = [drip.url(f"/{tag}/client-{i}.json") for i in range(8)]

    def authorize(url: str) -> tuple[float, int]:
        started = time.monotonic()
        answer = requests.get(f"{gw.base}/authorize", params={"response_type": "code", "client_id": url,
                                                              "redirect_uri": "http://127.0.0.1:1/cb"},
                              allow_redirects=False, timeout=60)
        return time.monotonic() - started, answer.status_code

    with concurrent.futures.ThreadPoolExecutor(len(urls)) as pool:
        running = [pool.submit(authorize, url) for url in urls]
        probe = requests.get(f"{gw.base}/.well-known/oauth-authorization-server", timeout=30)  # during the attack
        results = [f.result() for f in running]
    assert probe.status_code == 200
    # every request ends long before the stalled document would have been read whole (60 s of drip): the
    # gateway cut the fetches at its deadline. How close to DEADLINE they end is a timing, which depends
    # on the machine's load (it is measured by bench/bench_auth_attack.py, not asserted here).
    stall = drip.interval * drip.lines
    assert all(elapsed < stall / 2 for elapsed, _ in results), (stall, results)
    assert {status for _, status in results} <= {400, 503}
    fetched = [url for url in urls if drip.seen[url.split(str(drip.port), 1)[1]]]
    assert 1 <= len(fetched) <= len(urls)
    again = authorize(fetched[0])  # negative cache: refused without a new fetch
    assert again[1] == 400 and drip.seen[fetched[0].split(str(drip.port), 1)[1]] == 1


# ----------------------------------------------------------------- attack 2
def test_access_ends_when_membership_ends_and_admin_can_cut_off(attacked):
    gw, standin, _ = attacked
    alice = next(u for u in standin.users.values() if u.login == "alice")
    login = Login(gw, standin, user="alice")
    tokens = login.token(login.code()).json()
    assert tokens["scope"] == "mcp:read mcp:write"
    try:
        alice.teams.discard("s3lab/writers")  # removed from the write team: a refresh keeps read only
        narrowed = login.refresh(tokens["refresh_token"])
        assert narrowed.status_code == 200 and narrowed.json()["scope"] == "mcp:read", narrowed.text
        args = {**lesson_fields(), "operation_id": unique("op-gh"), "lesson_id": unique("gh"),
                "initial_evidence": evidence_args()}
        write = call_tool(gw.url, "create_lesson_draft", args, headers=bearer(narrowed.json()["access_token"]))
        assert write.status_code == 403 and not lesson_exists(gw, narrowed.json()["access_token"], args["lesson_id"])
        alice.orgs.discard("s3lab")  # out of the org too: the refresh fails and the family is revoked
        gone = login.refresh(narrowed.json()["refresh_token"])
        assert gone.status_code == 400 and gone.json()["error"] == "invalid_grant"
        dead = call_tool(gw.url, "search_lessons", {"query": "x"}, headers=bearer(narrowed.json()["access_token"]))
        assert dead.status_code == 401
    finally:
        alice.orgs.add("s3lab")
        alice.teams.add("s3lab/writers")
    again = Login(gw, standin, user="alice")
    fresh = again.token(again.code()).json()
    cut = _s3rm(gw, "auth", "revoke", "--user", "alice")
    assert cut.returncode == 0 and "revoked" in cut.stdout, cut.stderr
    assert call_tool(gw.url, "search_lessons", {"query": "x"},
                     headers=bearer(fresh["access_token"])).status_code == 401
    assert again.refresh(fresh["refresh_token"]).json()["error"] == "invalid_grant"


def test_a_github_outage_on_the_membership_calls_is_not_a_lost_membership(attacked):
    gw, standin, _ = attacked
    login = Login(gw, standin, user="bob")  # reads through the s3lab org
    tokens = login.token(login.code()).json()
    standin.membership_outage = 502
    try:  # the last good check is recent (< S3RM_GITHUB_MEMBERSHIP_STALE_SECONDS): its answer holds
        kept = login.refresh(tokens["refresh_token"])
        assert kept.status_code == 200 and kept.json()["scope"] == "mcp:read", kept.text
    finally:
        standin.membership_outage = None
    again = login.refresh(kept.json()["refresh_token"])  # GitHub back: the sign-in was never revoked
    assert again.status_code == 200, again.text


# ----------------------------------------------------------------- attack 3
def test_allowlisted_login_counts_only_for_the_pinned_id(attacked):
    gw, standin, _ = attacked
    dave = Login(gw, standin, user="dave")  # listed by numeric id
    assert dave.token(dave.code()).json()["scope"] == "mcp:read mcp:write"
    carol = Login(gw, standin, user="carol")  # listed by login, not pinned yet: nothing
    refused = carol.to_consent()
    assert refused.status_code == 403 and page_error(refused) == "access_denied"  # a page, never a redirect
    pinned = _s3rm(gw, "auth", "pin", "carol", "--id", "5010")
    assert pinned.returncode == 0, pinned.stderr
    carol = Login(gw, standin, user="carol")
    assert carol.token(carol.code()).json()["scope"] == "mcp:read mcp:write"
    original = standin.users["carol"]
    standin.users["carol"] = StandInUser("carol", 6666)  # the login freed by a rename, taken by a new account
    try:
        taker = Login(gw, standin, user="carol")
        answer = taker.to_consent()
        assert answer.status_code == 403 and page_error(answer) == "access_denied"
    finally:
        standin.users["carol"] = original


# ----------------------------------------------------------------- attack 4
def test_registration_fields_are_bounded(attacked):
    gw, _, _ = attacked
    cb = f"http://127.0.0.1:{free_port()}/cb"
    for extra in ({"client_name": "x" * 1_048_000}, {"jwks": {"keys": [{"k": "x" * 900_000}]}, "client_name": "j"}):
        answer = register(gw, [cb], **extra)
        if "jwks" in extra:  # unknown fields are dropped, never stored
            assert answer.status_code == 201 and "jwks" not in answer.json()
        else:
            assert answer.status_code == 400 and answer.json()["error"] == "invalid_client_metadata"
    many = register(gw, [f"http://127.0.0.1:{p}/cb" for p in range(2000, 2000 + 40)])
    assert many.status_code == 400
    state = _s3rm(gw, "auth", "status")
    assert state.returncode == 0, state.stderr
    stored = int(state.stdout.split("bytes=")[1].split()[0])
    assert stored < 2_000_000, state.stdout  # the 1 MB name and the 900 KB jwks never reached the store


def _age(gw, table_sqlite: str, table_pg: str, column: str, seconds: int) -> None:
    """Move ``column`` of every row ``seconds`` into the past in ``gw``'s state store."""
    from gateway.auth.service import open_auth_store

    store = open_auth_store(load_config(gw.env))
    if hasattr(store, "pool"):
        with store.pool.connection() as conn:
            conn.execute(f"UPDATE {table_pg} SET {column} = {column} - %s", (seconds,))
        store.close()
    else:
        store._db().execute(f"UPDATE {table_sqlite} SET {column} = {column} - ?", (seconds,))


def _status(gw, kind: str) -> int:
    state = _s3rm(gw, "auth", "status")
    assert state.returncode == 0, state.stderr
    return int(state.stdout.split(f"{kind}=")[1].split()[0])


def test_pending_logins_are_capped_and_purged(attacked, request, tmp_path):
    gw, _, _ = attacked
    capped = _own_gateway(gw, request, tmp_path, S3RM_OAUTH_MAX_PENDING="10", S3RM_OAUTH_PURGE_SECONDS="1")
    with capped:
        cb = f"http://127.0.0.1:{free_port()}/cb"
        client_id = register(capped, [cb]).json()["client_id"]
        params = {"response_type": "code", "client_id": client_id, "redirect_uri": cb, "state": "s",
                  "code_challenge": "x" * 43, "code_challenge_method": "S256"}
        answers = [requests.get(f"{capped.base}/authorize", params=params, allow_redirects=False, timeout=10)
                   for _ in range(11)]  # anonymous: each would store a pending login
        assert [a.status_code for a in answers] == [302] * 10 + [503]
        assert int(answers[-1].headers["Retry-After"]) >= 1 and _status(capped, "pending") == 10
        _age(capped, "pending", "s3rm_auth_pending", "expires_at", 3600)  # every one of them expired
        deadline = time.monotonic() + 300  # a few status reads; each is a process start, slow on a busy machine
        while _status(capped, "pending") and time.monotonic() < deadline:  # the periodic purge, not a request
            requests.get(f"{capped.base}/.well-known/oauth-authorization-server", timeout=60)
        assert _status(capped, "pending") == 0


def test_a_full_client_cap_evicts_never_used_clients_instead_of_locking_registration(attacked, request, tmp_path):
    gw, standin, _ = attacked
    capped = _own_gateway(gw, request, tmp_path, S3RM_OAUTH_MAX_CLIENTS="3")
    with capped:
        cb = f"http://127.0.0.1:{free_port()}/cb"
        assert [register(capped, [cb]).status_code for _ in range(4)] == [201, 201, 201, 400]
        _age(capped, "clients", "s3rm_auth_client", "created_at", 3600)  # the squatters are older than a sign-in
        assert register(capped, [cb]).status_code == 201  # the oldest never-used client made room
        assert _status(capped, "clients") == 3


# ----------------------------------------------------------------- attack 6
def test_unverified_clients_get_an_error_page_not_a_redirect(attacked):
    gw, standin, _ = attacked
    reg = register(gw, ["https://evil.example/phish"])
    assert reg.status_code == 201
    client_id = reg.json()["client_id"]
    for over in ({"code_challenge": None}, {"code_challenge_method": "plain"}, {"scope": "admin"},
                 {"resource": "https://other.example/mcp"}):
        params = {"response_type": "code", "client_id": client_id, "redirect_uri": "https://evil.example/phish",
                  "code_challenge": "x" * 43, "code_challenge_method": "S256", "state": "s", **over}
        answer = requests.get(f"{gw.base}/authorize", params={k: v for k, v in params.items() if v is not None},
                              allow_redirects=False, timeout=10)
        assert answer.status_code == 400, (over, answer.status_code)
        assert page_error(answer) and "evil.example" not in answer.headers.get("Location", "")


# ----------------------------------------------------------------- attack 7
def test_a_refused_refresh_leaves_the_token_usable(attacked):
    gw, standin, _ = attacked
    login = Login(gw, standin, user="bob")
    tokens = login.token(login.code()).json()
    for bad in ({"scope": "mcp:write"}, {"resource": "https://other.example/mcp"}):
        refused = requests.post(f"{gw.base}/token", data={"grant_type": "refresh_token", "client_id": login.client_id,
                                                          "refresh_token": tokens["refresh_token"], **bad}, timeout=10)
        assert refused.status_code == 400 and refused.json()["error"] in ("invalid_scope", "invalid_target")
    ok = login.refresh(tokens["refresh_token"])
    assert ok.status_code == 200, ok.text
    assert call_tool(gw.url, "search_lessons", {"query": "x"}, headers=bearer(ok.json()["access_token"])).status_code \
        == 200


def test_asking_for_a_scope_no_longer_allowed_is_a_scope_error_not_a_revocation(attacked):
    gw, standin, _ = attacked
    alice = next(u for u in standin.users.values() if u.login == "alice")
    login = Login(gw, standin, user="alice")
    tokens = login.token(login.code()).json()
    assert tokens["scope"] == "mcp:read mcp:write"
    alice.teams.discard("s3lab/writers")  # still in the read org: the sign-in stays good for mcp:read
    try:
        refused = requests.post(f"{gw.base}/token", data={"grant_type": "refresh_token", "client_id": login.client_id,
                                                          "refresh_token": tokens["refresh_token"],
                                                          "scope": "mcp:write"}, timeout=10)
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_scope", refused.text
        assert call_tool(gw.url, "search_lessons", {"query": "x"},
                         headers=bearer(tokens["access_token"])).status_code == 200  # the family was not revoked
        ok = login.refresh(tokens["refresh_token"])  # the same token, without the scope it may no longer have
        assert ok.status_code == 200 and ok.json()["scope"] == "mcp:read", ok.text
    finally:
        alice.teams.add("s3lab/writers")


@pytest.mark.parametrize("uri", ['http://127.0.0.1:5000/c"b', "http://127.0.0.1:5000/c\\b",
                                 "http://127.0.0.1:5000/cé", "http://127.0.0.1:99999/cb"])
def test_odd_redirect_uris_are_400_not_500(attacked, uri):
    gw, standin, _ = attacked
    assert register(gw, [uri]).status_code == 400
    login = Login(gw, standin)
    answer = login.http.get(f"{gw.base}/authorize", params=login.params(redirect_uri=uri), allow_redirects=False,
                            timeout=10)
    assert answer.status_code == 400 and page_error(answer) == "invalid_request"


def test_metadata_address_errors_are_generic(attacked):
    gw, _, drip = attacked
    texts = []
    for url in ("https://192.0.0.192/c.json", "https://[64:ff9b::a00:1]/c.json", "https://[2002:a00:1::1]/c.json",
                f"https://127.0.0.1:{free_port()}/closed-port.json", drip.url("/not-json-either")):
        answer = requests.get(f"{gw.base}/authorize", params={"response_type": "code", "client_id": url},
                              allow_redirects=False, timeout=30)
        assert answer.status_code == 400 and page_error(answer) == "invalid_client"
        texts.append(answer.text.replace(url, ""))
    assert len(set(texts)) == 1 and "refused" not in texts[0].lower() and "address" not in texts[0].lower()


def test_session_cookie_is_server_minted(attacked):
    gw, standin, _ = attacked
    login = Login(gw, standin)
    login.http.cookies.set("s3rm_oauth_session", "attacker-chosen", domain="127.0.0.1", path="/")
    first = login.http.get(f"{gw.base}/authorize", params=login.params(), allow_redirects=False, timeout=10)
    assert first.status_code == 302
    assert "attacker-chosen" not in first.headers["Set-Cookie"] and "HttpOnly" in first.headers["Set-Cookie"]


def test_a_session_cookie_with_any_bytes_is_replaced_not_a_500(attacked):
    import http.client
    from urllib.parse import urlencode, urlsplit

    gw, standin, _ = attacked
    login = Login(gw, standin)
    address = urlsplit(gw.base)
    for raw in (b"s3rm_oauth_session=abc.\xc3\xa9", b"s3rm_oauth_session=\xff\xfe.x", b's3rm_oauth_session="a.\\303"'):
        conn = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
        try:
            conn.putrequest("GET", f"/authorize?{urlencode(login.params())}")
            conn.putheader("Cookie", raw)
            conn.endheaders()
            answer = conn.getresponse()
            cookie = answer.getheader("Set-Cookie") or ""
            assert answer.status == 302, (raw, answer.status, answer.read()[:200])
            assert cookie.startswith("s3rm_oauth_session=") and "abc" not in cookie.split(";")[0]
        finally:
            conn.close()


def test_audit_lines_without_secrets(attacked):
    gw, standin, _ = attacked
    login = Login(gw, standin)
    tokens = login.token(login.code()).json()
    rotated = login.refresh(tokens["refresh_token"]).json()
    assert login.refresh(tokens["refresh_token"]).status_code == 400  # reuse
    log = gw.log_text()
    for event in ("sign_in", "token_issued", "refreshed", "refresh_reuse"):
        assert f"oauth_audit event={event}" in log, event
    for secret in (tokens["refresh_token"], tokens["access_token"], rotated["refresh_token"], CLIENT_SECRET):
        assert secret not in log
    own = (Path(gw.env["S3RM_OAUTH_STATE_DB"]).parent / "audit.log").read_text()  # the audit log of its own
    for event in ("sign_in", "token_issued", "refreshed", "refresh_reuse"):
        assert re.search(rf"oauth_audit event={event} .*addr=127\.0\.0\.1", own), event
    assert "rate limited" not in own and "GET /" not in own and tokens["refresh_token"] not in own


def test_rate_limited_lines_are_throttled():
    import logging

    from gateway.auth.endpoints import ThrottledLines

    now = [0.0]
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("s3rm.test.throttled")
    logger.addHandler(Keep())
    logger.setLevel(logging.INFO)
    lines = ThrottledLines(logger, "limited endpoint=%s", 60.0, clock=lambda: now[0])
    assert [lines.note("token") for _ in range(1000)].count(True) == 1  # 1000 refusals in one minute: one line
    assert lines.note("register")  # another endpoint has its own line
    now[0] = 61.0
    assert lines.note("token") and records[-1] == "limited endpoint=token (999 more since the last line)"


def test_oauth_endpoints_are_rate_limited(attacked, request, tmp_path):
    gw, _, _ = attacked
    limited = _own_gateway(gw, request, tmp_path, S3RM_OAUTH_RATE_LIMIT_PER_SECOND="0.01",
                           S3RM_OAUTH_RATE_LIMIT_BURST="3")
    with limited:
        cb = f"http://127.0.0.1:{free_port()}/cb"
        answers = [register(limited, [cb]) for _ in range(4)]
        assert [a.status_code for a in answers] == [201, 201, 201, 429]
        assert int(answers[-1].headers["Retry-After"]) >= 1
        tokens = [requests.post(f"{limited.base}/token", data={"grant_type": "refresh_token", "client_id": "c",
                                                               "refresh_token": "r"}, timeout=10) for _ in range(4)]
        assert tokens[-1].status_code == 429 and "Retry-After" in tokens[-1].headers


def test_sprayed_client_ids_cannot_grow_the_rate_buckets_without_bound(attacked, request, tmp_path):
    gw, _, _ = attacked
    limited = _own_gateway(gw, request, tmp_path, S3RM_OAUTH_RATE_LIMIT_PER_SECOND="0.01",
                           S3RM_OAUTH_RATE_LIMIT_BURST="1000", S3RM_OAUTH_RATE_LIMIT_MAX_BUCKETS="100")
    with limited:
        with requests.Session() as http:  # every anonymous /authorize names a new client id: a new bucket each
            for i in range(150):
                http.get(f"{limited.base}/authorize", params={"response_type": "code", "client_id": f"spray-{i}"},
                         allow_redirects=False, timeout=10)
        state = _s3rm(limited, "auth", "status")
        assert state.returncode == 0, state.stderr
        assert int(state.stdout.split("rate=")[1].split()[0]) <= 100, state.stdout


def test_an_ipv6_caller_is_rate_limited_by_its_64():
    from gateway.auth.endpoints import _rate_subject

    assert _rate_subject("2001:db8:1:2:aaaa::1") == _rate_subject("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert _rate_subject("2001:db8:1:3::1") != _rate_subject("2001:db8:1:2::1")
    assert _rate_subject("::ffff:198.51.100.7") == _rate_subject("198.51.100.7") == "198.51.100.7"
    assert _rate_subject("") == ""


def test_the_client_cap_is_atomic(attacked, request, tmp_path):
    gw, _, _ = attacked
    capped = _own_gateway(gw, request, tmp_path, S3RM_OAUTH_MAX_CLIENTS="10")
    with capped:
        cb = f"http://127.0.0.1:{free_port()}/cb"
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            codes = list(pool.map(lambda _: register(capped, [cb]).status_code, range(30)))
        assert codes.count(201) == 10 and codes.count(400) == 20, codes
        state = _s3rm(capped, "auth", "status")
        assert "clients=10 " in state.stdout, state.stdout


def test_https_issuer_uses_a_host_prefixed_secure_cookie(tmp_path):
    config = load_config({"S3RM_MCP_WRITE_AUTH_MODE": "github", "S3RM_GITHUB_CLIENT_ID": "Iv1.x",
                          "S3RM_GITHUB_CLIENT_SECRET": "secret-value", "S3RM_GITHUB_READ_USERS": "5001",
                          "S3RM_MCP_PUBLIC_URL": "https://wiki.example.org/mcp",
                          "S3RM_OAUTH_STATE_DB": str(tmp_path / "s.sqlite3")})
    client = create_app(config).test_client()
    headers = {"Host": "wiki.example.org"}
    reg = client.post("/register", headers=headers, json={"redirect_uris": ["http://127.0.0.1:5000/cb"]})
    params = {"response_type": "code", "client_id": reg.get_json()["client_id"],
              "redirect_uri": "http://127.0.0.1:5000/cb", "code_challenge": "x" * 43, "code_challenge_method": "S256"}
    client.set_cookie("__Host-s3rm_oauth_session", "attacker-chosen", domain="wiki.example.org")
    answer = client.get("/authorize", headers=headers, query_string=params)
    cookie = answer.headers["Set-Cookie"]
    assert answer.status_code == 302 and cookie.startswith("__Host-s3rm_oauth_session=")
    assert "Secure" in cookie and "Path=/" in cookie and "Domain" not in cookie and "attacker-chosen" not in cookie


def test_family_lifetime_and_github_outage_on_refresh(attacked, request, tmp_path):
    gw, _, _ = attacked
    own = _own_gateway(gw, request, tmp_path, S3RM_GITHUB_MEMBERSHIP_STALE_SECONDS="0")
    with GithubStandIn("Iv1.standin", CLIENT_SECRET, f"{own.base}/oauth/github/callback", _users()) as standin:
        own.env.update(standin.env())
        with own:
            from gateway.auth.service import open_auth_store
            from gateway.auth.store import digest

            store = open_auth_store(load_config(own.env))
            old = Login(own, standin, user="bob")
            aged = old.token(old.code()).json()
            if hasattr(store, "pool"):  # a sign-in that started 100 days ago (the default lifetime is 90)
                with store.pool.connection() as conn:
                    conn.execute("UPDATE s3rm_auth_family SET created_at = created_at - 8640000")
            else:
                store._db().execute("UPDATE families SET created_at = created_at - 8640000")
            too_old = old.refresh(aged["refresh_token"])
            assert too_old.status_code == 400 and too_old.json()["error"] == "invalid_grant"
            assert "older" in too_old.json()["error_description"]

            login = Login(own, standin, user="bob")
            tokens = login.token(login.code()).json()
            standin.__exit__()  # GitHub unreachable
            down = login.refresh(tokens["refresh_token"])
            assert down.status_code == 503 and down.json()["error"] == "temporarily_unavailable"
            assert int(down.headers["Retry-After"]) >= 1
            unused = store.use_refresh(digest(tokens["refresh_token"]), int(time.time()), consume=False)
            assert unused.status == "ok"  # the refused refresh left the token usable


# ------------------------------------------------- per-address quotas (docs/operations.md#github-quotas)
def _fill(gw, address: str, attempts: int) -> tuple[list[int], list[int], list[str]]:
    """``attempts`` anonymous registrations, then as many /authorize of the last client registered, from
    ``address``: the status codes of both and the client ids registered."""
    cb = "http://127.0.0.1:9/cb"
    with session_from(address) as http:
        regs = [http.post(f"{gw.base}/register", json={"redirect_uris": [cb]}, timeout=30) for _ in range(attempts)]
        ids = [r.json()["client_id"] for r in regs if r.status_code == 201]
        params = {"response_type": "code", "client_id": ids[-1], "redirect_uri": cb,
                  "code_challenge": "x" * 43, "code_challenge_method": "S256"}
        auths = [http.get(f"{gw.base}/authorize", params=params, allow_redirects=False, timeout=30)
                 for _ in range(attempts)]
    return [r.status_code for r in regs], [a.status_code for a in auths], ids


def test_a_few_addresses_cannot_lock_out_a_lab_behind_one_nat_address(attacked, request, tmp_path):
    """Two attacking addresses each hold only their quota (40); twenty people behind ONE address sign in at once
    with the default rate limits; when a third address fills the global cap, a new anonymous sign-in or
    registration is refused, but a client that already got a token still signs in."""
    gw, standin, _ = attacked
    own = _own_gateway(gw, request, tmp_path, S3RM_OAUTH_RATE_LIMIT_PER_SECOND="5", S3RM_OAUTH_MAX_PENDING="100",
                       S3RM_OAUTH_MAX_CLIENTS="130")
    with GithubStandIn("Iv1.standin", CLIENT_SECRET, f"{own.base}/oauth/github/callback", _users()) as gh:
        own.env.update(gh.env())
        with own:
            unused = []
            for address in ("127.0.1.1", "127.0.2.1"):  # other /24s than the lab's 127.0.0.1
                regs, auths, ids = _fill(own, address, 50)
                assert regs == [201] * 50 and auths == [302] * 50  # never refused: its own oldest made room
                unused.append(ids[-2])
            assert _status(own, "pending") == 80 and _status(own, "clients") == 80

            lab = [Login(own, gh, user="alice") for _ in range(20)]  # 20 browsers behind 127.0.0.1
            gh.signed_in = "alice"
            with concurrent.futures.ThreadPoolExecutor(20) as pool:
                firsts = list(pool.map(lambda login: login.http.get(
                    f"{own.base}/authorize", params=login.params(), allow_redirects=False, timeout=30), lab))
            assert [f.status_code for f in firsts] == [302] * 20  # twenty sign-ins in progress at once
            tokens = []
            for login, first in zip(lab, firsts):
                page = login.http.get(first.headers["Location"], timeout=10)
                action = re.search(r'action="([^"]+)"', page.text).group(1).replace("&amp;", "&")
                back = login.http.post(f"{gh.base}{action}", allow_redirects=False, timeout=10)
                consent = login.http.get(back.headers["Location"], allow_redirects=False, timeout=10)
                tokens.append(login.token(login.approve(consent)["code"]).status_code)
            assert tokens == [200] * 20

            regs, auths, _ = _fill(own, "127.0.3.1", 45)  # a third address fills both global caps
            assert regs == [201] * 30 + [400] * 15 and auths == [302] * 20 + [503] * 25
            with session_from("127.0.9.1") as http:  # the last resort: a new anonymous sign-in waits
                stranger = http.get(f"{own.base}/authorize", params={
                    "response_type": "code", "client_id": unused[0], "redirect_uri": "http://127.0.0.1:9/cb",
                    "code_challenge": "x" * 43, "code_challenge_method": "S256"}, allow_redirects=False, timeout=10)
            assert stranger.status_code == 503 and int(stranger.headers["Retry-After"]) >= 1, re.sub(r"<style>.*?</style>", "", stranger.text)[:700]
            known = lab[0].http.get(f"{own.base}/authorize", params=lab[0].params(), allow_redirects=False, timeout=10)
            assert known.status_code == 302 and known.headers["Location"].startswith(gh.base)  # a used client: in


def test_eight_parallel_approvals_of_one_consent_give_one_code(attacked):
    gw, standin, _ = attacked
    login = Login(gw, standin)
    consent = login.to_consent()
    fields = dict(re.findall(r'name="(request_id|csrf_token)" value="([^"]+)"', consent.text))
    cookies = login.http.cookies.get_dict()

    def approve(_: int) -> requests.Response:
        return requests.post(f"{gw.base}/authorize/consent", data={**fields, "decision": "approve"}, cookies=cookies,
                             allow_redirects=False, timeout=30)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(approve, range(8)))
    codes = [a for a in answers if a.status_code == 302 and "code=" in a.headers.get("Location", "")]
    assert len(codes) == 1, [a.status_code for a in answers]
    assert sorted(a.status_code for a in answers) == [302] + [403] * 7


def test_host_is_checked_on_every_route_but_the_health_probes(attacked):
    gw, _, _ = attacked
    rebound = {"Host": "evil.example"}
    for method, path in (("GET", "/mcp/graph"), ("POST", "/register"), ("GET", "/authorize"),
                         ("GET", "/.well-known/oauth-authorization-server"), ("GET", "/oauth/jwks"),
                         ("POST", "/token"), ("GET", "/oauth/github/callback"), ("GET", "/metrics")):
        answer = requests.request(method, f"{gw.base}{path}", headers=rebound, timeout=30)
        assert answer.status_code == 421, (path, answer.status_code)
    assert requests.get(f"{gw.base}/mcp/graph", timeout=60).status_code in (200, 503)  # its own Host: served
    for probe in ("/livez", "/healthz"):
        assert requests.get(f"{gw.base}{probe}", headers=rebound, timeout=30).status_code == 200
    loopback = {"Host": f"127.0.0.1:{gw.port}"}  # an operator's curl to the loopback address
    assert requests.get(f"{gw.base}/metrics", headers=loopback, timeout=30).status_code == 200


def test_the_callback_and_the_consent_form_are_rate_limited(attacked, request, tmp_path):
    gw, _, _ = attacked
    limited = _own_gateway(gw, request, tmp_path, S3RM_OAUTH_RATE_LIMIT_PER_SECOND="0.01",
                           S3RM_OAUTH_RATE_LIMIT_BURST="3")
    with limited:
        callbacks = [requests.get(f"{limited.base}/oauth/github/callback", params={"state": "s", "code": "c"},
                                  timeout=10) for _ in range(6)]
        consents = [requests.post(f"{limited.base}/authorize/consent", data={"request_id": "r", "csrf_token": "c"},
                                  timeout=10) for _ in range(6)]
        assert [a.status_code for a in callbacks] == [400] * 3 + [429] * 3
        assert [a.status_code for a in consents] == [403] * 3 + [429] * 3
        assert all(int(a.headers["Retry-After"]) >= 1 for a in callbacks[3:] + consents[3:])
        lines = re.findall(r"oauth rate limited endpoint=(\w+)", limited.log_text())
        assert sorted(lines) == ["callback", "consent"], lines  # one line per endpoint and minute, not per request


def test_org_allowlists_hold_the_numeric_org_id_not_the_name(attacked, request, tmp_path):
    """An org name is pinned to its numeric id at the first sign-in that sees it; the same name on another
    organisation (renamed, name taken) grants nothing, teams in it neither; an org listed by id matches by id."""
    gw, _, _ = attacked
    own = _own_gateway(gw, request, tmp_path)
    with GithubStandIn("Iv1.standin", CLIENT_SECRET, f"{own.base}/oauth/github/callback", _users()) as gh:
        own.env.update(gh.env())
        with own:
            bob = Login(own, gh, user="bob")
            assert bob.token(bob.code()).json()["scope"] == "mcp:read"
            assert f"org:s3lab={gh.org_ids['s3lab']}" in _s3rm(own, "auth", "status").stdout
            real_id, gh.org_ids["s3lab"] = gh.org_ids["s3lab"], 4242  # the name now belongs to another org
            for user in ("bob", "alice"):  # org member, and member of the org's writers team
                refused = Login(own, gh, user=user).to_consent()
                assert refused.status_code == 403 and page_error(refused) == "access_denied", user
            dave = Login(own, gh, user="dave")  # listed by user id: unaffected
            assert dave.token(dave.code()).status_code == 200
            gh.org_ids["s3lab"] = real_id
    by_id = _own_gateway(gw, request, tmp_path / "by-id", S3RM_GITHUB_READ_ORGS=str(real_id),
                         S3RM_GITHUB_WRITE_TEAMS="")
    with GithubStandIn("Iv1.standin", CLIENT_SECRET, f"{by_id.base}/oauth/github/callback", _users()) as gh:
        by_id.env.update(gh.env())
        with by_id:
            bob = Login(by_id, gh, user="bob")
            assert bob.token(bob.code()).json()["scope"] == "mcp:read"
            assert gh.requests_seen["/api/user/memberships/orgs"] >= 1


def test_one_address_sending_slow_metadata_documents_leaves_the_fetch_slots_to_others(attacked):
    """One address requesting new slow metadata documents from three connections at once holds at most one of
    the two fetch slots (its other requests are refused at once): eight first-time metadata-document sign-ins
    from elsewhere all reach GitHub meanwhile."""
    gw, standin, drip = attacked
    tag, stop, answers = secrets.token_hex(3), threading.Event(), []

    def attacker(n: int) -> None:
        with session_from("127.0.5.1") as http:
            k = 0
            while not stop.is_set():
                k += 1
                answers.append(http.get(f"{gw.base}/authorize", params={
                    "response_type": "code", "client_id": drip.url(f"/{tag}/slow-{n}-{k}.json"),
                    "redirect_uri": "http://127.0.0.1:9/cb"}, allow_redirects=False, timeout=60).status_code)
                stop.wait(0.3)

    threads = [threading.Thread(target=attacker, args=(n,), daemon=True) for n in range(3)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 60
        while not (503 in answers and any(p.startswith(f"/{tag}/slow-") for p in list(drip.seen))) \
                and time.monotonic() < deadline:
            stop.wait(0.05)  # one slow fetch under way, and the address already refused a second one
        assert 503 in answers, answers
        statuses = []
        for i in range(8):
            fast = drip.url(f"/fast/{tag}/client-{i}.json")
            answer = requests.get(f"{gw.base}/authorize", params={
                "response_type": "code", "client_id": fast, "redirect_uri": "http://127.0.0.1:9/cb",
                "code_challenge": "x" * 43, "code_challenge_method": "S256", "state": "s"}, allow_redirects=False,
                timeout=60)
            statuses.append((answer.status_code, answer.headers.get("Location", "").startswith(standin.base)))
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert statuses == [(302, True)] * 8, statuses
