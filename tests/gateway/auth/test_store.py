"""The github-mode state store, signing-key rotation, tokens and redirect rules (docs/operations.md#github-state).

Every store test runs against both :class:`AuthStore` implementations: the
SQLite file and PostgreSQL (the session ``pg_cluster``, one database for this
module, emptied before each test).
"""
from __future__ import annotations

import hashlib
import secrets
import threading

import psycopg
import pytest

from gateway.auth.pgstore import PostgresAuthStore
from gateway.auth.server import redirect_matches, redirect_uri_allowed
from gateway.auth.store import Family, Quota, SigningKey, SqliteAuthStore, digest
from gateway.auth.tokens import KeyRing, TokenInvalid, mint_access_token, verify_access_token
from gateway.config import ConfigError, load_config
from gateway.ops.access import github_subject_hash


_TABLES = ("s3rm_auth_refresh", "s3rm_auth_family", "s3rm_auth_code", "s3rm_auth_client",
           "s3rm_auth_signing_key", "s3rm_auth_pending", "s3rm_auth_pin", "s3rm_auth_rate")


@pytest.fixture(scope="module")
def auth_dsn(pg_cluster):
    return pg_cluster.create_database(f"s3rm_auth_{secrets.token_hex(4)}")


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request, tmp_path):
    """``open_store()`` → a new store instance on the SAME state (like another gateway or a restart)."""
    opened = []
    if request.param == "postgres":
        dsn = request.getfixturevalue("auth_dsn")
        PostgresAuthStore(dsn).close()  # the tables exist; empty them
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"TRUNCATE {', '.join(_TABLES)}")

        def make():
            opened.append(PostgresAuthStore(dsn))
            return opened[-1]
    else:
        def make():
            return SqliteAuthStore(tmp_path / "state.sqlite3")
    yield make
    for store in opened:
        store.close()


@pytest.fixture()
def store(open_store):
    return open_store()


def test_codes_are_single_use_and_expire(store):
    store.save_code(digest("code-1"), {"family": "f1"}, expires_at=100)
    assert store.consume_code(digest("code-1"), now=50) == ("ok", {"family": "f1"})
    assert store.consume_code(digest("code-1"), now=51) == ("used", {"family": "f1"})
    store.save_code(digest("code-2"), {"family": "f2"}, expires_at=100)
    assert store.consume_code(digest("code-2"), now=100) == ("expired", None)
    assert store.consume_code(digest("nope"), now=1) == ("unknown", None)


def test_refresh_rotation_and_reuse_revokes_the_family(store):
    store.save_refresh(digest("r1"), "fam", {"scope": "mcp:read"}, expires_at=1000)
    assert store.use_refresh(digest("r1"), now=10).status == "ok"
    store.save_refresh(digest("r2"), "fam", {"scope": "mcp:read"}, expires_at=1000)
    assert store.family_active("fam")
    assert store.use_refresh(digest("r1"), now=11).status == "reused"
    assert not store.family_active("fam")
    assert store.use_refresh(digest("r2"), now=12).status == "revoked"
    assert store.use_refresh(digest("other"), now=12).status == "unknown"
    store.save_refresh(digest("r3"), "fam3", {}, expires_at=20)
    assert store.use_refresh(digest("r3"), now=20).status == "expired"


def _raw_state(store) -> bytes:
    """Everything the store holds, as bytes (the SQLite files, or every row of the PostgreSQL tables as text)."""
    if isinstance(store, SqliteAuthStore):
        return b"".join(p.read_bytes() for p in store.path.parent.iterdir() if p.name.startswith(store.path.name))
    with store.pool.connection() as conn:
        return "".join(str(conn.execute(f"SELECT coalesce(string_agg(t::text, ' '), '') FROM {name} t").fetchone()[0])
                       for name in _TABLES).encode()


