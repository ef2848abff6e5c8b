"""The upstream identity: GitHub's OAuth web flow and user/org/team API (docs/operations.md#github-mode).

One login = authorization code with PKCE (S256) to GitHub's authorize and
token URLs, then ``GET /user`` for the identity and, when org or team
allowlists are set, ``GET /user/memberships/orgs/{org}`` and
``GET /orgs/{org}/teams/{team}/memberships/{login}`` (``state`` must be
``active``). The GitHub access token lives only inside :func:`login` and is
dropped when it returns: the gateway never stores it (it mints its own
tokens). The base URLs come from :class:`~gateway.config.github.GithubSettings`
so tests point them at a stand-in.

Errors are :class:`UpstreamError` (GitHub refused the code, answered
unexpectedly or could not be reached) with a message safe to show.
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlencode

import requests

from gateway.config.github import SCOPE_READ, SCOPE_WRITE, GithubSettings

__all__ = ["GithubUser", "UpstreamError", "authorize_url", "login", "granted_scopes"]

_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "s3rm-gateway"}


class UpstreamError(Exception):
    """GitHub did not complete the login (message is safe to show; no token or code in it)."""


@dataclass(frozen=True)
class GithubUser:
    """A verified GitHub identity: numeric ``id`` (as text), ``login``, and the scopes its memberships allow."""

    id: str
    login: str
    allowed: frozenset[str]


def authorize_url(settings: GithubSettings, *, state: str, code_challenge: str, redirect_uri: str) -> str:
    """GitHub's authorize URL for one login (``read:org`` is asked only when org/team allowlists exist)."""
    params = {"client_id": settings.client_id, "redirect_uri": redirect_uri, "state": state,
              "code_challenge": code_challenge, "code_challenge_method": "S256", "allow_signup": "false",
              "scope": "read:org" if settings.needs_org_scope else ""}
    return f"{settings.authorize_url}?{urlencode(params)}"


def _get(session: requests.Session, settings: GithubSettings, path: str) -> requests.Response:
    return session.get(f"{settings.api_url}{path}", timeout=settings.upstream_timeout_seconds)


def _active(session: requests.Session, settings: GithubSettings, path: str) -> bool:
    response = _get(session, settings, path)
    if response.status_code != 200:
        return False
    try:
        return response.json().get("state") == "active"
    except ValueError:
        return False


def granted_scopes(settings: GithubSettings, login_name: str, orgs: set[str], teams: set[str]) -> frozenset[str]:
    """The scopes allowed to ``login_name`` (lower case) with active ``orgs`` and ``org/team`` ``teams``."""
    def listed(users: frozenset[str], org_list: frozenset[str], team_list: frozenset[str]) -> bool:
        return login_name in users or bool(orgs & org_list) or bool(teams & team_list)

    if listed(settings.write_users, settings.write_orgs, settings.write_teams):
        return frozenset({SCOPE_READ, SCOPE_WRITE})
    if listed(settings.read_users, settings.read_orgs, settings.read_teams):
        return frozenset({SCOPE_READ})
    return frozenset()


def login(settings: GithubSettings, *, code: str, code_verifier: str, redirect_uri: str) -> GithubUser:
    """Redeem GitHub's ``code`` and return who logged in and what the allowlists grant them.

    Raises :class:`UpstreamError`. The GitHub token is used for the identity
    and membership calls only and discarded.
    """
    with requests.Session() as session:
        session.headers.update(_HEADERS)
        try:
            answer = session.post(settings.token_url, timeout=settings.upstream_timeout_seconds,
                                  headers={"Accept": "application/json"},
                                  data={"client_id": settings.client_id, "client_secret": settings.client_secret,
                                        "code": code, "redirect_uri": redirect_uri, "code_verifier": code_verifier})
            body = answer.json() if answer.status_code == 200 else {}
        except (requests.RequestException, ValueError):
            raise UpstreamError("GitHub could not be reached to finish the login.") from None
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise UpstreamError("GitHub did not accept the login (the code was refused or has expired).")
        session.headers["Authorization"] = f"Bearer {token}"
        try:
            user = _get(session, settings, "/user")
            data = user.json() if user.status_code == 200 else {}
            if not isinstance(data, dict) or not isinstance(data.get("id"), int) or not isinstance(data.get("login"), str):
                raise UpstreamError("GitHub did not say who logged in.")
            name = data["login"].lower()
            orgs = {org for org in settings.read_orgs | settings.write_orgs
                    if _active(session, settings, f"/user/memberships/orgs/{quote(org)}")}
            teams = set()
            for team in settings.read_teams | settings.write_teams:
                org, _, slug = team.partition("/")
                if _active(session, settings, f"/orgs/{quote(org)}/teams/{quote(slug)}/memberships/{quote(name)}"):
                    teams.add(team)
        except (requests.RequestException, ValueError):
            raise UpstreamError("GitHub could not be reached to check the login.") from None
        finally:
            token = None  # discarded: never stored, never logged
    return GithubUser(id=str(data["id"]), login=data["login"], allowed=granted_scopes(settings, name, orgs, teams))
