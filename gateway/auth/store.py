"""The authorization server's state behind ONE narrow interface, with a SQLite implementation.

:class:`AuthStore` is everything github mode keeps between requests
(docs/operations.md#github-state): registered clients, authorization codes,
refresh-token families (with their owner, age and last membership check),
signing keys, pending GitHub logins, login→id pins and the shared OAuth rate
buckets. A shared
PostgreSQL store may replace :class:`SqliteAuthStore` by implementing the same
methods with the same atomicity (each method is one transaction):
:class:`gateway.auth.pgstore.PostgresAuthStore` does, for several gateways
on one database.

Never stored: a raw authorization code, refresh token, login state or client
secret — only their SHA-256 hex (:func:`digest`), so a copy of the database
lets nobody redeem anything. The user's GitHub token (needed to re-check
membership on refresh) is stored only encrypted (AES-GCM,
:mod:`gateway.auth.vault`), on its family's row, and deleted with it.
The signing keys are stored as private JWKs (they must be usable after a
restart): keep the file mode 600, like the write-token file.

Times are integer Unix seconds supplied by the caller (testable without
sleeping). Records are plain JSON-able dicts.
"""
from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, TypeVar

from gateway.core.errors import StoreUnavailable

__all__ = ["AuthStore", "Family", "Quota", "RefreshOutcome", "SigningKey", "SqliteAuthStore", "digest",
           "evict_over_quota", "judge_refresh", "rate_take"]


