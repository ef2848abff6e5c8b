"""Settings of ``github`` write-auth mode: the OAuth authorization server and its GitHub upstream.

Read by :func:`load_github` from the same environment mapping as the rest of
the configuration (``gateway.config.loader.load_config`` calls it); the
result sits on ``GatewayConfig.github`` (``None`` outside github mode).
Contract: docs/operations.md#github-mode (every variable, defaults, how to
register the GitHub OAuth app) and docs/transport.md#github-mode.

Allowlists: ``S3RM_GITHUB_{READ,WRITE}_{USERS,ORGS,TEAMS}`` are comma
separated GitHub users, organisation logins and ``org/team-slug`` pairs
(compared case-insensitively). A user is GitHub's numeric id (``5001``); a
login name is accepted with a warning and counts only once an admin has
pinned it to an id (``s3rm auth pin``, docs/operations.md#github-ids), because
GitHub frees a login on rename. A person may read when listed in a read or a
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
_ID = re.compile(r"^[0-9]{1,20}$")
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
    registration (when full, the oldest never-used client is evicted, else
    registration is refused); ``address_quota`` / ``prefix_quota`` are the most
    pending logins and never-used clients one address (IPv4 /32, IPv6 /64) and
    one network (IPv4 /24, IPv6 /48) may hold, oldest evicted first
    (docs/operations.md#github-quotas). ``read_user_ids``/``write_user_ids`` are numeric
    GitHub ids; ``read_users``/``write_users`` the login names still waiting
    to be pinned to an id. The abuse limits (client metadata fetches, state
    size, rate limits, membership re-checks, family lifetime) are described
    in docs/operations.md#github-limits; ``audit_log`` is the audit lines' own
    rotating file (``""``: none), ``rate_log_seconds`` the most one "rate
    limited" line per endpoint is written (docs/operations.md#github-audit).
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
    read_user_ids: frozenset[str] = frozenset()
    write_user_ids: frozenset[str] = frozenset()
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
    unused_client_seconds: int = 86400
    max_pending: int = 10000
    address_quota: int = 40
    prefix_quota: int = 160
    purge_seconds: int = 300
    cimd_timeout_seconds: float = 3.0
    cimd_max_concurrent: int = 2
    cimd_failure_seconds: int = 60
    cimd_allow_networks: tuple[str, ...] = ()
    cimd_ca_file: str = ""
    rate_limit_per_second: float = 5.0
    rate_limit_burst: int = 60
    rate_limit_max_buckets: int = 100000
    audit_log: str = ""
    audit_log_bytes: int = 10 * 1024 * 1024
    audit_log_backups: int = 10
    rate_log_seconds: float = 60.0
    membership_check_seconds: int = 900
    membership_stale_seconds: int = 3600
    family_max_seconds: int = 90 * 86400

    @property
    def pending_logins(self) -> frozenset[str]:
        """Login names in the user allowlists (they count only once pinned to an id, ``s3rm auth pin``)."""
        return self.read_users | self.write_users

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
            raise ConfigError(name, "must list GitHub user ids or logins (teams as org/team-slug), comma separated")
        out.add(item.lower())
    return frozenset(out)


def _networks(get: Getter, name: str) -> tuple[str, ...]:
    import ipaddress

    out = []
    for item in (part.strip() for part in get(name).split(",")):
        if not item:
            continue
        try:
            out.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            raise ConfigError(name, "must list IP networks in CIDR form (10.1.0.0/16), comma separated") from None
    return tuple(out)


def _audit_path(value: str) -> str:
    """``S3RM_OAUTH_AUDIT_LOG``: a file path, or ``-`` for no file of its own (``""``)."""
    return "" if value.strip() == "-" else value.strip()


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
    for kind in ("read", "write"):  # numeric ids are trusted; logins wait for an admin's pin (module doc)
        users = lists.pop(f"{kind}_users")
        lists[f"{kind}_user_ids"] = frozenset(u for u in users if _ID.match(u))
        lists[f"{kind}_users"] = frozenset(u for u in users if not _ID.match(u))
    if not any(lists.values()):
        raise ConfigError("S3RM_GITHUB_READ_USERS", "github mode needs at least one allowlist (users, orgs or teams)")
    store = get("S3RM_AUTH_STORE", "postgres" if index_backend == "pgvector" else "sqlite").lower()
    if store not in AUTH_STORES:
        raise ConfigError("S3RM_AUTH_STORE", f"must be one of {', '.join(AUTH_STORES)}")
    if store == "postgres" and not pg_dsn:
        raise ConfigError("S3RM_PG_DSN", "is required when S3RM_AUTH_STORE=postgres (the shared auth state)")
    access = number(get, "S3RM_OAUTH_ACCESS_TOKEN_SECONDS", 600, int, 30, 3600)
    state_db = Path(get("S3RM_OAUTH_STATE_DB", str(default_state_db)))
    return GithubSettings(
        client_id=client_id,
        client_secret=secret,
        issuer=issuer,
        resource=public_url.rstrip("/"),
        authorize_url=_url(get, "S3RM_GITHUB_AUTHORIZE_URL", GithubSettings.authorize_url),
        token_url=_url(get, "S3RM_GITHUB_TOKEN_URL", GithubSettings.token_url),
        api_url=_url(get, "S3RM_GITHUB_API_URL", GithubSettings.api_url),
        state_db=state_db,
        state_store=store,
        access_token_seconds=access,
        refresh_token_seconds=number(get, "S3RM_OAUTH_REFRESH_TOKEN_SECONDS", 30 * 86400, int, 300, 365 * 86400),
        key_rotation_seconds=number(get, "S3RM_OAUTH_KEY_ROTATION_SECONDS", 30 * 86400, int, 3600, 365 * 86400),
        upstream_timeout_seconds=number(get, "S3RM_GITHUB_TIMEOUT_SECONDS", 10.0, float, 0.5, 60.0),
        max_clients=number(get, "S3RM_OAUTH_MAX_CLIENTS", 10000, int, 1, 10_000_000),
        unused_client_seconds=number(get, "S3RM_OAUTH_UNUSED_CLIENT_SECONDS", 86400, int, 600, 365 * 86400),
        max_pending=number(get, "S3RM_OAUTH_MAX_PENDING", 10000, int, 10, 10_000_000),
        address_quota=number(get, "S3RM_OAUTH_ADDRESS_QUOTA", 40, int, 1, 1_000_000),
        prefix_quota=number(get, "S3RM_OAUTH_PREFIX_QUOTA", 160, int, 1, 10_000_000),
        purge_seconds=number(get, "S3RM_OAUTH_PURGE_SECONDS", 300, int, 1, 86400),
        cimd_timeout_seconds=number(get, "S3RM_OAUTH_CIMD_TIMEOUT_SECONDS", 3.0, float, 0.5, 30.0),
        cimd_max_concurrent=number(get, "S3RM_OAUTH_CIMD_MAX_CONCURRENT", 2, int, 1, 64),
        cimd_failure_seconds=number(get, "S3RM_OAUTH_CIMD_FAILURE_SECONDS", 60, int, 0, 3600),
        cimd_allow_networks=_networks(get, "S3RM_OAUTH_CIMD_ALLOW_NETWORKS"),
        cimd_ca_file=get("S3RM_OAUTH_CIMD_CA_FILE"),
        rate_limit_per_second=number(get, "S3RM_OAUTH_RATE_LIMIT_PER_SECOND", 5.0, float, 0.0, 10000.0),
        rate_limit_burst=number(get, "S3RM_OAUTH_RATE_LIMIT_BURST", 60, int, 1, 100000),
        rate_limit_max_buckets=number(get, "S3RM_OAUTH_RATE_LIMIT_MAX_BUCKETS", 100000, int, 100, 10_000_000),
        audit_log=_audit_path(get("S3RM_OAUTH_AUDIT_LOG", str(state_db.parent / "audit.log"))),
        audit_log_bytes=number(get, "S3RM_OAUTH_AUDIT_LOG_BYTES", 10 * 1024 * 1024, int, 65536, 1 << 34),
        audit_log_backups=number(get, "S3RM_OAUTH_AUDIT_LOG_BACKUPS", 10, int, 1, 1000),
        rate_log_seconds=number(get, "S3RM_OAUTH_RATE_LOG_SECONDS", 60.0, float, 0.0, 86400.0),
        membership_check_seconds=number(get, "S3RM_GITHUB_MEMBERSHIP_CHECK_SECONDS", 900, int, 0, 86400),
        membership_stale_seconds=number(get, "S3RM_GITHUB_MEMBERSHIP_STALE_SECONDS", 3600, int, 0, 7 * 86400),
        family_max_seconds=number(get, "S3RM_OAUTH_FAMILY_MAX_SECONDS", 90 * 86400, int, 3600, 3650 * 86400),
        **lists,
    )
