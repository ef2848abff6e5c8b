"""Signing keys with rotation, and the JWT access tokens of github mode (docs/transport.md#github-tokens).

Access tokens are JWTs (RFC 9068 shape, ``typ`` ``at+jwt``) signed with
ES256 by the newest key of the :class:`KeyRing`, carrying ``iss`` (the
issuer), ``aud`` (the one resource they are for, RFC 8707), ``sub`` (the
GitHub user id), ``login``, ``scope``, ``client_id``, ``fid`` (the
refresh-token family; revoking the family revokes the token), ``iat``,
``exp`` (short: ``S3RM_OAUTH_ACCESS_TOKEN_SECONDS``) and ``jti``.

Rotation: a key older than the rotation period stops signing (a new one is
made and stored) and keeps verifying until every token it signed has
expired, then it is deleted. Keys live in the :class:`~gateway.auth.store.AuthStore`,
so tokens stay valid across restarts. joserfc does the JWS work.
"""
from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass
from typing import Any, Callable

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet

from gateway.auth.store import AuthStore, SigningKey
from gateway.core.errors import GatewayError

__all__ = ["AccessClaims", "KeyRing", "TokenInvalid", "mint_access_token", "token_family", "verify_access_token"]

_ALG = "ES256"


class TokenInvalid(GatewayError):
    """An access token is not acceptable; ``reason`` is ``malformed``, ``signature``, ``expired``,
    ``issuer``, ``audience`` or ``revoked``."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class AccessClaims:
    """The verified claims of an access token."""

    user_id: str
    login: str
    scopes: frozenset[str]
    client_id: str
    family: str
    expires_at: int


class KeyRing:
    """The signing keys in ``store``, rotated every ``rotation_seconds``; ``clock() -> Unix seconds``.

    ``max_token_seconds`` is the longest access-token lifetime, i.e. how long
    a retired key must keep verifying. Thread-safe.
    """

    def __init__(self, store: AuthStore, rotation_seconds: int, max_token_seconds: int, clock: Callable[[], int]):
        self.store = store
        self.rotation_seconds = rotation_seconds
        self.max_token_seconds = max_token_seconds
        self.clock = clock
        self._lock = threading.Lock()

    def _keys(self) -> list[SigningKey]:
        now = self.clock()
        with self._lock:
            keys = self.store.signing_keys()
            if not keys or keys[0].created_at + self.rotation_seconds <= now:
                key = ECKey.generate_key("P-256", parameters={"kid": secrets.token_hex(8), "alg": _ALG, "use": "sig"},
                                         private=True)
                record = SigningKey(key.kid, json.dumps(key.as_dict(private=True)), now)
                self.store.add_signing_key(record)
                keys = [record, *keys]
            # key i stopped signing when key i-1 was made; it verifies until the longest token it signed expired
            keep = [keys[0]]
            for newer, older in zip(keys, keys[1:]):
                if newer.created_at + self.max_token_seconds >= now:
                    keep.append(older)
                else:
                    self.store.delete_signing_key(older.kid)
            return keep

    def signing_key(self) -> ECKey:
        """The newest key (made when there is none or it is older than the rotation period)."""
        return ECKey.import_key(json.loads(self._keys()[0].private_jwk))

    def key_set(self) -> KeySet:
        """Every key that may still verify a token (private; for verification only)."""
        return KeySet([ECKey.import_key(json.loads(k.private_jwk)) for k in self._keys()])

    def public_jwks(self) -> dict[str, Any]:
        """``{"keys": [...]}`` with the public halves, for ``jwks_uri``."""
        return {"keys": [ECKey.import_key(json.loads(k.private_jwk)).as_dict(private=False) for k in self._keys()]}


def mint_access_token(ring: KeyRing, *, issuer: str, audience: str, user_id: str, login: str, scope: str,
                      client_id: str, family: str, lifetime: int) -> tuple[str, int]:
    """Sign a new access token; returns (token, expires_in seconds)."""
    now = ring.clock()
    key = ring.signing_key()
    claims = {"iss": issuer, "aud": audience, "sub": user_id, "login": login, "scope": scope,
              "client_id": client_id, "fid": family, "iat": now, "exp": now + lifetime,
              "jti": secrets.token_urlsafe(12)}
    token = jwt.encode({"alg": _ALG, "kid": key.kid, "typ": "at+jwt"}, claims, key)
    return token, lifetime


def verify_access_token(ring: KeyRing, token: str, *, issuer: str, audience: str,
                        family_active: Callable[[str], bool]) -> AccessClaims:
    """Check signature, issuer, audience (exactly this resource), expiry and family; raises :class:`TokenInvalid`."""
    try:
        decoded = jwt.decode(token, ring.key_set(), algorithms=[_ALG])
    except (JoseError, ValueError, TypeError):
        raise TokenInvalid("signature", "The access token is malformed or its signature is not valid.") from None
    claims = decoded.claims
    if decoded.header.get("typ") != "at+jwt":
        raise TokenInvalid("malformed", "The token is not an access token of this server.")
    if claims.get("iss") != issuer:
        raise TokenInvalid("issuer", "The access token was issued by another authorization server.")
    if claims.get("aud") != audience:
        raise TokenInvalid("audience", "The access token was issued for another resource (RFC 8707 audience).")
    exp = claims.get("exp")
    if not isinstance(exp, int) or exp <= ring.clock():
        raise TokenInvalid("expired", "The access token has expired; refresh it or sign in again.")
    for name in ("sub", "login", "scope", "client_id", "fid"):
        if not isinstance(claims.get(name), str):
            raise TokenInvalid("malformed", "The access token lacks a required claim.")
    if not family_active(claims["fid"]):
        raise TokenInvalid("revoked", "The access token was revoked.")
    return AccessClaims(user_id=claims["sub"], login=claims["login"], scopes=frozenset(claims["scope"].split()),
                        client_id=claims["client_id"], family=claims["fid"], expires_at=exp)


def token_family(ring: KeyRing, token: str) -> tuple[str, str] | None:
    """(family, client_id) of an access token signed by one of ``ring``'s keys (expired or not), else ``None``.

    Used by revocation (RFC 7009): revoking an access token revokes its family.
    """
    try:
        claims = jwt.decode(token, ring.key_set(), algorithms=[_ALG]).claims
    except (JoseError, ValueError, TypeError):
        return None
    family, client = claims.get("fid"), claims.get("client_id")
    return (family, client) if isinstance(family, str) and isinstance(client, str) else None
