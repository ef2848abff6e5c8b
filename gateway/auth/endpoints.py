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

Errors are OAuth error JSON (``error``, ``error_description``) or, for the
browser steps that cannot go back to a verified redirect URI, a short Korean
HTML page — never a stack trace. Discovery, registration, token and
revocation answer CORS for the allowlisted origins
(``S3RM_MCP_ALLOWED_ORIGINS`` and the public origin).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

from authlib.common.urls import add_params_to_uri
from authlib.oauth2 import OAuth2Error
from flask import Blueprint, Response, redirect, request

from gateway.auth import github
from gateway.auth.consent import PAGE_HEADERS, consent_page, error_page
from gateway.auth.server import GrantUser, InvalidTargetError, StoredRequest
from gateway.auth.service import AuthService
from gateway.auth.store import digest
from gateway.core.jsonio import json_response

__all__ = ["SESSION_COOKIE", "create_auth_blueprint"]

log = logging.getLogger("s3rm.auth")

#: The browser-session cookie binding a GitHub login and its consent form to one browser.
SESSION_COOKIE = "s3rm_oauth_session"
_CORS_PATHS = ("/.well-known/", "/register", "/token", "/revoke", "/oauth/jwks")


def _verifier(session: str, state: str) -> str:
    """GitHub PKCE verifier derived from the browser secret and the state (never stored)."""
    raw = hashlib.sha256(f"{session}.{state}".encode()).digest()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


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

    @cors_route("POST", "/token")
    def token(rest: str):
        return server.create_token_response()

    @cors_route("POST", "/revoke")
    def revoke(rest: str):
        return server.create_endpoint_response("revocation")

    # ------------------------------------------------------ browser steps
    @bp.route("/authorize", methods=["GET"])
    def authorize():
        try:
            grant = server.get_consent_grant(end_user=None)
        except OAuth2Error as error:
            return grant_error(error)
        resources = request.args.getlist("resource")
        if len(resources) > 1 or (resources and resources[0].rstrip("/") != settings.resource):
            return grant_error(InvalidTargetError(
                description=f"This server grants tokens only for the resource {settings.resource}.",
                redirect_uri=grant.redirect_uri, state=request.args.get("state")))
        session = request.cookies.get(SESSION_COOKIE) or secrets.token_urlsafe(32)
        state = secrets.token_urlsafe(32)
        service.store.save_pending(digest(f"github:{state}"), {
            "params": request.args.to_dict(flat=True), "session": digest(session),
        }, service.clock() + settings.login_seconds)
        target = github.authorize_url(settings, state=state, code_challenge=_challenge(_verifier(session, state)),
                                      redirect_uri=callback_url)
        response = redirect(target, 302)
        response.set_cookie(SESSION_COOKIE, session, httponly=True, secure=secure_cookie, samesite="Lax",
                            max_age=settings.login_seconds, path="/")
        return response

    def stored_grant(params: dict[str, str]):
        stored = StoredRequest(f"{settings.issuer}/authorize?{urlencode(params)}", params)
        return stored, server.get_consent_grant(stored)

    @bp.route("/oauth/github/callback", methods=["GET"])
    def github_callback():
        state = request.args.get("state") or ""
        pending = service.store.take_pending(digest(f"github:{state}"), service.clock()) if state else None
        session = request.cookies.get(SESSION_COOKIE) or ""
        if pending is None or not session or not hmac.compare_digest(digest(session), pending["session"]):
            return _page(error_page("로그인 요청이 만료되었거나 이 브라우저에서 시작되지 않았습니다."), 400)
        try:
            stored, grant = stored_grant(pending["params"])
        except OAuth2Error as error:
            return grant_error(error)
        if request.args.get("error") or not request.args.get("code"):
            return with_iss(server.create_authorization_response(stored, grant_user=None, grant=grant))
        try:
            user = github.login(settings, code=request.args["code"], code_verifier=_verifier(session, state),
                                redirect_uri=callback_url)
        except github.UpstreamError as exc:
            return _page(error_page(str(exc)), 502)
        if not user.allowed:
            log.info("github login refused: not in the allowlists")
            error = OAuth2Error(description="This GitHub account is not in this server's allowlists.",
                                redirect_uri=grant.redirect_uri, state=stored.payload.state)
            error.error = "access_denied"
            return grant_error(error)
        scopes = server.grant_scope(stored.payload.scope, GrantUser(user.id, user.login, user.allowed)).split()
        if not scopes:
            error = OAuth2Error(description="This GitHub account may not use the requested scopes.",
                                redirect_uri=grant.redirect_uri, state=stored.payload.state)
            error.error = "access_denied"
            return grant_error(error)
        request_id, csrf = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        service.store.save_pending(digest(f"consent:{request_id}"), {
            "params": pending["params"], "session": pending["session"], "csrf": digest(csrf),
            "user_id": user.id, "login": user.login, "allowed": sorted(user.allowed),
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
        session = request.cookies.get(SESSION_COOKIE) or ""
        csrf = request.form.get("csrf_token") or ""
        if (record is None or not session or not hmac.compare_digest(digest(session), record["session"])
                or not csrf or not hmac.compare_digest(digest(csrf), record["csrf"])):
            return oauth_error("invalid_request", "The consent form is not valid for this browser session "
                               "(expired, already used or not from this page).", 403)
        service.store.take_pending(key, service.clock())
        try:
            stored, grant = stored_grant(record["params"])
        except OAuth2Error as error:
            return grant_error(error)
        user = None
        if request.form.get("decision") == "approve":
            user = GrantUser(record["user_id"], record["login"], frozenset(record["allowed"]),
                             resource=settings.resource)
        return with_iss(server.create_authorization_response(stored, grant_user=user, grant=grant))

    return bp
