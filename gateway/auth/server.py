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
  through :class:`gateway.auth.fetch.MetadataFetcher` (SSRF rules, absolute
  deadline, concurrency cap with a per-address share, negative cache there), must name itself as
  ``client_id``, and is cached for five minutes; the caller learns only that
  the document was refused (the reason goes to the log);
* **bounded client metadata** (:data:`METADATA_LIMITS`): every field has a
  size limit, unknown fields are dropped; one address (and one network)
  holds a quota of never-used clients, its oldest evicted first
  (docs/operations.md#github-quotas); the registration cap is atomic and
  evicts the oldest never-used client when full;
* **rotating refresh tokens with reuse detection**: every refresh returns a
  new refresh token of the same family; presenting a used one revokes the
  family (and with it every access token minted from it), as does replaying
  an authorization code. A refresh refused for its request (scope, resource,
  GitHub unreachable) leaves the token usable: it is consumed only once the
  request passed every check;
* **membership on refresh** (docs/operations.md#github-credential): at most
  every ``S3RM_GITHUB_MEMBERSHIP_CHECK_SECONDS`` per family the allowlists
  are re-evaluated against GitHub with the user's stored (encrypted) GitHub
  token; no longer allowed → the family is revoked; GitHub unreachable and
  the last good check older than ``S3RM_GITHUB_MEMBERSHIP_STALE_SECONDS`` →
  ``temporarily_unavailable``. A family lives at most
  ``S3RM_OAUTH_FAMILY_MAX_SECONDS`` from its sign-in.

Audit lines (logger ``s3rm.auth.audit``, no secrets, with the client
address; also in their own rotating file, :func:`install_audit_log`):
``sign_in``, ``token_issued``, ``refreshed``, ``refresh_reuse``,
``revoked``, ``membership_lost`` (:func:`audit`).

Tokens: :mod:`gateway.auth.tokens` (JWT, ES256, rotating keys). State:
:class:`gateway.auth.store.AuthStore`.
"""
from __future__ import annotations

import hmac
import logging
import re
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
from authlib.oauth2.rfc6749.errors import (InvalidClientError, InvalidGrantError, InvalidRequestError,
                                           InvalidScopeError, UnsupportedResponseTypeError)
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload, JsonRequest
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7591 import (ClientMetadataClaims, ClientRegistrationEndpoint, InvalidClientMetadataError,
                                    InvalidRedirectURIError)
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc9207 import IssuerParameter
from flask import g as flask_g
from flask import has_request_context
from flask import request as flask_request

from gateway.auth import github
from gateway.auth.fetch import FetchError, MetadataFetcher
from gateway.auth.store import AuthStore, Family, digest
from gateway.auth.tokens import KeyRing, mint_access_token, token_family
from gateway.auth.vault import Vault
from gateway.config.github import SCOPE_READ, SCOPE_WRITE, GithubSettings
from gateway.core.errors import GatewayError

__all__ = ["GatewayAuthorizationServer", "GrantUser", "InvalidTargetError", "METADATA_LIMITS", "OAuthClient",
           "SCOPES", "StoredRequest", "TemporarilyUnavailable", "audit", "clean_metadata", "install_audit_log",
           "redirect_matches", "redirect_uri_allowed"]

log = logging.getLogger("s3rm.auth")
audit_log = logging.getLogger("s3rm.auth.audit")


def audit(event: str, **fields: str | int) -> None:
    """One audit line ``oauth_audit event=<event> key=value ... addr=<client address>`` (values must never be
    secrets; ``addr`` is the caller's address when a request is being served, docs/operations.md#github-audit)."""
    if has_request_context() and "addr" not in fields and flask_g.get("s3rm_address"):
        fields = {**fields, "addr": flask_g.s3rm_address}
    audit_log.info("oauth_audit event=%s %s", event, " ".join(f"{k}={_plain(v)}" for k, v in fields.items()))


_AUDIT_FILES: dict[str, logging.Handler] = {}


def install_audit_log(path: str, max_bytes: int, backups: int) -> None:
    """Send the audit lines (logger ``s3rm.auth.audit``) also to their own rotating file ``path`` (at most
    ``backups`` + 1 files of ``max_bytes``), once per process and path; ``""`` installs nothing. Nothing
    but audit lines goes there (the rate-limit and request lines stay in the main log)."""
    from logging.handlers import RotatingFileHandler
    from pathlib import Path

    class PrivateRotatingFile(RotatingFileHandler):
        def _open(self):  # every file it opens, after each rotation too: logins and addresses stay private
            stream = super()._open()
            Path(self.baseFilename).chmod(0o600)
            return stream

    if not path or path in _AUDIT_FILES:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    handler = PrivateRotatingFile(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%dT%H:%M:%S%z"))
    handler.setLevel(logging.INFO)
    audit_log.addHandler(handler)
    audit_log.setLevel(logging.INFO)
    _AUDIT_FILES[path] = handler


def _plain(value: str | int) -> str:
    return re.sub(r"[^A-Za-z0-9._:/@+-]", "?", str(value))[:200] or "-"

#: Scopes this server grants, in order.
SCOPES = (SCOPE_READ, SCOPE_WRITE)
_AUTH_METHODS = ["none", "client_secret_post", "client_secret_basic"]
_LOOPBACK = {"127.0.0.1", "::1", "localhost"}
_FORBIDDEN_SCHEMES = {"javascript", "data", "file", "vbscript", "about", "blob", "ftp", "ws", "wss"}
_CIMD_TTL = 300
_CIMD_MAX = 256
#: A redirect URI: printable ASCII without space, quote, backslash, angle brackets, braces or pipe.
_URI_CHARS = re.compile(r"^[!#$%&'()*+,\-./0-9:;=?@A-Z\[\]_a-z~]{1,2000}$")

#: Client metadata this server keeps, with limits: strings (max characters) or lists (max items, max
#: characters each). Anything else in a registration or metadata document is dropped.
METADATA_LIMITS: dict[str, tuple[str, int, int]] = {
    "client_name": ("str", 200, 0), "client_uri": ("str", 500, 0), "logo_uri": ("str", 500, 0),
    "tos_uri": ("str", 500, 0), "policy_uri": ("str", 500, 0), "software_id": ("str", 200, 0),
    "software_version": ("str", 100, 0), "scope": ("str", 200, 0),
    "token_endpoint_auth_method": ("str", 40, 0), "redirect_uris": ("list", 10, 2000),
    "grant_types": ("list", 4, 40), "response_types": ("list", 2, 20), "contacts": ("list", 5, 200),
}


class TemporarilyUnavailable(OAuth2Error, GatewayError):
    """RFC 6749 ``temporarily_unavailable`` (HTTP 503 with ``Retry-After``): try again shortly."""

    error = "temporarily_unavailable"
    status_code = 503

    def __init__(self, description: str, retry_after: int = 5, **kwargs: Any):
        super().__init__(description=description, **kwargs)
        self.retry_after = retry_after

    def get_headers(self):
        """The JSON headers plus ``Retry-After``."""
        return [*super().get_headers(), ("Retry-After", str(self.retry_after))]


def clean_metadata(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` reduced to :data:`METADATA_LIMITS` fields; raises ``InvalidClientMetadataError`` naming the
    first field over its limit or of the wrong type."""
    out: dict[str, Any] = {}
    for name, (kind, limit, each) in METADATA_LIMITS.items():
        if name not in data:
            continue
        value = data[name]
        if kind == "str":
            if not isinstance(value, str) or len(value) > limit:
                raise InvalidClientMetadataError(description=f"{name} must be a string of at most {limit} characters.")
        elif (not isinstance(value, list) or len(value) > limit
              or not all(isinstance(v, str) and len(v) <= each for v in value)):
            raise InvalidClientMetadataError(description=f"{name} must list at most {limit} strings of at most "
                                             f"{each} characters each.")
        out[name] = value
    return out


class InvalidTargetError(OAuth2Error, GatewayError):
    """RFC 8707 ``invalid_target``: the requested resource is not this server's MCP endpoint."""

    error = "invalid_target"


def redirect_uri_allowed(uri: str) -> bool:
    """A redirect URI a client may register: https, http on a loopback host, or a private-use scheme
    (RFC 8252 §7.1, e.g. ``cursor://...``); never a fragment, credentials or a dangerous scheme."""
    if not isinstance(uri, str) or not _URI_CHARS.match(uri):
        return False
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError for a bad port
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
    """Exact match, or the same loopback http URI with any port (RFC 8252 §7.3); a requested URI with
    characters outside the URI set never matches."""
    if not isinstance(requested, str) or not _URI_CHARS.match(requested):
        return False
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
    refresh-token ``family``, the ``resource`` the grant is for, the sealed GitHub token of a new
    grant (``credential``; ``None`` on a refresh) and when the family started (``started``, refreshes)."""

    user_id: str
    login: str
    allowed: frozenset[str]
    family: str = ""
    resource: str = ""
    credential: str | None = None
    started: int = 0

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
    token_hash: str = ""
    started: int = 0
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


def _user(data: dict[str, Any], family: str, credential: str | None = None, started: int = 0) -> GrantUser:
    return GrantUser(data["user_id"], data["login"], frozenset(data["allowed"]), family, data["resource"],
                     credential, started)


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


#: RFC 6749 §3.1.1 / Appendix A.3: response-type = response-name *( SP response-name ),
#: response-name = 1*("_" / DIGIT / ALPHA)
_RESPONSE_TYPE = re.compile(r"[A-Za-z0-9_]+( [A-Za-z0-9_]+)*")


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
        try:
            return self._request.get_json(force=True, silent=True)
        except RecursionError:  # nested deeper than the parser goes: not a metadata object either
            return None


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
    fetcher: MetadataFetcher
    vault: Vault
    cimd_cache: dict[str, tuple[float, OAuthClient]] = field(default_factory=dict)
    cimd_lock: threading.Lock = field(default_factory=threading.Lock)


class GatewayAuthorizationServer(AuthorizationServer):
    """Authlib's Flask authorization server wired to the gateway's store, keys and settings.

    ``clock() -> Unix seconds``; ``fetch(url, timeout) -> dict`` fetches a client ID
    metadata document (default :func:`gateway.auth.fetch.fetch_json` under the
    settings' address rules), always through a :class:`MetadataFetcher`.
    ``metadata`` is the RFC 8414 document. Endpoint names for
    :meth:`create_endpoint_response`: ``revocation``, ``client_registration``.
    """

    def __init__(self, settings: GithubSettings, store: AuthStore, ring: KeyRing, *,
                 clock: Callable[[], int] = lambda: int(time.time()),
                 fetch: Callable[[str, float], dict[str, Any]] | None = None):
        super().__init__(query_client=self._query_client, save_token=self._save_token)
        fetcher = MetadataFetcher(timeout=settings.cimd_timeout_seconds, max_concurrent=settings.cimd_max_concurrent,
                                  failure_seconds=settings.cimd_failure_seconds,
                                  allow_networks=settings.cimd_allow_networks, ca_file=settings.cimd_ca_file,
                                  fetch=fetch)
        self.svc = _Services(settings, store, ring, clock, fetcher, Vault(settings.client_secret))
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

    def get_authorization_grant(self, request):
        """Authlib's grant lookup, but a ``response_type`` outside RFC 6749's syntax is never echoed: Authlib
        puts the value in its error description, which refuses ``"``, ``\\``, controls and non-ASCII
        (``ValueError``, a 500); such a value is ``unsupported_response_type`` as any unknown one."""
        value = request.payload.response_type
        if value is not None and not _RESPONSE_TYPE.fullmatch(value):
            raise UnsupportedResponseTypeError("(malformed)", description="The response_type is not a response "
                                               "type (RFC 6749 section 3.1.1); this server supports code.")
        return super().get_authorization_grant(request)

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
            caller = flask_g.get("s3rm_caller")
            document = self.svc.fetcher.get(url, caller=caller.address if caller else "")
        except FetchError as exc:
            log.info("client metadata document refused reason=%s", exc.reason)
            if exc.reason == "busy":
                raise TemporarilyUnavailable("Too many client metadata documents are being fetched right now; "
                                             "retry shortly.") from None
            raise InvalidClientError(description="The client metadata document could not be fetched or is not "
                                     "acceptable (docs: client ID metadata documents).") from None
        try:
            document = {**clean_metadata(document), "client_id": document.get("client_id")}
        except InvalidClientMetadataError as exc:
            raise InvalidClientError(description=f"The client metadata document is not acceptable: "
                                     f"{exc.description}") from None
        uris = document.get("redirect_uris")
        if document.get("client_id") != url or not isinstance(uris, list) or not uris:
            raise InvalidClientError(description="The client metadata document must name its own URL as client_id "
                                     "and list redirect_uris.")
        if not all(isinstance(u, str) and redirect_uri_allowed(u) for u in uris):
            raise InvalidClientError(description="The client metadata document lists a redirect URI this server "
                                     "does not accept.")
        metadata = {"client_name": str(document.get("client_name") or url), "redirect_uris": uris,
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
        svc, now = self.svc, self.svc.clock()
        client_id = request.client.get_client_id()
        data = {"client_id": client_id, "user_id": user.user_id, "login": user.login,
                "allowed": sorted(user.allowed), "resource": user.resource, "scope": token["scope"]}
        owner = None
        if user.credential is not None:  # the first token of a grant: the family starts now
            owner = Family(user.family, user.user_id, user.login, now, now, user.credential, tuple(sorted(user.allowed)),
                           None)
        started = now if owner else user.started
        ends = started + svc.settings.family_max_seconds if started else now + svc.settings.refresh_token_seconds
        svc.store.save_refresh(digest(refresh), user.family, data,
                               min(now + svc.settings.refresh_token_seconds, ends), owner=owner)
        if not client_id.startswith("https://"):
            svc.store.touch_client(client_id, now)
        audit("token_issued" if owner else "refreshed", user_id=user.user_id, login=user.login, client_id=client_id,
              family=user.family[:8], scope=token["scope"].replace(" ", ","))

    def family_scopes(self, family: str, user_id: str) -> frozenset[str]:
        """The scopes ``family`` may still have (docs/operations.md#github-credential): checks its age and,
        at most every ``membership_check_seconds``, the user's memberships on GitHub.

        Raises ``InvalidGrantError`` (too old, membership gone — the family is then revoked) or
        :class:`TemporarilyUnavailable` (GitHub unreachable for longer than ``membership_stale_seconds``).
        A family from before this check existed (no owner row) is held to the same rules from its
        first refresh: it must sign in again once its age or stored credential cannot be shown.
        """
        svc, now = self.svc, self.svc.clock()
        settings = svc.settings
        found = svc.store.family(family)
        if found is None or found.revoked_at is not None:
            raise InvalidGrantError(description="The refresh token is not valid.")
        if not found.created_at or now >= found.created_at + settings.family_max_seconds:
            svc.store.revoke_family(family, now)
            audit("revoked", reason="family_lifetime", user_id=user_id, family=family[:8])
            raise InvalidGrantError(description="This sign-in is older than the server allows; sign in again.")
        if now - found.checked_at < settings.membership_check_seconds:
            return frozenset(found.allowed)
        token = svc.vault.open(found.credential, f"github:{found.user_id}") if found.credential else None
        if token is None:
            svc.store.revoke_family(family, now)
            audit("membership_lost", reason="no_credential", user_id=user_id, family=family[:8])
            raise InvalidGrantError(description="The GitHub membership cannot be re-checked; sign in again.")
        try:
            allowed = github.recheck(settings, token, found.user_id, svc.store.pinned_logins())
        except github.UpstreamError:
            if now - found.checked_at >= settings.membership_stale_seconds:
                log.warning("membership re-check failed: GitHub unreachable")
                raise TemporarilyUnavailable("GitHub cannot be reached to re-check the membership; retry later "
                                             "(the refresh token stays valid).", retry_after=30) from None
            return frozenset(found.allowed)
        if not allowed:
            svc.store.revoke_family(family, now)
            audit("membership_lost", user_id=user_id, family=family[:8])
            raise InvalidGrantError(description="This GitHub account is no longer in this server's allowlists.")
        svc.store.mark_checked(family, now, sorted(allowed))
        return allowed

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
                "resource": user.resource, "family": secrets.token_urlsafe(16), "credential": user.credential or ""}
        self.svc.store.save_code(digest(code), data, self.svc.clock() + self.svc.settings.code_seconds)

    def query_authorization_code(self, code: str, client):
        status, data = self.svc.store.consume_code(digest(code), self.svc.clock())
        if status == "used" and data:  # a replayed code: revoke what its first redemption issued
            self.svc.store.revoke_family(data["family"], self.svc.clock())
            audit("revoked", reason="code_replay", user_id=data["user_id"], client_id=data["client_id"],
                  family=data["family"][:8])
        if status != "ok" or data is None or data["client_id"] != client.get_client_id():
            return None
        return _Code(data)

    def delete_authorization_code(self, authorization_code) -> None:
        return None  # consumed (marked used) when queried

    def authenticate_user(self, authorization_code) -> GrantUser:
        data = authorization_code.data
        return _user(data, data["family"], data.get("credential") or "")

    def validate_token_request(self):
        super().validate_token_request()
        code = self.request.authorization_code
        _check_resource(self.request.payload.datalist.get("resource", []), code.data["resource"])


class _RefreshGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = _AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token: str):
        svc = self.server.svc
        token_hash = digest(refresh_token)
        outcome = svc.store.use_refresh(token_hash, svc.clock(), consume=False)  # only a look: see validate
        if outcome.status == "reused":  # a reused token has just revoked its whole family
            audit("refresh_reuse", family=outcome.family[:8])
        if outcome.status != "ok":
            return None
        return _Refresh(outcome.family, outcome.data, token_hash)

    def authenticate_user(self, refresh_token: _Refresh) -> GrantUser:
        return _user(refresh_token.data, refresh_token.family, None, refresh_token.started)

    def revoke_old_credential(self, refresh_token) -> None:
        return None  # consumed at the end of validate_token_request

    def issue_token(self, user: GrantUser, refresh_token: _Refresh):
        """The requested (or original) scopes, narrowed to what the allowlists allow now."""
        wanted = scope_to_list(self.request.payload.scope) or scope_to_list(refresh_token.get_scope())
        scope = " ".join(s for s in SCOPES if s in wanted and s in user.allowed)
        return self.generate_token(user=user, scope=scope, include_refresh_token=self.INCLUDE_NEW_REFRESH_TOKEN)

    def validate_token_request(self):
        """Every check first (client, scope, resource, family age, membership); only then is the
        presented token consumed, so a refused request leaves it usable."""
        super().validate_token_request()
        refresh: _Refresh = self.request.refresh_token
        _check_resource(self.request.payload.datalist.get("resource", []), refresh.data["resource"])
        svc = self.server.svc
        allowed = self.server.family_scopes(refresh.family, refresh.data["user_id"])
        wanted = scope_to_list(self.request.payload.scope) or scope_to_list(refresh.get_scope())
        if not any(s in allowed for s in wanted):  # the allowlists still allow something: a request error only
            raise InvalidScopeError(description="This GitHub account may no longer use the requested scopes; "
                                    f"ask for {' '.join(s for s in SCOPES if s in allowed)}.")
        outcome = svc.store.use_refresh(refresh.token_hash, svc.clock())
        if outcome.status != "ok":  # raced with another presentation of the same token
            if outcome.status == "reused":
                audit("refresh_reuse", family=outcome.family[:8])
            raise InvalidGrantError(description="The refresh token is not valid.")
        found = svc.store.family(refresh.family)
        refresh.data = {**outcome.data, "allowed": sorted(allowed)}
        refresh.started = found.created_at if found else 0


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
        audit("revoked", reason="client_request", client_id=token.client_id, family=token.family[:8])


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
        uris = data.get("redirect_uris")
        if not isinstance(uris, list) or not uris or not all(
                isinstance(u, str) and redirect_uri_allowed(u) for u in uris):
            raise InvalidRedirectURIError(description="redirect_uris must list https URIs, http loopback URIs "
                                          "or private-use scheme URIs (ASCII, at most 2000 characters), without "
                                          "fragments")
        kept = clean_metadata(data)
        data.clear()
        data.update(kept)
        data.setdefault("token_endpoint_auth_method", "none")
        status, body, headers = super().create_registration_response(request)
        if body.get("client_secret") is None:
            body.pop("client_secret", None)
            body.pop("client_secret_expires_at", None)
        return status, body, headers

    def save_client(self, client_info, client_metadata, request):
        svc = self.server.svc
        secret = client_info.get("client_secret")
        metadata = clean_metadata(dict(client_metadata))
        now = svc.clock()
        if not svc.store.add_client(client_info["client_id"], metadata, digest(secret) if secret else None, now,
                                    cap=svc.settings.max_clients, evict_before=now - svc.settings.login_seconds,
                                    quota=flask_g.get("s3rm_caller")):
            raise InvalidClientMetadataError(description="This server accepts no more client registrations right "
                                             "now (S3RM_OAUTH_MAX_CLIENTS reached); retry later or ask its "
                                             "administrator.")
        return OAuthClient(client_info["client_id"], metadata, digest(secret) if secret else None)
