"""The OAuth 2.1 authorization server of github mode, built on Authlib (docs/transport.md#github-mode).

Authlib does the protocol work: the authorization-code grant with the PKCE
extension, the refresh-token grant, client authentication at the token and
revocation endpoints (RFC 7009), dynamic client registration (RFC 7591) and
the RFC 9207 ``iss`` parameter. What Authlib lacks is small code here:

* **S256 only, always** (:class:`S256Only`): a missing ``code_challenge`` or
  ``code_challenge_method`` other than ``S256`` is ``invalid_request``;
* **RFC 8707 resource indicators**: the only resource is the MCP endpoint;
  another ``resource`` at the token endpoint is ``invalid_target`` and every
  token's ``aud`` is the resource it was granted for (the ``resource`` check
  of the authorization endpoint is in :mod:`gateway.auth.endpoints`);
* **loopback redirect URIs** (RFC 8252 §7.3): a registered
  ``http://127.0.0.1/...``, ``http://[::1]/...`` or ``http://localhost/...``
  URI matches the same URI on any port (:func:`redirect_matches`);
* **client ID metadata documents**: an ``https`` ``client_id`` is fetched
  with :func:`gateway.auth.fetch.fetch_json` (SSRF rules there), must name
  itself as ``client_id``, and is cached for five minutes;
* **rotating refresh tokens with reuse detection**: every refresh returns a
  new refresh token of the same family; presenting a used one revokes the
  family (and with it every access token minted from it), as does replaying
  an authorization code.

Tokens: :mod:`gateway.auth.tokens` (JWT, ES256, rotating keys). State:
:class:`gateway.auth.store.AuthStore`.
"""
from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from authlib.common.security import generate_token
from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.integrations.flask_oauth2.requests import FlaskJsonRequest, FlaskOAuth2Payload, FlaskOAuth2Request
from authlib.oauth2 import OAuth2Error, OAuth2Request
from authlib.oauth2.rfc6749 import AuthorizationCodeMixin, ClientMixin, TokenMixin, grants, scope_to_list
from authlib.oauth2.rfc6749.errors import InvalidClientError, InvalidRequestError
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload, JsonRequest
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7591 import (ClientMetadataClaims, ClientRegistrationEndpoint, InvalidClientMetadataError,
                                    InvalidRedirectURIError)
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc9207 import IssuerParameter
from flask import request as flask_request

from gateway.auth.fetch import FetchError, fetch_json
from gateway.auth.store import AuthStore, digest
from gateway.auth.tokens import KeyRing, mint_access_token, token_family
from gateway.config.github import SCOPE_READ, SCOPE_WRITE, GithubSettings

__all__ = ["GatewayAuthorizationServer", "GrantUser", "InvalidTargetError", "OAuthClient", "SCOPES",
           "StoredRequest", "redirect_matches", "redirect_uri_allowed"]

#: Scopes this server grants, in order.
SCOPES = (SCOPE_READ, SCOPE_WRITE)
_AUTH_METHODS = ["none", "client_secret_post", "client_secret_basic"]
_LOOPBACK = {"127.0.0.1", "::1", "localhost"}
_FORBIDDEN_SCHEMES = {"javascript", "data", "file", "vbscript", "about", "blob", "ftp", "ws", "wss"}
_CIMD_TTL = 300
_CIMD_MAX = 256


class InvalidTargetError(OAuth2Error):
    """RFC 8707 ``invalid_target``: the requested resource is not this server's MCP endpoint."""

    error = "invalid_target"


