"""The authorization server's state behind ONE narrow interface, with a SQLite implementation.

:class:`AuthStore` is everything github mode keeps between requests
(docs/operations.md#github-state): registered clients, authorization codes,
refresh-token families, signing keys and pending GitHub logins. A shared
PostgreSQL store may replace :class:`SqliteAuthStore` by implementing the same
methods with the same atomicity (each method is one transaction):
:class:`gateway.auth.pgstore.PostgresAuthStore` does, for several gateways
on one database.

Never stored: a raw authorization code, refresh token, login state or client
secret — only their SHA-256 hex (:func:`digest`), so a copy of the database
lets nobody redeem anything. GitHub's access token never reaches the store
(it is used for the identity and membership calls of one login and dropped).
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

__all__ = ["AuthStore", "RefreshOutcome", "SigningKey", "SqliteAuthStore", "digest", "judge_refresh"]


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
    or ``None``.
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

    def save_code(self, code_hash: str, data: dict[str, Any], expires_at: int) -> None:
        """Store an authorization code's grant (client, redirect URI, PKCE challenge, resource, user, scope)."""

    def consume_code(self, code_hash: str, now: int) -> tuple[str, dict[str, Any] | None]:
        """Redeem a code once: (``ok``, grant) and the code is marked used; (``used``, grant) for a
        replay (the caller revokes what the first redemption issued); (``expired``/``unknown``, None)."""

    def save_refresh(self, token_hash: str, family: str, data: dict[str, Any], expires_at: int) -> None:
        """Store a refresh token of ``family`` (a new family is created on first use of its id)."""

    def use_refresh(self, token_hash: str, now: int) -> RefreshOutcome:
        """Present a refresh token once (rotation): see :class:`RefreshOutcome`; reuse revokes the family."""

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

    def save_pending(self, key_hash: str, data: dict[str, Any], expires_at: int) -> None:
        """Store (or replace) a pending browser login keyed by the hash of its state/session secret."""

    def get_pending(self, key_hash: str, now: int) -> dict[str, Any] | None:
        """The unexpired pending login, or ``None``."""

    def take_pending(self, key_hash: str, now: int) -> dict[str, Any] | None:
        """Return and delete the unexpired pending login (single use), or ``None``."""

    def purge(self, now: int) -> None:
        """Delete expired codes, refresh tokens and pending logins."""


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
"""


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
        self._db().executescript(_SCHEMA)

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
            db.execute("INSERT OR REPLACE INTO clients VALUES (?, ?, ?, ?)",
                       (client_id, json.dumps(metadata), secret_hash, now))

    def get_client(self, client_id: str) -> tuple[dict[str, Any], str | None] | None:
        """See :meth:`AuthStore.get_client`."""
        row = self._db().execute("SELECT metadata, secret_hash FROM clients WHERE client_id = ?",
                                 (client_id,)).fetchone()
        return (json.loads(row[0]), row[1]) if row else None

    def count_clients(self) -> int:
        """See :meth:`AuthStore.count_clients`."""
        return int(self._db().execute("SELECT COUNT(*) FROM clients").fetchone()[0])

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
    def save_refresh(self, token_hash: str, family: str, data: dict[str, Any], expires_at: int) -> None:
        """See :meth:`AuthStore.save_refresh`."""
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO families (family) VALUES (?)", (family,))
            db.execute("INSERT INTO refresh_tokens (token_hash, family, data, expires_at) VALUES (?, ?, ?, ?)",
                       (token_hash, family, json.dumps(data), expires_at))

    def use_refresh(self, token_hash: str, now: int) -> RefreshOutcome:
        """See :meth:`AuthStore.use_refresh`."""
        with self._tx() as db:
            row = db.execute(
                "SELECT r.family, r.data, r.expires_at, r.used, f.revoked_at FROM refresh_tokens r "
                "JOIN families f ON f.family = r.family WHERE r.token_hash = ?", (token_hash,)).fetchone()
            outcome, write = judge_refresh((*row[:1], json.loads(row[1]), *row[2:]) if row else None, now)
            if write == "revoke":
                db.execute("UPDATE families SET revoked_at = ? WHERE family = ?", (now, outcome.family))
            elif write == "use":
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
    def save_pending(self, key_hash: str, data: dict[str, Any], expires_at: int) -> None:
        """See :meth:`AuthStore.save_pending`."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO pending VALUES (?, ?, ?)", (key_hash, json.dumps(data), expires_at))

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

    def purge(self, now: int) -> None:
        """See :meth:`AuthStore.purge`."""
        with self._tx() as db:
            db.execute("DELETE FROM codes WHERE expires_at <= ?", (now - 86400,))  # kept a day: replay detection
            db.execute("DELETE FROM refresh_tokens WHERE expires_at <= ?", (now,))
            db.execute("DELETE FROM pending WHERE expires_at <= ?", (now,))
