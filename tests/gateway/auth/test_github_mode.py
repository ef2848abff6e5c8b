"""github mode end to end: gunicorn gateway on the dev wiki + a GitHub STAND-IN (docs/transport.md#github-mode).

GitHub cannot be reached from the test machines, so ``support.github_standin``
plays GitHub's OAuth authorize/token endpoints and its user/org/team API.
The happy path runs the python-sdk 1.x OAuth client provider
(``mcp.client.auth.OAuthClientProvider``) with headless Chromium approving the
stand-in's page and the gateway's Korean consent page: read with a
``mcp:read`` token, a write that steps up to ``mcp:write`` on the 403,
refresh, revoke. The attack tests drive the same HTTP endpoints with
``requests`` (cookies kept like a browser) and check the OAuth error and
that nothing was written.
"""
from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import secrets
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import httpx
import psycopg
import pytest
import requests
from mcp import ClientSession, StdioServerParameters
from mcp.client.auth import OAuthClientProvider
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from support.schema_dirs import SCHEMA
from support.browser import launch_chromium
from support.clients import MCP_REMOTE, NODE
from support.github_standin import GithubStandIn, StandInUser
from support.services import MCP_HEADERS, Gateway, call_tool, free_port, tool_payload
from support.write_harness import evidence_args, lesson_fields, unique

from gateway.auth.store import SqliteAuthStore
from gateway.auth.tokens import KeyRing, mint_access_token
from gateway.wiki.client import WikiClient
from s3rm.audit import audit

pytestmark = pytest.mark.wiki
REPO = Path(__file__).resolve().parents[3]

CLIENT_SECRET = "standin-secret-0123456789"
USERS = [StandInUser("alice", 5001, {"s3lab"}, {"s3lab/writers"}),  # read + write
         StandInUser("bob", 5002, {"s3lab"}),                      # read only
         StandInUser("mallory", 5003)]                               # no access


@pytest.fixture(scope="module")
def github_mode(dev_wiki, tmp_path_factory):
    """(gateway, stand-in, state db path): one github-mode gunicorn gateway for the module."""
    db = tmp_path_factory.mktemp("oauth") / "oauth.sqlite3"
    env = dict(dev_wiki.env())
    env.update({"S3RM_MCP_WRITE_AUTH_MODE": "github", "S3RM_OAUTH_STATE_DB": str(db),
                "S3RM_GITHUB_READ_ORGS": "s3lab", "S3RM_GITHUB_WRITE_TEAMS": "s3lab/writers",
                "S3RM_CURSOR_SECRET": "github-tests-cursor-secret-0123456",
                "S3RM_OAUTH_RATE_LIMIT_PER_SECOND": "0"})  # rate limits: test_github_attacks.py
    gateway = Gateway(env, threads=6)
    with GithubStandIn("Iv1.standin", CLIENT_SECRET, f"{gateway.base}/oauth/github/callback", USERS) as standin:
        gateway.env.update(standin.env())
        with gateway:
            yield gateway, standin, db


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    return verifier, base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def register(gw, redirect_uris, **extra) -> requests.Response:
    return requests.post(f"{gw.base}/register", json={"client_name": "attack test", "redirect_uris": redirect_uris,
                                                      "token_endpoint_auth_method": "none", **extra}, timeout=10)