def test_state_survives_a_restart_and_holds_no_raw_secret(open_store):
    first = open_store()
    first.save_client("client-a", {"client_name": "A"}, digest("client-secret-value"), now=1)
    first.save_refresh(digest("refresh-secret-value"), "fam", {"client_id": "client-a"}, expires_at=10**10)
    first.save_pending(digest("github:state-secret-value"), {"session": digest("cookie")}, expires_at=10**10)
    second = open_store()
    assert second.get_client("client-a") == ({"client_name": "A"}, digest("client-secret-value"))
    assert second.refresh_owner(digest("refresh-secret-value")) == ("fam", "client-a")
    assert second.take_pending(digest("github:state-secret-value"), now=1) is not None
    assert second.take_pending(digest("github:state-secret-value"), now=1) is None  # single use
    raw = _raw_state(second)
    assert digest("refresh-secret-value").encode() in raw  # the dump does hold the records
    for secret in (b"client-secret-value", b"refresh-secret-value", b"state-secret-value"):
        assert secret not in raw
    if isinstance(second, SqliteAuthStore):
        assert oct(second.path.stat().st_mode & 0o777) == "0o600"


def _race(calls: int, call) -> list:
    """Run ``call(i)`` in ``calls`` threads released together; their results in thread order."""
    start, out = threading.Barrier(calls), [None] * calls

    def run(i):
        start.wait()
        out[i] = call(i)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_racing_gateways_redeem_a_code_once_and_a_refresh_token_once(open_store):
    stores = [open_store(), open_store()]  # two gateways on one state
    stores[0].save_code(digest("raced-code"), {"family": "f"}, expires_at=10**10)
    codes = _race(8, lambda i: stores[i % 2].consume_code(digest("raced-code"), now=1)[0])
    assert sorted(codes) == ["ok"] + ["used"] * 7
    stores[1].save_refresh(digest("raced-refresh"), "fam-raced", {}, expires_at=10**10)
    uses = _race(8, lambda i: stores[i % 2].use_refresh(digest("raced-refresh"), now=1).status)
    assert uses.count("ok") == 1 and set(uses) <= {"ok", "reused", "revoked"} and "reused" in uses
    assert not stores[0].family_active("fam-raced")  # a concurrent second use is a reuse: family revoked


def test_keys_rotate_and_old_tokens_verify_until_they_expire(store):
    clock = [1_000_000]
    ring = KeyRing(store, rotation_seconds=1000, max_token_seconds=600, clock=lambda: clock[0])
    store.save_refresh(digest("r"), "fam", {}, expires_at=10**10)
    args = dict(issuer="https://as.example", audience="https://as.example/mcp", user_id="7", login="alice",
                scope="mcp:read", client_id="c", family="fam")
    old, _ = mint_access_token(ring, lifetime=600, **args)
    first_kid = store.signing_keys()[0].kid
    clock[0] += 1001  # rotation: a new key signs, the old one still verifies
    new, _ = mint_access_token(ring, lifetime=600, **args)
    kids = [k.kid for k in store.signing_keys()]
    assert kids[0] != first_kid and first_kid in kids
    verify = dict(issuer=args["issuer"], audience=args["audience"], family_active=store.family_active)
    assert verify_access_token(ring, new, **verify).login == "alice"
    with pytest.raises(TokenInvalid) as err:
        verify_access_token(ring, old, **verify)
    assert err.value.reason == "expired"
    clock[0] += 601  # the old key outlived every token it signed
    ring.key_set()
    assert first_kid not in [k.kid for k in store.signing_keys()]
    fresh, _ = mint_access_token(ring, lifetime=600, **args)
    with pytest.raises(TokenInvalid) as err:
        verify_access_token(ring, fresh, issuer=args["issuer"], audience="https://other.example/mcp",
                            family_active=store.family_active)
    assert err.value.reason == "audience"
    store.add_signing_key(SigningKey("zz", store.signing_keys()[0].private_jwk, clock[0]))  # interface round trip


