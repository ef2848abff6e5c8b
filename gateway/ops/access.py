"""Write authorisation and the caller's principal (docs/transport.md#write-auth).

Pure policy over the configuration and a :class:`~gateway.core.principal.Principal`:
the transport extracts the credentials from the HTTP request, the dispatcher
and the read tools ask these functions, so the rules sit below both.

* ``token`` mode (default): reads, initialize and tools/list are public; the
  write tools need ``Authorization: Bearer <token>`` whose SHA-256 hex
  digest equals ``S3RM_MCP_WRITE_TOKEN_SHA256`` (compared in constant time).
  No header → :class:`AuthError` 401; a wrong token (or an empty configured
  digest, i.e. writes disabled) → 403.
* ``open`` mode: every tool is public; the principal is the client address.
* ``github`` mode (docs/transport.md#github-mode): the transport has already
  verified the OAuth access token of every request and passes the caller as
  ``Credentials.principal`` (kind ``github``); the write tools need the
  scope ``mcp:write`` — without it :class:`AuthError` 403 ``insufficient_scope``.

Search-scope ACL (docs/retrieval.md#filters-and-scopes):
``S3RM_SEARCH_SCOPE_PRINCIPALS_JSON`` maps a scope to the short hashes of the
principals allowed to use it. :func:`principal_hash` is the first 16 hex of
SHA-256 of the verified credential (for the shared write token that is the
first 16 hex of ``S3RM_MCP_WRITE_TOKEN_SHA256``; for a GitHub user the first
16 hex of SHA-256 of ``github:<numeric user id>``, :func:`github_subject_hash`);
anonymous callers and bare client addresses have none. :func:`check_scope_access` is what
``search_lessons`` and ``find_analogies`` call before anything else.
"""
from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from gateway.config import GatewayConfig
from gateway.config.github import SCOPE_WRITE
from gateway.core.errors import GatewayError, ToolError
from gateway.core.principal import Principal

__all__ = [
    "AuthError",
    "Credentials",
    "authorize",
    "bearer_token",
    "principal_hash",
    "github_subject_hash",
    "check_scope_access",
]

_TOKEN_SUBJECT = "shared-write-token"


@dataclass(frozen=True)
class Credentials:
    """What the HTTP request says about its caller: the raw Authorization header and the peer address;
    in github mode also the ``principal`` the transport verified from the access token."""

    authorization: str | None = None
    remote_addr: str | None = None
    principal: Principal | None = None


class AuthError(GatewayError):
    """A write call is not authorised. ``status`` is 401 (no credentials) or 403 (wrong credentials)."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status = status
        self.reason = reason  # short code: missing_token | invalid_token | writes_disabled
        self.message = message


def bearer_token(authorization: str | None) -> str | None:
    """Return the token of an ``Authorization: Bearer <token>`` header, ``""`` for another scheme, ``None`` when absent."""
    if authorization is None or not authorization.strip():
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return ""
    return token.strip()


def _token_matches(token: str, config: GatewayConfig) -> bool:
    if not token or not config.write_token_sha256:
        return False
    digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
    return hmac.compare_digest(digest, config.write_token_sha256)


def authorize(kind: str, credentials: Credentials, config: GatewayConfig) -> Principal:
    """Return the caller's :class:`Principal` for a call to a tool of ``kind`` (``read``/``write``).

    Raises :class:`AuthError` for an unauthorised write in token mode. Reads
    never fail here: an absent or wrong token just leaves them anonymous.
    """
    if config.write_auth_mode == "github":
        return _authorize_github(kind, credentials)
    token = bearer_token(credentials.authorization)
    valid = token is not None and _token_matches(token, config)
    if config.write_auth_mode == "open":
        if valid:
            return Principal("token", _TOKEN_SUBJECT)
        return Principal("ip", credentials.remote_addr or "")
    if valid:
        return Principal("token", _TOKEN_SUBJECT)
    if kind != "write":
        return Principal("anonymous", "")
    if token is None:
        raise AuthError(
            401,
            "missing_token",
            "This tool changes Lessons and needs the shared write token: send 'Authorization: Bearer <token>'.",
        )
    if not config.write_token_sha256:
        raise AuthError(403, "writes_disabled", "Writes are disabled on this server (no write token is configured).")
    raise AuthError(403, "invalid_token", "The write token was not accepted.")


def _authorize_github(kind: str, credentials: Credentials) -> Principal:
    principal = credentials.principal
    if principal is None or principal.kind != "github":
        raise AuthError(401, "missing_token", "This MCP server needs an OAuth access token: sign in with GitHub.")
    if kind == "write" and SCOPE_WRITE not in principal.scopes:
        raise AuthError(403, "insufficient_scope",
                        "This tool changes Lessons and needs the mcp:write scope: authorize again with mcp:write "
                        "(your MCP client does this on this 403).")
    return principal


def github_subject_hash(user_id: str) -> str:
    """The 16-hex ACL identity of the GitHub user with numeric id ``user_id``: SHA-256(``github:<id>``)[:16]."""
    return hashlib.sha256(f"github:{user_id}".encode("utf-8")).hexdigest()[:16]


def principal_hash(principal: Principal, config: GatewayConfig) -> str | None:
    """The 16-hex ACL identity of a verified principal, or ``None`` for anonymous/address-only callers.

    ``token`` principals hash to the first 16 hex characters of the write
    token's SHA-256 (``S3RM_MCP_WRITE_TOKEN_SHA256[:16]``); raw credentials
    are never stored or compared.
    """
    if principal.kind == "token" and config.write_token_sha256:
        return config.write_token_sha256[:16]
    if principal.kind == "github" and principal.user_id:
        return github_subject_hash(principal.user_id)
    return None


def check_scope_access(scope: str | None, principal: Principal, config: GatewayConfig) -> None:
    """Refuse a search scope the caller may not use (no-op for ``None`` or a scope without an ACL).

    Raises :class:`~gateway.core.errors.ToolError`:
    ``scope_requires_authentication`` for an anonymous caller of an ACL'd
    scope, ``scope_forbidden`` when the caller's :func:`principal_hash` is not
    listed. Neither is retryable; neither names who is allowed.
    """
    if scope is None:
        return
    allowed = config.search_scope_principals.get(scope)
    if allowed is None:
        return
    identity = principal_hash(principal, config)
    if identity is None:
        raise ToolError(
            "scope_requires_authentication",
            f"The search scope {scope!r} is restricted: call with a credential that this server accepts "
            "(Authorization: Bearer <token>), or search without this scope.",
        )
    if identity not in allowed:
        raise ToolError("scope_forbidden", f"This credential may not use the search scope {scope!r}.")
