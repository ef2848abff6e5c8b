"""The dev wiki's accounts: users, groups and bot passwords (:data:`ACCOUNT_SPECS`).

Three bot passwords: ``S3Admin@sync`` (site JS/CSS and interface pages, used
by ``s3rm sync push``), ``S3Agent@gateway`` (the gateway) and
``S3Import@import`` (the importer), the last two with the grants to read,
create and edit ordinary pages only. Users are made with MediaWiki's
``createAndPromote.php``; a bot password is replaced by deleting its row from
the wiki's SQLite ``bot_passwords`` table and running ``createBotPassword.php``
(which refuses to overwrite an existing one).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import secrets
import sqlite3
from pathlib import Path
from typing import Any

from s3rm.devstack import packages
from s3rm.devstack.console import say

#: The SQLite database name ``install.php`` is given (``data/<name>.sqlite``).
DB_NAME = "s3rm"


@dataclasses.dataclass(frozen=True)
class AccountSpec:
    """One wiki account and its bot password.

    ``role`` is the short name used by :meth:`DevWiki.site` ("sync", "agent",
    "import"); the bot login name is ``f"{user}@{app_id}"``.
    """

    role: str
    user: str
    app_id: str
    groups: tuple[str, ...]
    grants: tuple[str, ...]

    @property
    def bot_username(self) -> str:
        """Login name of the bot password, e.g. ``S3Agent@gateway``."""
        return f"{self.user}@{self.app_id}"


_PAGE_GRANTS = ("basic", "highvolume", "editpage", "createeditmovepage")


#: The three accounts every dev/test wiki has.
ACCOUNT_SPECS: tuple[AccountSpec, ...] = (
    AccountSpec(
        "sync", "S3Admin", "sync", ("sysop", "bureaucrat", "interface-admin"),
        _PAGE_GRANTS + ("editinterface", "editsiteconfig"),
    ),
    AccountSpec("agent", "S3Agent", "gateway", (), _PAGE_GRANTS),
    AccountSpec("import", "S3Import", "import", (), _PAGE_GRANTS),
)


ADMIN_USER = "S3Admin"


def accounts_fingerprint() -> str:
    """A short hash of :data:`ACCOUNT_SPECS`: a stored state with another one needs its accounts updated."""
    raw = json.dumps([dataclasses.asdict(s) for s in ACCOUNT_SPECS], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Credentials:
    """A username/password pair, e.g. ``Credentials("S3Agent@gateway", "…32 chars…")``."""

    username: str
    password: str

    def __repr__(self) -> str:  # keep passwords out of test logs
        return f"Credentials(username={self.username!r}, password='***')"


def new_password() -> str:
    """A random account password that maintenance scripts cannot mistake for an option.

    ``secrets.token_urlsafe`` may start with ``-``, which ``createAndPromote.php``
    then parses as a flag (seen in CI); hex never does.
    """
    return "pw" + secrets.token_hex(16)


def _db(wiki_dir: Path) -> sqlite3.Connection:
    return sqlite3.connect(wiki_dir / "data" / f"{DB_NAME}.sqlite", timeout=30)


def _user_exists(wiki_dir: Path, user: str) -> bool:
    con = _db(wiki_dir)
    try:
        return con.execute("SELECT 1 FROM user WHERE user_name = ?", (user,)).fetchone() is not None
    finally:
        con.close()


def _delete_bot_password(wiki_dir: Path, user: str, app_id: str) -> None:
    con = _db(wiki_dir)
    try:
        with con:
            con.execute(
                "DELETE FROM bot_passwords WHERE bp_app_id = ? AND bp_user = "
                "(SELECT user_id FROM user WHERE user_name = ?)", (app_id, user))
    finally:
        con.close()


def ensure_accounts(wiki_dir: Path, state: dict[str, Any], quiet: bool = False) -> None:
    """Create the :data:`ACCOUNT_SPECS` users, groups and bot passwords in the wiki.

    Idempotent: users that exist only get their groups (re)added; bot passwords
    are recreated with the spec's grants. Passwords are taken from
    ``state["accounts"]`` when present, else generated and stored there.
    Raises :class:`DevWikiError` if a maintenance script fails.
    """
    accounts = state.setdefault("accounts", {})
    for spec in ACCOUNT_SPECS:
        acc = accounts.setdefault(spec.role, {})
        acc["user"] = spec.user
        if spec.user == ADMIN_USER:
            acc["password"] = state["admin"]["password"]
        acc.setdefault("password", new_password())
        acc.setdefault("bot_password", secrets.token_hex(16))  # exactly 32 chars
        acc["bot_username"] = spec.bot_username
        acc["groups"] = list(spec.groups)
        acc["grants"] = list(spec.grants)
        roles = [f"--{g}" for g in spec.groups]
        if not _user_exists(wiki_dir, spec.user):
            say(f"dev wiki: creating account {spec.user}", quiet)
            packages.run_maintenance(wiki_dir, "createAndPromote.php", *roles, spec.user, acc["password"])
        elif roles:
            packages.run_maintenance(wiki_dir, "createAndPromote.php", "--force", *roles,
                            spec.user, acc["password"])
        _delete_bot_password(wiki_dir, spec.user, spec.app_id)
        packages.run_maintenance(wiki_dir, "createBotPassword.php", "--appid", spec.app_id,
                        "--grants", ",".join(spec.grants), spec.user, acc["bot_password"])
    state["accounts_fingerprint"] = accounts_fingerprint()


