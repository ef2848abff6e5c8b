"""The github-mode :class:`~gateway.auth.store.AuthStore` in PostgreSQL, shared by every gateway on one database.

Chosen by ``S3RM_AUTH_STORE=postgres`` (the default when
``S3RM_INDEX_BACKEND=pgvector``) on the ``S3RM_PG_DSN`` database
(docs/operations.md#github-state). With it, N gateways behind one load
balancer serve one authorization server: a code issued through one gateway
is redeemed through another, a token minted by one verifies on all (the
signing keys are rows here), a refresh rotates wherever it arrives, and a
replayed refresh token revokes its family for all of them.

Same guarantees as :class:`~gateway.auth.store.SqliteAuthStore`: only
SHA-256 hex of codes, refresh tokens, login states and client secrets is
stored; each method is one transaction. Redeeming a code and presenting a
refresh token lock their row (``SELECT … FOR UPDATE``), so when two
gateways race on the same secret exactly one sees it unused — the other
sees ``used`` (a code replay) or ``reused`` (a refresh-token reuse, which
revokes the family). The signing keys are private JWKs: protect the
database like the SQLite file (its role should be reachable from the
backend network only).

Tables (created idempotently under one advisory lock, so gateways may start
at once): ``s3rm_auth_client``, ``s3rm_auth_code``, ``s3rm_auth_family``,
``s3rm_auth_refresh``, ``s3rm_auth_signing_key``, ``s3rm_auth_pending``,
``s3rm_auth_pin``, ``s3rm_auth_rate`` (the OAuth rate buckets, so every
gateway on the database shares one limit per address and client).
A lost database (``psycopg.OperationalError``, pool timeouts) surfaces as
:class:`~gateway.core.errors.StoreUnavailable`, which the gateway answers with
HTTP 503 and ``Retry-After``, never as an authorization decision.
"""
from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from gateway.auth.store import (Family, Quota, RefreshOutcome, SigningKey, evict_over_quota, judge_refresh,
                                rate_take, store_errors_as_unavailable)

__all__ = ["PostgresAuthStore"]

_SCHEMA_LOCK = 0x53334D41  # "S3MA": serialises this module's DDL between gateways

_DDL = """
CREATE TABLE IF NOT EXISTS s3rm_auth_client (client_id text PRIMARY KEY, metadata jsonb NOT NULL,
    secret_hash text, created_at bigint NOT NULL);
CREATE TABLE IF NOT EXISTS s3rm_auth_code (code_hash text PRIMARY KEY, data jsonb NOT NULL,
    expires_at bigint NOT NULL, used boolean NOT NULL DEFAULT false);
CREATE TABLE IF NOT EXISTS s3rm_auth_family (family text PRIMARY KEY, revoked_at bigint);
CREATE TABLE IF NOT EXISTS s3rm_auth_refresh (token_hash text PRIMARY KEY,
    family text NOT NULL REFERENCES s3rm_auth_family(family), data jsonb NOT NULL,
    expires_at bigint NOT NULL, used boolean NOT NULL DEFAULT false);
CREATE TABLE IF NOT EXISTS s3rm_auth_signing_key (kid text PRIMARY KEY, private_jwk text NOT NULL,
    created_at bigint NOT NULL);
CREATE TABLE IF NOT EXISTS s3rm_auth_pending (key_hash text PRIMARY KEY, data jsonb NOT NULL,
    expires_at bigint NOT NULL);
CREATE TABLE IF NOT EXISTS s3rm_auth_pin (login text PRIMARY KEY, user_id text NOT NULL, pinned_at bigint NOT NULL);
CREATE TABLE IF NOT EXISTS s3rm_auth_rate (key text PRIMARY KEY, tokens double precision NOT NULL,
    last double precision NOT NULL);
ALTER TABLE s3rm_auth_client ADD COLUMN IF NOT EXISTS last_used_at bigint;
ALTER TABLE s3rm_auth_family ADD COLUMN IF NOT EXISTS user_id text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS login text NOT NULL DEFAULT '', ADD COLUMN IF NOT EXISTS created_at bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS checked_at bigint NOT NULL DEFAULT 0, ADD COLUMN IF NOT EXISTS credential text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS allowed jsonb NOT NULL DEFAULT '[]';
CREATE INDEX IF NOT EXISTS s3rm_auth_refresh_family ON s3rm_auth_refresh (family);
CREATE INDEX IF NOT EXISTS s3rm_auth_family_user ON s3rm_auth_family (user_id);
CREATE INDEX IF NOT EXISTS s3rm_auth_rate_last ON s3rm_auth_rate (last);
ALTER TABLE s3rm_auth_client ADD COLUMN IF NOT EXISTS owner text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS prefix text NOT NULL DEFAULT '';
ALTER TABLE s3rm_auth_pending ADD COLUMN IF NOT EXISTS owner text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS prefix text NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS s3rm_auth_pending_owner ON s3rm_auth_pending (owner, expires_at);
CREATE INDEX IF NOT EXISTS s3rm_auth_pending_prefix ON s3rm_auth_pending (prefix, expires_at);
CREATE INDEX IF NOT EXISTS s3rm_auth_pending_expires ON s3rm_auth_pending (expires_at);
CREATE INDEX IF NOT EXISTS s3rm_auth_client_owner ON s3rm_auth_client (owner, created_at) WHERE last_used_at IS NULL;
CREATE INDEX IF NOT EXISTS s3rm_auth_client_prefix ON s3rm_auth_client (prefix, created_at) WHERE last_used_at IS NULL;
"""

