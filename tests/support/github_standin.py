"""A local STAND-IN for GitHub's OAuth web flow and its user/org/team REST API (tests only).

GitHub cannot be reached from the test machines, so github-mode tests point
``S3RM_GITHUB_AUTHORIZE_URL`` / ``S3RM_GITHUB_TOKEN_URL`` / ``S3RM_GITHUB_API_URL``
at this server. It behaves as GitHub documents for OAuth apps
(docs.github.com "Authorizing OAuth apps", REST "Users", "Organization members",
"Team members"):

* ``GET /login/oauth/authorize`` — the authorization page for the user
  currently "signed in to GitHub" (:attr:`GithubStandIn.signed_in`), with an
  "Authorize" button (``#js-oauth-authorize-btn``); approving redirects to
  ``redirect_uri`` with ``code`` and ``state``. ``redirect_uri`` must start
  with the registered callback; ``code_challenge_method`` must be ``S256``.
* ``POST /login/oauth/access_token`` — exchanges the code (single use, PKCE
  checked, client secret checked). Like GitHub it answers **200** with
  ``{"error": "bad_verification_code", ...}`` for a bad code; with
  ``Accept: application/json`` the success body is
  ``{"access_token", "token_type": "bearer", "scope"}``.
* ``GET /api/user`` — ``{"login", "id", ...}`` for ``Authorization: Bearer``
  (or ``token``) of a valid token, else 401 ``{"message": "Bad credentials"}``.
* ``GET /api/user/memberships/orgs/{org}`` — 200 ``{"state": "active",
  "organization": {"login", "id"}, ...}`` for a member (the token needs
  ``read:org``), 404 otherwise; ``GET /api/user/memberships/orgs`` lists the
  user's memberships the same way (paged with ``per_page``/``page``).
* ``GET /api/orgs/{org}`` — ``{"login", "id"}`` of an organisation.
* ``GET /api/orgs/{org}/teams/{team}/memberships/{username}`` — 200
  ``{"state": "active", "role": "member"}`` or 404.

``GithubStandIn.org_ids`` maps each org login to its numeric id (change one
to play an org renamed and its name taken by another organisation);
``GithubStandIn.requests_seen`` counts calls per path for assertions;
``GithubStandIn.membership_outage`` (an HTTP status, e.g. 502) makes both
membership calls answer that status, as GitHub does during an incident.
"""
from __future__ import annotations

import base64
import hashlib
import html
import secrets
import threading
import zlib
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlencode

from flask import Flask, jsonify, redirect, request
from werkzeug.serving import make_server

from support.services import free_port

__all__ = ["GithubStandIn", "StandInUser"]


@dataclass
class StandInUser:
    """One GitHub account of the stand-in: numeric id, active org logins and ``org/team`` slugs."""

    login: str
    id: int
    orgs: set[str] = field(default_factory=set)
    teams: set[str] = field(default_factory=set)


