"""Settings of ``github`` write-auth mode: the OAuth authorization server and its GitHub upstream.

Read by :func:`load_github` from the same environment mapping as the rest of
the configuration (``gateway.config.loader.load_config`` calls it); the
result sits on ``GatewayConfig.github`` (``None`` outside github mode).
Contract: docs/operations.md#github-mode (every variable, defaults, how to
register the GitHub OAuth app) and docs/transport.md#github-mode.

Allowlists: ``S3RM_GITHUB_{READ,WRITE}_{USERS,ORGS,TEAMS}`` are comma
separated GitHub logins, organisation logins and ``org/team-slug`` pairs
(compared case-insensitively). A person may read when listed in a read or a
write list (writing implies reading); ``mcp:write`` needs a write list.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from gateway.config.values import ConfigError, Getter, number, redacted_repr

__all__ = ["AUTH_STORES", "GithubSettings", "load_github", "SCOPE_READ", "SCOPE_WRITE"]

#: The two scopes the authorization server grants (docs/transport.md#github-mode).
SCOPE_READ = "mcp:read"
SCOPE_WRITE = "mcp:write"

#: Where github mode keeps its state (docs/operations.md#github-state).
AUTH_STORES = ("sqlite", "postgres")

_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
_TEAM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


@dataclass(frozen=True)
class GithubSettings:
    """Validated github-mode settings (secrets redacted by ``repr``).

    URLs: ``issuer`` (this server's OAuth issuer, an origin without a path),
    ``resource`` (the protected MCP endpoint, the public URL), and the three
    GitHub base URLs (overridable so tests can point at a stand-in).
    Lifetimes are seconds. ``state_store`` is where the authorization
    server's state lives: ``sqlite`` (the file ``state_db``, one gateway) or
    ``postgres`` (the ``S3RM_PG_DSN`` database shared by every gateway,
    docs/operations.md#github-state); ``max_clients`` caps open dynamic
    registration (further registrations are refused).
    """

    client_id: str
    client_secret: str
    issuer: str
    resource: str
    authorize_url: str = "https://github.com/login/oauth/authorize"
    token_url: str = "https://github.com/login/oauth/access_token"
    api_url: str = "https://api.github.com"
    read_users: frozenset[str] = frozenset()
    read_orgs: frozenset[str] = frozenset()
    read_teams: frozenset[str] = frozenset()
    write_users: frozenset[str] = frozenset()
    write_orgs: frozenset[str] = frozenset()
    write_teams: frozenset[str] = frozenset()
    state_db: Path = Path(".dev/oauth-state.sqlite3")
    state_store: str = "sqlite"
    access_token_seconds: int = 600
    refresh_token_seconds: int = 30 * 86400
    code_seconds: int = 120
    login_seconds: int = 600
    key_rotation_seconds: int = 30 * 86400
    upstream_timeout_seconds: float = 10.0
    max_clients: int = 10000

    @property
    def needs_org_scope(self) -> bool:
        """True when an org or team allowlist is set (GitHub then needs the ``read:org`` scope)."""
        return bool(self.read_orgs or self.read_teams or self.write_orgs or self.write_teams)

    def __repr__(self) -> str:
        """Every setting, with the client secret shown as ``<redacted>``."""
        return redacted_repr(self, ("client_secret",))

    __str__ = __repr__


def _names(get: Getter, name: str, pattern: re.Pattern) -> frozenset[str]:
    out = set()
    for item in (part.strip() for part in get(name).split(",")):
        if not item:
            continue
        if not pattern.match(item):
            raise ConfigError(name, "must list GitHub logins (teams as org/team-slug), comma separated")
        out.add(item.lower())
    return frozenset(out)


def _url(get: Getter, name: str, default: str) -> str:
    value = get(name, default).rstrip("/")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(name, "must be an absolute http(s) URL without query or fragment")
    return value


def load_github(get: Getter, public_url: str, public_origin: str, default_state_db: Path, *,
                index_backend: str = "memory", pg_dsn: str = "") -> GithubSettings:
    """Read the github-mode variables through ``get`` (called only when the mode is ``github``).

    ``public_url`` is the validated ``S3RM_MCP_PUBLIC_URL`` (the resource),
    ``public_origin`` its origin (the default issuer); ``index_backend`` and
    ``pg_dsn`` are the validated retrieval settings (``S3RM_AUTH_STORE``
    defaults to ``postgres`` with the pgvector backend, else ``sqlite``).
    Raises :class:`ConfigError` for a missing client id/secret, an empty set
    of allowlists, a malformed login or URL, an issuer with a path/query, an
    unknown ``S3RM_AUTH_STORE`` or ``postgres`` without ``S3RM_PG_DSN``.
    """
    client_id = get("S3RM_GITHUB_CLIENT_ID")
    secret = get("S3RM_GITHUB_CLIENT_SECRET")
    if not client_id:
        raise ConfigError("S3RM_GITHUB_CLIENT_ID", "is required in github mode (the GitHub OAuth app's client id)")
    if not secret:
        raise ConfigError("S3RM_GITHUB_CLIENT_SECRET", "is required in github mode")
    issuer = _url(get, "S3RM_OAUTH_ISSUER", public_origin)
    if urlsplit(issuer).path not in ("", "/"):
        raise ConfigError("S3RM_OAUTH_ISSUER", "must be an origin without a path (for example https://wiki.example.org)")
    lists = {
        f"{kind}_{what}": _names(get, f"S3RM_GITHUB_{kind.upper()}_{what.upper()}", _TEAM if what == "teams" else _LOGIN)
        for kind in ("read", "write") for what in ("users", "orgs", "teams")
    }
    if not any(lists.values()):
        raise ConfigError("S3RM_GITHUB_READ_USERS", "github mode needs at least one allowlist (users, orgs or teams)")
    store = get("S3RM_AUTH_STORE", "postgres" if index_backend == "pgvector" else "sqlite").lower()
    if store not in AUTH_STORES:
        raise ConfigError("S3RM_AUTH_STORE", f"must be one of {', '.join(AUTH_STORES)}")
    if store == "postgres" and not pg_dsn:
        raise ConfigError("S3RM_PG_DSN", "is required when S3RM_AUTH_STORE=postgres (the shared auth state)")
    access = number(get, "S3RM_OAUTH_ACCESS_TOKEN_SECONDS", 600, int, 30, 3600)
    return GithubSettings(
        client_id=client_id,
        client_secret=secret,
        issuer=issuer,
        resource=public_url.rstrip("/"),
        authorize_url=_url(get, "S3RM_GITHUB_AUTHORIZE_URL", GithubSettings.authorize_url),
        token_url=_url(get, "S3RM_GITHUB_TOKEN_URL", GithubSettings.token_url),
        api_url=_url(get, "S3RM_GITHUB_API_URL", GithubSettings.api_url),
        state_db=Path(get("S3RM_OAUTH_STATE_DB", str(default_state_db))),
        state_store=store,
        access_token_seconds=access,
        refresh_token_seconds=number(get, "S3RM_OAUTH_REFRESH_TOKEN_SECONDS", 30 * 86400, int, 300, 365 * 86400),
        key_rotation_seconds=number(get, "S3RM_OAUTH_KEY_ROTATION_SECONDS", 30 * 86400, int, 3600, 365 * 86400),
        upstream_timeout_seconds=number(get, "S3RM_GITHUB_TIMEOUT_SECONDS", 10.0, float, 0.5, 60.0),
        max_clients=number(get, "S3RM_OAUTH_MAX_CLIENTS", 10000, int, 1, 10_000_000),
        **lists,
    )