#: The tables a purge deletes from (VACUUMed afterwards so their space is reusable, and trailing pages returned).
_PURGED = ("s3rm_auth_code", "s3rm_auth_refresh", "s3rm_auth_family", "s3rm_auth_pending", "s3rm_auth_rate",
           "s3rm_auth_client")

#: Serialises the count-then-insert of the client and pending caps between gateways.
_CAP_LOCK = 0x53334D43


@store_errors_as_unavailable(psycopg.OperationalError)
class PostgresAuthStore:
    """:class:`~gateway.auth.store.AuthStore` in PostgreSQL through one psycopg connection pool.

    Args:
        dsn: libpq URL (``S3RM_PG_DSN``).
        min_size/max_size: pool bounds (connections per process).
        timeout: seconds to connect and to wait for a pooled connection.

    Opens the pool and creates the tables before returning; raises
    ``psycopg.Error`` / ``psycopg_pool.PoolTimeout`` when the database cannot be reached.
    Afterwards a lost database (``psycopg.OperationalError``, pool timeouts)
    surfaces as :class:`~gateway.core.errors.StoreUnavailable`.
    """

    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 4, timeout: float = 5.0):
        from psycopg_pool import ConnectionPool

        self.pool = ConnectionPool(dsn, min_size=min_size, max_size=max_size, timeout=timeout, open=False,
                                   kwargs={"autocommit": True, "connect_timeout": max(1, int(timeout))},
                                   name="s3rm-auth")
        self.pool.open(wait=True, timeout=timeout)
        try:
            with self.pool.connection() as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                conn.execute(_DDL)
        except Exception:
            self.pool.close()
            raise

    def close(self) -> None:
        """Close every pooled connection."""
        self.pool.close()

    def _one(self, sql: str, params: tuple = ()) -> tuple | None:
        with self.pool.connection() as conn:
            return conn.execute(sql, params).fetchone()

    def _run(self, sql: str, params: tuple = ()) -> None:
        with self.pool.connection() as conn:
            conn.execute(sql, params)

    # ------------------------------------------------------------ clients
    def save_client(self, client_id: str, metadata: dict[str, Any], secret_hash: str | None, now: int) -> None:
        """See :meth:`AuthStore.save_client`."""
        self._run("INSERT INTO s3rm_auth_client (client_id, metadata, secret_hash, created_at) "
                  "VALUES (%s, %s, %s, %s) ON CONFLICT (client_id) DO UPDATE SET "
                  "metadata = EXCLUDED.metadata, secret_hash = EXCLUDED.secret_hash, created_at = EXCLUDED.created_at",
                  (client_id, Jsonb(metadata), secret_hash, now))

    def get_client(self, client_id: str) -> tuple[dict[str, Any], str | None] | None:
        """See :meth:`AuthStore.get_client`."""
        row = self._one("SELECT metadata, secret_hash FROM s3rm_auth_client WHERE client_id = %s", (client_id,))
        return (row[0], row[1]) if row else None

    def count_clients(self) -> int:
        """See :meth:`AuthStore.count_clients`."""
        return int(self._one("SELECT count(*) FROM s3rm_auth_client")[0])

    def add_client(self, client_id: str, metadata: dict[str, Any], secret_hash: str | None, now: int, *,
                   cap: int, evict_before: int, quota: Quota | None = None) -> bool:
        """See :meth:`AuthStore.add_client`; an advisory lock makes count and insert one step for all gateways."""
        quota = quota or Quota()
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CAP_LOCK,))
            evict_over_quota(conn.execute, quota, "s3rm_auth_client", "client_id", "created_at, client_id",
                             " AND last_used_at IS NULL", mark="%s")
            if int(conn.execute("SELECT count(*) FROM s3rm_auth_client").fetchone()[0]) >= cap:
                victim = conn.execute("DELETE FROM s3rm_auth_client WHERE client_id = (SELECT client_id FROM "
                                      "s3rm_auth_client WHERE last_used_at IS NULL AND created_at < %s ORDER BY "
                                      "created_at, client_id LIMIT 1) RETURNING client_id", (evict_before,)).fetchone()
                if victim is None:
                    return False
            conn.execute("INSERT INTO s3rm_auth_client (client_id, metadata, secret_hash, created_at, owner, prefix) "
                         "VALUES (%s, %s, %s, %s, %s, %s)",
                         (client_id, Jsonb(metadata), secret_hash, now, quota.address, quota.prefix))
            return True

    def touch_client(self, client_id: str, now: int) -> None:
        """See :meth:`AuthStore.touch_client`."""
        self._run("UPDATE s3rm_auth_client SET last_used_at = %s WHERE client_id = %s", (now, client_id))

    def client_used(self, client_id: str) -> bool:
        """See :meth:`AuthStore.client_used`."""
        return self._one("SELECT 1 FROM s3rm_auth_client WHERE client_id = %s AND last_used_at IS NOT NULL",
                         (client_id,)) is not None

    # -------------------------------------------------------------- codes
    def save_code(self, code_hash: str, data: dict[str, Any], expires_at: int) -> None:
        """See :meth:`AuthStore.save_code`."""
        self._run("INSERT INTO s3rm_auth_code (code_hash, data, expires_at) VALUES (%s, %s, %s)",
                  (code_hash, Jsonb(data), expires_at))

    def consume_code(self, code_hash: str, now: int) -> tuple[str, dict[str, Any] | None]:
        """See :meth:`AuthStore.consume_code`; the row lock makes one of two racing redemptions ``ok``."""
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute("SELECT data, expires_at, used FROM s3rm_auth_code WHERE code_hash = %s FOR UPDATE",
                               (code_hash,)).fetchone()
            if row is None:
                return "unknown", None
            if row[2]:
                return "used", row[0]
            if row[1] <= now:
                return "expired", None
            conn.execute("UPDATE s3rm_auth_code SET used = true WHERE code_hash = %s", (code_hash,))
            return "ok", row[0]

    # ------------------------------------------------------ refresh tokens
    def save_refresh(self, token_hash: str, family: str, data: dict[str, Any], expires_at: int, *,
                     owner: Family | None = None) -> None:
        """See :meth:`AuthStore.save_refresh`."""
        with self.pool.connection() as conn, conn.transaction():
            if owner is not None:
                conn.execute("INSERT INTO s3rm_auth_family (family, user_id, login, created_at, checked_at, credential, "
                             "allowed) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                             (family, owner.user_id, owner.login, owner.created_at, owner.checked_at,
                              owner.credential, Jsonb(list(owner.allowed))))
            conn.execute("INSERT INTO s3rm_auth_family (family) VALUES (%s) ON CONFLICT DO NOTHING", (family,))
            conn.execute("INSERT INTO s3rm_auth_refresh (token_hash, family, data, expires_at) "
                         "VALUES (%s, %s, %s, %s)", (token_hash, family, Jsonb(data), expires_at))

    def use_refresh(self, token_hash: str, now: int, *, consume: bool = True) -> RefreshOutcome:
        """See :meth:`AuthStore.use_refresh`; token and family rows are locked for the decision."""
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "SELECT r.family, r.data, r.expires_at, r.used, f.revoked_at FROM s3rm_auth_refresh r "
                "JOIN s3rm_auth_family f ON f.family = r.family WHERE r.token_hash = %s FOR UPDATE OF r, f",
                (token_hash,)).fetchone()
            outcome, write = judge_refresh(row, now)
            if write == "revoke":
                conn.execute("UPDATE s3rm_auth_family SET revoked_at = %s WHERE family = %s", (now, outcome.family))
            elif write == "use" and consume:
                conn.execute("UPDATE s3rm_auth_refresh SET used = true WHERE token_hash = %s", (token_hash,))
            return outcome

    def refresh_owner(self, token_hash: str) -> tuple[str, str] | None:
        """See :meth:`AuthStore.refresh_owner`."""
        row = self._one("SELECT family, data FROM s3rm_auth_refresh WHERE token_hash = %s", (token_hash,))
        return (row[0], row[1].get("client_id", "")) if row else None

    def revoke_family(self, family: str, now: int) -> None:
        """See :meth:`AuthStore.revoke_family`."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("INSERT INTO s3rm_auth_family (family) VALUES (%s) ON CONFLICT DO NOTHING", (family,))
            conn.execute("UPDATE s3rm_auth_family SET revoked_at = %s WHERE family = %s AND revoked_at IS NULL",
                         (now, family))

    def family_active(self, family: str) -> bool:
        """See :meth:`AuthStore.family_active`."""
        row = self._one("SELECT revoked_at FROM s3rm_auth_family WHERE family = %s", (family,))
        return row is not None and row[0] is None

    def family(self, family: str) -> Family | None:
        """See :meth:`AuthStore.family`."""
        row = self._one("SELECT family, user_id, login, created_at, checked_at, credential, allowed, revoked_at "
                        "FROM s3rm_auth_family WHERE family = %s", (family,))
        return Family(*row[:6], tuple(row[6]), row[7]) if row else None

    def mark_checked(self, family: str, now: int, allowed: list[str]) -> None:
        """See :meth:`AuthStore.mark_checked`."""
        self._run("UPDATE s3rm_auth_family SET checked_at = %s, allowed = %s WHERE family = %s",
                  (now, Jsonb(sorted(allowed)), family))

    def revoke_user(self, user: str, now: int) -> int:
        """See :meth:`AuthStore.revoke_user`."""
        with self.pool.connection() as conn:
            return conn.execute("UPDATE s3rm_auth_family SET revoked_at = %s WHERE revoked_at IS NULL AND "
                                "(user_id = %s OR (login <> '' AND lower(login) = lower(%s)))",
                                (now, user, user)).rowcount

    # -------------------------------------------------------- signing keys
    def signing_keys(self) -> list[SigningKey]:
        """See :meth:`AuthStore.signing_keys`."""
        with self.pool.connection() as conn:
            rows = conn.execute("SELECT kid, private_jwk, created_at FROM s3rm_auth_signing_key "
                                "ORDER BY created_at DESC, kid DESC").fetchall()
        return [SigningKey(*row) for row in rows]

    def add_signing_key(self, key: SigningKey) -> None:
        """See :meth:`AuthStore.add_signing_key`."""
        self._run("INSERT INTO s3rm_auth_signing_key VALUES (%s, %s, %s)", (key.kid, key.private_jwk, key.created_at))

    def delete_signing_key(self, kid: str) -> None:
        """See :meth:`AuthStore.delete_signing_key`."""
        self._run("DELETE FROM s3rm_auth_signing_key WHERE kid = %s", (kid,))

    # ------------------------------------------------------ pending logins
    def save_pending(self, key_hash: str, data: dict[str, Any], expires_at: int, *, cap: int = 0,
                     now: int = 0, quota: Quota | None = None, priority: bool = False) -> bool:
        """See :meth:`AuthStore.save_pending`; one advisory lock serialises quotas and cap for all gateways."""
        quota = quota or Quota()
        with self.pool.connection() as conn, conn.transaction():
            if cap or quota.limits():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CAP_LOCK + 1,))
            for column, key, _ in quota.limits():
                conn.execute(f"DELETE FROM s3rm_auth_pending WHERE {column} = %s AND expires_at <= %s", (key, now))
            evict_over_quota(conn.execute, quota, "s3rm_auth_pending", "key_hash", "expires_at, key_hash", mark="%s")
            if cap and int(conn.execute("SELECT count(*) FROM s3rm_auth_pending").fetchone()[0]) >= cap:
                conn.execute("DELETE FROM s3rm_auth_pending WHERE expires_at <= %s", (now,))
                if int(conn.execute("SELECT count(*) FROM s3rm_auth_pending").fetchone()[0]) >= cap:
                    victim = conn.execute("DELETE FROM s3rm_auth_pending WHERE key_hash = (SELECT key_hash FROM "
                                          "s3rm_auth_pending WHERE owner <> '' ORDER BY expires_at, key_hash LIMIT 1) "
                                          "RETURNING key_hash").fetchone() if priority else None
                    if victim is None:
                        return False
            conn.execute("INSERT INTO s3rm_auth_pending (key_hash, data, expires_at, owner, prefix) VALUES "
                         "(%s, %s, %s, %s, %s) ON CONFLICT (key_hash) DO UPDATE SET data = EXCLUDED.data, "
                         "expires_at = EXCLUDED.expires_at", (key_hash, Jsonb(data), expires_at, quota.address,
                                                              quota.prefix))
            return True

    def get_pending(self, key_hash: str, now: int) -> dict[str, Any] | None:
        """See :meth:`AuthStore.get_pending`."""
        row = self._one("SELECT data, expires_at FROM s3rm_auth_pending WHERE key_hash = %s", (key_hash,))
        return row[0] if row and row[1] > now else None

    def take_pending(self, key_hash: str, now: int) -> dict[str, Any] | None:
        """See :meth:`AuthStore.take_pending`; the delete returns the row to one caller only."""
        row = self._one("DELETE FROM s3rm_auth_pending WHERE key_hash = %s RETURNING data, expires_at", (key_hash,))
        return row[0] if row and row[1] > now else None

    # ------------------------------------------------- pins, rate buckets
    def pin_login(self, login: str, user_id: str, now: int) -> None:
        """See :meth:`AuthStore.pin_login`."""
        self._run("INSERT INTO s3rm_auth_pin (login, user_id, pinned_at) VALUES (%s, %s, %s) ON CONFLICT (login) DO UPDATE SET "
                  "user_id = EXCLUDED.user_id, pinned_at = EXCLUDED.pinned_at", (login.lower(), user_id, now))

    def pinned_logins(self) -> dict[str, str]:
        """See :meth:`AuthStore.pinned_logins`."""
        with self.pool.connection() as conn:
            return dict(conn.execute("SELECT login, user_id FROM s3rm_auth_pin").fetchall())

    def take_rate(self, key: str, now: float, rate: float, burst: int, *, max_buckets: int = 0) -> int:
        """See :meth:`AuthStore.take_rate`; the bucket row is locked, so every gateway shares it. A new
        bucket evicts the least recently used beyond ``max_buckets`` under an advisory lock (one evictor)."""
        with self.pool.connection() as conn, conn.transaction():
            if max_buckets and conn.execute("SELECT 1 FROM s3rm_auth_rate WHERE key = %s", (key,)).fetchone() is None:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CAP_LOCK + 2,))
                extra = int(conn.execute("SELECT count(*) FROM s3rm_auth_rate").fetchone()[0]) - max_buckets + 1
                if extra > 0:
                    conn.execute("DELETE FROM s3rm_auth_rate WHERE key IN (SELECT key FROM s3rm_auth_rate "
                                 "ORDER BY last LIMIT %s)", (extra,))
            conn.execute("INSERT INTO s3rm_auth_rate VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                         (key, float(burst), now))
            row = conn.execute("SELECT tokens, last FROM s3rm_auth_rate WHERE key = %s FOR UPDATE", (key,)).fetchone()
            tokens, last, wait = rate_take(row, now, rate, burst)
            conn.execute("UPDATE s3rm_auth_rate SET tokens = %s, last = %s WHERE key = %s", (tokens, last, key))
            return wait

    def size(self) -> dict[str, int]:
        """See :meth:`AuthStore.size`."""
        with self.pool.connection() as conn:
            out = {name: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) for name, table in (
                ("clients", "s3rm_auth_client"), ("codes", "s3rm_auth_code"), ("families", "s3rm_auth_family"),
                ("refresh", "s3rm_auth_refresh"), ("pending", "s3rm_auth_pending"), ("rate", "s3rm_auth_rate"))}
            out["bytes"] = int(conn.execute(
                "SELECT (SELECT COALESCE(SUM(length(metadata::text) + length(client_id)), 0) FROM s3rm_auth_client)"
                " + (SELECT COALESCE(SUM(length(data::text) + 64), 0) FROM s3rm_auth_code)"
                " + (SELECT COALESCE(SUM(length(data::text) + 64), 0) FROM s3rm_auth_refresh)"
                " + (SELECT COALESCE(SUM(length(data::text) + 64), 0) FROM s3rm_auth_pending)"
                " + (SELECT COALESCE(SUM(length(credential) + length(family) + 64), 0) FROM s3rm_auth_family)"
                " + (SELECT COALESCE(SUM(length(key) + 16), 0) FROM s3rm_auth_rate)").fetchone()[0])
        return out

    def purge(self, now: int, *, unused_client_before: int = 0, idle_client_before: int = 0,
              revoked_before: int | None = None) -> dict[str, int]:
        """See :meth:`AuthStore.purge`."""
        revoked_before = now - 3600 if revoked_before is None else revoked_before
        steps = {
            "codes": ("DELETE FROM s3rm_auth_code WHERE expires_at <= %s", (now - 86400,)),  # kept a day: replays
            "refresh": ("DELETE FROM s3rm_auth_refresh WHERE expires_at <= %s OR family IN "
                        "(SELECT family FROM s3rm_auth_family WHERE revoked_at IS NOT NULL)", (now,)),
            "families": ("DELETE FROM s3rm_auth_family f WHERE (revoked_at IS NULL OR revoked_at <= %s) AND NOT EXISTS "
                         "(SELECT 1 FROM s3rm_auth_refresh r WHERE r.family = f.family)", (revoked_before,)),
            "pending": ("DELETE FROM s3rm_auth_pending WHERE expires_at <= %s", (now,)),
            "rate": ("DELETE FROM s3rm_auth_rate WHERE last <= %s", (now - 86400,)),
            "clients": ("DELETE FROM s3rm_auth_client WHERE (last_used_at IS NULL AND created_at < %s) "
                        "OR last_used_at < %s", (unused_client_before, idle_client_before)),
        }
        with self.pool.connection() as conn, conn.transaction():
            removed = {name: conn.execute(sql, args).rowcount for name, (sql, args) in steps.items()}
        if any(removed.values()):
            with self.pool.connection() as conn:  # autocommit: VACUUM cannot run in a transaction
                for table in _PURGED:  # plain VACUUM: no exclusive lock; frees the rows' space for reuse
                    conn.execute(f"VACUUM {table}")
        return removed