class Login:
    """A browser-like HTTP walk through /authorize → stand-in → consent (cookies kept)."""

    def __init__(self, gw, standin, user="alice"):
        self.gw, self.standin, self.user = gw, standin, user
        self.http = requests.Session()
        self.redirect_uri = f"http://127.0.0.1:{free_port()}/callback"
        reg = register(gw, [self.redirect_uri])
        assert reg.status_code == 201, reg.text
        self.client_id = reg.json()["client_id"]
        self.verifier, self.challenge = pkce()

    def params(self, **over) -> dict:
        base = {"response_type": "code", "client_id": self.client_id, "redirect_uri": self.redirect_uri,
                "code_challenge": self.challenge, "code_challenge_method": "S256", "state": "st-1",
                "scope": "mcp:read mcp:write", "resource": self.gw.url}
        base.update(over)
        return {k: v for k, v in base.items() if v is not None}

    def to_consent(self, **over) -> requests.Response:
        """Follow the flow to the consent page (or whatever stops it); returns the last response."""
        self.standin.signed_in = self.user
        first = self.http.get(f"{self.gw.base}/authorize", params=self.params(**over), allow_redirects=False,
                              timeout=10)
        if first.status_code != 302 or not first.headers["Location"].startswith(self.standin.base):
            return first
        page = self.http.get(first.headers["Location"], timeout=10)
        action = re.search(r'action="([^"]+)"', page.text).group(1).replace("&amp;", "&")
        back = self.http.post(f"{self.standin.base}{action}", allow_redirects=False, timeout=10)
        return self.http.get(back.headers["Location"], allow_redirects=False, timeout=10)

    def approve(self, consent: requests.Response, decision="approve") -> dict:
        fields = dict(re.findall(r'name="(request_id|csrf_token)" value="([^"]+)"', consent.text))
        done = self.http.post(f"{self.gw.base}/authorize/consent", data={**fields, "decision": decision},
                              allow_redirects=False, timeout=10)
        assert done.status_code == 302, done.text
        return {k: v[0] for k, v in parse_qs(urlsplit(done.headers["Location"]).query).items()}

    def code(self, **over) -> str:
        answer = self.approve(self.to_consent(**over))
        assert answer["iss"] == self.gw.base and answer["state"] == "st-1"
        return answer["code"]

    def token(self, code: str, **over) -> requests.Response:
        data = {"grant_type": "authorization_code", "code": code, "redirect_uri": self.redirect_uri,
                "client_id": self.client_id, "code_verifier": self.verifier, "resource": self.gw.url, **over}
        return requests.post(f"{self.gw.base}/token", data={k: v for k, v in data.items() if v is not None},
                             timeout=10)

    def refresh(self, refresh_token: str) -> requests.Response:
        return requests.post(f"{self.gw.base}/token", data={"grant_type": "refresh_token", "client_id": self.client_id,
                                                             "refresh_token": refresh_token}, timeout=10)


def page_error(answer: requests.Response) -> str:
    """The OAuth error code of an error PAGE (before sign-in nothing redirects, docs/operations.md#github-limits)."""
    assert "Location" not in answer.headers and answer.headers["Content-Type"].startswith("text/html")
    found = re.search(r"<p>([a-z_]+):", answer.text)
    return found.group(1) if found else ""


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def lesson_exists(gw, token: str, lesson_id: str) -> bool:
    payload = tool_payload(call_tool(gw.url, "get_lesson", {"id": lesson_id}, headers=bearer(token)))
    if "error" in payload:
        assert payload["error"]["code"] == "not_found", payload  # any other error would prove nothing
        return False
    return payload["id"] == lesson_id


def history(dev_wiki, lesson_id: str) -> list[tuple[str, str]]:
    """(user, summary) of a Lesson's revisions, newest first."""
    answer = requests.get(dev_wiki.api_url, params={"action": "query", "prop": "revisions", "titles":
                                                    f"Lesson:{lesson_id}", "rvprop": "comment|user", "rvlimit": 10,
                                                    "format": "json", "formatversion": 2}, timeout=10).json()
    return [(rev["user"], rev["comment"]) for rev in answer["query"]["pages"][0].get("revisions", [])]


# ----------------------------------------------------------------- discovery
def test_discovery_documents_and_401_challenge(github_mode):
    gw, _, _ = github_mode
    unauth = requests.post(gw.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=MCP_HEADERS,
                           timeout=10)
    assert unauth.status_code == 401
    challenge = unauth.headers["WWW-Authenticate"]
    assert f'resource_metadata="{gw.base}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert 'scope="mcp:read"' in challenge
    browser = requests.post(gw.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                            headers={**MCP_HEADERS, "Origin": gw.base}, timeout=10)
    assert "WWW-Authenticate" in browser.headers["Access-Control-Expose-Headers"]
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        prm = requests.get(gw.base + path, timeout=10).json()
        assert prm["resource"] == gw.url and prm["authorization_servers"] == [gw.base]
    meta = requests.get(f"{gw.base}/.well-known/oauth-authorization-server",
                        headers={"Origin": gw.base}, timeout=10)
    assert meta.headers["Access-Control-Allow-Origin"] == gw.base
    doc = meta.json()
    assert doc["issuer"] == gw.base and doc["code_challenge_methods_supported"] == ["S256"]
    assert doc["authorization_response_iss_parameter_supported"] is True
    assert requests.get(f"{gw.base}/.well-known/openid-configuration", timeout=10).json()["error"] == "invalid_request"
    foreign = requests.options(f"{gw.base}/token", headers={"Origin": "https://evil.example",
                                                             "Access-Control-Request-Method": "POST"}, timeout=10)
    assert "Access-Control-Allow-Origin" not in foreign.headers


