"""HTTP endpoints of github mode's authorization server (docs/transport.md#github-mode).

=============================================  =========================================================
path                                           answer
=============================================  =========================================================
``/.well-known/oauth-protected-resource[/mcp]``  RFC 9728 metadata of the MCP endpoint
``/.well-known/oauth-authorization-server``    RFC 8414 metadata (also with the ``/mcp`` suffix)
``/.well-known/openid-configuration[...]``     JSON 404 (this is not an OpenID provider)
``POST /register``                             RFC 7591 dynamic client registration (open; public clients)
``GET /authorize``                             validates the request (client, redirect URI, S256 PKCE,
                                               scope, RFC 8707 ``resource``), then sends the browser to
                                               GitHub; the login is bound to a cookie of this browser
``GET /oauth/github/callback``                 GitHub's answer: identity, allowlists, then the Korean
                                               consent page (or ``access_denied`` to the client)
``POST /authorize/consent``                    the consent form (session cookie + CSRF token); approve →
                                               ``code``, ``state`` and ``iss`` (RFC 9207) to the client
``POST /token``                                authorization_code (PKCE) and refresh_token (rotating)
``POST /revoke``                               RFC 7009 (revokes the token's whole family)
``GET /oauth/jwks``                            public signing keys
=============================================  =========================================================

Errors are OAuth error JSON (``error``, ``error_description``) or a short
Korean HTML page — never a stack trace. Before the person has signed in,
``/authorize`` never redirects an error to the client: anyone can register a
client with any redirect URI, so an automatic redirect would make this
trusted host an open redirector (RFC 9700 §4.11.2); the error is a page
instead. The same holds after the GitHub sign-in for a person the
allowlists refuse (GitHub approves a returning user without a click, so a
redirect would still be automatic); only the person's own decision on the
consent page goes back to the client. Discovery, registration, token and revocation
answer CORS for the allowlisted origins (``S3RM_MCP_ALLOWED_ORIGINS`` and the
public origin).

Abuse limits (docs/operations.md#github-limits): per-address and per-client
token buckets on ``/register``, ``/authorize``, ``/token``, ``/revoke``, ``/oauth/github/callback`` and
``POST /authorize/consent``
(429 with ``Retry-After``; the buckets live in the state store, so gateways
on one PostgreSQL share them; an IPv6 caller counts as its /64; at most
``S3RM_OAUTH_RATE_LIMIT_MAX_BUCKETS`` buckets, least recently used evicted); per-address quotas on pending
logins (:class:`~gateway.auth.store.Quota`, oldest evicted first) and at most ``S3RM_OAUTH_MAX_PENDING`` of them,
a client that already got a token never refused (docs/operations.md#github-quotas); only the known authorization parameters are kept, each bounded; the
expired state is purged every ``S3RM_OAUTH_PURGE_SECONDS`` by a background
thread. The browser-session cookie is ``__Host-`` prefixed on an https issuer
and only a value this server signed is ever adopted.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import threading
import time
from urllib.parse import parse_qs, urlencode, urlsplit

from authlib.common.urls import add_params_to_uri
from authlib.oauth2 import OAuth2Error
from flask import Blueprint, Response, g, redirect, request

from gateway.auth import github
from gateway.auth.consent import PAGE_HEADERS, consent_page, error_page
from gateway.auth.server import GrantUser, InvalidTargetError, StoredRequest, audit, redirect_uri_allowed
from gateway.auth.service import AuthService
from gateway.auth.store import Quota, digest
from gateway.core.jsonio import json_response
from gateway.ops.ratelimit import client_address, principal_key

__all__ = ["AUTHORIZE_PARAMS", "SESSION_COOKIE", "ThrottledLines", "create_auth_blueprint"]

log = logging.getLogger("s3rm.auth")

#: The browser-session cookie binding a GitHub login and its consent form to one browser
#: (``__Host-`` + this name on an https issuer: Secure, no Domain, Path=/).
SESSION_COOKIE = "s3rm_oauth_session"
_CORS_PATHS = ("/.well-known/", "/register", "/token", "/revoke", "/oauth/jwks")
#: The authorization parameters a pending login keeps (anything else is dropped), each at most 2048 characters.
AUTHORIZE_PARAMS = ("response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge",
                    "code_challenge_method", "resource")
_PARAM_MAX = 2048
_LIMITED = {"/register": "register", "/authorize": "authorize", "/token": "token", "/revoke": "revoke",
            "/oauth/github/callback": "callback", "/authorize/consent": "consent"}


def _verifier(session: str, state: str) -> str:
    """GitHub PKCE verifier derived from the browser secret and the state (never stored)."""
    raw = hashlib.sha256(f"{session}.{state}".encode()).digest()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def _rate_subject(address: str) -> str:
    """The rate-limit subject of a caller address: an IPv6 address counts as its /64 (one subscriber's
    prefix: rotating through it gives no fresh buckets), an IPv4 address as itself (:meth:`Quota.of`)."""
    return Quota.of(address).address


class ThrottledLines:
    """One log line per ``interval`` seconds and key at most, naming how many were held back since the last one
    (the "rate limited" lines: an attacker must not be able to flood the log, docs/operations.md#github-audit)."""

    def __init__(self, logger: logging.Logger, message: str, interval: float,
                 clock=time.monotonic):
        self._logger, self._message, self._interval, self._clock = logger, message, interval, clock
        self._lock = threading.Lock()
        self._state: dict[str, tuple[float, int]] = {}  # key -> (last line, held back since)

    def note(self, key: str) -> bool:
        """Count one event of ``key``; log it (with the held-back count) when its interval has passed.
        Returns True when a line was written."""
        now = self._clock()
        with self._lock:
            last, held = self._state.get(key, (float("-inf"), 0))
            if now - last < self._interval:
                self._state[key] = (last, held + 1)
                return False
            self._state[key] = (now, 0)
        self._logger.info(self._message + " (%d more since the last line)", key, held)
        return True


def _page(html: str, status: int) -> Response:
    response = Response(html, status=status, mimetype="text/html")
    for key, value in PAGE_HEADERS.items():
        response.headers[key] = value
    return response


def create_auth_blueprint(service: AuthService) -> Blueprint:
    """The blueprint of every github-mode OAuth endpoint, bound to ``service``."""
    bp = Blueprint("oauth", __name__)
    server = service.server
    settings = service.settings
    callback_url = f"{settings.issuer}/oauth/github/callback"
    secure_cookie = settings.issuer.startswith("https://")
    cookie_name = f"__Host-{SESSION_COOKIE}" if secure_cookie else SESSION_COOKIE
    vault = server.svc.vault
    purge_state = {"next": 0.0, "lock": threading.Lock()}
    limited_lines = ThrottledLines(log, "oauth rate limited endpoint=%s", settings.rate_log_seconds)

    def purge_soon() -> None:
        """Start the periodic purge in a background thread when it is due (never on the request thread)."""
        now = time.monotonic()
        if now < purge_state["next"] or not purge_state["lock"].acquire(blocking=False):
            return
        purge_state["next"] = now + settings.purge_seconds

        def run() -> None:
            try:
                clock = service.clock()
                removed = service.store.purge(
                    clock, unused_client_before=clock - settings.unused_client_seconds,
                    idle_client_before=clock - settings.refresh_token_seconds - settings.access_token_seconds,
                    revoked_before=clock - settings.access_token_seconds)
                log.info("oauth state purged %s", " ".join(f"{k}={v}" for k, v in removed.items()))
            except Exception as exc:  # a store outage: the next request tries again later
                log.warning("oauth state purge failed (%s)", type(exc).__name__)
            finally:
                purge_state["lock"].release()

        threading.Thread(target=run, name="s3rm-oauth-purge", daemon=True).start()

    def over_limit(kind: str, subject: str) -> int:
        if settings.rate_limit_per_second <= 0 or not subject:
            return 0
        return service.store.take_rate(principal_key(kind, subject), time.time(), settings.rate_limit_per_second,
                                       settings.rate_limit_burst, max_buckets=settings.rate_limit_max_buckets)

    @bp.before_request
    def _caller():
        """The caller's quota keys (address, prefix) for the per-address quotas, the metadata fetch slots
        and the audit lines (``flask.g.s3rm_caller``, a :class:`~gateway.auth.store.Quota`)."""
        address = client_address(request.headers, request.remote_addr, service.config.proxy_secret)
        g.s3rm_caller = Quota.of(address, settings.address_quota, settings.prefix_quota)
        g.s3rm_address = address

    @bp.before_request
    def _limits():
        purge_soon()
        endpoint = _LIMITED.get(request.path)
        if endpoint is None or request.method == "OPTIONS":
            return None
        address = _rate_subject(client_address(request.headers, request.remote_addr, service.config.proxy_secret))
        # the address bucket before the body is parsed: an over-limit caller costs no form parse
        wait = over_limit(f"oauth-{endpoint}-ip", address)
        if not wait:
            client = (request.args.get("client_id") or request.form.get("client_id") or "")[:200]
            wait = client and over_limit(f"oauth-{endpoint}-client", digest(client))
        if not wait:
            return None
        limited_lines.note(endpoint)
        response = oauth_error("temporarily_unavailable", f"Too many requests to {request.path}; retry after "
                               f"{wait} s.", 429)
        response.headers["Retry-After"] = str(wait)
        return response

    def oauth_error(error: str, description: str, status: int = 400) -> Response:
        return json_response({"error": error, "error_description": description}, status)

    def with_iss(response: Response) -> Response:
        """RFC 9207: ``iss`` on every authorization response redirect, error ones included."""
        location = response.headers.get("Location")
        if response.status_code == 302 and location and "iss" not in parse_qs(urlsplit(location).query):
            response.headers["Location"] = add_params_to_uri(location, [("iss", settings.issuer)])
        return response

    def grant_error(error: OAuth2Error) -> Response:
        return with_iss(server.handle_error_response(None, error))

    def unverified_error(error: OAuth2Error) -> Response:
        """An error before sign-in: a page, never a redirect to the (unverified) client (module doc)."""
        status = getattr(error, "status_code", 400) or 400
        text = f"{error.error}: {error.description or ''}".strip()
        response = _page(error_page(text), status)
        for key, value in error.get_headers():
            if key == "Retry-After":
                response.headers[key] = value
        return response

    @bp.after_request
    def _cors(response: Response) -> Response:
        origin = request.headers.get("Origin")
        if origin and request.path.startswith(_CORS_PATHS) and origin in service.config.allowed_origins:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Expose-Headers"] = "WWW-Authenticate"
            response.vary.add("Origin")
        return response

    def preflight() -> Response:
        origin = request.headers.get("Origin")
        response = Response(status=204)
        response.headers.remove("Content-Type")
        if origin and origin in service.config.allowed_origins:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = "Authorization, Content-Type, MCP-Protocol-Version"
            response.headers["Access-Control-Max-Age"] = "600"
        return response

    def cors_route(method: str, *paths: str):
        """Register ``paths`` for ``method`` plus ``OPTIONS`` (answered as a CORS preflight)."""
        def register_routes(view):
            def handler(rest: str = ""):
                return preflight() if request.method == "OPTIONS" else view(rest)
            handler.__name__ = view.__name__
            for path in paths:
                bp.add_url_rule(path, view.__name__, handler, methods=[method, "OPTIONS"],
                                provide_automatic_options=False)
            return view
        return register_routes

    # ------------------------------------------------------------- discovery
    @cors_route("GET", "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/<path:rest>")
    def protected_resource(rest: str):
        if rest and f"/{rest}".rstrip("/") != "/mcp":
            return oauth_error("invalid_request", "No protected resource at this path; the MCP endpoint is /mcp.", 404)
        return json_response(service.resource_metadata())

    @cors_route("GET", "/.well-known/oauth-authorization-server",
                "/.well-known/oauth-authorization-server/<path:rest>")
    def authorization_server_metadata(rest: str):
        return json_response(server.metadata)

    @cors_route("GET", "/.well-known/openid-configuration", "/.well-known/openid-configuration/<path:rest>",
                "/mcp/.well-known/openid-configuration")
    def openid_configuration(rest: str):
        return oauth_error("invalid_request", "This server is an OAuth 2.1 authorization server, not an OpenID "
                           "provider: read /.well-known/oauth-authorization-server.", 404)

    @cors_route("GET", "/oauth/jwks")
    def jwks(rest: str):
        return json_response(service.ring.public_jwks())

    # ------------------------------------------------- registration, tokens
    @cors_route("POST", "/register")
    def register(rest: str):
        return server.create_endpoint_response("client_registration")

    def unreadable_basic() -> Response | None:
        """401 ``invalid_client`` for ``Authorization: Basic`` credentials that are not base64 of UTF-8
        (Authlib decodes them unguarded on some endpoints: a ``UnicodeDecodeError`` would be a 500)."""
        scheme, _, value = (request.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return oauth_error("invalid_client", "The Basic client credentials are not base64 of UTF-8 text.", 401)
        return None

    @cors_route("POST", "/token")
    def token(rest: str):
        return unreadable_basic() or server.create_token_response()

    @cors_route("POST", "/revoke")
    def revoke(rest: str):
        return unreadable_basic() or server.create_endpoint_response("revocation")

    # ------------------------------------------------------ browser steps
    @bp.route("/authorize", methods=["GET"])
    def authorize():
        if any(len(v) > _PARAM_MAX for k in AUTHORIZE_PARAMS for v in request.args.getlist(k)):
            return _page(error_page(f"invalid_request: an authorization parameter is longer than {_PARAM_MAX} "
                                    "characters."), 400)
        requested = request.args.get("redirect_uri")
        if requested is not None and not redirect_uri_allowed(requested):  # odd characters: 400, never a 500
            return _page(error_page("invalid_request: redirect_uri is not a URI this server accepts (ASCII, at most "
                                    "2000 characters, no quotes, backslashes or fragments)."), 400)
        try:
            grant = server.get_consent_grant(end_user=None)
        except OAuth2Error as error:
            return unverified_error(error)
        resources = request.args.getlist("resource")
        if len(resources) > 1 or (resources and resources[0].rstrip("/") != settings.resource):
            return unverified_error(InvalidTargetError(
                description=f"This server grants tokens only for the resource {settings.resource}."))
        presented = request.cookies.get(cookie_name)
        session = presented if vault.session_ok(presented) else vault.new_session()
        state = secrets.token_urlsafe(32)
        params = {k: request.args[k] for k in AUTHORIZE_PARAMS if k in request.args}
        client_id = grant.client.get_client_id()
        trusted = not client_id.startswith("https://") and service.store.client_used(client_id)
        if not service.store.save_pending(digest(f"github:{state}"), {"params": params, "session": digest(session)},
                                          service.clock() + settings.login_seconds, cap=settings.max_pending,
                                          now=service.clock(), quota=g.s3rm_caller, priority=trusted):
            response = _page(error_page("temporarily_unavailable: too many sign-ins are in progress; retry in a "
                                        "minute."), 503)
            response.headers["Retry-After"] = "60"
            return response
        target = github.authorize_url(settings, state=state, code_challenge=_challenge(_verifier(session, state)),
                                      redirect_uri=callback_url)
        response = redirect(target, 302)
        response.set_cookie(cookie_name, session, httponly=True, secure=secure_cookie, samesite="Lax",
                            max_age=settings.login_seconds, path="/")
        return response

    def stored_grant(params: dict[str, str]):
        stored = StoredRequest(f"{settings.issuer}/authorize?{urlencode(params)}", params)
        return stored, server.get_consent_grant(stored)

    @bp.route("/oauth/github/callback", methods=["GET"])
    def github_callback():
        state = request.args.get("state") or ""
        pending = service.store.take_pending(digest(f"github:{state}"), service.clock()) if state else None
        session = request.cookies.get(cookie_name) or ""
        if pending is None or not session or not hmac.compare_digest(digest(session), pending["session"]):
            return _page(error_page("로그인 요청이 만료되었거나 이 브라우저에서 시작되지 않았습니다."), 400)
        try:
            stored, grant = stored_grant(pending["params"])
        except OAuth2Error as error:
            return unverified_error(error)
        if request.args.get("error") or not request.args.get("code"):
            return _page(error_page("access_denied: the GitHub sign-in was cancelled; nothing was granted."), 400)
        try:
            user, github_token = github.login(settings, code=request.args["code"],
                                              code_verifier=_verifier(session, state), redirect_uri=callback_url,
                                              pins=service.store.pinned_logins())
        except github.UpstreamError as exc:
            return _page(error_page(str(exc)), 502)
        for org, org_id in user.org_ids.items():  # first sight of an allowlisted org name: pin its numeric id
            service.store.pin_login(f"org:{org}", org_id, service.clock())
        audit("sign_in", user_id=user.id, login=user.login, client_id=grant.client.get_client_id(),
              allowed=",".join(sorted(user.allowed)) or "none")
        # refused: a page, never a redirect — the client's URI is unverified, and GitHub approves a returning
        # user without a click, so a redirect would make this host an open redirector (module doc)
        if not user.allowed:
            log.info("github login refused: not in the allowlists")
            return _page(error_page("access_denied: this GitHub account is not in this server's allowlists; "
                                    "nothing was granted."), 403)
        scopes = server.grant_scope(stored.payload.scope, GrantUser(user.id, user.login, user.allowed)).split()
        if not scopes:
            return _page(error_page("access_denied: this GitHub account may not use the requested scopes; "
                                    "nothing was granted."), 403)
        request_id, csrf = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        service.store.save_pending(digest(f"consent:{request_id}"), {
            "params": pending["params"], "session": pending["session"], "csrf": digest(csrf),
            "user_id": user.id, "login": user.login, "allowed": sorted(user.allowed),
            "credential": vault.seal(github_token, f"github:{user.id}"),
        }, service.clock() + settings.login_seconds)
        client = grant.client
        return _page(consent_page(client_name=client.name, client_id=client.get_client_id(),
                                  redirect_uri=grant.redirect_uri, scopes=scopes, login=user.login,
                                  request_id=request_id, csrf=csrf, action="/authorize/consent"), 200)

    @bp.route("/authorize/consent", methods=["POST"])
    def consent():
        request_id = request.form.get("request_id") or ""
        key = digest(f"consent:{request_id}")
        record = service.store.get_pending(key, service.clock()) if request_id else None
        session = request.cookies.get(cookie_name) or ""
        csrf = request.form.get("csrf_token") or ""
        if (record is None or not session or not hmac.compare_digest(digest(session), record["session"])
                or not csrf or not hmac.compare_digest(digest(csrf), record["csrf"])):
            return oauth_error("invalid_request", "The consent form is not valid for this browser session "
                               "(expired, already used or not from this page).", 403)
        if service.store.take_pending(key, service.clock()) is None:  # a parallel approval took it: one code
            return oauth_error("invalid_request", "The consent form was already used.", 403)
        try:
            stored, grant = stored_grant(record["params"])
        except OAuth2Error as error:
            return grant_error(error)
        user = None
        if request.form.get("decision") == "approve":
            user = GrantUser(record["user_id"], record["login"], frozenset(record["allowed"]),
                             resource=settings.resource, credential=record.get("credential") or "")
        return with_iss(server.create_authorization_response(stored, grant_user=user, grant=grant))

    return bp
