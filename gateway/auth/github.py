"""The upstream identity: GitHub's OAuth web flow and user/org/team API (docs/operations.md#github-mode).

One login = authorization code with PKCE (S256) to GitHub's authorize and
token URLs, then ``GET /user`` for the identity and, when org or team
allowlists are set, ``GET /user/memberships/orgs/{org}`` and
``GET /orgs/{org}/teams/{team}/memberships/{login}`` (``state`` must be
``active``). :func:`login` returns the user's GitHub token with the
identity; the gateway keeps it only encrypted on the grant's refresh-token
family (:mod:`gateway.auth.vault`) and uses it for nothing but
:func:`recheck`: the same identity and membership calls, made again when a
refresh arrives (docs/operations.md#github-credential). The base URLs come
from :class:`~gateway.config.github.GithubSettings` so tests point them at a
stand-in.

Allowlisted users are GitHub's numeric ids; a login name in the settings
counts only for the id an admin pinned it to (:func:`granted_scopes`).
:func:`lookup_user` resolves a login for that admin command. Allowlisted
organisations are numeric ids or names; a name counts only for the
organisation id pinned to it (pinned by ``s3rm auth pin --org`` or at the
first sign-in that sees it, :func:`_active_orgs`), and a team counts only
inside such an organisation — a freed org name taken by someone else grants
nothing (docs/operations.md#github-ids).

Errors are :class:`UpstreamError` (GitHub refused the code, answered
unexpectedly or could not be reached) with a message safe to show.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

import requests

from gateway.config.github import SCOPE_READ, SCOPE_WRITE, GithubSettings
from gateway.core.errors import GatewayError

__all__ = ["GithubUser", "UpstreamError", "authorize_url", "granted_scopes", "login", "lookup_org", "lookup_user",
           "recheck"]

_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "s3rm-gateway"}


class UpstreamError(GatewayError):
    """GitHub did not complete the login (message is safe to show; no token or code in it)."""


@dataclass(frozen=True)
class GithubUser:
    """A verified GitHub identity: numeric ``id`` (as text), ``login``, the scopes its memberships allow,
    and ``org_ids``: allowlisted org names not pinned yet → the numeric id seen (the caller pins them)."""

    id: str
    login: str
    allowed: frozenset[str]
    org_ids: dict[str, str] = field(default_factory=dict)


def authorize_url(settings: GithubSettings, *, state: str, code_challenge: str, redirect_uri: str) -> str:
    """GitHub's authorize URL for one login (``read:org`` is asked only when org/team allowlists exist)."""
    params = {"client_id": settings.client_id, "redirect_uri": redirect_uri, "state": state,
              "code_challenge": code_challenge, "code_challenge_method": "S256", "allow_signup": "false",
              "scope": "read:org" if settings.needs_org_scope else ""}
    return f"{settings.authorize_url}?{urlencode(params)}"


def _get(session: requests.Session, settings: GithubSettings, path: str) -> requests.Response:
    return session.get(f"{settings.api_url}{path}", timeout=settings.upstream_timeout_seconds)


def _membership(session: requests.Session, settings: GithubSettings, path: str) -> dict | list | None:
    """The JSON of a membership call; ``None`` when GitHub says there is none (404, or another refusal);
    :class:`UpstreamError` when GitHub could not answer (5xx, or its rate limit: 429, or 403 with no
    requests left) — an outage is never taken for a lost membership."""
    response = _get(session, settings, path)
    limited = response.status_code == 429 or (response.status_code == 403 and (
        response.headers.get("X-RateLimit-Remaining") == "0" or "Retry-After" in response.headers))
    if response.status_code >= 500 or limited:
        raise UpstreamError("GitHub is not answering the membership check right now.")
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _active(session: requests.Session, settings: GithubSettings, path: str) -> bool:
    """True for an active membership (see :func:`_membership`)."""
    found = _membership(session, settings, path)
    return isinstance(found, dict) and found.get("state") == "active"


def _org_id(membership: object) -> str | None:
    """The numeric id of the organisation of an ACTIVE org membership record, else ``None``."""
    if not isinstance(membership, dict) or membership.get("state") != "active":
        return None
    org = membership.get("organization")
    return str(org["id"]) if isinstance(org, dict) and isinstance(org.get("id"), int) else None


def _active_orgs(session: requests.Session, settings: GithubSettings, pins: dict[str, str],
                 learned: dict[str, str]) -> set[str]:
    """The org allowlist entries (names and numeric ids) this session's user is an active member of.

    A name counts only while its organisation's numeric id is the one pinned for it (``pins["org:<name>"]``:
    GitHub frees an org name on rename and anyone may take it); an unpinned name counts and its id goes to
    ``learned`` (the caller pins it: trust on first use). A numeric id is matched against the user's list of
    active memberships (``GET /user/memberships/orgs``, which carries the ids)."""
    entries = settings.read_orgs | settings.write_orgs | {t.partition("/")[0] for t in settings.read_teams
                                                          | settings.write_teams}
    found = set()
    for name in sorted(e for e in entries if not e.isdigit()):
        org_id = _org_id(_membership(session, settings, f"/user/memberships/orgs/{quote(name)}"))
        pinned = pins.get(f"org:{name}")
        if org_id is None or (pinned is not None and pinned != org_id):
            continue
        if pinned is None:
            learned[name] = org_id
        found.add(name)
    wanted = {e for e in entries if e.isdigit()}
    for page in range(1, 11) if wanted else ():  # at most 1000 memberships
        listed = _membership(session, settings, f"/user/memberships/orgs?state=active&per_page=100&page={page}")
        if not isinstance(listed, list):
            break
        found |= wanted & {org_id for org_id in map(_org_id, listed) if org_id}
        if len(listed) < 100:
            break
    return found