# --------------------------------------------------- the real client flow
class MemoryStorage:
    def __init__(self):
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


def test_python_sdk_oauth_provider_with_chromium(github_mode, dev_wiki):
    """Read (mcp:read), write after step-up to mcp:write, refresh, revoke — python-sdk + Chromium."""
    gw, standin, _ = github_mode
    started = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=5)
    standin.signed_in = "alice"
    callback = f"http://127.0.0.1:{free_port()}/callback"
    seen: list[str] = []
    consents: list[str] = []

    async def main():
        from playwright.async_api import async_playwright
        async with async_playwright() as pw:
            context = await launch_chromium(pw)
            captured: list[str] = []

            async def catch(route):
                captured.append(route.request.url)
                await route.fulfill(status=200, body="ok")

            await context.route(f"{callback}*", catch)
            page = await context.new_page()

            async def redirect_handler(url: str) -> None:
                seen.append(url)
                await page.goto(url)
                await page.click("#js-oauth-authorize-btn")
                await page.wait_for_selector("#approve")
                consents.append(await page.content())
                await page.click("#approve")
                await page.wait_for_function("() => document.body.innerText.includes('ok')")

            async def callback_handler():
                query = parse_qs(urlsplit(captured[-1]).query)
                assert query["iss"] == [gw.base]
                return query["code"][0], query.get("state", [None])[0]

            storage = MemoryStorage()
            provider = OAuthClientProvider(
                gw.url, OAuthClientMetadata(client_name="python-sdk test", redirect_uris=[callback],
                                            grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"], token_endpoint_auth_method="none"),
                storage, redirect_handler=redirect_handler, callback_handler=callback_handler)
            out = {}
            async with httpx.AsyncClient(auth=provider, timeout=60) as http:
                async with streamable_http_client(gw.url, http_client=http) as (read, write, _):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        out["tools"] = len((await session.list_tools()).tools)
                        out["first_scope"] = storage.tokens.scope
                        found = await session.call_tool("search_lessons", {"query": "allocator", "limit": 3})
                        out["read_error"] = found.isError
                        args = {**lesson_fields(), "operation_id": unique("op-gh"), "lesson_id": unique("gh"),
                                "initial_evidence": evidence_args()}
                        created = await session.call_tool("create_lesson_draft", args)
                        out["write"] = created.structuredContent
                        out["lesson_id"] = args["lesson_id"]
                        out["second_scope"] = storage.tokens.scope
                        old_refresh = storage.tokens.refresh_token
                        provider.context.token_expiry_time = time.time() - 1  # force a refresh
                        read = await session.call_tool("get_lesson", {"id": args["lesson_id"]})
                        out["read_after_refresh"] = not read.isError
                        out["rotated"] = storage.tokens.refresh_token != old_refresh
                        out["access"] = storage.tokens.access_token
                        out["client_id"] = storage.client.client_id
            await context.close()
            return out

    out = anyio.run(main)
    assert out["tools"] == 10 and out["read_error"] is False
    assert out["first_scope"] == "mcp:read"
    assert "mcp:write" in out["second_scope"] and out["write"]["status"] == "created"
    assert len(seen) == 2  # one sign-in for reading, one step-up for writing
    assert "S3 Research Memory 접근 허용" in consents[0] and "python-sdk test" in consents[0]
    assert "127.0.0.1:" in consents[0] and "mcp:read" in consents[0] and "mcp:write" in consents[1]
    assert out["rotated"]
    revisions = history(dev_wiki, out["lesson_id"])
    assert revisions and revisions[0][1].endswith(" gh=alice ghid=5001]"), revisions  # the id survives a rename
    report = audit(WikiClient(dev_wiki.api_url, dev_wiki.agent.username, dev_wiki.agent.password),
                   since=started, limit=5000, keys={}, agent_accounts={revisions[0][0]}, schema=SCHEMA)
    assert report.github_writers["alice"] >= 1  # s3rm audit names the person
    assert out["read_after_refresh"]
    lesson = tool_payload(call_tool(gw.url, "get_lesson", {"id": out["lesson_id"]}, headers=bearer(out["access"])))
    assert lesson["revision_github_login"] == "alice"  # get_lesson names the person who wrote this revision
    assert lesson["revision_github_id"] == "5001"
    assert "alice" not in json.dumps(lesson["lesson"].get("author", ""))  # provenance stays the gateway account

    revoked = requests.post(f"{gw.base}/revoke", data={"token": out["access"], "client_id": out["client_id"]},
                            timeout=10)
    assert revoked.status_code == 200
    after = call_tool(gw.url, "search_lessons", {"query": "allocator"}, headers=bearer(out["access"]))
    assert after.status_code == 401 and 'error="invalid_token"' in after.headers["WWW-Authenticate"]


# ------------------------------------------------------------------ attacks
def test_read_only_token_gets_insufficient_scope_and_writes_nothing(github_mode):
    gw, standin, _ = github_mode
    login = Login(gw, standin, user="bob")
    answer = login.token(login.code())
    assert answer.status_code == 200 and answer.json()["scope"] == "mcp:read"  # bob may only read
    token = answer.json()["access_token"]
    args = {**lesson_fields(), "operation_id": unique("op-gh"), "lesson_id": unique("gh"),
            "initial_evidence": evidence_args()}
    refused = call_tool(gw.url, "create_lesson_draft", args, headers=bearer(token))
    assert refused.status_code == 403
    assert refused.headers["WWW-Authenticate"].startswith('Bearer error="insufficient_scope", ')
    assert 'scope="mcp:write"' in refused.headers["WWW-Authenticate"]
    assert not lesson_exists(gw, token, args["lesson_id"])


def test_redirect_uri_attacks_never_redirect(github_mode):
    gw, standin, _ = github_mode
    login = Login(gw, standin)
    for bad in ("https://evil.example/callback", "http://127.0.0.1.evil.example/callback",
                login.redirect_uri + "/../../evil", "http://localhost:1/callback"):
        answer = login.to_consent(redirect_uri=bad)
        assert answer.status_code == 400 and page_error(answer) == "invalid_request", bad
    unknown = login.to_consent(client_id="no-such-client")
    assert unknown.status_code == 400 and page_error(unknown) == "invalid_client"
    for uri in ("javascript:alert(1)", "http://example.org/cb", "https://ok.example/cb#frag"):
        reg = register(gw, [uri])
        assert reg.status_code == 400 and reg.json()["error"] == "invalid_redirect_uri", uri
    # a loopback redirect URI matches on any port (RFC 8252 §7.3)
    other_port = re.sub(r":\d+/", f":{free_port()}/", login.redirect_uri)
    assert login.to_consent(redirect_uri=other_port).status_code == 200


def test_pkce_is_required_and_s256_only(github_mode):
    gw, standin, _ = github_mode
    login = Login(gw, standin)
    for over in ({"code_challenge": None, "code_challenge_method": None}, {"code_challenge_method": "plain"},
                 {"code_challenge_method": None}):
        answer = login.to_consent(**over)  # before sign-in: an error page, never a redirect (RFC 9700 §4.11.2)
        assert answer.status_code == 400 and page_error(answer) == "invalid_request", over
    code = login.code()
    assert login.token(code, code_verifier="x" * 50).json()["error"] == "invalid_grant"


def test_code_replay_revokes_and_refresh_reuse_revokes_family(github_mode):
    gw, standin, _ = github_mode
    login = Login(gw, standin)
    code = login.code()
    first = login.token(code)
    assert first.status_code == 200, first.text
    tokens = first.json()
    replay = login.token(code)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    gone = call_tool(gw.url, "search_lessons", {"query": "x"}, headers=bearer(tokens["access_token"]))
    assert gone.status_code == 401  # the replay revoked what the code had issued

    tokens = login.token(login.code()).json()
    rotated = login.refresh(tokens["refresh_token"])
    assert rotated.status_code == 200 and rotated.json()["refresh_token"] != tokens["refresh_token"]
    reuse = login.refresh(tokens["refresh_token"])
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    assert login.refresh(rotated.json()["refresh_token"]).json()["error"] == "invalid_grant"  # family revoked
    dead = call_tool(gw.url, "search_lessons", {"query": "x"}, headers=bearer(rotated.json()["access_token"]))
    assert dead.status_code == 401


def test_other_resource_and_expired_tokens_are_refused(github_mode):
    gw, standin, db = github_mode
    login = Login(gw, standin)
    other = login.to_consent(resource="https://other.example/mcp")
    assert other.status_code == 400 and page_error(other) == "invalid_target"
    code = login.code()
    answer = login.token(code, resource="https://other.example/mcp")
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_target"

    store = SqliteAuthStore(db)
    family = "test-family"
    store.save_refresh(hashlib.sha256(b"unused").hexdigest(), family, {"client_id": "x"}, int(time.time()) + 60)
    now = int(time.time())
    ring = KeyRing(store, 30 * 86400, 600, lambda: now)
    common = dict(issuer=gw.base, user_id="5001", login="alice", scope="mcp:read mcp:write", client_id="x",
                  family=family)
    foreign, _ = mint_access_token(ring, audience="https://other.example/mcp", lifetime=600, **common)
    old_ring = KeyRing(store, 30 * 86400, 600, lambda: now - 3600)
    expired, _ = mint_access_token(old_ring, audience=gw.url, lifetime=60, **common)
    valid, _ = mint_access_token(ring, audience=gw.url, lifetime=600, **common)
    for token, words in ((foreign, "another resource"), (expired, "expired")):
        refused = call_tool(gw.url, "search_lessons", {"query": "x"}, headers=bearer(token))
        assert refused.status_code == 401 and words in refused.text
        assert 'error="invalid_token"' in refused.headers["WWW-Authenticate"]
    assert call_tool(gw.url, "search_lessons", {"query": "x"}, headers=bearer(valid)).status_code == 200


def test_consent_csrf_is_refused(github_mode):
    gw, standin, _ = github_mode
    login = Login(gw, standin)
    consent = login.to_consent()
    fields = dict(re.findall(r'name="(request_id|csrf_token)" value="([^"]+)"', consent.text))
    forged = login.http.post(f"{gw.base}/authorize/consent", data={**fields, "csrf_token": "guess",
                                                                    "decision": "approve"}, allow_redirects=False)
    assert forged.status_code == 403 and forged.json()["error"] == "invalid_request"
    other_browser = requests.post(f"{gw.base}/authorize/consent", data={**fields, "decision": "approve"},
                                  allow_redirects=False, timeout=10)
    assert other_browser.status_code == 403 and "Location" not in other_browser.headers
    assert "frame-ancestors 'none'" in consent.headers["Content-Security-Policy"]
    answer = login.approve(consent)  # the real browser session still works once
    assert "code" in answer


def test_user_outside_allowlist_is_denied(github_mode):
    gw, standin, _ = github_mode
    login = Login(gw, standin, user="mallory")
    answer = login.to_consent()  # GitHub approved (as it does for a returning user): still no redirect
    assert answer.status_code == 403 and page_error(answer) == "access_denied"
    assert login.redirect_uri not in answer.text


@pytest.mark.parametrize("client_id", ["https://127.0.0.1/client.json", "https://10.1.2.3/client.json",
                                       "https://169.254.169.254/latest/meta-data", "https://localhost/c.json",
                                       "https://[::1]/c.json", "http://example.org/client.json"])
def test_client_metadata_documents_at_internal_addresses_are_refused(github_mode, client_id):
    gw, standin, _ = github_mode
    login = Login(gw, standin)
    answer = login.to_consent(client_id=client_id)
    assert answer.status_code == 400 and page_error(answer) == "invalid_client"


def test_clients_and_tokens_survive_a_restart(github_mode):
    """The state store is a file: after a restart the same client, access token and refresh token still work."""
    gw, standin, _ = github_mode
    login = Login(gw, standin)
    tokens = login.token(login.code()).json()
    gw.restart()
    assert call_tool(gw.url, "search_lessons", {"query": "allocator"},
                     headers=bearer(tokens["access_token"])).status_code == 200
    rotated = login.refresh(tokens["refresh_token"])
    assert rotated.status_code == 200 and rotated.json()["scope"] == "mcp:read mcp:write"


def test_two_gateways_share_one_postgres_auth_state(dev_wiki, pg_cluster):
    """Two github-mode gateways behind one public URL on one PostgreSQL (docs/operations.md#github-state):
    a token issued by A works on B, a refresh on B rotates, and replaying the old refresh token on A
    revokes the family for both."""
    dsn = pg_cluster.create_database(f"s3rm_oauth_{secrets.token_hex(4)}")
    env = dict(dev_wiki.env())
    env.update({"S3RM_MCP_WRITE_AUTH_MODE": "github", "S3RM_AUTH_STORE": "postgres", "S3RM_PG_DSN": dsn,
                "S3RM_GITHUB_READ_ORGS": "s3lab", "S3RM_GITHUB_WRITE_TEAMS": "s3lab/writers",
                "S3RM_CURSOR_SECRET": "github-tests-cursor-secret-0123456",
                "S3RM_OAUTH_RATE_LIMIT_PER_SECOND": "0"})  # rate limits: test_github_attacks.py
    a = Gateway(env, threads=4)
    b = Gateway({**env, "S3RM_MCP_PUBLIC_URL": a.url}, threads=4)  # A's URL stands for the load balancer's
    b.env["S3RM_MCP_ALLOWED_HOSTS"] = f"127.0.0.1:{b.port}"
    with GithubStandIn("Iv1.standin", CLIENT_SECRET, f"{a.base}/oauth/github/callback", USERS) as standin, \
            contextlib.ExitStack() as running:
        for gw in (a, b):
            gw.env.update(standin.env())
            running.callback(gw.__exit__)
        starting = threading.Thread(target=b.start)  # both start at once (each takes seconds)
        starting.start()
        a.start()
        starting.join()
        assert b.proc is not None and b.proc.poll() is None, b.log_text()[-2000:]
        login = Login(a, standin)
        tokens = login.token(login.code()).json()
        assert "access_token" in tokens, tokens
        on_b = call_tool(b.url, "search_lessons", {"query": "allocator"}, headers=bearer(tokens["access_token"]))
        assert on_b.status_code == 200, on_b.text  # A's signing key verifies on B
        rotated = requests.post(f"{b.base}/token", data={"grant_type": "refresh_token", "client_id": login.client_id,
                                                         "refresh_token": tokens["refresh_token"]}, timeout=10)
        assert rotated.status_code == 200, rotated.text
        fresh = rotated.json()
        assert fresh["refresh_token"] != tokens["refresh_token"]
        assert call_tool(a.url, "search_lessons", {"query": "x"},
                         headers=bearer(fresh["access_token"])).status_code == 200
        replay = login.refresh(tokens["refresh_token"])  # the old one, on A
        assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
        for gw in (a, b):  # the whole family is revoked everywhere
            dead = call_tool(gw.url, "search_lessons", {"query": "x"}, headers=bearer(fresh["access_token"]))
            assert dead.status_code == 401, dead.text
        again = requests.post(f"{b.base}/token", data={"grant_type": "refresh_token", "client_id": login.client_id,
                                                       "refresh_token": fresh["refresh_token"]}, timeout=10)
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    with psycopg.connect(dsn) as conn:  # the shared state holds hashes only
        stored = conn.execute("SELECT string_agg(token_hash, ' ') FROM s3rm_auth_refresh").fetchone()[0]
    assert tokens["refresh_token"] not in stored and fresh["refresh_token"] not in stored
    assert hashlib.sha256(fresh["refresh_token"].encode()).hexdigest() in stored


def test_mcp_remote_signs_in_through_its_browser_opener(github_mode, installed_clients, tmp_path):
    """mcp-remote (stdio ↔ HTTP) discovers, registers and signs in by itself; its ``xdg-open``/``$BROWSER``
    is ``support/oauth_opener.py`` (headless Chromium approving the stand-in and the consent page)."""
    gw, standin, _ = github_mode
    standin.signed_in = "alice"
    opener = tmp_path / "bin" / "xdg-open"
    opener.parent.mkdir()
    opener.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests" / "support" / "oauth_opener.py"}" '
                      f'"$@" >>"{tmp_path / "opener.log"}" 2>&1\n')
    opener.chmod(0o755)
    env = {**os.environ, "PATH": f"{opener.parent}{os.pathsep}{NODE.parent}{os.pathsep}{os.environ['PATH']}",
           "BROWSER": str(opener), "HOME": str(tmp_path), "MCP_REMOTE_CONFIG_DIR": str(tmp_path / "mcp-auth")}
    params = StdioServerParameters(command=str(NODE), args=[str(MCP_REMOTE), gw.url, str(free_port()),
                                                            "--transport", "http-only"],
                                   env=env, cwd=str(REPO / "tests" / "clients"))

    async def run():
        with anyio.fail_after(120), open(tmp_path / "mcp-remote.err", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = await session.list_tools()
                    found = await session.call_tool("search_lessons", {"query": "allocator", "limit": 2})
                    return len(tools.tools), found.isError

    count, failed = anyio.run(run)
    assert count == 10 and failed is False, (tmp_path / "mcp-remote.err").read_text()[-2000:]
    assert f"open {gw.base}/authorize?" in (tmp_path / "opener.log").read_text()  # its browser did the sign-in