def test_revoked_family_refuses_its_access_tokens(store):
    ring = KeyRing(store, 10**6, 600, lambda: 5_000)
    store.save_refresh(digest("r"), "fam", {}, expires_at=10**10)
    token, _ = mint_access_token(ring, issuer="i", audience="a", user_id="1", login="bob", scope="mcp:read",
                                 client_id="c", family="fam", lifetime=600)
    store.revoke_family("fam", now=5_000)
    with pytest.raises(TokenInvalid) as err:
        verify_access_token(ring, token, issuer="i", audience="a", family_active=store.family_active)
    assert err.value.reason == "revoked"


@pytest.mark.parametrize("registered,requested,ok", [
    ("http://127.0.0.1:3000/cb", "http://127.0.0.1:49152/cb", True),
    ("http://localhost/callback", "http://localhost:8765/callback", True),
    ("http://[::1]:1/cb", "http://[::1]:2/cb", True),
    ("http://127.0.0.1:3000/cb", "http://127.0.0.1:3000/cb/other", False),
    ("http://127.0.0.1:3000/cb", "http://localhost:3000/cb", False),
    ("https://app.example/cb", "https://app.example:8443/cb", False),
    ("https://app.example/cb", "https://app.example/cb", True),
    ("cursor://anysphere.cursor-mcp/oauth/callback", "cursor://anysphere.cursor-mcp/oauth/callback", True),
])
def test_redirect_matching(registered, requested, ok):
    assert redirect_matches(registered, requested) is ok


@pytest.mark.parametrize("uri,ok", [
    ("https://claude.ai/api/mcp/auth_callback", True), ("http://localhost:6274/oauth/callback", True),
    ("cursor://anysphere.cursor-mcp/oauth/callback", True), ("http://wiki.example/cb", False),
    ("javascript:alert(1)", False), ("data:text/html,x", False), ("https://a.example/cb#f", False),
])
def test_registrable_redirect_uris(uri, ok):
    assert redirect_uri_allowed(uri) is ok


def test_github_mode_settings():
    base = {"S3RM_MCP_WRITE_AUTH_MODE": "github", "S3RM_MCP_PUBLIC_URL": "https://wiki.example/mcp",
            "S3RM_GITHUB_CLIENT_ID": "Iv1.x", "S3RM_GITHUB_CLIENT_SECRET": "s3cret-value",
            "S3RM_GITHUB_WRITE_TEAMS": "Lab/Writers", "S3RM_GITHUB_READ_USERS": "alice,bob"}
    config = load_config(base)
    assert config.github.issuer == "https://wiki.example" and config.github.resource == "https://wiki.example/mcp"
    assert config.github.write_teams == {"lab/writers"} and config.github.needs_org_scope
    assert "s3cret-value" not in repr(config.github)
    for key, value in (("S3RM_GITHUB_CLIENT_SECRET", ""), ("S3RM_GITHUB_READ_USERS", "bad login!"),
                       ("S3RM_OAUTH_ISSUER", "https://wiki.example/path")):
        with pytest.raises(ConfigError) as err:
            load_config({**base, key: value})
        assert key in str(err.value) and "s3cret-value" not in str(err.value)
    with pytest.raises(ConfigError):
        load_config({k: v for k, v in base.items() if "USERS" not in k and "TEAMS" not in k})
    assert load_config({}).github is None
    assert config.github.state_store == "sqlite"
    dsn = "postgresql://s3rm@db.internal/s3rm"
    shared = load_config({**base, "S3RM_INDEX_BACKEND": "pgvector", "S3RM_PG_DSN": dsn})
    assert shared.github.state_store == "postgres" and shared.retrieval.pg_dsn == dsn  # pgvector → shared state
    assert load_config({**base, "S3RM_INDEX_BACKEND": "pgvector", "S3RM_PG_DSN": dsn,
                        "S3RM_AUTH_STORE": "sqlite"}).github.state_store == "sqlite"
    assert load_config({**base, "S3RM_AUTH_STORE": "postgres", "S3RM_PG_DSN": dsn}).github.state_store == "postgres"
    for extra, name in (({"S3RM_AUTH_STORE": "postgres"}, "S3RM_PG_DSN"), ({"S3RM_AUTH_STORE": "redis"},
                                                                            "S3RM_AUTH_STORE")):
        with pytest.raises(ConfigError) as err:
            load_config({**base, **extra})
        assert name in str(err.value)