def digest(secret: str) -> str:
    """SHA-256 hex of ``secret`` (UTF-8) — the only form in which codes, tokens and states are stored."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class SigningKey:
    """One stored signing key: ``kid``, the private JWK as JSON text, ``created_at`` (Unix seconds)."""

    kid: str
    private_jwk: str
    created_at: int


@dataclass(frozen=True)
class Quota:
    """Who stores an anonymous row and how many unused rows each of its keys may hold
    (docs/operations.md#github-quotas).

    ``address`` is the caller's address key (IPv4 /32, IPv6 /64), ``prefix`` its wider network
    (IPv4 /24, IPv6 /48); ``per_address`` / ``per_prefix`` are the most unused rows (pending logins,
    never-used clients) each may hold: at the quota, that key's OLDEST unused row is evicted to make
    room, so a caller only ever pushes out its own state. ``0`` turns a quota off.
    """

    address: str = ""
    prefix: str = ""
    per_address: int = 0
    per_prefix: int = 0

    @classmethod
    def of(cls, address: str, per_address: int = 0, per_prefix: int = 0) -> "Quota":
        """The quota keys of a caller ``address``: an IPv4 address counts as itself and its /24, an IPv6
        address as its /64 and /48 (one subscriber's prefix, one site); an IPv4-mapped IPv6 address as the
        IPv4 address; anything else (a Unix socket peer) as itself with no prefix."""
        import ipaddress

        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return cls(address, "", per_address, per_prefix)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if isinstance(ip, ipaddress.IPv6Address):
            return cls(str(ipaddress.ip_network(f"{ip}/64", strict=False)),
                       str(ipaddress.ip_network(f"{ip}/48", strict=False)), per_address, per_prefix)
        return cls(str(ip), str(ipaddress.ip_network(f"{ip}/24", strict=False)), per_address, per_prefix)

    def limits(self) -> tuple[tuple[str, str, int], ...]:
        """``(column, key, quota)`` of every quota in force."""
        return tuple((column, key, limit) for column, key, limit in (
            ("owner", self.address, self.per_address), ("prefix", self.prefix, self.per_prefix)) if key and limit)


def evict_over_quota(execute: Callable[[str, tuple], Any], quota: Quota, table: str, key_column: str, order: str,
                     where: str = "", mark: str = "?") -> None:
    """Make room for one more row of ``quota``'s keys in ``table``: for each quota in force, delete that key's
    oldest rows (``order``) beyond ``limit - 1``. ``where`` narrows the counted rows (``" AND ..."``: the
    unused ones), ``mark`` is the driver's placeholder; ``execute`` runs inside the caller's transaction.
    Shared by both :class:`AuthStore` implementations."""
    for column, key, limit in quota.limits():
        extra = int(execute(f"SELECT COUNT(*) FROM {table} WHERE {column} = {mark}{where}", (key,)).fetchone()[0]) \
            - limit + 1
        if extra > 0:
            execute(f"DELETE FROM {table} WHERE {key_column} IN (SELECT {key_column} FROM {table} WHERE "
                    f"{column} = {mark}{where} ORDER BY {order} LIMIT {mark})", (key, extra))


@dataclass(frozen=True)
class Family:
    """A refresh-token family: owner (GitHub ``user_id``, ``login``), ``created_at``, ``checked_at``
    (last successful membership check), ``credential`` (the encrypted GitHub token, ``""`` when none),
    ``allowed`` (scopes the last check allowed) and ``revoked_at`` (``None`` while active). Times in Unix seconds."""

    family: str
    user_id: str
    login: str
    created_at: int
    checked_at: int
    credential: str
    allowed: tuple[str, ...]
    revoked_at: int | None


def rate_take(row: tuple[float, float] | None, now: float, rate: float, burst: int) -> tuple[float, float, int]:
    """One token-bucket step shared by both stores' :meth:`AuthStore.take_rate`.

    ``row`` is ``(tokens, last)`` or ``None`` for a new bucket. Returns
    ``(tokens, last, wait)``: the bucket to store and ``0`` when a token was
    spent, else the whole seconds until one is back (at least 1). Same rule
    as :class:`gateway.ops.ratelimit.RateLimiter`.
    """
    import math

    tokens, last = (float(burst), now) if row is None else (min(float(burst), row[0] + (now - row[1]) * rate), now)
    if tokens >= 1.0:
        return tokens - 1.0, last, 0
    return tokens, last, max(1, math.ceil((1.0 - tokens) / rate))


@dataclass(frozen=True)
class RefreshOutcome:
    """What presenting a refresh token did.

    ``status``: ``ok`` (it was active and is now used — the caller issues the
    successor in the same ``family``), ``reused`` (it had been used before: the
    whole family is now revoked), ``revoked`` (its family was revoked),
    ``expired`` or ``unknown``. ``data`` is the stored record for ``ok``.
    """

    status: str
    family: str = ""
    data: dict[str, Any] | None = None


def judge_refresh(row: tuple | None, now: int) -> tuple[RefreshOutcome, str | None]:
    """Decide what presenting a refresh token does, for every :class:`AuthStore` implementation.

    ``row``: ``(family, data, expires_at, used, revoked_at)`` of the token and
    its family, read under the store's lock (``None`` when unknown). Returns
    the outcome and the write the store must make in the same transaction:
    ``"revoke"`` (revoke the family: a reuse), ``"use"`` (mark the token used)
    or ``None``. A store asked only to look (``consume=False``) skips ``"use"``.
    """
    if row is None:
        return RefreshOutcome("unknown"), None
    family, data, expires_at, used, revoked_at = row
    if revoked_at is not None:
        return RefreshOutcome("revoked", family), None
    if used:
        return RefreshOutcome("reused", family), "revoke"
    if expires_at <= now:
        return RefreshOutcome("expired", family), None
    return RefreshOutcome("ok", family, data), "use"


class AuthStore(Protocol):
    """The state interface of the authorization server (docs/operations.md#github-state)."""

    def save_client(self, client_id: str, metadata: dict[str, Any], secret_hash: str | None, now: int) -> None:
        """Store a dynamically registered client (RFC 7591); ``secret_hash`` for confidential clients."""

    def get_client(self, client_id: str) -> tuple[dict[str, Any], str | None] | None:
        """(metadata, secret_hash) of a registered client, or ``None``."""

    def count_clients(self) -> int:
        """How many clients are registered (the registration cap compares it)."""

    def add_client(self, client_id: str, metadata: dict[str, Any], secret_hash: str | None, now: int, *,
                   cap: int, evict_before: int, quota: "Quota | None" = None) -> bool:
        """Register a client. With ``quota``: at its address or prefix quota of never-used clients, that
        key's oldest never-used client is evicted first. Then, when ``cap`` clients exist, the oldest
        client never used and created before ``evict_before`` is evicted (a client that got a token never
        is). One transaction; False when the cap is full and nothing could be evicted."""

    def touch_client(self, client_id: str, now: int) -> None:
        """Record that ``client_id`` was just issued a token (unused clients expire, :meth:`purge`)."""

    def client_used(self, client_id: str) -> bool:
        """True when ``client_id`` is registered and was issued a token at least once."""

    def save_code(self, code_hash: str, data: dict[str, Any], expires_at: int) -> None:
        """Store an authorization code's grant (client, redirect URI, PKCE challenge, resource, user, scope)."""

    def consume_code(self, code_hash: str, now: int) -> tuple[str, dict[str, Any] | None]:
        """Redeem a code once: (``ok``, grant) and the code is marked used; (``used``, grant) for a
        replay (the caller revokes what the first redemption issued); (``expired``/``unknown``, None)."""

    def save_refresh(self, token_hash: str, family: str, data: dict[str, Any], expires_at: int, *,
                     owner: "Family | None" = None) -> None:
        """Store a refresh token of ``family``; ``owner`` creates the family row with its owner, times and
        encrypted credential (the first token of a grant), in the same transaction."""

    def use_refresh(self, token_hash: str, now: int, *, consume: bool = True) -> RefreshOutcome:
        """Present a refresh token once (rotation): see :class:`RefreshOutcome`; reuse revokes the family.
        ``consume=False`` only looks (a reuse still revokes), so a refused request leaves the token usable."""

    def family(self, family: str) -> "Family | None":
        """The family row, or ``None``."""

    def mark_checked(self, family: str, now: int, allowed: list[str]) -> None:
        """Record a successful membership check of ``family`` at ``now`` with the scopes it allowed."""

    def revoke_user(self, user: str, now: int) -> int:
        """Revoke every active family of the GitHub user with numeric id or login ``user``; returns how many."""

    def refresh_owner(self, token_hash: str) -> tuple[str, str] | None:
        """(family, client_id) of a stored refresh token (used or not), or ``None``."""

    def revoke_family(self, family: str, now: int) -> None:
        """Revoke every refresh token of ``family`` and the access tokens minted from it."""

    def family_active(self, family: str) -> bool:
        """True unless ``family`` was revoked (an unknown family counts as revoked)."""

    def signing_keys(self) -> list[SigningKey]:
        """Every stored signing key, newest first."""

    def add_signing_key(self, key: SigningKey) -> None:
        """Store a new signing key (it becomes the newest)."""

    def delete_signing_key(self, kid: str) -> None:
        """Forget a retired key (no token signed with it can still be valid)."""

    def save_pending(self, key_hash: str, data: dict[str, Any], expires_at: int, *, cap: int = 0,
                     now: int = 0, quota: "Quota | None" = None, priority: bool = False) -> bool:
        """Store (or replace) a pending browser login keyed by the hash of its state/session secret.

        With ``quota``: expired rows of its keys are dropped and, at an address or prefix quota, that
        key's oldest pending login is evicted. With ``cap`` (the global last resort): expired ones are
        dropped; when ``cap`` unexpired remain, a ``priority`` login (a client that already got a token)
        evicts the oldest anonymous one, any other gets False."""

    def get_pending(self, key_hash: str, now: int) -> dict[str, Any] | None:
        """The unexpired pending login, or ``None``."""

    def take_pending(self, key_hash: str, now: int) -> dict[str, Any] | None:
        """Return and delete the unexpired pending login (single use), or ``None``."""

    def pin_login(self, login: str, user_id: str, now: int) -> None:
        """Pin an allowlisted login name (lower case) to GitHub's numeric ``user_id`` (an admin's decision)."""

    def pinned_logins(self) -> dict[str, str]:
        """Every pinned login name → numeric id."""

    def take_rate(self, key: str, now: float, rate: float, burst: int, *, max_buckets: int = 0) -> int:
        """Spend one token of the shared bucket ``key`` (:func:`rate_take`); 0 or the seconds to wait.
        With ``max_buckets``: a new bucket first evicts the least recently used ones beyond that many,
        so the table stays bounded whatever addresses or client ids anonymous callers spray."""

    def size(self) -> dict[str, int]:
        """Rows per kind (``clients``, ``codes``, ``families``, ``refresh``, ``pending``, ``rate``) and
        ``bytes`` (the stored payload, approximately): the bound docs/operations.md#github-limits states."""

    def purge(self, now: int, *, unused_client_before: int = 0, idle_client_before: int = 0,
              revoked_before: int | None = None) -> dict[str, int]:
        """Delete expired codes (a day after expiry), expired refresh tokens, tokens of revoked families,
        families left without tokens (revoked before ``revoked_before``, default ``now - 3600``), expired
        pending logins, rate buckets idle for a day, clients never used and created before
        ``unused_client_before`` and clients last used before ``idle_client_before``. Returns counts.
        The space the deleted rows took is given back (SQLite: incremental vacuum; PostgreSQL: VACUUM)."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS clients (client_id TEXT PRIMARY KEY, metadata TEXT NOT NULL,
    secret_hash TEXT, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS codes (code_hash TEXT PRIMARY KEY, data TEXT NOT NULL,
    expires_at INTEGER NOT NULL, used INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS families (family TEXT PRIMARY KEY, revoked_at INTEGER);
CREATE TABLE IF NOT EXISTS refresh_tokens (token_hash TEXT PRIMARY KEY, family TEXT NOT NULL,
    data TEXT NOT NULL, expires_at INTEGER NOT NULL, used INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS signing_keys (kid TEXT PRIMARY KEY, private_jwk TEXT NOT NULL,
    created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS pending (key_hash TEXT PRIMARY KEY, data TEXT NOT NULL, expires_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS pins (login TEXT PRIMARY KEY, user_id TEXT NOT NULL, pinned_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS rate (key TEXT PRIMARY KEY, tokens REAL NOT NULL, last REAL NOT NULL);
CREATE INDEX IF NOT EXISTS refresh_family ON refresh_tokens (family);
CREATE INDEX IF NOT EXISTS rate_last ON rate (last);
"""

#: Indexes on columns of :data:`_ADDED_COLUMNS` (created once those exist).
_LATE_INDEXES = """
CREATE INDEX IF NOT EXISTS pending_owner ON pending (owner, expires_at);
CREATE INDEX IF NOT EXISTS pending_prefix ON pending (prefix, expires_at);
CREATE INDEX IF NOT EXISTS pending_expires ON pending (expires_at);
CREATE INDEX IF NOT EXISTS clients_owner ON clients (owner, created_at) WHERE last_used_at IS NULL;
CREATE INDEX IF NOT EXISTS clients_prefix ON clients (prefix, created_at) WHERE last_used_at IS NULL;
CREATE INDEX IF NOT EXISTS clients_unused ON clients (created_at) WHERE last_used_at IS NULL;
"""

#: Columns added after the first release (added to an older file when it is opened).
_ADDED_COLUMNS = {
    "clients": (("last_used_at", "INTEGER"), ("owner", "TEXT NOT NULL DEFAULT ''"),
                ("prefix", "TEXT NOT NULL DEFAULT ''")),
    "pending": (("owner", "TEXT NOT NULL DEFAULT ''"), ("prefix", "TEXT NOT NULL DEFAULT ''")),
    "families": (("user_id", "TEXT NOT NULL DEFAULT ''"), ("login", "TEXT NOT NULL DEFAULT ''"),
                 ("created_at", "INTEGER NOT NULL DEFAULT 0"), ("checked_at", "INTEGER NOT NULL DEFAULT 0"),
                 ("credential", "TEXT NOT NULL DEFAULT ''"), ("allowed", "TEXT NOT NULL DEFAULT '[]'")),
}


_Store = TypeVar("_Store", bound=type)


def store_errors_as_unavailable(*kinds: type[BaseException]) -> Callable[[_Store], _Store]:
    """Class decorator: every public method re-raises ``kinds`` as :class:`StoreUnavailable`.

    Both :class:`AuthStore` implementations use it, so a store outage reaches
    the app as one exception type (answered 503, docs/transport.md#github-store-outage).
    """
    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except kinds as exc:
                raise StoreUnavailable(f"authorization state store unavailable ({type(exc).__name__})") from exc
        return call

    def decorate(cls: _Store) -> _Store:
        for name, member in list(vars(cls).items()):
            if callable(member) and not name.startswith("_") and not isinstance(member, type):
                setattr(cls, name, wrap(member))
        return cls
    return decorate


@store_errors_as_unavailable(sqlite3.DatabaseError)
class SqliteAuthStore:
    """:class:`AuthStore` in one SQLite file (WAL; one connection per thread; file mode 600).

    Safe across threads and processes sharing the file: every read-modify-write
    runs in ``BEGIN IMMEDIATE``. Raises :class:`sqlite3.Error` when the file
    cannot be opened; later database failures surface as
    :class:`~gateway.core.errors.StoreUnavailable`.
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch(mode=0o600, exist_ok=True)
        self.path.chmod(0o600)
        self._local = threading.local()
        db = self._db()
        if int(db.execute("PRAGMA auto_vacuum").fetchone()[0]) != 2:  # incremental: a purge gives space back
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            db.execute("VACUUM")  # converts an older file (instant on a new one)
        db.executescript(_SCHEMA)
        for table, columns in _ADDED_COLUMNS.items():
            have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            for name, kind in columns:
                if name not in have:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
        db.executescript(_LATE_INDEXES)

    # ----------------------------------------------------------- plumbing
    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA busy_timeout=10000")
            self._local.db = db
        return db

    class _Tx:
        def __init__(self, db: sqlite3.Connection):
            self.db = db

        def __enter__(self) -> sqlite3.Connection:
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, exc_type, *_):
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")

    def _tx(self) -> "_Tx":
        return self._Tx(self._db())

    # ------------------------------------------------------------ clients
    def save_client(self, client_id: str, metadata: dict[str, Any], secret_hash: str | None, now: int) -> None:
        """See :meth:`AuthStore.save_client`."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO clients (client_id, metadata, secret_hash, created_at) "
                       "VALUES (?, ?, ?, ?)", (client_id, json.dumps(metadata), secret_hash, now))

    def get_client(self, client_id: str) -> tuple[dict[str, Any], str | None] | None:
        """See :meth:`AuthStore.get_client`."""
        row = self._db().execute("SELECT metadata, secret_hash FROM clients WHERE client_id = ?",
                                 (client_id,)).fetchone()
        return (json.loads(row[0]), row[1]) if row else None

    def count_clients(self) -> int:
        """See :meth:`AuthStore.count_clients`."""
        return int(self._db().execute("SELECT COUNT(*) FROM clients").fetchone()[0])

    def add_client(self, client_id: str, metadata: dict[str, Any], secret_hash: str | None, now: int, *,
                   cap: int, evict_before: int, quota: Quota | None = None) -> bool:
        """See :meth:`AuthStore.add_client` (``BEGIN IMMEDIATE``: count and insert are one step)."""
        quota = quota or Quota()
        with self._tx() as db:
            evict_over_quota(db.execute, quota, "clients", "client_id", "created_at, rowid",
                             " AND last_used_at IS NULL")
            if int(db.execute("SELECT COUNT(*) FROM clients").fetchone()[0]) >= cap:
                victim = db.execute("SELECT client_id FROM clients WHERE last_used_at IS NULL AND created_at < ? "
                                    "ORDER BY created_at, rowid LIMIT 1", (evict_before,)).fetchone()
                if victim is None:
                    return False
                db.execute("DELETE FROM clients WHERE client_id = ?", victim)
            db.execute("INSERT INTO clients (client_id, metadata, secret_hash, created_at, owner, prefix) "
                       "VALUES (?, ?, ?, ?, ?, ?)",
                       (client_id, json.dumps(metadata), secret_hash, now, quota.address, quota.prefix))
            return True

    def touch_client(self, client_id: str, now: int) -> None:
        """See :meth:`AuthStore.touch_client`."""
        with self._tx() as db:
            db.execute("UPDATE clients SET last_used_at = ? WHERE client_id = ?", (now, client_id))

    def client_used(self, client_id: str) -> bool:
        """See :meth:`AuthStore.client_used`."""
        return self._db().execute("SELECT 1 FROM clients WHERE client_id = ? AND last_used_at IS NOT NULL",
                                  (client_id,)).fetchone() is not None

    # -------------------------------------------------------------- codes
    def save_code(self, code_hash: str, data: dict[str, Any], expires_at: int) -> None:
        """See :meth:`AuthStore.save_code`."""
        with self._tx() as db:
            db.execute("INSERT INTO codes (code_hash, data, expires_at) VALUES (?, ?, ?)",
                       (code_hash, json.dumps(data), expires_at))

    def consume_code(self, code_hash: str, now: int) -> tuple[str, dict[str, Any] | None]:
        """See :meth:`AuthStore.consume_code`."""
        with self._tx() as db:
            row = db.execute("SELECT data, expires_at, used FROM codes WHERE code_hash = ?", (code_hash,)).fetchone()
            if row is None:
                return "unknown", None
            if row[2]:
                return "used", json.loads(row[0])
            if row[1] <= now:
                return "expired", None
            db.execute("UPDATE codes SET used = 1 WHERE code_hash = ?", (code_hash,))
            return "ok", json.loads(row[0])

    # ------------------------------------------------------ refresh tokens
    def save_refresh(self, token_hash: str, family: str, data: dict[str, Any], expires_at: int, *,
                     owner: Family | None = None) -> None:
        """See :meth:`AuthStore.save_refresh`."""
        with self._tx() as db:
            if owner is not None:
                db.execute("INSERT OR IGNORE INTO families (family, user_id, login, created_at, checked_at, "
                           "credential, allowed) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           (family, owner.user_id, owner.login, owner.created_at, owner.checked_at,
                            owner.credential, json.dumps(list(owner.allowed))))
            db.execute("INSERT OR IGNORE INTO families (family) VALUES (?)", (family,))
            db.execute("INSERT INTO refresh_tokens (token_hash, family, data, expires_at) VALUES (?, ?, ?, ?)",
                       (token_hash, family, json.dumps(data), expires_at))

    def use_refresh(self, token_hash: str, now: int, *, consume: bool = True) -> RefreshOutcome:
        """See :meth:`AuthStore.use_refresh`."""
        with self._tx() as db:
            row = db.execute(
                "SELECT r.family, r.data, r.expires_at, r.used, f.revoked_at FROM refresh_tokens r "
                "JOIN families f ON f.family = r.family WHERE r.token_hash = ?", (token_hash,)).fetchone()
            outcome, write = judge_refresh((*row[:1], json.loads(row[1]), *row[2:]) if row else None, now)
            if write == "revoke":
                db.execute("UPDATE families SET revoked_at = ? WHERE family = ?", (now, outcome.family))
            elif write == "use" and consume:
                db.execute("UPDATE refresh_tokens SET used = 1 WHERE token_hash = ?", (token_hash,))
            return outcome

    def refresh_owner(self, token_hash: str) -> tuple[str, str] | None:
        """See :meth:`AuthStore.refresh_owner`."""
        row = self._db().execute("SELECT family, data FROM refresh_tokens WHERE token_hash = ?",
                                 (token_hash,)).fetchone()
        return (row[0], json.loads(row[1]).get("client_id", "")) if row else None

    def revoke_family(self, family: str, now: int) -> None:
        """See :meth:`AuthStore.revoke_family`."""
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO families (family) VALUES (?)", (family,))
            db.execute("UPDATE families SET revoked_at = ? WHERE family = ? AND revoked_at IS NULL", (now, family))

    def family_active(self, family: str) -> bool:
        """See :meth:`AuthStore.family_active`."""
        row = self._db().execute("SELECT revoked_at FROM families WHERE family = ?", (family,)).fetchone()
        return row is not None and row[0] is None

    def family(self, family: str) -> Family | None:
        """See :meth:`AuthStore.family`."""
        row = self._db().execute("SELECT family, user_id, login, created_at, checked_at, credential, allowed, "
                                 "revoked_at FROM families WHERE family = ?", (family,)).fetchone()
        return Family(*row[:6], tuple(json.loads(row[6])), row[7]) if row else None

    def mark_checked(self, family: str, now: int, allowed: list[str]) -> None:
        """See :meth:`AuthStore.mark_checked`."""
        with self._tx() as db:
            db.execute("UPDATE families SET checked_at = ?, allowed = ? WHERE family = ?",
                       (now, json.dumps(sorted(allowed)), family))

    def revoke_user(self, user: str, now: int) -> int:
        """See :meth:`AuthStore.revoke_user`."""
        with self._tx() as db:
            return db.execute("UPDATE families SET revoked_at = ? WHERE revoked_at IS NULL AND "
                              "(user_id = ? OR (login <> '' AND lower(login) = lower(?)))",
                              (now, user, user)).rowcount

    # -------------------------------------------------------- signing keys
    def signing_keys(self) -> list[SigningKey]:
        """See :meth:`AuthStore.signing_keys`."""
        rows = self._db().execute(
            "SELECT kid, private_jwk, created_at FROM signing_keys ORDER BY created_at DESC, kid DESC").fetchall()
        return [SigningKey(*row) for row in rows]

    def add_signing_key(self, key: SigningKey) -> None:
        """See :meth:`AuthStore.add_signing_key`."""
        with self._tx() as db:
            db.execute("INSERT INTO signing_keys VALUES (?, ?, ?)", (key.kid, key.private_jwk, key.created_at))

    def delete_signing_key(self, kid: str) -> None:
        """See :meth:`AuthStore.delete_signing_key`."""
        with self._tx() as db:
            db.execute("DELETE FROM signing_keys WHERE kid = ?", (kid,))

    # ------------------------------------------------------ pending logins
    def save_pending(self, key_hash: str, data: dict[str, Any], expires_at: int, *, cap: int = 0,
                     now: int = 0, quota: Quota | None = None, priority: bool = False) -> bool:
        """See :meth:`AuthStore.save_pending`."""
        quota = quota or Quota()
        with self._tx() as db:
            for column, key, _ in quota.limits():
                db.execute(f"DELETE FROM pending WHERE {column} = ? AND expires_at <= ?", (key, now))
            evict_over_quota(db.execute, quota, "pending", "key_hash", "expires_at, rowid")
            if cap and int(db.execute("SELECT COUNT(*) FROM pending").fetchone()[0]) >= cap:
                db.execute("DELETE FROM pending WHERE expires_at <= ?", (now,))
                if int(db.execute("SELECT COUNT(*) FROM pending").fetchone()[0]) >= cap:
                    victim = db.execute("SELECT key_hash FROM pending WHERE owner <> '' ORDER BY expires_at, rowid "
                                        "LIMIT 1").fetchone() if priority else None
                    if victim is None:
                        return False
                    db.execute("DELETE FROM pending WHERE key_hash = ?", victim)
            db.execute("INSERT OR REPLACE INTO pending (key_hash, data, expires_at, owner, prefix) VALUES "
                       "(?, ?, ?, ?, ?)", (key_hash, json.dumps(data), expires_at, quota.address, quota.prefix))
            return True

    def get_pending(self, key_hash: str, now: int) -> dict[str, Any] | None:
        """See :meth:`AuthStore.get_pending`."""
        row = self._db().execute("SELECT data, expires_at FROM pending WHERE key_hash = ?", (key_hash,)).fetchone()
        return json.loads(row[0]) if row and row[1] > now else None

    def take_pending(self, key_hash: str, now: int) -> dict[str, Any] | None:
        """See :meth:`AuthStore.take_pending`."""
        with self._tx() as db:
            row = db.execute("SELECT data, expires_at FROM pending WHERE key_hash = ?", (key_hash,)).fetchone()
            db.execute("DELETE FROM pending WHERE key_hash = ?", (key_hash,))
            return json.loads(row[0]) if row and row[1] > now else None

    # ------------------------------------------------- pins, rate buckets
    def pin_login(self, login: str, user_id: str, now: int) -> None:
        """See :meth:`AuthStore.pin_login`."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO pins VALUES (?, ?, ?)", (login.lower(), user_id, now))

    def pinned_logins(self) -> dict[str, str]:
        """See :meth:`AuthStore.pinned_logins`."""
        return dict(self._db().execute("SELECT login, user_id FROM pins").fetchall())

    def take_rate(self, key: str, now: float, rate: float, burst: int, *, max_buckets: int = 0) -> int:
        """See :meth:`AuthStore.take_rate`."""
        with self._tx() as db:
            row = db.execute("SELECT tokens, last FROM rate WHERE key = ?", (key,)).fetchone()
            if row is None and max_buckets:
                extra = int(db.execute("SELECT COUNT(*) FROM rate").fetchone()[0]) - max_buckets + 1
                if extra > 0:
                    db.execute("DELETE FROM rate WHERE key IN (SELECT key FROM rate ORDER BY last LIMIT ?)", (extra,))
            tokens, last, wait = rate_take(row, now, rate, burst)
            db.execute("INSERT OR REPLACE INTO rate VALUES (?, ?, ?)", (key, tokens, last))
            return wait

    def size(self) -> dict[str, int]:
        """See :meth:`AuthStore.size`."""
        db = self._db()
        out = {name: int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]) for name, table in (
            ("clients", "clients"), ("codes", "codes"), ("families", "families"), ("refresh", "refresh_tokens"),
            ("pending", "pending"), ("rate", "rate"))}
        out["bytes"] = int(db.execute(
            "SELECT (SELECT COALESCE(SUM(LENGTH(metadata) + LENGTH(client_id)), 0) FROM clients)"
            " + (SELECT COALESCE(SUM(LENGTH(data) + 64), 0) FROM codes)"
            " + (SELECT COALESCE(SUM(LENGTH(data) + 64), 0) FROM refresh_tokens)"
            " + (SELECT COALESCE(SUM(LENGTH(data) + 64), 0) FROM pending)"
            " + (SELECT COALESCE(SUM(LENGTH(credential) + LENGTH(family) + 64), 0) FROM families)"
            " + (SELECT COALESCE(SUM(LENGTH(key) + 16), 0) FROM rate)").fetchone()[0])
        return out

    def purge(self, now: int, *, unused_client_before: int = 0, idle_client_before: int = 0,
              revoked_before: int | None = None) -> dict[str, int]:
        """See :meth:`AuthStore.purge`."""
        revoked_before = now - 3600 if revoked_before is None else revoked_before
        steps = {
            "codes": ("DELETE FROM codes WHERE expires_at <= ?", (now - 86400,)),  # kept a day: replay detection
            "refresh": ("DELETE FROM refresh_tokens WHERE expires_at <= ? OR family IN "
                        "(SELECT family FROM families WHERE revoked_at IS NOT NULL)", (now,)),
            "families": ("DELETE FROM families WHERE (revoked_at IS NULL OR revoked_at <= ?) AND NOT EXISTS "
                         "(SELECT 1 FROM refresh_tokens r WHERE r.family = families.family)", (revoked_before,)),
            "pending": ("DELETE FROM pending WHERE expires_at <= ?", (now,)),
            "rate": ("DELETE FROM rate WHERE last <= ?", (now - 86400,)),
            "clients": ("DELETE FROM clients WHERE (last_used_at IS NULL AND created_at < ?) OR last_used_at < ?",
                        (unused_client_before, idle_client_before)),
        }
        with self._tx() as db:
            removed = {name: db.execute(sql, args).rowcount for name, (sql, args) in steps.items()}
        if any(removed.values()):
            db = self._db()
            db.executescript("PRAGMA incremental_vacuum;")  # every freed page back to the file system (steps to the end)
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()  # ... and the log does not keep them
        return removed

    def file_bytes(self) -> int:
        """Bytes the state takes on disk: the database file and its write-ahead log."""
        return sum(p.stat().st_size for p in (self.path, self.path.with_name(self.path.name + "-wal")) if p.exists())