class GithubStandIn:
    """The stand-in server on a free loopback port (``with GithubStandIn(...) as gh:``)."""

    def __init__(self, client_id: str, client_secret: str, callback_prefix: str, users: list[StandInUser]):
        self.client_id = client_id
        self.client_secret = client_secret
        self.callback_prefix = callback_prefix
        self.users = {u.login.lower(): u for u in users}
        self.signed_in: str | None = None
        self.requests_seen: Counter[str] = Counter()
        self.membership_outage: int | None = None
        self.org_ids = {org: 10000 + zlib.crc32(org.encode()) % 900000 for u in users for org in u.orgs | {
            t.partition("/")[0] for t in u.teams}}
        self._codes: dict[str, dict] = {}
        self._tokens: dict[str, dict] = {}
        self._lock = threading.Lock()
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.api = f"{self.base}/api"
        self._server = make_server("127.0.0.1", self.port, self._app(), threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "GithubStandIn":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()

    def env(self) -> dict[str, str]:
        """The gateway settings pointing at this stand-in."""
        return {"S3RM_GITHUB_CLIENT_ID": self.client_id, "S3RM_GITHUB_CLIENT_SECRET": self.client_secret,
                "S3RM_GITHUB_AUTHORIZE_URL": f"{self.base}/login/oauth/authorize",
                "S3RM_GITHUB_TOKEN_URL": f"{self.base}/login/oauth/access_token",
                "S3RM_GITHUB_API_URL": self.api}

    # ------------------------------------------------------------------ app
    def _app(self) -> Flask:
        app = Flask("github-standin")

        @app.before_request
        def _count():
            self.requests_seen[request.path] += 1

        @app.get("/login/oauth/authorize")
        def authorize():
            args = request.args
            if args.get("client_id") != self.client_id:
                return "<h1>404 — no such OAuth app</h1>", 404
            if not (args.get("redirect_uri") or "").startswith(self.callback_prefix):
                return "<h1>The redirect_uri MUST match the registered callback URL for this application.</h1>", 400
            if args.get("code_challenge_method") != "S256" or not args.get("code_challenge"):
                return "<h1>code_challenge with S256 expected</h1>", 400
            user = self.users.get((self.signed_in or "").lower())
            if user is None:
                return "<h1>Sign in to GitHub</h1>", 401
            query = html.escape(urlencode(args.to_dict(flat=True)))
            return (f"<!doctype html><title>Authorize application</title><h1>Authorize {html.escape(self.client_id)}"
                    f"</h1><p>Signed in as {html.escape(user.login)}</p>"
                    f'<form method="post" action="/login/oauth/authorize?{query}">'
                    '<button id="js-oauth-authorize-btn" name="authorize" value="1">Authorize</button></form>')

        @app.post("/login/oauth/authorize")
        def approve():
            args = request.args
            code = secrets.token_hex(10)
            with self._lock:
                self._codes[code] = {"login": (self.signed_in or "").lower(), "challenge": args["code_challenge"],
                                     "redirect_uri": args["redirect_uri"], "scope": args.get("scope", "")}
            sep = "&" if "?" in args["redirect_uri"] else "?"
            return redirect(f"{args['redirect_uri']}{sep}{urlencode({'code': code, 'state': args.get('state', '')})}")

        @app.post("/login/oauth/access_token")
        def access_token():
            form = request.form
            if form.get("client_id") != self.client_id or form.get("client_secret") != self.client_secret:
                return jsonify(error="incorrect_client_credentials",
                               error_description="The client_id and/or client_secret passed are incorrect.")
            with self._lock:
                grant = self._codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            expected = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if grant is None or grant["redirect_uri"] != form.get("redirect_uri") or expected != grant["challenge"]:
                return jsonify(error="bad_verification_code",
                               error_description="The code passed is incorrect or expired.")
            token = "gho_" + secrets.token_hex(16)
            with self._lock:
                self._tokens[token] = {"login": grant["login"], "scope": grant["scope"]}
            return jsonify(access_token=token, token_type="bearer", scope=grant["scope"])

        def current() -> tuple[StandInUser | None, dict | None]:
            scheme, _, token = (request.headers.get("Authorization") or "").partition(" ")
            if scheme.lower() not in ("bearer", "token"):
                return None, None
            info = self._tokens.get(token.strip())
            return (self.users.get(info["login"]), info) if info else (None, None)

        @app.get("/api/user")
        def user():
            found, _ = current()
            if found is None:
                return jsonify(message="Bad credentials"), 401
            return jsonify(login=found.login, id=found.id, type="User", name=None)

        def membership(org: str) -> dict:
            return {"state": "active", "role": "member", "organization": {"login": org, "id": self.org_ids[org]}}

        def org_reader():
            """(user, None) when the token may read memberships, else (None, error response)."""
            if self.membership_outage:
                return None, (jsonify(message="Server Error"), self.membership_outage)
            found, info = current()
            if found is None:
                return None, (jsonify(message="Bad credentials"), 401)
            if "read:org" not in info["scope"].split(",") and "read:org" not in info["scope"].split():
                return None, (jsonify(message="Not Found"), 404)
            return found, None

        @app.get("/api/user/memberships/orgs/<org>")
        def org_membership(org: str):
            found, error = org_reader()
            if error:
                return error
            if org.lower() not in found.orgs:
                return jsonify(message="Not Found"), 404
            return jsonify(membership(org.lower()))

        @app.get("/api/user/memberships/orgs")
        def org_memberships():
            found, error = org_reader()
            if error:
                return error
            per_page, page = int(request.args.get("per_page", 30)), int(request.args.get("page", 1))
            every = [membership(org) for org in sorted(found.orgs)]
            return jsonify(every[(page - 1) * per_page: page * per_page])

        @app.get("/api/orgs/<org>")
        def organisation(org: str):
            if org.lower() not in self.org_ids:
                return jsonify(message="Not Found"), 404
            return jsonify(login=org.lower(), id=self.org_ids[org.lower()])

        @app.get("/api/orgs/<org>/teams/<team>/memberships/<username>")
        def team_membership(org: str, team: str, username: str):
            if self.membership_outage:
                return jsonify(message="Server Error"), self.membership_outage
            found, _ = current()
            if found is None:
                return jsonify(message="Bad credentials"), 401
            member = self.users.get(username.lower())
            if member is None or f"{org.lower()}/{team.lower()}" not in member.teams:
                return jsonify(message="Not Found"), 404
            return jsonify(state="active", role="member")

        return app