def test_user_allowlists_split_ids_from_logins_and_the_abuse_settings_are_checked():
    base = {"S3RM_MCP_WRITE_AUTH_MODE": "github", "S3RM_MCP_PUBLIC_URL": "https://wiki.example/mcp",
            "S3RM_GITHUB_CLIENT_ID": "Iv1.x", "S3RM_GITHUB_CLIENT_SECRET": "s3cret-value",
            "S3RM_GITHUB_READ_USERS": "5001,Alice", "S3RM_GITHUB_WRITE_USERS": "5002"}
    github = load_config(base).github
    assert github.read_user_ids == {"5001"} and github.read_users == {"alice"} and github.write_user_ids == {"5002"}
    assert github.pending_logins == {"alice"} and github.rate_limit_per_second == 5.0
    allowed = load_config({**base, "S3RM_OAUTH_CIMD_ALLOW_NETWORKS": "10.1.0.0/16, 127.0.0.1"}).github
    assert allowed.cimd_allow_networks == ("10.1.0.0/16", "127.0.0.1/32")
    for key, value in (("S3RM_OAUTH_CIMD_ALLOW_NETWORKS", "not-a-network"), ("S3RM_OAUTH_CIMD_TIMEOUT_SECONDS", "0"),
                       ("S3RM_OAUTH_FAMILY_MAX_SECONDS", "10"), ("S3RM_OAUTH_MAX_PENDING", "x")):
        with pytest.raises(ConfigError) as err:
            load_config({**base, key: value})
        assert key in str(err.value)


def test_github_subject_hash():
    assert github_subject_hash("12345") == hashlib.sha256(b"github:12345").hexdigest()[:16]


# ---------------------------------------------------------------- bounded state, cut-off
def test_the_client_cap_evicts_only_old_unused_clients(store):
    assert store.add_client("a", {}, None, 10, cap=2, evict_before=0)
    assert store.add_client("b", {}, None, 20, cap=2, evict_before=0)
    store.touch_client("a", 30)
    assert not store.add_client("c", {}, None, 40, cap=2, evict_before=15)  # b is too young to evict
    assert store.add_client("c", {}, None, 40, cap=2, evict_before=25)  # b never got a token: evicted
    assert store.get_client("b") is None and store.get_client("a") and store.count_clients() == 2


def test_pending_logins_are_capped(store):
    assert all(store.save_pending(digest(f"p{i}"), {}, expires_at=100, cap=3, now=0) for i in range(3))
    assert not store.save_pending(digest("p3"), {}, expires_at=100, cap=3, now=50)
    assert store.save_pending(digest("p3"), {}, expires_at=200, cap=3, now=100)  # the expired ones made room


def test_purge_removes_expired_state_and_unused_clients(store):
    now = 10**6
    store.add_client("unused", {}, None, now - 5000, cap=10, evict_before=0)
    store.add_client("used", {}, None, now - 5000, cap=10, evict_before=0)
    store.touch_client("used", now - 100)
    store.save_pending(digest("old"), {}, expires_at=now - 1)
    store.save_pending(digest("live"), {}, expires_at=now + 600)
    owner = Family("dead", "5001", "alice", now - 10, now - 10, "", ("mcp:read",), None)
    store.save_refresh(digest("r-dead"), "dead", {}, expires_at=now + 600, owner=owner)
    store.revoke_family("dead", now - 7200)
    store.save_refresh(digest("r-old"), "expired", {}, expires_at=now - 1)
    store.take_rate("ip:old", now - 90000, 1.0, 5)
    removed = store.purge(now, unused_client_before=now - 1000, idle_client_before=now - 1000)
    assert removed["clients"] == 1 and removed["pending"] == 1 and removed["refresh"] == 2
    assert removed["families"] == 2 and removed["rate"] == 1
    assert store.get_client("used") is not None and store.get_pending(digest("live"), now) is not None
    size = store.size()
    assert size["clients"] == 1 and size["pending"] == 1 and size["refresh"] == 0 and size["families"] == 0