def redirect_uri_allowed(uri: str) -> bool:
    """A redirect URI a client may register: https, http on a loopback host, or a private-use scheme
    (RFC 8252 §7.1, e.g. ``cursor://...``); never a fragment, credentials or a dangerous scheme."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return False
    if not parts.scheme or parts.fragment or parts.username or parts.password:
        return False
    scheme = parts.scheme.lower()
    if scheme == "https":
        return bool(parts.hostname)
    if scheme == "http":
        return (parts.hostname or "") in _LOOPBACK
    return scheme not in _FORBIDDEN_SCHEMES and bool(parts.netloc or parts.path)


def redirect_matches(registered: str, requested: str) -> bool:
    """Exact match, or the same loopback http URI with any port (RFC 8252 §7.3)."""
    if hmac.compare_digest(registered.encode(), requested.encode()):
        return True
    try:
        a, b = urlsplit(registered), urlsplit(requested)
        b.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return False
    return (a.scheme == b.scheme == "http" and (a.hostname or "") in _LOOPBACK and a.hostname == b.hostname
            and a.path == b.path and a.query == b.query and not b.fragment and not b.username)


@dataclass(frozen=True)
class GrantUser:
    """The person behind a grant: GitHub id and login, the scopes the allowlists allow, the
    refresh-token ``family`` and the ``resource`` the grant is for."""

    user_id: str
    login: str
    allowed: frozenset[str]
    family: str = ""
    resource: str = ""

    def get_user_id(self) -> str:
        """Authlib's user id: the GitHub user id."""
        return self.user_id


class OAuthClient(ClientMixin):
    """A registered (RFC 7591) or metadata-document client; ``metadata`` is its client metadata."""

    def __init__(self, client_id: str, metadata: dict[str, Any], secret_hash: str | None):
        self.client_id = client_id
        self.metadata = metadata
        self.secret_hash = secret_hash

    @property
    def name(self) -> str:
        """``client_name`` or the client id."""
        return str(self.metadata.get("client_name") or self.client_id)

    @property
    def redirect_uris(self) -> list[str]:
        """Registered redirect URIs."""
        return [u for u in self.metadata.get("redirect_uris") or [] if isinstance(u, str)]

    def get_client_id(self) -> str:
        """See Authlib's ClientMixin."""
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        """The only redirect URI, when exactly one is registered."""
        uris = self.redirect_uris
        return uris[0] if len(uris) == 1 else None

    def get_allowed_scope(self, scope: str) -> str:
        """The requested scopes this server knows, in :data:`SCOPES` order."""
        requested = set(scope_to_list(scope) or [])
        return " ".join(s for s in SCOPES if s in requested)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        """See :func:`redirect_matches`."""
        return any(redirect_matches(uri, redirect_uri) for uri in self.redirect_uris)

    def check_client_secret(self, client_secret: str) -> bool:
        """Constant-time compare of the secret's SHA-256 with the stored hash."""
        return bool(self.secret_hash) and hmac.compare_digest(digest(client_secret), self.secret_hash)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        """The registered ``token_endpoint_auth_method`` (default ``none``) at both token endpoints."""
        return method == self.metadata.get("token_endpoint_auth_method", "none")

    def check_response_type(self, response_type: str) -> bool:
        """Only ``code``."""
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        """``authorization_code`` and ``refresh_token`` (when registered)."""
        types = self.metadata.get("grant_types") or ["authorization_code", "refresh_token"]
        return grant_type in types and grant_type in ("authorization_code", "refresh_token")


class _Code(AuthorizationCodeMixin):
    def __init__(self, data: dict[str, Any]):
        self.data = data

    def get_redirect_uri(self) -> str:
        return self.data["redirect_uri"]

    def get_scope(self) -> str:
        return self.data["scope"]


@dataclass
class _Refresh(TokenMixin):
    family: str
    data: dict[str, Any]
    client: Any = None

    def check_client(self, client) -> bool:
        return self.data.get("client_id") == client.get_client_id()

    def get_scope(self) -> str:
        return self.data["scope"]

    def get_expires_in(self) -> int:
        return 0

    def is_expired(self) -> bool:
        return False

    def is_revoked(self) -> bool:
        return False

    def get_user(self):
        return None

    def get_client(self):
        return self.client


def _user(data: dict[str, Any], family: str) -> GrantUser:
    return GrantUser(data["user_id"], data["login"], frozenset(data["allowed"]), family, data["resource"])


def _check_resource(values: list[str], resource: str) -> None:
    if len(values) > 1 or (values and values[0].rstrip("/") != resource):
        raise InvalidTargetError(description=f"This server grants tokens only for the resource {resource}.")