def granted_scopes(settings: GithubSettings, user_id: str, login_name: str, orgs: set[str], teams: set[str],
                   pins: dict[str, str] | None = None) -> frozenset[str]:
    """The scopes allowed to GitHub user ``user_id`` (login ``login_name``, lower case) with active ``orgs``
    and ``org/team`` ``teams``. A login listed in the settings counts only when ``pins`` (login → id,
    written by ``s3rm auth pin``) maps it to ``user_id``: a login freed by a rename grants nothing."""
    pinned = (pins or {}).get(login_name) == user_id

    def listed(ids: frozenset[str], users: frozenset[str], org_list: frozenset[str], team_list: frozenset[str]) -> bool:
        return user_id in ids or (pinned and login_name in users) or bool(orgs & org_list) or bool(teams & team_list)

    if listed(settings.write_user_ids, settings.write_users, settings.write_orgs, settings.write_teams):
        return frozenset({SCOPE_READ, SCOPE_WRITE})
    if listed(settings.read_user_ids, settings.read_users, settings.read_orgs, settings.read_teams):
        return frozenset({SCOPE_READ})
    return frozenset()


def _identity_and_scopes(session: requests.Session, settings: GithubSettings,
                         pins: dict[str, str] | None) -> tuple[dict, frozenset[str]] | None:
    """``GET /user`` and the membership calls with the session's token; ``None`` when GitHub refuses the
    token (401: revoked or expired). Raises ``requests.RequestException``/``ValueError`` when unreachable
    or malformed, :class:`UpstreamError` for a 5xx."""
    user = _get(session, settings, "/user")
    if user.status_code == 401:
        return None
    if user.status_code >= 500:
        raise UpstreamError("GitHub is not answering correctly right now.")
    data = user.json() if user.status_code == 200 else {}
    if not isinstance(data, dict) or not isinstance(data.get("id"), int) or not isinstance(data.get("login"), str):
        raise UpstreamError("GitHub did not say who logged in.")
    name = data["login"].lower()
    learned: dict[str, str] = {}
    orgs = _active_orgs(session, settings, pins or {}, learned) if settings.needs_org_scope else set()
    teams = set()
    for team in settings.read_teams | settings.write_teams:
        org, _, slug = team.partition("/")
        if org in orgs and _active(session, settings, f"/orgs/{quote(org)}/teams/{quote(slug)}/memberships/"
                                                      f"{quote(name)}"):
            teams.add(team)
    data = {**data, "_learned_orgs": learned}
    return data, granted_scopes(settings, str(data["id"]), name, orgs, teams, pins)


def recheck(settings: GithubSettings, token: str, user_id: str, pins: dict[str, str] | None = None) -> frozenset[str]:
    """What the allowlists allow the holder of GitHub ``token`` now: empty when GitHub refuses the token
    or it belongs to another id than ``user_id``. Raises :class:`UpstreamError` when GitHub cannot be
    reached or answers a server error (the caller decides how long an old answer stays good)."""
    with requests.Session() as session:
        session.headers.update(_HEADERS)
        session.headers["Authorization"] = f"Bearer {token}"
        try:
            found = _identity_and_scopes(session, settings, pins)
        except (requests.RequestException, ValueError):
            raise UpstreamError("GitHub could not be reached to re-check the membership.") from None
    if found is None or str(found[0]["id"]) != user_id:
        return frozenset()
    return found[1]


def _lookup_id(settings: GithubSettings, path: str, what: str, token: str) -> str:
    """The numeric ``id`` of the GitHub API object at ``path``, as text; raises :class:`UpstreamError`."""
    headers = dict(_HEADERS, **({"Authorization": f"Bearer {token}"} if token else {}))
    try:
        answer = requests.get(f"{settings.api_url}{path}", headers=headers, timeout=settings.upstream_timeout_seconds)
        data = answer.json() if answer.status_code == 200 else {}
    except (requests.RequestException, ValueError):
        raise UpstreamError(f"GitHub could not be reached to look the {what.split()[0]} up.") from None
    if not isinstance(data, dict) or not isinstance(data.get("id"), int):
        raise UpstreamError(f"GitHub knows no {what} (HTTP {answer.status_code}).")
    return str(data["id"])


def lookup_user(settings: GithubSettings, login_name: str, token: str = "") -> str:
    """GitHub's numeric id of ``login_name`` (``GET /users/{login}``), as text; raises :class:`UpstreamError`."""
    return _lookup_id(settings, f"/users/{quote(login_name)}", f"user {login_name!r}", token)


def lookup_org(settings: GithubSettings, name: str, token: str = "") -> str:
    """GitHub's numeric id of organisation ``name`` (``GET /orgs/{org}``), as text; raises :class:`UpstreamError`."""
    return _lookup_id(settings, f"/orgs/{quote(name)}", f"organisation {name!r}", token)


def login(settings: GithubSettings, *, code: str, code_verifier: str, redirect_uri: str,
          pins: dict[str, str] | None = None) -> tuple[GithubUser, str]:
    """Redeem GitHub's ``code``: who logged in, what the allowlists grant them, and their GitHub token
    (for :func:`recheck`; the caller stores it only encrypted). Raises :class:`UpstreamError`."""
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
            found = _identity_and_scopes(session, settings, pins)
        except (requests.RequestException, ValueError):
            raise UpstreamError("GitHub could not be reached to check the login.") from None
        if found is None:
            raise UpstreamError("GitHub did not accept its own token.")
    data, allowed = found
    return GithubUser(id=str(data["id"]), login=data["login"], allowed=allowed,
                      org_ids=dict(data["_learned_orgs"])), token