def test_revoke_user_by_login_or_id_and_family_owner(store):
    for family, user, login in (("f1", "5001", "alice"), ("f2", "5001", "alice"), ("f3", "5002", "bob")):
        store.save_refresh(digest(family), family, {}, expires_at=10**10,
                           owner=Family(family, user, login, 5, 5, "sealed", ("mcp:read",), None))
    assert store.family("f1").user_id == "5001" and store.family("f1").credential == "sealed"
    assert store.revoke_user("ALICE", 100) == 2 and store.revoke_user("5002", 100) == 1
    assert not any(store.family_active(f) for f in ("f1", "f2", "f3"))
    store.mark_checked("f3", 200, ["mcp:read"])
    assert store.family("f3").checked_at == 200


def test_rate_buckets_are_shared_through_the_store(open_store):
    first, second = open_store(), open_store()  # two gateways on the same state
    assert [first.take_rate("ip:a", 100.0, 1.0, 2), second.take_rate("ip:a", 100.0, 1.0, 2)] == [0, 0]
    assert first.take_rate("ip:a", 100.0, 1.0, 2) == 1 and second.take_rate("ip:a", 101.0, 1.0, 2) == 0


def test_a_look_at_a_refresh_token_does_not_consume_it(store):
    store.save_refresh(digest("r"), "fam", {}, expires_at=10**10)
    assert store.use_refresh(digest("r"), 1, consume=False).status == "ok"
    assert store.use_refresh(digest("r"), 1).status == "ok"
    assert store.use_refresh(digest("r"), 1, consume=False).status == "reused"


def test_rate_buckets_are_bounded_least_recently_used_first(store):
    for i, key in enumerate(("ip:a", "ip:b", "ip:c")):
        assert store.take_rate(key, 100.0 + i, 0.001, 2, max_buckets=3) == 0
    assert store.take_rate("ip:a", 110.0, 0.001, 2, max_buckets=3) == 0  # a: most recently used, ~0 tokens left
    assert store.take_rate("ip:d", 111.0, 0.001, 2, max_buckets=3) == 0  # evicts b, the least recently used
    assert store.size()["rate"] == 3
    assert store.take_rate("ip:a", 111.0, 0.001, 2, max_buckets=3) > 0  # a kept its empty bucket (no fresh burst)


# ------------------------------------------------------- per-address quotas (docs/operations.md#github-quotas)
def test_quota_keys_are_the_address_and_its_network():
    assert Quota.of("198.51.100.7", 3, 9) == Quota("198.51.100.7", "198.51.100.0/24", 3, 9)
    assert Quota.of("::ffff:198.51.100.7").address == "198.51.100.7"
    v6 = Quota.of("2001:db8:1:2:aaaa::1")
    assert (v6.address, v6.prefix) == ("2001:db8:1:2::/64", "2001:db8:1::/48")
    assert Quota.of("unix-peer") == Quota("unix-peer", "")


def test_pending_logins_per_address_evict_that_address_oldest_first(store):
    a, b = Quota.of("192.0.2.1", 3, 5), Quota.of("192.0.2.2", 3, 5)
    for i in range(5):  # a at its quota: each new login pushes out a's OLDEST, never anyone else's
        assert store.save_pending(digest(f"a{i}"), {}, expires_at=1000 + i, cap=100, now=0, quota=a)
    assert [store.get_pending(digest(f"a{i}"), 0) is not None for i in range(5)] == [False, False, True, True, True]
    for i in range(3):  # b shares a's /24 (quota 5): the network's oldest, a2, makes room
        assert store.save_pending(digest(f"b{i}"), {}, expires_at=2000 + i, cap=100, now=0, quota=b)
    assert store.size()["pending"] == 5 and store.get_pending(digest("a2"), 0) is None
    assert all(store.get_pending(digest(f"b{i}"), 0) is not None for i in range(3))


