"""The SHIPPED Caddyfile under real Caddy (Debian's, scripts/install.sh) in front of real gunicorn gateways.

Loopback only: Caddy runs ``deploy/caddy/Caddyfile`` unchanged, with only its
environment placeholders set (``support.caddy``). Client addresses are
127.0.0.1, 127.0.0.2 and 127.0.0.3 (Linux routes 127.0.0.0/8 to ``lo``), so the
gateway's per-address buckets can be told apart through the proxy.

* github mode: ``/token``, ``/authorize`` and ``/register`` keep one bucket per
  client address (docs/operations.md#public-domain, #github-limits): one address
  driven to 429 leaves another at its full budget, and 100 junk ``/token``
  requests from one address leave another's refresh at 200;
* open mode: ``/mcp`` likewise (docs/operations.md#admission);
* a slow request body through Caddy holds no gateway thread
  (docs/operations.md#request-reading).
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import requests
from support.caddy import Caddy, session_from
from support.github_standin import GithubStandIn, StandInUser
from support.services import MCP_HEADERS, Gateway, rpc
from support.slow_bodies import assert_unanswered, slow_body
from test_github_mode import Login

SECRET = "caddy-live-proxy-secret-0123456789"
CLIENT_SECRET = "standin-secret-0123456789"
JUNK = {"/token": ("post", {"data": {"grant_type": "refresh_token", "refresh_token": "junk", "client_id": ""}}),
        "/authorize": ("get", {"params": {"response_type": "code"}, "allow_redirects": False}),
        "/register": ("post", {"json": {"redirect_uris": ["javascript:junk"]}})}


def _behind_caddy(env: dict[str, str], threads: int = 4) -> tuple[Gateway, Caddy]:
    gw = Gateway({"S3RM_PROXY_SECRET": SECRET, **env}, threads=threads)
    caddy = Caddy(f"127.0.0.1:{gw.port}", SECRET)
    gw.env["S3RM_MCP_PUBLIC_URL"] = f"{caddy.base}/mcp"  # the public origin is Caddy's, as in production
    return gw, caddy


@pytest.fixture(scope="module")
def github_behind_caddy(tmp_path_factory):
    """(gateway, caddy, stand-in): github mode with per-address OAuth rate limits, reached through Caddy."""
    db = tmp_path_factory.mktemp("caddy-oauth") / "oauth.sqlite3"
    # the default burst (60) with a slow refill (one request per 10 s), so a dry bucket stays dry during a test
    gw, caddy = _behind_caddy({"S3RM_MCP_WRITE_AUTH_MODE": "github", "S3RM_OAUTH_STATE_DB": str(db),
                               "S3RM_GITHUB_READ_ORGS": "s3lab", "S3RM_CURSOR_SECRET": "caddy-live-cursor-0123456789",
                               "S3RM_OAUTH_RATE_LIMIT_PER_SECOND": "0.1"})
    users = [StandInUser("alice", 5001, {"s3lab"})]
    with GithubStandIn("Iv1.standin", CLIENT_SECRET, f"{caddy.base}/oauth/github/callback", users) as standin:
        gw.env.update(standin.env())
        with gw, caddy:
            yield gw, caddy, standin


def _send(session: requests.Session, caddy: Caddy, path: str) -> int:
    method, kwargs = JUNK[path]
    return getattr(session, method)(f"{caddy.base}{path}", timeout=30, **kwargs).status_code


@pytest.mark.parametrize("path", sorted(JUNK))
def test_each_client_address_has_its_own_oauth_bucket_behind_caddy(github_behind_caddy, path):
    gw, caddy, _ = github_behind_caddy
    attacker, other = session_from("127.0.0.2"), session_from("127.0.0.3")
    codes = [_send(attacker, caddy, path) for _ in range(100)]  # burst 60: the bucket runs dry before 100
    assert 429 in codes and all(c < 500 for c in codes), codes
    assert _send(attacker, caddy, path) == 429
    # the other address has its whole burst: 30 requests in a row, none refused (one shared bucket would be dry)
    others = [_send(other, caddy, path) for _ in range(30)]
    assert 429 not in others and all(c < 500 for c in others), others


def test_junk_from_one_address_leaves_another_addresss_refresh_at_200(github_behind_caddy):
    """Through Caddy, 100 junk requests from one address; a refresh from another → 200."""
    gw, caddy, standin = github_behind_caddy
    public = SimpleNamespace(base=caddy.base, url=f"{caddy.base}/mcp")
    login = Login(public, standin)  # signs in through Caddy from 127.0.0.1
    tokens = login.token(login.code(scope="mcp:read")).json()
    junk = session_from("127.0.0.2")
    codes = [_send(junk, caddy, "/token") for _ in range(100)]
    assert codes.count(429) >= 30, codes  # that address is over its limit ...
    refreshed = login.refresh(tokens["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text  # ... and the other address is not
    assert refreshed.json()["access_token"]


def test_open_mode_mcp_buckets_are_per_client_address_behind_caddy():
    gw, caddy = _behind_caddy({"S3RM_MCP_WRITE_AUTH_MODE": "open", "S3RM_RATE_LIMIT_BURST": "5",
                               "S3RM_RATE_LIMIT_PER_SECOND": "0.01"})
    with gw, caddy:
        url = f"{caddy.base}/mcp"
        flood = session_from("127.0.0.2")
        codes = [flood.post(url, json={"jsonrpc": "2.0", "id": i, "method": "ping"}, headers=MCP_HEADERS,
                            timeout=30).status_code for i in range(10)]
        assert codes[:5] == [200] * 5 and set(codes[5:]) == {429}, codes
        calm = session_from("127.0.0.3").post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                              headers=MCP_HEADERS, timeout=30)
        assert calm.status_code == 200, calm.text


def test_slow_request_bodies_through_caddy_hold_no_gateway_thread():
    """More slow bodies than threads, through Caddy: a quick request is still answered (request-reading)."""
    gw, caddy = _behind_caddy({"S3RM_MCP_WRITE_AUTH_MODE": "open", "S3RM_REQUEST_READ_SECONDS": "120"}, threads=2)
    with gw, caddy:
        slow = [slow_body(caddy.port, path) for path in ("/mcp", "/token", "/register", "/mcp", "/authorize/consent")]
        answer = rpc(f"{caddy.base}/mcp", "ping", {})
        assert answer.status_code == 200, answer.text
        assert_unanswered(slow)  # still waiting for their bodies (in the gateway's event loop)
