"""Write authorisation and the caller's principal (seeds "연구실 공용 MCP 연결", DESIGN.md §3).

* ``token`` mode (default): reads, initialize and tools/list are public; the
  five write tools need ``Authorization: Bearer <token>`` whose SHA-256 hex
  digest equals ``S3RM_MCP_WRITE_TOKEN_SHA256`` (compared in constant time).
  No header → :class:`AuthError` 401; a wrong token (or an empty configured
  digest, i.e. writes disabled) → 403.
* ``open`` mode: every tool is public; the principal is the client address.
"""
from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from gateway.config import GatewayConfig
from gateway.tools.base import Principal

__all__ = ["AuthError", "Credentials", "authorize", "bearer_token"]

_TOKEN_SUBJECT = "shared-write-token"


@dataclass(frozen=True)
class Credentials:
    """What the HTTP request says about its caller: the raw Authorization header and the peer address."""

    authorization: str | None = None
    remote_addr: str | None = None


class AuthError(Exception):
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
