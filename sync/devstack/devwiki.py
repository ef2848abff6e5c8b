"""Development MediaWiki: ``s3rm dev wiki up|down|reset|status``.

A REAL MediaWiki (Debian's ``mediawiki`` 1.39 package, PHP, SQLite) installed
into a project directory (default ``<repo>/.dev/wiki``) and served by PHP's
built-in web server on loopback. Nothing under ``/etc/mediawiki``,
``/var/lib/mediawiki`` or ``/usr/share/mediawiki`` is written: the installer
writes ``LocalSettings.php`` into the project directory and every PHP process
is pointed at it through the ``MW_CONFIG_FILE`` environment variable (which
MediaWiki 1.39 reads in ``wfDetectLocalSettingsFile()``).

Layout of a wiki directory::

    LocalSettings.php       written by maintenance/install.php, + one include line
    S3RM.php                our settings, rewritten on every ``up``
    data/                   SQLite databases (WAL mode)
    logs/server.log         php -S access/error log
    logs/jobrunner.log      job runner log
    logs/exception.log      MediaWiki exceptions
    run/server.pid, run/jobrunner.pid
    jobrunner-state.json    {"last_run_at": ISO-8601 UTC, "ok": bool, ...}
    state.json              URLs, ports, accounts and passwords (mode 600)
    env                     ``export`` lines for the gateway/sync (mode 600)

Accounts (bot passwords, see :data:`ACCOUNT_SPECS`): ``S3Admin@sync`` (site
JS/CSS and interface pages), ``S3Agent@gateway`` and ``S3Import@import``
(read, create and edit ordinary pages only).

The same functions back the pytest fixture ``dev_wiki`` (``tests/conftest.py``):
:func:`start_test_wiki` installs a cached template once, copies it per test
session and serves the copy on a free port.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as _dt
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Mapping

from gateway.domain.schema import REPO_ROOT
from sync.devstack.envfiles import DEV_DIR
from sync.devstack.procs import read_pid as _read_pid, running as _running, stop as _stop

#: Default directory of the interactive dev wiki (git-ignored via ``/.dev/``).
DEFAULT_DIR = DEV_DIR / "wiki"
#: Installed-once template the test fixture copies for each pytest session.
DEFAULT_TEMPLATE_DIR = DEV_DIR / "test-wiki-template"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8081
PORT_ENV = "S3RM_DEV_WIKI_PORT"

#: Where Debian's mediawiki package puts the code (read-only for us).
MW_ROOT = Path("/usr/share/mediawiki")
#: Debian packages the dev wiki needs (CI installs the same list, see .ci/run).
DEBIAN_PACKAGES = ("mediawiki", "php-cli", "php-sqlite3", "php-intl", "php-mbstring", "php-xml")
#: PHP modules (``php -m`` names) that must be loaded.
PHP_MODULES = ("pdo_sqlite", "intl", "mbstring", "xml")

SITE_NAME = "S3 Research Memory"
DB_NAME = "s3rm"
CONTENT_LANGUAGE = "ko"
LESSON_NS = 3000
LESSON_TALK_NS = 3001
SERVER_WORKERS = 8
JOBRUNNER_INTERVAL_S = 2.0
#: Bump when :func:`install` produces something a cached install must not keep.
INSTALL_VERSION = 1

STATE_FILE = "state.json"
ENV_FILE = "env"
SETTINGS_FILE = "S3RM.php"
JOBRUNNER_STATE_FILE = "jobrunner-state.json"
_INCLUDE_MARKER = "# s3rm dev wiki: generated settings"


class DevWikiError(Exception):
    """A dev-wiki operation failed; ``str(exc)`` is a message for humans.

    ``exit_code`` is what the CLI returns: 1 for a failed operation, 2 for bad
    configuration or usage.
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ConfigError(DevWikiError):
    """Bad configuration (port, directory, environment variable); exit code 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


# --------------------------------------------------------------------------
# accounts


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


def _accounts_fingerprint() -> str:
    raw = json.dumps([dataclasses.asdict(s) for s in ACCOUNT_SPECS], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Credentials:
    """A username/password pair, e.g. ``Credentials("S3Agent@gateway", "…32 chars…")``."""

    username: str
    password: str

    def __repr__(self) -> str:  # keep passwords out of test logs
        return f"Credentials(username={self.username!r}, password='***')"


@dataclasses.dataclass(frozen=True)
class DevWiki:
    """A running dev/test wiki.

    Fields: ``api_url`` (``http://127.0.0.1:PORT/api.php``), ``index_url``
    (``…/index.php``), ``server_url`` (``http://127.0.0.1:PORT``), ``host``,
    ``port``, ``dir`` (the wiki directory), ``jobrunner_state_file``, and the
    bot-password logins ``sync`` (``S3Admin@sync``), ``agent``
    (``S3Agent@gateway``), ``importer`` (``S3Import@import``), plus ``admin``,
    the main ``S3Admin`` login for the browser (Special:UserLogin).
    """

    api_url: str
    index_url: str
    server_url: str
    host: str
    port: int
    dir: Path
    jobrunner_state_file: Path
    sync: Credentials
    agent: Credentials
    importer: Credentials
    admin: Credentials

    def account(self, role: str | Credentials) -> Credentials:
        """Return the credentials for ``role`` ("sync", "agent", "import"/"importer",
        "admin") or ``role`` itself if it already is :class:`Credentials`.

        Raises ``KeyError`` for an unknown role.
        """
        if isinstance(role, Credentials):
            return role
        table = {"sync": self.sync, "agent": self.agent, "import": self.importer,
                 "importer": self.importer, "admin": self.admin}
        if role not in table:
            raise KeyError(f"unknown dev wiki account {role!r}; use one of {sorted(table)}")
        return table[role]

    def site(self, account: str | Credentials = "agent", *, login: bool = True) -> Any:
        """Return an ``mwclient.Site`` for this wiki, logged in as ``account``
        (see :meth:`account`) unless ``login`` is false.

        Raises ``mwclient.errors.LoginError`` if the login is refused.
        """
        import mwclient

        site = mwclient.Site(
            f"{self.host}:{self.port}", path="/", scheme="http",
            clients_useragent="s3rm-devwiki", max_retries=2, retry_timeout=2,
        )
        if login:
            creds = self.account(account)
            site.login(creds.username, creds.password)
        return site

    def env(self) -> dict[str, str]:
        """Environment variables for the gateway/sync/import tools (same as ``<dir>/env``)."""
        return {
            "S3RM_WIKI_API_URL": self.api_url,
            "S3RM_WIKI_USERNAME": self.agent.username,
            "S3RM_WIKI_PASSWORD": self.agent.password,
            "S3RM_SYNC_USERNAME": self.sync.username,
            "S3RM_SYNC_PASSWORD": self.sync.password,
            "S3RM_IMPORT_USERNAME": self.importer.username,
            "S3RM_IMPORT_PASSWORD": self.importer.password,
            "S3RM_JOBRUNNER_STATE_FILE": str(self.jobrunner_state_file),
        }


# --------------------------------------------------------------------------
# small helpers


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _say(msg: str, quiet: bool = False) -> None:
    if not quiet:
        print(msg, flush=True)


def _new_password() -> str:
    """A random account password that maintenance scripts cannot mistake for an option.

    ``secrets.token_urlsafe`` may start with ``-``, which ``createAndPromote.php``
    then parses as a flag (seen in CI); hex never does.
    """
    return "pw" + secrets.token_hex(16)


def _write_private(path: Path, text: str) -> None:
    """Atomically write ``text`` to ``path`` with mode 600."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _php_str(value: str) -> str:
    """A PHP single-quoted string literal for ``value``."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def resolve_port(port: int | str | None) -> int:
    """Return the port to use: ``port`` if given, else ``$S3RM_DEV_WIKI_PORT``, else 8081.

    Raises :class:`ConfigError` for anything that is not an integer in 1..65535.
    """
    source = "--port"
    if port is None:
        env = os.environ.get(PORT_ENV, "").strip()
        if not env:
            return DEFAULT_PORT
        port, source = env, PORT_ENV
    try:
        value = int(port)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}={port!r} is not a port number (expected an integer 1-65535)") from None
    if not 1 <= value <= 65535:
        raise ConfigError(f"{source}={value} is out of range (expected 1-65535)")
    return value


def free_port(host: str = DEFAULT_HOST) -> int:
    """Return a TCP port on ``host`` that is free right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise ConfigError(f"cannot use {host}:{port}: {exc.strerror}") from None
    return False


@contextlib.contextmanager
def _locked(wiki_dir: Path) -> Iterator[None]:
    """Serialise up/down/reset on one wiki directory (a sibling ``.lock`` file)."""
    wiki_dir.parent.mkdir(parents=True, exist_ok=True)
    lock_path = wiki_dir.with_name(wiki_dir.name + ".lock")
    with open(lock_path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------
# packages and PHP


def missing_packages() -> list[str]:
    """Return the entries of :data:`DEBIAN_PACKAGES` that dpkg does not list as installed.

    Raises :class:`DevWikiError` on a machine without ``dpkg-query`` (not Debian).
    """
    if shutil.which("dpkg-query") is None:
        raise DevWikiError(
            "the dev wiki needs Debian packages (" + " ".join(DEBIAN_PACKAGES) + ") "
            "but dpkg-query is not available: this is not a Debian/Ubuntu machine"
        )
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\n", *DEBIAN_PACKAGES],
        capture_output=True, text=True, check=False,
    )
    installed = {
        parts[0].split(":")[0]
        for parts in (line.split() for line in proc.stdout.splitlines())
        if len(parts) == 2 and parts[1] == "installed"
    }
    return [p for p in DEBIAN_PACKAGES if p not in installed]


def ensure_packages(install: bool = True, quiet: bool = False) -> None:
    """Make sure the Debian packages, ``php`` and MediaWiki are present.

    With ``install`` true, missing packages are installed with
    ``apt-get install -y --no-install-recommends`` (as root, or via ``sudo -n``).
    Raises :class:`DevWikiError` if something is missing and cannot be installed.
    """
    missing = missing_packages()
    if missing:
        if not install:
            raise DevWikiError(
                "the dev wiki needs Debian packages that are not installed: " + " ".join(missing)
                + "\n  install them with: apt-get install -y --no-install-recommends " + " ".join(missing)
                + "\n  (or run `s3rm dev wiki up`, which installs them, or .ci/run)"
            )
        prefix: list[str] = []
        if os.geteuid() != 0:
            if shutil.which("sudo") is None:
                raise DevWikiError(
                    "missing Debian packages " + " ".join(missing) + " and not running as root; run:\n"
                    "  apt-get update && apt-get install -y --no-install-recommends " + " ".join(missing)
                )
            prefix = ["sudo", "-n"]
        _say("dev wiki: installing Debian packages: " + " ".join(missing), quiet)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for cmd in (["apt-get", "update", "-q"],
                    ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]):
            proc = subprocess.run(prefix + cmd, env=env, check=False)
            if proc.returncode != 0:
                raise DevWikiError(f"`{' '.join(prefix + cmd)}` failed with exit code {proc.returncode}")
        still = missing_packages()
        if still:
            raise DevWikiError("apt-get finished but these packages are still missing: " + " ".join(still))
    check_php()


def check_php() -> None:
    """Raise :class:`DevWikiError` unless ``php`` has :data:`PHP_MODULES` and MediaWiki is at :data:`MW_ROOT`."""
    if shutil.which("php") is None:
        raise DevWikiError("`php` is not on PATH (Debian package php-cli)")
    if not (MW_ROOT / "maintenance" / "install.php").is_file():
        raise DevWikiError(f"MediaWiki not found at {MW_ROOT} (Debian package mediawiki)")
    proc = subprocess.run(["php", "-m"], capture_output=True, text=True, check=False)
    loaded = {line.strip().lower() for line in proc.stdout.splitlines()}
    absent = [m for m in PHP_MODULES if m not in loaded]
    if absent:
        raise DevWikiError("PHP modules missing: " + ", ".join(absent)
                           + " (Debian packages php-sqlite3 php-intl php-mbstring php-xml)")


def mediawiki_version() -> str:
    """Return the installed MediaWiki version (e.g. ``"1.39.17"``) from ``includes/Defines.php``.

    Raises :class:`DevWikiError` if it cannot be read.
    """
    try:
        text = (MW_ROOT / "includes" / "Defines.php").read_text()
    except OSError as exc:
        raise DevWikiError(f"cannot read the MediaWiki version: {exc}") from None
    m = re.search(r"define\(\s*'MW_VERSION',\s*'([^']+)'", text)
    if not m:
        raise DevWikiError("cannot find MW_VERSION in MediaWiki's includes/Defines.php")
    return m.group(1)


def _php_env(wiki_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["MW_CONFIG_FILE"] = str(wiki_dir / "LocalSettings.php")
    env.pop("MW_INSTALL_PATH", None)
    return env


def run_maintenance(wiki_dir: Path, script: str, *args: str, timeout: float = 600,
                    config: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``php maintenance/<script> args…`` for the wiki in ``wiki_dir``.

    Returns the completed process (stdout/stderr captured as text). Raises
    :class:`DevWikiError` with the script's output if it exits non-zero.
    """
    cmd = ["php", str(MW_ROOT / "maintenance" / script), *args]
    env = _php_env(wiki_dir) if config else {k: v for k, v in os.environ.items() if k != "MW_CONFIG_FILE"}
    try:
        proc = subprocess.run(cmd, cwd=MW_ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise DevWikiError(f"maintenance/{script} timed out after {timeout:.0f} s") from None
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr).strip()
        out = "\n".join(out.splitlines()[-20:])
        raise DevWikiError(f"maintenance/{script} failed (exit {proc.returncode}):\n{out}")
    return proc


# --------------------------------------------------------------------------
# install and configuration


def _settings_php(host: str, port: int) -> str:
    server = _php_str(_server_url(host, port))
    return f"""<?php
// Generated by `s3rm dev wiki up` (sync/devstack/devwiki.py) and rewritten on every run.
// Edit sync/devstack/devwiki.py, not this file.
if ( !defined( 'MEDIAWIKI' ) ) {{
	exit;
}}

$wgServer = {server};
$wgCanonicalServer = {server};

// Lesson namespace: content, searched by default, titles never capitalised.
if ( !defined( 'NS_LESSON' ) ) {{
	define( 'NS_LESSON', {LESSON_NS} );
	define( 'NS_LESSON_TALK', {LESSON_TALK_NS} );
}}
$wgExtraNamespaces[NS_LESSON] = 'Lesson';
$wgExtraNamespaces[NS_LESSON_TALK] = 'Lesson_talk';
if ( !in_array( NS_LESSON, $wgContentNamespaces, true ) ) {{
	$wgContentNamespaces[] = NS_LESSON;
}}
$wgNamespacesToBeSearchedDefault[NS_LESSON] = true;
$wgCapitalLinkOverrides[NS_LESSON] = false;
$wgCapitalLinkOverrides[NS_LESSON_TALK] = false;

wfLoadExtension( 'ParserFunctions' );

// Site JS/CSS are pushed by `s3rm sync push` as S3Admin@sync.
$wgUseSiteJs = true;
$wgUseSiteCss = true;
$wgAllowSiteCSSOnRestrictedPages = true;
$wgEnableBotPasswords = true;

// Jobs run only in the job runner started by `s3rm dev wiki up`.
$wgJobRunRate = 0;

// One cache shared by the php -S workers, maintenance scripts and the job runner.
$wgMainCacheType = CACHE_DB;
$wgParserCacheType = CACHE_DB;
$wgSessionCacheType = CACHE_DB;
$wgMessageCacheType = CACHE_DB;
$wgUseFileCache = false;

$wgEnableUploads = false;
// Never three-way merge a stale edit: a save whose base revision is no longer
// the latest becomes an edit conflict, for the gateway and browser editors alike
// (docs/consistency.md).
$wgDiff3 = false;
$wgEnableEmail = false;
$wgEnableUserEmail = false;
$wgEmailAuthentication = false;
$wgEnotifUserTalk = false;
$wgEnotifWatchlist = false;

// Tests edit and log in fast from one IP: no rate limits or login throttles.
$wgRateLimits = [];
$wgPasswordAttemptThrottle = false;
$wgAccountCreationThrottle = false;

// Development: show and log exception details.
$wgShowExceptionDetails = true;
$wgDebugLogGroups['exception'] = __DIR__ . '/logs/exception.log';
$wgDebugLogGroups['error'] = __DIR__ . '/logs/exception.log';
"""


def _server_url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def write_settings(wiki_dir: Path, host: str, port: int) -> None:
    """(Re)write ``S3RM.php`` for ``host:port`` and make sure ``LocalSettings.php``
    includes it exactly once.

    Raises :class:`DevWikiError` if ``LocalSettings.php`` is missing.
    """
    ls = wiki_dir / "LocalSettings.php"
    if not ls.is_file():
        raise DevWikiError(f"{ls} is missing: {wiki_dir} is not an installed dev wiki (use `reset`)")
    (wiki_dir / SETTINGS_FILE).write_text(_settings_php(host, port), encoding="utf-8")
    text = ls.read_text(encoding="utf-8")
    if _INCLUDE_MARKER not in text:
        if not text.endswith("\n"):
            text += "\n"
        text += f"\n{_INCLUDE_MARKER}\nrequire_once __DIR__ . '/{SETTINGS_FILE}';\n"
        ls.write_text(text, encoding="utf-8")


def _make_relocatable(wiki_dir: Path) -> None:
    """Point ``$wgSQLiteDataDir`` at ``__DIR__/data`` so the directory can be moved or copied."""
    ls = wiki_dir / "LocalSettings.php"
    text = ls.read_text(encoding="utf-8")
    new, n = re.subn(r'^\$wgSQLiteDataDir = .*;$', "$wgSQLiteDataDir = __DIR__ . '/data';",
                     text, flags=re.M)
    if n != 1:
        raise DevWikiError("unexpected LocalSettings.php from install.php: no $wgSQLiteDataDir line")
    ls.write_text(new, encoding="utf-8")


def _sqlite_files(wiki_dir: Path) -> list[Path]:
    return sorted(p for p in (wiki_dir / "data").glob("*.sqlite") if p.stat().st_size > 0)


def _enable_wal(wiki_dir: Path) -> None:
    """Switch the SQLite databases to WAL so readers and a writer do not block each other."""
    for db in _sqlite_files(wiki_dir):
        con = sqlite3.connect(db, timeout=30)
        try:
            con.execute("PRAGMA journal_mode=WAL")
        finally:
            con.close()


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
        acc.setdefault("password", _new_password())
        acc.setdefault("bot_password", secrets.token_hex(16))  # exactly 32 chars
        acc["bot_username"] = spec.bot_username
        acc["groups"] = list(spec.groups)
        acc["grants"] = list(spec.grants)
        roles = [f"--{g}" for g in spec.groups]
        if not _user_exists(wiki_dir, spec.user):
            _say(f"dev wiki: creating account {spec.user}", quiet)
            run_maintenance(wiki_dir, "createAndPromote.php", *roles, spec.user, acc["password"])
        elif roles:
            run_maintenance(wiki_dir, "createAndPromote.php", "--force", *roles,
                            spec.user, acc["password"])
        _delete_bot_password(wiki_dir, spec.user, spec.app_id)
        run_maintenance(wiki_dir, "createBotPassword.php", "--appid", spec.app_id,
                        "--grants", ",".join(spec.grants), spec.user, acc["bot_password"])
    state["accounts_fingerprint"] = _accounts_fingerprint()


def _installed(wiki_dir: Path) -> bool:
    return (wiki_dir / STATE_FILE).is_file() and (wiki_dir / "LocalSettings.php").is_file()


def read_state(wiki_dir: Path) -> dict[str, Any]:
    """Return the parsed ``state.json`` of ``wiki_dir``.

    Raises :class:`DevWikiError` if the directory is not an installed dev wiki.
    """
    path = wiki_dir / STATE_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DevWikiError(f"no dev wiki installed in {wiki_dir} (run `s3rm dev wiki up`)") from None
    except (OSError, ValueError) as exc:
        raise DevWikiError(f"cannot read {path}: {exc} (run `s3rm dev wiki reset`)") from None


def _paths(wiki_dir: Path) -> dict[str, Path]:
    return {
        "server_pid": wiki_dir / "run" / "server.pid",
        "jobrunner_pid": wiki_dir / "run" / "jobrunner.pid",
        "server_log": wiki_dir / "logs" / "server.log",
        "jobrunner_log": wiki_dir / "logs" / "jobrunner.log",
        "exception_log": wiki_dir / "logs" / "exception.log",
        "jobrunner_state": wiki_dir / JOBRUNNER_STATE_FILE,
    }


def _save_state(wiki_dir: Path, state: dict[str, Any], host: str, port: int) -> DevWiki:
    paths = _paths(wiki_dir)
    server = _server_url(host, port)
    state.update({
        "dir": str(wiki_dir),
        "host": host,
        "port": port,
        "server_url": server,
        "api_url": f"{server}/api.php",
        "index_url": f"{server}/index.php",
        "files": {k: str(v) for k, v in paths.items()},
    })
    _write_private(wiki_dir / STATE_FILE, json.dumps(state, indent=2, sort_keys=True) + "\n")
    wiki = wiki_from_state(wiki_dir, state)
    _write_private(wiki_dir / ENV_FILE, "".join(
        f"export {k}={shlex.quote(v)}\n" for k, v in wiki.env().items()))
    return wiki


def wiki_from_state(wiki_dir: Path, state: Mapping[str, Any] | None = None) -> DevWiki:
    """Build a :class:`DevWiki` from ``state.json`` of ``wiki_dir`` (read if ``state`` is None).

    Raises :class:`DevWikiError` if the state is missing or incomplete.
    """
    st = read_state(wiki_dir) if state is None else state
    try:
        host, port = st["host"], int(st["port"])
        accs = st["accounts"]

        def bot(role: str) -> Credentials:
            return Credentials(accs[role]["bot_username"], accs[role]["bot_password"])

        server = _server_url(host, port)
        return DevWiki(
            api_url=f"{server}/api.php", index_url=f"{server}/index.php", server_url=server,
            host=host, port=port, dir=wiki_dir,
            jobrunner_state_file=wiki_dir / JOBRUNNER_STATE_FILE,
            sync=bot("sync"), agent=bot("agent"), importer=bot("import"),
            admin=Credentials(ADMIN_USER, st["admin"]["password"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DevWikiError(f"{wiki_dir / STATE_FILE} is incomplete ({exc!r}); run `s3rm dev wiki reset`") from None


def install(wiki_dir: Path, host: str, port: int, quiet: bool = False) -> dict[str, Any]:
    """Install a fresh wiki into ``wiki_dir`` (which must not exist or be empty).

    Runs ``maintenance/install.php`` (SQLite, Korean, scriptpath "") into a
    staging directory, writes our settings, creates the accounts and renames
    the staging directory to ``wiki_dir``. Returns the new state dict.
    Raises :class:`DevWikiError` on failure (the staging directory is removed).
    """
    if wiki_dir.exists() and any(wiki_dir.iterdir()):
        raise DevWikiError(f"{wiki_dir} exists but holds no complete dev wiki; "
                           "run `s3rm dev wiki reset` to replace it")
    staging = wiki_dir.with_name(f".{wiki_dir.name}.installing-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for sub in ("logs", "run"):
            (staging / sub).mkdir()
        admin_pw = _new_password()
        passfile = staging / ".adminpass"
        _write_private(passfile, admin_pw)
        _say(f"dev wiki: installing MediaWiki {mediawiki_version()} into {wiki_dir}", quiet)
        run_maintenance(
            staging, "install.php",
            "--dbtype", "sqlite", "--dbpath", str(staging / "data"), "--dbname", DB_NAME,
            "--lang", CONTENT_LANGUAGE, "--server", _server_url(host, port), "--scriptpath", "",
            "--confpath", str(staging), "--passfile", str(passfile), "--skins", "Vector",
            "--quiet", SITE_NAME, ADMIN_USER,
            config=False,
        )
        passfile.unlink()
        _make_relocatable(staging)
        _enable_wal(staging)
        write_settings(staging, host, port)
        state: dict[str, Any] = {
            "format": 1,
            "install_version": INSTALL_VERSION,
            "mediawiki_version": mediawiki_version(),
            "installed_at": _now_iso(),
            "admin": {"username": ADMIN_USER, "password": admin_pw},
        }
        ensure_accounts(staging, state, quiet=quiet)
        _save_state(staging, state, host, port)
        if wiki_dir.exists():
            wiki_dir.rmdir()
        staging.rename(wiki_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    # state paths were computed for the staging dir; rewrite them for the final place
    _save_state(wiki_dir, state, host, port)
    return state


# --------------------------------------------------------------------------
# processes


def _server_marker(wiki_dir: Path) -> str:
    return f"{MW_ROOT} {wiki_dir / 'router.php'}"


def _jobrunner_marker(wiki_dir: Path) -> str:
    return f"jobrunner --dir {wiki_dir}"


_ROUTER_PHP = """<?php
// Router for `php -S` (generated by sync/devstack/devwiki.py). Returning false lets the
// built-in server serve the static file or PHP entry point itself; the web
// installer and maintenance directory are not served.
$path = (string)parse_url( $_SERVER['REQUEST_URI'], PHP_URL_PATH );
if ( preg_match( '#^/+(mw-config|maintenance|vendor|includes|tests)(/|$)#', $path ) ) {
	http_response_code( 403 );
	echo "Forbidden\\n";
	return true;
}
return false;
"""


def _start_server(wiki_dir: Path, host: str, port: int) -> int:
    paths = _paths(wiki_dir)
    router = wiki_dir / "router.php"
    router.write_text(_ROUTER_PHP, encoding="utf-8")
    if _port_in_use(host, port):
        raise ConfigError(
            f"port {host}:{port} is already in use by another program; "
            f"choose another with --port or {PORT_ENV}")
    env = _php_env(wiki_dir)
    env["PHP_CLI_SERVER_WORKERS"] = str(SERVER_WORKERS)
    with open(paths["server_log"], "ab") as log:
        proc = subprocess.Popen(
            ["php", "-S", f"{host}:{port}", "-t", str(MW_ROOT), str(router)],
            cwd=MW_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True,
        )
    paths["server_pid"].write_text(f"{proc.pid}\n")
    return proc.pid


def _start_jobrunner(wiki_dir: Path, watch_pid: int | None) -> int:
    paths = _paths(wiki_dir)
    cmd = [sys.executable, "-m", "sync.devstack.devwiki", "jobrunner", "--dir", str(wiki_dir)]
    if watch_pid:
        cmd += ["--watch-pid", str(watch_pid)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    with open(paths["jobrunner_log"], "ab") as log:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True)
    paths["jobrunner_pid"].write_text(f"{proc.pid}\n")
    return proc.pid


def siteinfo(api_url: str, timeout: float = 5.0) -> dict[str, Any]:
    """GET ``action=query&meta=siteinfo`` (general, namespaces, extensions) and return ``query``.

    Raises ``OSError``/``ValueError`` (incl. ``urllib.error.URLError``) if the wiki does not answer properly.
    """
    qs = urllib.parse.urlencode({
        "action": "query", "meta": "siteinfo", "format": "json", "formatversion": "2",
        "siprop": "general|namespaces|namespacealiases|extensions",
    })
    with urllib.request.urlopen(f"{api_url}?{qs}", timeout=timeout) as resp:
        data = json.loads(resp.read().decode("utf-8"))
    if "query" not in data or "general" not in data["query"]:
        raise ValueError(f"unexpected siteinfo answer: {str(data)[:300]}")
    return data["query"]


def _wait_ready(wiki: DevWiki, server_pid: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    log = _paths(wiki.dir)["server_log"]
    while time.monotonic() < deadline:
        if _running(_paths(wiki.dir)["server_pid"], _server_marker(wiki.dir)) is None:
            raise DevWikiError(f"php -S exited during start-up; last lines of {log}:\n{_tail(log)}")
        try:
            siteinfo(wiki.api_url)
            return
        except (OSError, ValueError) as exc:
            last = exc
            time.sleep(0.1)
    raise DevWikiError(f"{wiki.api_url} did not answer within {timeout:.0f} s ({last}); "
                       f"see {log} and {_paths(wiki.dir)['exception_log']}")


def jobrunner_freshness(state_file: Path) -> tuple[bool, float | None, dict[str, Any]]:
    """Return ``(ok, age_seconds, data)`` for a job-runner state file.

    ``ok`` is the file's own ``ok`` flag; ``age_seconds`` is None when the file
    is missing or unreadable (then ``ok`` is False and ``data`` is empty).
    """
    try:
        data = json.loads(state_file.read_text(encoding="utf-8"))
        ts = _dt.datetime.fromisoformat(data["last_run_at"].replace("Z", "+00:00"))
    except (OSError, ValueError, KeyError, TypeError):
        return False, None, {}
    age = (_dt.datetime.now(_dt.timezone.utc) - ts).total_seconds()
    return bool(data.get("ok")), age, data


def pending_jobs(wiki_dir: Path) -> int:
    """Return the number of jobs queued or running (rows of the job table).

    Exact, unlike ``siteinfo`` statistics and ``showJobs.php``, which use a
    size cache of up to a minute. Raises :class:`DevWikiError` if the job
    queue database cannot be read.
    """
    path = Path(wiki_dir) / "data" / f"{DB_NAME}_jobqueue.sqlite"
    try:
        if not path.is_file():
            raise sqlite3.OperationalError("file not found")
        con = sqlite3.connect(path, timeout=30)
        try:
            return int(con.execute("SELECT COUNT(*) FROM job").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise DevWikiError(f"cannot read the job queue {path}: {exc}") from None


def _wait_jobrunner(wiki: DevWiki, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ok, age, _ = jobrunner_freshness(wiki.jobrunner_state_file)
        if age is not None and age < 30:
            if not ok:
                log = _paths(wiki.dir)["jobrunner_log"]
                raise DevWikiError(f"the job runner's first run failed; see {log}:\n{_tail(log)}")
            return
        if _running(_paths(wiki.dir)["jobrunner_pid"], _jobrunner_marker(wiki.dir)) is None:
            log = _paths(wiki.dir)["jobrunner_log"]
            raise DevWikiError(f"the job runner exited during start-up; see {log}:\n{_tail(log)}")
        time.sleep(0.1)
    raise DevWikiError(f"the job runner wrote no state to {wiki.jobrunner_state_file} within {timeout:.0f} s")


# --------------------------------------------------------------------------
# public operations


def up(wiki_dir: Path = DEFAULT_DIR, port: int | None = None, host: str = DEFAULT_HOST, *,
       install_packages: bool = True, watch_pid: int | None = None, quiet: bool = False) -> DevWiki:
    """Install (first time) and start the dev wiki in ``wiki_dir``; return it once api.php answers.

    Idempotent: on an installed directory it only refreshes ``S3RM.php``,
    ``state.json`` and ``env`` and starts the server and job runner if they are
    not running. ``port`` None means ``$S3RM_DEV_WIKI_PORT`` or 8081.
    ``install_packages`` lets it apt-get missing Debian packages;
    ``watch_pid`` makes the job runner stop the wiki when that process exits.
    Raises :class:`ConfigError` (bad port, port busy, already running on
    another port) or :class:`DevWikiError` (anything else).
    """
    wiki_dir = Path(wiki_dir).resolve()
    port = resolve_port(port)
    ensure_packages(install=install_packages, quiet=quiet)
    with _locked(wiki_dir):
        paths = _paths(wiki_dir)
        if not _installed(wiki_dir):
            state = install(wiki_dir, host, port, quiet=quiet)
        else:
            state = read_state(wiki_dir)
            if state.get("install_version") != INSTALL_VERSION or \
                    state.get("mediawiki_version") != mediawiki_version():
                _say(f"dev wiki: {wiki_dir} was installed by an older s3rm or MediaWiki; "
                     "consider `s3rm dev wiki reset`", quiet)
        server_pid = _running(paths["server_pid"], _server_marker(wiki_dir))
        if server_pid is not None and (state.get("port") != port or state.get("host") != host):
            raise ConfigError(
                f"the dev wiki in {wiki_dir} already runs on {state.get('host')}:{state.get('port')}; "
                f"run `s3rm dev wiki down --dir {wiki_dir}` before switching to {host}:{port}")
        for sub in ("logs", "run"):
            (wiki_dir / sub).mkdir(exist_ok=True)
        write_settings(wiki_dir, host, port)
        if state.get("accounts_fingerprint") != _accounts_fingerprint():
            _say("dev wiki: updating accounts and bot passwords", quiet)
            ensure_accounts(wiki_dir, state, quiet=quiet)
        wiki = _save_state(wiki_dir, state, host, port)
        started = []
        if server_pid is None:
            server_pid = _start_server(wiki_dir, host, port)
            started.append("server")
        try:
            _wait_ready(wiki, server_pid)
            if _running(paths["jobrunner_pid"], _jobrunner_marker(wiki_dir)) is None:
                paths["jobrunner_state"].unlink(missing_ok=True)
                _start_jobrunner(wiki_dir, watch_pid)
                started.append("job runner")
                _wait_jobrunner(wiki)
        except BaseException:
            if "server" in started:
                _stop(paths["server_pid"], _server_marker(wiki_dir))
            if "job runner" in started:
                _stop(paths["jobrunner_pid"], _jobrunner_marker(wiki_dir))
            raise
    _say(f"dev wiki: {'started ' + ' and '.join(started) if started else 'already running'}; "
         f"{wiki.server_url}/  (API {wiki.api_url}; credentials in {wiki_dir / ENV_FILE})", quiet)
    return wiki


def down(wiki_dir: Path = DEFAULT_DIR, quiet: bool = False) -> bool:
    """Stop the server and job runner of ``wiki_dir``; return True if anything was running."""
    wiki_dir = Path(wiki_dir).resolve()
    paths = _paths(wiki_dir)
    if not wiki_dir.exists():
        _say(f"dev wiki: nothing in {wiki_dir}", quiet)
        return False
    with _locked(wiki_dir):
        jr = _stop(paths["jobrunner_pid"], _jobrunner_marker(wiki_dir))
        sv = _stop(paths["server_pid"], _server_marker(wiki_dir))
    _say(f"dev wiki: {'stopped' if (jr or sv) else 'was not running'} ({wiki_dir})", quiet)
    return jr or sv


def _looks_like_devwiki(wiki_dir: Path) -> bool:
    if not wiki_dir.exists():
        return True
    entries = {p.name for p in wiki_dir.iterdir()}
    return not entries or STATE_FILE in entries or SETTINGS_FILE in entries


def reset(wiki_dir: Path = DEFAULT_DIR, port: int | None = None, host: str = DEFAULT_HOST,
          quiet: bool = False) -> DevWiki:
    """``down``, delete ``wiki_dir`` and ``up`` again; returns the fresh wiki.

    Refuses (:class:`ConfigError`) to delete a non-empty directory that is not a dev wiki.
    """
    wiki_dir = Path(wiki_dir).resolve()
    port = resolve_port(port)
    if not _looks_like_devwiki(wiki_dir):
        raise ConfigError(f"refusing to delete {wiki_dir}: it does not look like a dev wiki "
                          f"(no {STATE_FILE} or {SETTINGS_FILE})")
    down(wiki_dir, quiet=quiet)
    with _locked(wiki_dir):
        if wiki_dir.exists():
            shutil.rmtree(wiki_dir)
    _say(f"dev wiki: deleted {wiki_dir}", quiet)
    return up(wiki_dir, port, host, quiet=quiet)


@dataclasses.dataclass(frozen=True)
class Status:
    """Result of :func:`status`: pids (None when not running), whether api.php
    answers, the job runner's state age in seconds and ok flag, and ``healthy``."""

    dir: Path
    installed: bool
    server_url: str | None
    server_pid: int | None
    jobrunner_pid: int | None
    api_ok: bool
    api_error: str | None
    jobrunner_ok: bool
    jobrunner_age_s: float | None

    @property
    def healthy(self) -> bool:
        """True when server and job runner run, api.php answers and jobs ran in the last 30 s."""
        return bool(self.server_pid and self.jobrunner_pid and self.api_ok and self.jobrunner_ok
                    and self.jobrunner_age_s is not None and self.jobrunner_age_s < 30)


def status(wiki_dir: Path = DEFAULT_DIR) -> Status:
    """Inspect ``wiki_dir`` without changing anything."""
    wiki_dir = Path(wiki_dir).resolve()
    paths = _paths(wiki_dir)
    if not _installed(wiki_dir):
        return Status(wiki_dir, False, None, None, None, False, "not installed", False, None)
    wiki = wiki_from_state(wiki_dir)
    server_pid = _running(paths["server_pid"], _server_marker(wiki_dir))
    jr_pid = _running(paths["jobrunner_pid"], _jobrunner_marker(wiki_dir))
    api_ok, api_error = False, None
    try:
        siteinfo(wiki.api_url)
        api_ok = True
    except (OSError, ValueError) as exc:
        api_error = str(exc)
    jr_ok, age, _ = jobrunner_freshness(paths["jobrunner_state"])
    return Status(wiki_dir, True, wiki.server_url, server_pid, jr_pid, api_ok, api_error, jr_ok, age)


# --------------------------------------------------------------------------
# job runner (runs as `python -m sync.devstack.devwiki jobrunner --dir DIR`)


def run_jobrunner(wiki_dir: Path, interval: float = JOBRUNNER_INTERVAL_S,
                  watch_pid: int | None = None) -> int:
    """Run ``maintenance/runJobs.php`` every ``interval`` seconds until SIGTERM.

    After each run it atomically writes ``<dir>/jobrunner-state.json`` =
    ``{"last_run_at": "<UTC ISO-8601>Z", "ok": bool, "exit_code": int,
    "duration_s": float, "pid": int}`` (plus ``"error"`` when not ok). It exits
    when the wiki directory disappears, and, with ``watch_pid``, stops the wiki
    server and exits when that process is gone (so a killed test session does
    not leak servers). Returns the process exit code.
    """
    stop = False

    def _on_signal(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    state_file = wiki_dir / JOBRUNNER_STATE_FILE
    print(f"{_now_iso()} job runner started for {wiki_dir} (pid {os.getpid()})", flush=True)
    while not stop:
        if not (wiki_dir / "LocalSettings.php").is_file():
            print(f"{_now_iso()} {wiki_dir} is gone; exiting", flush=True)
            return 0
        if watch_pid and not _pid_alive(watch_pid):
            print(f"{_now_iso()} owner pid {watch_pid} is gone; stopping the wiki", flush=True)
            _stop(_paths(wiki_dir)["server_pid"], _server_marker(wiki_dir))
            return 0
        t0 = time.monotonic()
        record: dict[str, Any]
        try:
            proc = subprocess.run(
                ["php", str(MW_ROOT / "maintenance" / "runJobs.php"), "--maxtime", "60"],
                cwd=MW_ROOT, env=_php_env(wiki_dir), capture_output=True, text=True,
                timeout=300, check=False)
            ok = proc.returncode == 0
            record = {"ok": ok, "exit_code": proc.returncode}
            out = (proc.stdout + proc.stderr).strip()
            if out and out != "Job queue is empty.":
                print(f"{_now_iso()} runJobs (exit {proc.returncode}):\n{out}", flush=True)
            if not ok:
                record["error"] = "\n".join(out.splitlines()[-5:])
        except subprocess.TimeoutExpired:
            record = {"ok": False, "exit_code": None, "error": "runJobs.php timed out after 300 s"}
            print(f"{_now_iso()} runJobs timed out", flush=True)
        if stop:
            break
        record.update({"last_run_at": _now_iso(), "duration_s": round(time.monotonic() - t0, 3),
                       "pid": os.getpid()})
        tmp = state_file.with_name(f".{state_file.name}.tmp")
        try:
            tmp.write_text(json.dumps(record, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, state_file)
        except OSError:
            if not wiki_dir.exists():
                return 0
            raise
        deadline = time.monotonic() + interval
        while not stop and time.monotonic() < deadline:
            time.sleep(0.1)
    print(f"{_now_iso()} job runner stopped", flush=True)
    return 0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --------------------------------------------------------------------------
# test support


def ensure_template(template_dir: Path = DEFAULT_TEMPLATE_DIR, quiet: bool = True) -> Path:
    """Install the test template wiki into ``template_dir`` unless a current one is there.

    The template is never served; :func:`start_test_wiki` copies it. A template
    from another :data:`INSTALL_VERSION` or MediaWiki version is rebuilt, one
    with other account specs is updated. Safe to call from concurrent
    processes. Raises :class:`DevWikiError` if PHP/MediaWiki are missing.
    """
    template_dir = Path(template_dir).resolve()
    ensure_packages(install=False)
    with _locked(template_dir):
        if _installed(template_dir):
            state = read_state(template_dir)
            if state.get("install_version") == INSTALL_VERSION and \
                    state.get("mediawiki_version") == mediawiki_version():
                if state.get("accounts_fingerprint") != _accounts_fingerprint():
                    ensure_accounts(template_dir, state, quiet=quiet)
                    _save_state(template_dir, state, state["host"], int(state["port"]))
                return template_dir
        if template_dir.exists():
            if not _looks_like_devwiki(template_dir):
                raise ConfigError(f"refusing to replace {template_dir}: it is not a dev wiki")
            shutil.rmtree(template_dir)
        install(template_dir, DEFAULT_HOST, 1, quiet=quiet)
        # warm the localisation cache so every copy starts fast
        run_maintenance(template_dir, "rebuildLocalisationCache.php", "--lang", f"{CONTENT_LANGUAGE},en",
                        "--quiet")
    return template_dir


def start_test_wiki(target_dir: Path, template_dir: Path = DEFAULT_TEMPLATE_DIR,
                    watch_pid: int | None = None, attempts: int = 3) -> DevWiki:
    """Copy the template (installing it first if needed) to ``target_dir`` and
    serve the copy on a free loopback port; return the running :class:`DevWiki`.

    ``target_dir`` must not exist yet. ``watch_pid`` (default: this process)
    makes the wiki stop itself when that process exits. Stop it with
    :func:`down`. Raises :class:`DevWikiError` if anything fails.
    """
    template_dir = ensure_template(template_dir)
    target_dir = Path(target_dir).resolve()
    if target_dir.exists() and any(target_dir.iterdir()):
        raise ConfigError(f"{target_dir} is not empty")
    if target_dir.exists():
        target_dir.rmdir()
    with _locked(template_dir):
        shutil.copytree(template_dir, target_dir, symlinks=True, ignore=shutil.ignore_patterns(
            "run", "logs", JOBRUNNER_STATE_FILE, "router.php"))
    last: DevWikiError | None = None
    for _ in range(attempts):
        port = free_port()
        try:
            return up(target_dir, port, DEFAULT_HOST, install_packages=False,
                      watch_pid=watch_pid or os.getpid(), quiet=True)
        except DevWikiError as exc:  # e.g. the free port was taken meanwhile
            last = exc
            down(target_dir, quiet=True)
    assert last is not None
    raise last


# --------------------------------------------------------------------------
# CLI


def _cmd_up(args: argparse.Namespace) -> int:
    up(args.dir, args.port, args.host)
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    down(args.dir)
    return 0


def _cmd_reset(args: argparse.Namespace) -> int:
    reset(args.dir, args.port, args.host)
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    st = status(args.dir)
    if not st.installed:
        print(f"dev wiki: not installed in {st.dir} (run `s3rm dev wiki up`)")
        return 1

    def pid(p: int | None) -> str:
        return f"running (pid {p})" if p else "NOT running"

    print(f"dev wiki in {st.dir}")
    print(f"  server:     {pid(st.server_pid)}")
    print(f"  url:        {st.server_url}/  "
          + ("answers" if st.api_ok else f"does NOT answer ({st.api_error})"))
    age = "no state yet" if st.jobrunner_age_s is None else \
        f"last run {st.jobrunner_age_s:.1f} s ago, {'ok' if st.jobrunner_ok else 'FAILED'}"
    print(f"  job runner: {pid(st.jobrunner_pid)}; {age}")
    print(f"  env file:   {st.dir / ENV_FILE}")
    return 0 if st.healthy else 1


def _wrap(fn: Any) -> Any:
    def handler(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except DevWikiError as exc:
            print(f"s3rm dev wiki: error: {exc}", file=sys.stderr)
            return exc.exit_code
    handler.__doc__ = fn.__doc__
    return handler


def _dir_arg(value: str) -> Path:
    return Path(value).expanduser().resolve()


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``dev wiki up|down|reset|status`` to the ``s3rm`` parser."""
    dev = subparsers.add_parser("dev", help="local development services",
                                description="Local development services.")
    dev_sub = dev.add_subparsers(dest="dev_command", metavar="SERVICE")
    dev.set_defaults(handler=lambda a: (dev.print_help(), 2)[1])
    wiki = dev_sub.add_parser(
        "wiki", help="the development MediaWiki (PHP built-in server + SQLite)",
        description="Install, start, stop and inspect the development MediaWiki.")
    wiki.set_defaults(handler=lambda a: (wiki.print_help(), 2)[1])
    wsub = wiki.add_subparsers(dest="wiki_command", metavar="ACTION")

    def common(p: argparse.ArgumentParser, serve: bool) -> None:
        p.add_argument("--dir", type=_dir_arg, default=DEFAULT_DIR,
                       help=f"wiki directory (default: {DEFAULT_DIR})")
        if serve:
            p.add_argument("--port", default=None,
                           help=f"port (default: ${PORT_ENV} or {DEFAULT_PORT})")
            p.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (default: %(default)s)")

    for name, fn, serve, help_ in (
        ("up", _cmd_up, True, "install (first time, incl. Debian packages) and start; idempotent"),
        ("down", _cmd_down, False, "stop the server and the job runner"),
        ("reset", _cmd_reset, True, "down, delete the wiki directory, up"),
        ("status", _cmd_status, False, "show what runs; exit 1 unless healthy"),
    ):
        p = wsub.add_parser(name, help=help_, description=help_)
        common(p, serve)
        p.set_defaults(handler=_wrap(fn))


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sync.devstack.devwiki")
    sub = parser.add_subparsers(dest="cmd", required=True)
    jr = sub.add_parser("jobrunner", help="(internal) the job-runner loop started by `up`")
    jr.add_argument("--dir", type=Path, required=True)
    jr.add_argument("--interval", type=float, default=JOBRUNNER_INTERVAL_S)
    jr.add_argument("--watch-pid", type=int, default=None)
    args = parser.parse_args(argv)
    return run_jobrunner(args.dir, args.interval, args.watch_pid)


if __name__ == "__main__":
    sys.exit(_main())
