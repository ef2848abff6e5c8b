"""``s3rm auth``: an admin's levers on github mode's authorization state (docs/operations.md#github-mode).

The state store and the GitHub settings come from the same ``S3RM_*``
environment as the gateway (``S3RM_MCP_WRITE_AUTH_MODE=github``, the
allowlists, ``S3RM_AUTH_STORE`` / ``S3RM_OAUTH_STATE_DB`` / ``S3RM_PG_DSN``).

Verbs:

* ``revoke --user <login|id>`` — revoke every refresh-token family of that
  GitHub user; their access tokens stop working at once on every gateway
  sharing the store (docs/operations.md#github-cut-off);
* ``pin <login> [--id N]`` — pin a login name of the user allowlists to
  GitHub's numeric id (looked up on GitHub when ``--id`` is not given, after
  which the admin should compare it): only then does the login grant
  anything (docs/operations.md#github-ids); ``pin --org <name> [--id N]``
  pins an organisation name of the org/team allowlists ahead of its first
  sign-in (which would otherwise pin the id it sees);
* ``status`` — rows and bytes per kind of state, the pinned logins and the
  allowlisted logins still waiting for a pin;
* ``purge`` — delete expired state now (the gateways also do it periodically).

Exit codes: 0 done, 1 nothing matched or GitHub refused, 2 usage/configuration.
"""
from __future__ import annotations

import argparse
import os
import time

from s3rm.errors import CliError
from s3rm.settings import CliSettings

__all__ = ["register"]


def _open():
    from gateway.auth.service import open_auth_store
    from gateway.config import ConfigError, load_config

    try:
        config = load_config(os.environ)
    except ConfigError as exc:
        raise CliError(str(exc), 2) from exc
    if config.github is None:
        raise CliError("needs github mode (S3RM_MCP_WRITE_AUTH_MODE=github and its settings)", 2)
    return config.github, open_auth_store(config)


def cmd_revoke(args: argparse.Namespace) -> int:
    from gateway.auth.server import audit, install_audit_log

    settings, store = _open()
    install_audit_log(settings.audit_log, settings.audit_log_bytes, settings.audit_log_backups)
    count = store.revoke_user(args.user.strip(), int(time.time()))
    audit("revoked", reason="admin", user=args.user.strip(), families=count)
    print(f"revoked {count} sign-in(s) of GitHub user {args.user.strip()}")
    return 0 if count else 1


def cmd_pin(args: argparse.Namespace) -> int:
    from gateway.auth import github

    settings, store = _open()
    login = args.login.strip().lower()
    if args.org:
        orgs = settings.read_orgs | settings.write_orgs | {t.partition("/")[0] for t in
                                                           settings.read_teams | settings.write_teams}
        if login not in orgs or login.isdigit():
            raise CliError(f"{login!r} is not an organisation name in the org or team allowlists", 2)
        try:
            org_id = str(args.id) if args.id is not None else github.lookup_org(
                settings, login, CliSettings().github_lookup_token)
        except github.UpstreamError as exc:
            raise CliError(str(exc), 1) from exc
        store.pin_login(f"org:{login}", org_id, int(time.time()))
        print(f"pinned organisation {login} to GitHub id {org_id}")
        return 0
    if login not in settings.pending_logins:
        raise CliError(f"{login!r} is not a login in S3RM_GITHUB_READ_USERS / S3RM_GITHUB_WRITE_USERS", 2)
    user_id = args.id
    if user_id is None:
        try:
            user_id = github.lookup_user(settings, login, CliSettings().github_lookup_token)
        except github.UpstreamError as exc:
            raise CliError(str(exc), 1) from exc
    store.pin_login(login, str(user_id), int(time.time()))
    print(f"pinned {login} to GitHub id {user_id}; better: list the id itself in the setting")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    settings, store = _open()
    size = store.size()
    print(" ".join(f"{k}={v}" for k, v in size.items()))
    pins = store.pinned_logins()
    print("pinned " + (" ".join(f"{k}={v}" for k, v in sorted(pins.items())) or "-"))
    print("unpinned " + (" ".join(sorted(settings.pending_logins - set(pins))) or "-"))
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    settings, store = _open()
    now = int(time.time())
    removed = store.purge(now, unused_client_before=now - settings.unused_client_seconds,
                          idle_client_before=now - settings.refresh_token_seconds - settings.access_token_seconds,
                          revoked_before=now - settings.access_token_seconds)
    print(" ".join(f"{k}={v}" for k, v in removed.items()))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``s3rm auth`` to the ``s3rm`` parser."""
    p = subparsers.add_parser("auth", help="github mode: cut a user off, pin allowlisted logins to ids, state size",
                              description=__doc__.split("\n\n")[0])
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    p.set_defaults(error_prefix="s3rm auth")
    revoke = verbs.add_parser("revoke", help="revoke every sign-in of a GitHub user")
    revoke.add_argument("--user", required=True, help="GitHub login or numeric id")
    revoke.set_defaults(handler=cmd_revoke)
    pin = verbs.add_parser("pin", help="pin an allowlisted login name to its GitHub id")
    pin.add_argument("login")
    pin.add_argument("--id", type=int, help="the numeric id (default: look it up on GitHub)")
    pin.add_argument("--org", action="store_true", help="pin an organisation name of the org/team allowlists")
    pin.set_defaults(handler=cmd_pin)
    verbs.add_parser("status", help="state size, pins").set_defaults(handler=cmd_status)
    verbs.add_parser("purge", help="delete expired state now").set_defaults(handler=cmd_purge)