def test_a_full_pending_cap_refuses_anonymous_logins_but_not_a_used_client(store):
    for i in range(4):
        assert store.save_pending(digest(f"x{i}"), {}, 1000 + i, cap=4, now=0, quota=Quota.of(f"203.0.113.{i}"))
    assert not store.save_pending(digest("new"), {}, 2000, cap=4, now=0, quota=Quota.of("198.51.100.1"))
    assert store.save_pending(digest("known"), {}, 2000, cap=4, now=0, quota=Quota.of("198.51.100.1"), priority=True)
    assert store.get_pending(digest("x0"), 0) is None and store.size()["pending"] == 4  # the oldest made room


def test_never_used_clients_per_address_evict_that_address_oldest_first(store):
    a = Quota.of("192.0.2.1", 2, 10)
    for i in range(3):
        assert store.add_client(f"c{i}", {}, None, 100 + i, cap=100, evict_before=0, quota=a)
    store.touch_client("c1", 200)  # a client that got a token is never pushed out
    assert store.add_client("c3", {}, None, 300, cap=100, evict_before=0, quota=a)  # c1 no longer counts
    assert store.add_client("c4", {}, None, 400, cap=100, evict_before=0, quota=a)  # c2: a's oldest unused
    assert [store.get_client(f"c{i}") is not None for i in range(5)] == [False, True, False, True, True]
    assert store.client_used("c1") and not store.client_used("c3") and not store.client_used("nope")


def test_within_one_second_the_first_written_is_the_oldest(store):
    """Rows written in the same second are evicted in the order they were written, whatever their keys: ids and
    key hashes are random, so ordering by them would push out an arbitrary one of a burst."""
    a = Quota.of("192.0.2.1", 3, 10)
    ids = [f"{c}-client" for c in "zyxwvu"]  # written z first: alphabetical order is the reverse
    for client_id in ids:
        assert store.add_client(client_id, {}, None, 100, cap=100, evict_before=0, quota=a)
    assert [store.get_client(i) is not None for i in ids] == [False] * 3 + [True] * 3
    keys = [digest(f"login-{i}") for i in range(6)]
    order = sorted(range(6), key=lambda i: keys[i], reverse=True)  # written in descending key order
    for i in order:
        assert store.save_pending(keys[i], {}, expires_at=1000, cap=100, now=0, quota=a)
    assert [store.get_pending(keys[i], 0) is not None for i in order] == [False] * 3 + [True] * 3
    for i in range(4):  # the fourth fills the global cap: its last resort takes the first written too
        assert store.save_pending(digest(f"cap-{i}"), {}, 1000, cap=6, now=0, quota=Quota.of(f"203.0.113.{i}"),
                                  priority=True)
    assert [store.get_pending(keys[i], 0) is not None for i in order[3:]] == [False, True, True]


def test_a_purge_gives_the_space_back(open_store, tmp_path):
    store = open_store()
    for i in range(300):  # random text: PostgreSQL would compress a repeated one to nothing
        big = {"redirect_uris": [f"https://a.example/{secrets.token_hex(950)}" for _ in range(10)]}
        store.add_client(f"c{i}", big, None, 100, cap=1000, evict_before=0)
    if isinstance(store, SqliteAuthStore):
        full = store.file_bytes()
        assert store.purge(10**6, unused_client_before=10**5)["clients"] == 300
        assert store.file_bytes() < full / 4, (full, store.file_bytes())
    else:  # plain VACUUM: the dead rows' space is reusable and the emptied pages are cut off the table's end
        size = "SELECT pg_total_relation_size('s3rm_auth_client')"
        full = store._one(size)[0]
        assert store.purge(10**6, unused_client_before=10**5)["clients"] == 300
        assert store._one(size)[0] < full / 4, (full, store._one(size)[0])
