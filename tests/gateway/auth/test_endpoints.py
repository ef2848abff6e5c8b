"""Bad input to github mode's OAuth endpoints gets a specific OAuth error, never a 500 (docs/transport.md#github-mode).

In-process (Flask test client, no wiki): the answers come before any tool runs.
"""
from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from gateway.app import create_app
from gateway.auth.service import AuthService, open_auth_store
from gateway.auth.store import SqliteAuthStore
from gateway.config import load_config
from gateway.core.errors import StoreUnavailable


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    db = tmp_path_factory.mktemp("oauth-endpoints") / "state.sqlite3"
    config = load_config({"S3RM_MCP_WRITE_AUTH_MODE": "github", "S3RM_GITHUB_CLIENT_ID": "Iv1.x",
                          "S3RM_GITHUB_CLIENT_SECRET": "secret-value", "S3RM_GITHUB_READ_USERS": "alice",
                          "S3RM_OAUTH_STATE_DB": str(db)})
    return create_app(config).test_client()


HOST = {"Host": "127.0.0.1:8080"}


@pytest.mark.parametrize("kwargs,error", [
    ({"data": "not json", "content_type": "text/plain"}, "invalid_client_metadata"),
    ({"data": "[1, 2]", "content_type": "application/json"}, "invalid_client_metadata"),
    ({"data": "{", "content_type": "application/json"}, "invalid_client_metadata"),
    ({"json": {"redirect_uris": "https://a.example/cb"}}, "invalid_redirect_uri"),
    ({"json": {"redirect_uris": ["https://a.example/cb"], "grant_types": ["password"]}}, "invalid_client_metadata"),
    ({"json": {"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "private_key_jwt"}},
     "invalid_client_metadata"),
])
def test_bad_registrations(client, kwargs, error):
    answer = client.post("/register", headers=HOST, **kwargs)
    assert answer.status_code == 400 and answer.get_json()["error"] == error


def test_registration_of_a_public_client_has_no_secret(client):
    answer = client.post("/register", headers=HOST, json={"redirect_uris": ["http://127.0.0.1:5000/cb"],
                                                          "client_name": "<script>x</script>"})
    body = answer.get_json()
    assert answer.status_code == 201 and body["token_endpoint_auth_method"] == "none" and "client_secret" not in body


@pytest.mark.parametrize("method,path,data,status,error", [
    ("post", "/token", None, 400, "unsupported_grant_type"),
    ("post", "/token", {"grant_type": "authorization_code"}, 401, "invalid_client"),
    ("post", "/token", {"grant_type": "password", "client_id": "x"}, 400, "unsupported_grant_type"),
    ("post", "/revoke", None, 401, "invalid_client"),
    ("get", "/authorize", None, 400, "unsupported_response_type"),
    ("get", "/authorize?response_type=code&client_id=unknown", None, 400, "invalid_client"),
    ("post", "/authorize/consent", {"request_id": "x", "csrf_token": "y"}, 403, "invalid_request"),
    ("get", "/.well-known/oauth-protected-resource/other", None, 404, "invalid_request"),
])
def test_bad_protocol_requests(client, method, path, data, status, error):
    answer = getattr(client, method)(path, headers=HOST, data=data)
    if path.startswith("/authorize?") or path == "/authorize":  # before sign-in: a page, never a redirect
        assert answer.status_code == status and "Location" not in answer.headers
        assert f"{error}:" in answer.get_data(as_text=True) and answer.mimetype == "text/html"
        return
    assert answer.status_code == status and answer.get_json()["error"] == error


def test_callbacks_without_a_login_show_the_korean_error_page(client):
    answer = client.get("/oauth/github/callback?state=forged&code=1", headers=HOST)
    assert answer.status_code == 400 and "로그인을 계속할 수 없습니다" in answer.get_data(as_text=True)
    assert "frame-ancestors 'none'" in answer.headers["Content-Security-Policy"]


def test_registration_cap(tmp_path):
    config = load_config({"S3RM_MCP_WRITE_AUTH_MODE": "github", "S3RM_GITHUB_CLIENT_ID": "Iv1.x",
                          "S3RM_GITHUB_CLIENT_SECRET": "secret-value", "S3RM_GITHUB_READ_USERS": "alice",
                          "S3RM_OAUTH_STATE_DB": str(tmp_path / "s.sqlite3"), "S3RM_OAUTH_MAX_CLIENTS": "2"})
    client = create_app(config).test_client()
    body = {"redirect_uris": ["http://127.0.0.1:5000/cb"]}
    assert [client.post("/register", headers=HOST, json=body).status_code for _ in range(3)] == [201, 201, 400]
    assert "S3RM_OAUTH_MAX_CLIENTS" in client.post("/register", headers=HOST, json=body).get_json()["error_description"]


def _lose(store) -> None:
    """Make ``store``'s database unreachable: PostgreSQL's pool closed, SQLite's file no database any more."""
    if isinstance(store, SqliteAuthStore):
        store._local.__dict__.clear()
        for suffix in ("-wal", "-shm"):
            Path(f"{store.path}{suffix}").unlink(missing_ok=True)
        store.path.write_bytes(b"not a database " * 512)
    else:
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_lost_state_store_is_503_with_retry_after_never_a_500(kind, tmp_path, request):
    # docs/transport.md#github-store-outage
    env = {"S3RM_MCP_WRITE_AUTH_MODE": "github", "S3RM_GITHUB_CLIENT_ID": "Iv1.x",
           "S3RM_GITHUB_CLIENT_SECRET": "secret-value", "S3RM_GITHUB_READ_USERS": "alice",
           "S3RM_OAUTH_STATE_DB": str(tmp_path / "s.sqlite3")}
    if kind == "postgres":
        cluster = request.getfixturevalue("pg_cluster")
        env |= {"S3RM_AUTH_STORE": "postgres",
                "S3RM_PG_DSN": cluster.create_database(f"s3rm_outage_{secrets.token_hex(4)}")}
    config = load_config(env)
    store = open_auth_store(config)
    client = create_app(config, oauth=AuthService(config, store=store)).test_client()
    body = {"redirect_uris": ["http://127.0.0.1:5000/cb"]}
    assert client.post("/register", headers=HOST, json=body).status_code == 201

    _lose(store)
    with pytest.raises(StoreUnavailable):
        store.get_client("anything")
    answer = client.post("/register", headers=HOST, json=body)
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "5"
    assert answer.get_json()["error"] == "temporarily_unavailable"
    assert "s.sqlite3" not in answer.get_data(as_text=True) and "postgresql://" not in answer.get_data(as_text=True)
