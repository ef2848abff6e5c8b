"""github mode's process-wide auth service: store, keys, authorization server, bearer checks.

:class:`AuthService` is built once per process by ``create_app`` from the
configuration (docs/transport.md#github-mode). The MCP transport asks
:meth:`AuthService.authenticate` for every request and uses
:meth:`AuthService.challenge` for the ``WWW-Authenticate`` header of a 401
or 403; :mod:`gateway.auth.endpoints` serves the OAuth endpoints with it.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from gateway.auth.server import SCOPES, GatewayAuthorizationServer, install_audit_log
from gateway.auth.store import AuthStore, SqliteAuthStore
from gateway.auth.tokens import KeyRing, TokenInvalid, verify_access_token
from gateway.config import GatewayConfig
from gateway.config.github import SCOPE_READ, GithubSettings
from gateway.core.errors import GatewayError
from gateway.core.principal import Principal

__all__ = ["AuthService", "Unauthenticated", "open_auth_store"]

log = logging.getLogger("s3rm.auth")


def open_auth_store(config: GatewayConfig) -> AuthStore:
    """The :class:`AuthStore` github mode's settings choose (docs/operations.md#github-state).

    ``postgres``: a :class:`~gateway.auth.pgstore.PostgresAuthStore` on
    ``config.retrieval.pg_dsn``, shared by every gateway on that database;
    ``sqlite``: a :class:`~gateway.auth.store.SqliteAuthStore` on
    ``state_db`` (one gateway). Raises ``ValueError`` outside github mode and
    the store's own error (``psycopg.Error``, ``sqlite3.Error``) when it cannot be opened.
    """
    settings = config.github
    if settings is None:
        raise ValueError("open_auth_store needs github mode (GatewayConfig.github)")
    if settings.state_store == "postgres":
        from gateway.auth.pgstore import PostgresAuthStore

        return PostgresAuthStore(config.retrieval.pg_dsn)
    return SqliteAuthStore(settings.state_db)


class Unauthenticated(GatewayError):
    """No acceptable access token: ``error`` is ``None`` (none sent) or ``invalid_token``; ``message`` says why."""

    def __init__(self, error: str | None, message: str):
        super().__init__(message)
        self.error = error
        self.message = message


class AuthService:
    """The github-mode authorization server and resource-server checks of one process.

    ``clock() -> Unix seconds`` (tests move it); ``store`` defaults to
    :func:`open_auth_store` of the configuration;
    ``fetch(url, timeout)`` fetches client ID metadata documents (default: the
    SSRF-safe fetcher). A login name in the user allowlists that no admin has
    pinned to an id is logged as a warning (it grants nothing until
    ``s3rm auth pin``, docs/operations.md#github-ids).
    """

    def __init__(self, config: GatewayConfig, *, store: AuthStore | None = None,
                 clock: Callable[[], int] = lambda: int(time.time()),
                 fetch: Callable[[str, float], dict[str, Any]] | None = None):
        settings = config.github
        if settings is None:
            raise ValueError("AuthService needs github mode (GatewayConfig.github)")
        self.config = config
        self.settings: GithubSettings = settings
        self.clock = clock
        self.store = store or open_auth_store(config)
        install_audit_log(settings.audit_log, settings.audit_log_bytes, settings.audit_log_backups)
        self.ring = KeyRing(self.store, settings.key_rotation_seconds, settings.access_token_seconds, clock)
        self.server = GatewayAuthorizationServer(settings, self.store, self.ring, clock=clock, fetch=fetch)
        unpinned = sorted(settings.pending_logins - set(self.store.pinned_logins()))
        if unpinned:
            log.warning("github allowlists name %d login(s) not pinned to a GitHub id; they grant nothing until "
                        "'s3rm auth pin' (docs/operations.md#github-ids): %s", len(unpinned), ",".join(unpinned))

    # ------------------------------------------------------ resource server
    @property
    def resource_metadata_url(self) -> str:
        """RFC 9728 metadata URL of the MCP endpoint (path-suffixed form)."""
        from urllib.parse import urlsplit
        parts = urlsplit(self.settings.resource)
        return f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"

    def resource_metadata(self) -> dict[str, Any]:
        """The RFC 9728 protected resource metadata document."""
        return {"resource": self.settings.resource, "authorization_servers": [self.settings.issuer],
                "scopes_supported": list(SCOPES), "bearer_methods_supported": ["header"],
                "resource_name": "S3 Research Memory"}

    def challenge(self, error: str | None = None, scope: str = SCOPE_READ, description: str | None = None) -> str:
        """``WWW-Authenticate`` value: ``Bearer resource_metadata=..., scope=...`` (+ ``error``)."""
        parts = [f'resource_metadata="{self.resource_metadata_url}"', f'scope="{scope}"']
        if error:
            parts.insert(0, f'error="{error}"')
        if description:
            parts.append('error_description="' + description.replace('"', "'").replace("\\", "/") + '"')
        return "Bearer " + ", ".join(parts)

    def authenticate(self, authorization: str | None) -> Principal:
        """The ``github`` :class:`Principal` of a valid bearer access token; raises :class:`Unauthenticated`."""
        if authorization is None or not authorization.strip():
            raise Unauthenticated(None, "This MCP server needs an OAuth access token: sign in with GitHub "
                                  "(your MCP client starts the flow from this 401).")
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("invalid_token", "Send the access token as 'Authorization: Bearer <token>'.")
        try:
            claims = verify_access_token(self.ring, token.strip(), issuer=self.settings.issuer,
                                         audience=self.settings.resource, family_active=self.store.family_active)
        except TokenInvalid as exc:
            raise Unauthenticated("invalid_token", str(exc)) from None
        return Principal("github", claims.login, user_id=claims.user_id, scopes=claims.scopes)