class S256Only(CodeChallenge):
    """PKCE is required and only ``S256`` is accepted (``plain`` and a missing method are refused)."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def validate_code_challenge(self, grant, redirect_uri):
        """Refuse a request without ``code_challenge`` or with a method other than ``S256``."""
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("PKCE is required: send code_challenge with code_challenge_method=S256.")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("Only code_challenge_method=S256 is supported (plain is refused).")
        return super().validate_code_challenge(grant, redirect_uri)

    def get_authorization_code_challenge(self, authorization_code):
        """The stored challenge."""
        return authorization_code.data["code_challenge"]

    def get_authorization_code_challenge_method(self, authorization_code):
        """Always ``S256``."""
        return "S256"


class StoredRequest(OAuth2Request):
    """An authorization request replayed from its stored parameters (after GitHub login and consent)."""

    def __init__(self, uri: str, params: dict[str, str]):
        super().__init__("GET", uri)
        self._params = dict(params)
        self.payload = BasicOAuth2Payload(self._params)

    @property
    def args(self):
        return self._params

    @property
    def form(self):
        return {}


class _FlaskRequest(FlaskOAuth2Request):
    """The current Flask request with its URL rebuilt on the public issuer (TLS ends at the proxy)."""

    def __init__(self, request, base: str):
        OAuth2Request.__init__(self, request.method, base + request.full_path.rstrip("?"), headers=request.headers)
        self._request = request
        self.payload = FlaskOAuth2Payload(request)


class _LenientJsonPayload:
    """The JSON body, or ``None`` when it is not JSON (refused as an OAuth error, not a bare 400/415)."""

    def __init__(self, request):
        self._request = request

    @property
    def data(self):
        return self._request.get_json(force=True, silent=True)


class _FlaskJson(FlaskJsonRequest):
    def __init__(self, request, base: str):
        JsonRequest.__init__(self, request.method, base + request.path, request.headers)
        self.payload = _LenientJsonPayload(request)


@dataclass
class _Services:
    settings: GithubSettings
    store: AuthStore
    ring: KeyRing
    clock: Callable[[], int]
    fetch: Callable[[str], dict[str, Any]]
    cimd_cache: dict[str, tuple[float, OAuthClient]] = field(default_factory=dict)
    cimd_lock: threading.Lock = field(default_factory=threading.Lock)


class GatewayAuthorizationServer(AuthorizationServer):
    """Authlib's Flask authorization server wired to the gateway's store, keys and settings.

    ``clock() -> Unix seconds``; ``fetch(url) -> dict`` fetches a client ID
    metadata document (default :func:`gateway.auth.fetch.fetch_json`).
    ``metadata`` is the RFC 8414 document. Endpoint names for
    :meth:`create_endpoint_response`: ``revocation``, ``client_registration``.
    """

    def __init__(self, settings: GithubSettings, store: AuthStore, ring: KeyRing, *,
                 clock: Callable[[], int] = lambda: int(time.time()),
                 fetch: Callable[[str], dict[str, Any]] | None = None):
        super().__init__(query_client=self._query_client, save_token=self._save_token)
        self.svc = _Services(settings, store, ring, clock, fetch or fetch_json)
        self.scopes_supported = list(SCOPES)
        self.register_token_generator("default", self._generate_token)
        self.register_grant(_CodeGrant, [S256Only(required=True)])
        self.register_grant(_RefreshGrant)
        self.register_endpoint(_Revocation)
        self.register_endpoint(_Registration(claims_classes=[ClientMetadataClaims]))
        self.register_extension(_Issuer(settings.issuer))
        issuer = settings.issuer
        self.metadata = {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "registration_endpoint": f"{issuer}/register",
            "revocation_endpoint": f"{issuer}/revoke",
            "jwks_uri": f"{issuer}/oauth/jwks",
            "scopes_supported": list(SCOPES),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": list(_AUTH_METHODS),
            "revocation_endpoint_auth_methods_supported": list(_AUTH_METHODS),
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
            "client_id_metadata_document_supported": True,
        }

    # ------------------------------------------------------------ requests
    def create_oauth2_request(self, request):
        """A stored request as is; the current Flask request rebuilt on the issuer URL."""
        if isinstance(request, OAuth2Request):
            return request
        return _FlaskRequest(flask_request, self.svc.settings.issuer)

    def create_json_request(self, request):
        """The current Flask JSON request rebuilt on the issuer URL."""
        return _FlaskJson(flask_request, self.svc.settings.issuer)

    # ------------------------------------------------------------- clients
    def _query_client(self, client_id: str):
        if not isinstance(client_id, str) or not client_id:
            return None
        if client_id.startswith("https://"):
            return self._metadata_client(client_id)
        found = self.svc.store.get_client(client_id)
        return OAuthClient(client_id, found[0], found[1]) if found else None

    def _metadata_client(self, url: str) -> OAuthClient:
        now = time.monotonic()
        with self.svc.cimd_lock:
            cached = self.svc.cimd_cache.get(url)
            if cached and cached[0] > now:
                return cached[1]
        try:
            document = self.svc.fetch(url)
        except FetchError as exc:
            raise InvalidClientError(description=f"The client metadata document was refused ({exc.reason}): {exc}")
        uris = document.get("redirect_uris")
        if document.get("client_id") != url or not isinstance(uris, list) or not uris:
            raise InvalidClientError(description="The client metadata document must name its own URL as client_id "
                                     "and list redirect_uris.")
        if not all(isinstance(u, str) and redirect_uri_allowed(u) for u in uris):
            raise InvalidClientError(description="The client metadata document lists a redirect URI this server "
                                     "does not accept.")
        metadata = {"client_name": str(document.get("client_name") or url)[:200], "redirect_uris": uris,
                    "token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token"]}
        client = OAuthClient(url, metadata, None)
        with self.svc.cimd_lock:
            if len(self.svc.cimd_cache) >= _CIMD_MAX:
                self.svc.cimd_cache.clear()
            self.svc.cimd_cache[url] = (now + _CIMD_TTL, client)
        return client

    # -------------------------------------------------------------- tokens
    def _generate_token(self, grant_type, client, user: GrantUser, scope, expires_in=None,
                        include_refresh_token=True) -> dict[str, Any]:
        settings = self.svc.settings
        access, lifetime = mint_access_token(
            self.svc.ring, issuer=settings.issuer, audience=user.resource, user_id=user.user_id, login=user.login,
            scope=scope, client_id=client.get_client_id(), family=user.family, lifetime=settings.access_token_seconds)
        token = {"token_type": "Bearer", "access_token": access, "expires_in": lifetime, "scope": scope}
        if include_refresh_token:
            token["refresh_token"] = generate_token(48)
        return token

    def _save_token(self, token: dict[str, Any], request) -> None:
        refresh = token.get("refresh_token")
        if not refresh:
            return
        user: GrantUser = request.user
        data = {"client_id": request.client.get_client_id(), "user_id": user.user_id, "login": user.login,
                "allowed": sorted(user.allowed), "resource": user.resource, "scope": token["scope"]}
        self.svc.store.save_refresh(digest(refresh), user.family, data,
                                    self.svc.clock() + self.svc.settings.refresh_token_seconds)

    def grant_scope(self, requested: str, user: GrantUser) -> str:
        """The scopes a consented request gets: requested ∩ allowed (``mcp:read`` when none was asked)."""
        wanted = set(scope_to_list(requested) or [SCOPE_READ])
        return " ".join(s for s in SCOPES if s in wanted and s in user.allowed)


class _Issuer(IssuerParameter):
    def __init__(self, issuer: str):
        self.issuer = issuer

    def get_issuer(self) -> str:
        return self.issuer


class _CodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = _AUTH_METHODS

    @property
    def svc(self) -> _Services:
        return self.server.svc

    def save_authorization_code(self, code: str, request) -> None:
        user: GrantUser = request.user
        data = {"client_id": request.client.get_client_id(), "redirect_uri": request.payload.redirect_uri or "",
                "scope": self.server.grant_scope(request.payload.scope, user),
                "code_challenge": request.payload.data.get("code_challenge"),
                "user_id": user.user_id, "login": user.login, "allowed": sorted(user.allowed),
                "resource": user.resource, "family": secrets.token_urlsafe(16)}
        self.svc.store.save_code(digest(code), data, self.svc.clock() + self.svc.settings.code_seconds)

    def query_authorization_code(self, code: str, client):
        status, data = self.svc.store.consume_code(digest(code), self.svc.clock())
        if status == "used" and data:  # a replayed code: revoke what its first redemption issued
            self.svc.store.revoke_family(data["family"], self.svc.clock())
        if status != "ok" or data is None or data["client_id"] != client.get_client_id():
            return None
        return _Code(data)

    def delete_authorization_code(self, authorization_code) -> None:
        return None  # consumed (marked used) when queried

    def authenticate_user(self, authorization_code) -> GrantUser:
        return _user(authorization_code.data, authorization_code.data["family"])

    def validate_token_request(self):
        super().validate_token_request()
        code = self.request.authorization_code
        _check_resource(self.request.payload.datalist.get("resource", []), code.data["resource"])


class _RefreshGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = _AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token: str):
        svc = self.server.svc
        outcome = svc.store.use_refresh(digest(refresh_token), svc.clock())
        if outcome.status != "ok":  # a reused token has just revoked its whole family
            return None
        return _Refresh(outcome.family, outcome.data)

    def authenticate_user(self, refresh_token: _Refresh) -> GrantUser:
        return _user(refresh_token.data, refresh_token.family)

    def revoke_old_credential(self, refresh_token) -> None:
        return None  # marked used by authenticate_refresh_token

    def validate_token_request(self):
        super().validate_token_request()
        _check_resource(self.request.payload.datalist.get("resource", []), self.request.refresh_token.data["resource"])


@dataclass
class _Revocable:
    family: str
    client_id: str

    def check_client(self, client) -> bool:
        return self.client_id == client.get_client_id()


class _Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = _AUTH_METHODS

    def query_token(self, token_string: str, token_type_hint):
        svc = self.server.svc
        found = svc.store.refresh_owner(digest(token_string)) or token_family(svc.ring, token_string)
        return _Revocable(*found) if found else None

    def revoke_token(self, token: _Revocable, request) -> None:
        self.server.svc.store.revoke_family(token.family, self.server.svc.clock())


class _Registration(ClientRegistrationEndpoint):
    def authenticate_token(self, request):
        return True  # open registration: MCP clients register anonymously; consent protects every grant

    def get_server_metadata(self):
        return self.server.metadata

    def generate_client_secret(self, request):
        data = request.payload.data or {}
        if data.get("token_endpoint_auth_method", "none") == "none":
            return None
        return generate_token(48)

    def create_registration_response(self, request):
        data = request.payload.data
        if not isinstance(data, dict):
            raise InvalidClientMetadataError(description="The registration body must be a JSON object (RFC 7591).")
        if self.server.svc.store.count_clients() >= self.server.svc.settings.max_clients:
            raise InvalidClientMetadataError(description="This server accepts no more client registrations "
                                             "(S3RM_OAUTH_MAX_CLIENTS reached); ask its administrator.")
        data.setdefault("token_endpoint_auth_method", "none")
        uris = data.get("redirect_uris")
        if not isinstance(uris, list) or not uris or not all(
                isinstance(u, str) and redirect_uri_allowed(u) for u in uris):
            raise InvalidRedirectURIError(description="redirect_uris must list https URIs, http loopback URIs "
                                          "or private-use scheme URIs, without fragments")
        status, body, headers = super().create_registration_response(request)
        if body.get("client_secret") is None:
            body.pop("client_secret", None)
            body.pop("client_secret_expires_at", None)
        return status, body, headers

    def save_client(self, client_info, client_metadata, request):
        secret = client_info.get("client_secret")
        metadata = dict(client_metadata)
        self.server.svc.store.save_client(client_info["client_id"], metadata, digest(secret) if secret else None,
                                          self.server.svc.clock())
        return OAuthClient(client_info["client_id"], metadata, digest(secret) if secret else None)
