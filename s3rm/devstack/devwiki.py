"""Development MediaWiki: ``s3rm dev wiki up|down|reset|status``.

A REAL MediaWiki (Debian's ``mediawiki`` 1.39 package, PHP, SQLite) installed
into a project directory (default ``<repo>/.dev/wiki``) and served by PHP's
built-in web server on loopback. Nothing under ``/etc/mediawiki``,
``/var/lib/mediawiki`` or ``/usr/share/mediawiki`` is written: the installer
writes ``LocalSettings.php`` into the project directory and every PHP process
is pointed at it through the ``MW_CONFIG_FILE`` environment variable (which
MediaWiki 1.39 reads in ``wfDetectLocalSettingsFile()``).

The pieces live beside this module: :mod:`~s3rm.devstack.packages` (Debian
packages, PHP, maintenance scripts), :mod:`~s3rm.devstack.settings` (the
settings template file rendered from ``schema/lesson.toml``),
:mod:`~s3rm.devstack.accounts` (users and bot passwords),
:mod:`~s3rm.devstack.wikiserver` and :mod:`~s3rm.devstack.jobrunner` (the two
processes). This module keeps the wiki directory's state and the operations.

Layout of a wiki directory::

    LocalSettings.php       written by maintenance/install.php, + one include line
    S3RM.php                s3rm/devstack/LocalSettings.dev.php rendered, on every ``up``
    data/                   SQLite databases (WAL mode)
    logs/server.log         php -S access/error log
    logs/jobrunner.log      job runner log
    logs/exception.log      MediaWiki exceptions
    run/server.pid, run/jobrunner.pid
    jobrunner-state.json    {"last_run_at": ISO-8601 UTC, "ok": bool, ...}
    state.json              URLs, ports, accounts and passwords (mode 600)
    env                     ``export`` lines for the gateway/sync (mode 600)

Accounts (bot passwords, see :data:`s3rm.devstack.accounts.ACCOUNT_SPECS`): ``S3Admin@sync`` (site
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
import fcntl
import json
import os
import shlex
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Iterator, Mapping

from gateway.domain.repository import RepositoryError
from s3rm.devstack import accounts, packages, settings, wikiserver
from s3rm.devstack.accounts import Credentials
from s3rm.devstack.console import say
from s3rm.devstack.errors import DevWikiError
from s3rm.devstack.statefiles import now_iso, write_private
from s3rm.settings import DEV_DIR, CliSettings
from s3rm.devstack.packages import check_php
from s3rm.devstack.wikiserver import jobrunner_freshness, pending_jobs, siteinfo

__all__ = ["DevWiki", "Credentials", "DevWikiError", "Status", "up", "down", "reset", "status",
           "read_state", "wiki_from_state", "install", "ensure_template", "start_test_wiki", "resolve_port",
           "check_php", "siteinfo", "jobrunner_freshness", "pending_jobs", "register"]

#: Default directory of the interactive dev wiki (git-ignored via ``/.dev/``).
DEFAULT_DIR = DEV_DIR / "wiki"
#: Installed-once template the test fixture copies for each pytest session.
DEFAULT_TEMPLATE_DIR = DEV_DIR / "test-wiki-template"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8081
PORT_ENV = "S3RM_DEV_WIKI_PORT"

SITE_NAME = "S3 Research Memory"
CONTENT_LANGUAGE = "ko"
#: Bump when :func:`install` produces something a cached install must not keep.
INSTALL_VERSION = 1

STATE_FILE = "state.json"
ENV_FILE = "env"


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

        For tests only: mwclient (a test dependency) is an independent second
        client that cross-checks what the repository's own client
        (:class:`gateway.wiki.client.WikiClient`) wrote; no command uses it.
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


def resolve_port(port: int | str | None) -> int:
    """Return the port to use: ``port`` if given, else ``$S3RM_DEV_WIKI_PORT``, else 8081.

    Raises :class:`DevWikiError` (exit code 2) for anything that is not an integer in 1..65535.
    """
    source = "--port"
    if port is None:
        env = CliSettings().value(PORT_ENV).strip()
        if not env:
            return DEFAULT_PORT
        port, source = env, PORT_ENV
    try:
        value = int(port)
    except (TypeError, ValueError):
        raise DevWikiError(f"{source}={port!r} is not a port number (expected an integer 1-65535)", exit_code=2) from None
    if not 1 <= value <= 65535:
        raise DevWikiError(f"{source}={value} is out of range (expected 1-65535)", exit_code=2)
    return value


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



def _save_state(wiki_dir: Path, state: dict[str, Any], host: str, port: int) -> DevWiki:
    paths = wikiserver.paths(wiki_dir)
    server = settings.server_url(host, port)
    state.update({
        "dir": str(wiki_dir),
        "host": host,
        "port": port,
        "server_url": server,
        "api_url": f"{server}/api.php",
        "index_url": f"{server}/index.php",
        "files": {k: str(v) for k, v in paths.items()},
    })
    write_private(wiki_dir / STATE_FILE, json.dumps(state, indent=2, sort_keys=True) + "\n")
    wiki = wiki_from_state(wiki_dir, state)
    write_private(wiki_dir / ENV_FILE, "".join(
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

        server = settings.server_url(host, port)
        return DevWiki(
            api_url=f"{server}/api.php", index_url=f"{server}/index.php", server_url=server,
            host=host, port=port, dir=wiki_dir,
            jobrunner_state_file=wiki_dir / wikiserver.JOBRUNNER_STATE_FILE,
            sync=bot("sync"), agent=bot("agent"), importer=bot("import"),
            admin=Credentials(accounts.ADMIN_USER, st["admin"]["password"]),
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
        admin_pw = accounts.new_password()
        passfile = staging / ".adminpass"
        write_private(passfile, admin_pw)
        say(f"dev wiki: installing MediaWiki {packages.mediawiki_version()} into {wiki_dir}", quiet)
        packages.run_maintenance(
            staging, "install.php",
            "--dbtype", "sqlite", "--dbpath", str(staging / "data"), "--dbname", accounts.DB_NAME,
            "--lang", CONTENT_LANGUAGE, "--server", settings.server_url(host, port), "--scriptpath", "",
            "--confpath", str(staging), "--passfile", str(passfile), "--skins", "Vector",
            "--quiet", SITE_NAME, accounts.ADMIN_USER,
            config=False,
        )
        passfile.unlink()
        settings.make_relocatable(staging)
        _enable_wal(staging)
        settings.write_settings(staging, host, port, CliSettings().schema)
        state: dict[str, Any] = {
            "format": 1,
            "install_version": INSTALL_VERSION,
            "mediawiki_version": packages.mediawiki_version(),
            "installed_at": now_iso(),
            "admin": {"username": accounts.ADMIN_USER, "password": admin_pw},
        }
        accounts.ensure_accounts(staging, state, quiet=quiet)
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


def up(wiki_dir: Path = DEFAULT_DIR, port: int | None = None, host: str = DEFAULT_HOST, *,
       install_packages: bool = True, watch_pid: int | None = None, quiet: bool = False) -> DevWiki:
    """Install (first time) and start the dev wiki in ``wiki_dir``; return it once api.php answers.

    Idempotent: on an installed directory it only refreshes ``S3RM.php``,
    ``state.json`` and ``env`` and starts the server and job runner if they are
    not running. ``port`` None means ``$S3RM_DEV_WIKI_PORT`` or 8081.
    ``install_packages`` lets it apt-get missing Debian packages;
    ``watch_pid`` makes the job runner stop the wiki when that process exits.
    Raises :class:`DevWikiError` (exit code 2) (bad port, port busy, already running on
    another port) or :class:`DevWikiError` (anything else).
    """
    wiki_dir = Path(wiki_dir).resolve()
    port = resolve_port(port)
    packages.ensure_packages(install=install_packages, quiet=quiet)
    with _locked(wiki_dir):
        paths = wikiserver.paths(wiki_dir)
        if not _installed(wiki_dir):
            state = install(wiki_dir, host, port, quiet=quiet)
        else:
            state = read_state(wiki_dir)
            if state.get("install_version") != INSTALL_VERSION or \
                    state.get("mediawiki_version") != packages.mediawiki_version():
                say(f"dev wiki: {wiki_dir} was installed by an older s3rm or MediaWiki; "
                    "consider `s3rm dev wiki reset`", quiet)
        server_pid = wikiserver.server_pid(wiki_dir)
        if server_pid is not None and (state.get("port") != port or state.get("host") != host):
            raise DevWikiError(
                f"the dev wiki in {wiki_dir} already runs on {state.get('host')}:{state.get('port')}; "
                f"run `s3rm dev wiki down --dir {wiki_dir}` before switching to {host}:{port}", exit_code=2)
        for sub in ("logs", "run"):
            (wiki_dir / sub).mkdir(exist_ok=True)
        settings.write_settings(wiki_dir, host, port, CliSettings().schema)
        if state.get("accounts_fingerprint") != accounts.accounts_fingerprint():
            say("dev wiki: updating accounts and bot passwords", quiet)
            accounts.ensure_accounts(wiki_dir, state, quiet=quiet)
        wiki = _save_state(wiki_dir, state, host, port)
        started = []
        if server_pid is None:
            server_pid = wikiserver.start_server(wiki_dir, host, port, PORT_ENV)
            started.append("server")
        try:
            wikiserver.wait_ready(wiki.dir, wiki.api_url)
            if wikiserver.jobrunner_pid(wiki_dir) is None:
                paths["jobrunner_state"].unlink(missing_ok=True)
                wikiserver.start_jobrunner(wiki_dir, watch_pid)
                started.append("job runner")
                wikiserver.wait_jobrunner(wiki.dir)
        except BaseException:
            if "server" in started:
                wikiserver.stop_server(wiki_dir)
            if "job runner" in started:
                wikiserver.stop_jobrunner(wiki_dir)
            raise
    say(f"dev wiki: {'started ' + ' and '.join(started) if started else 'already running'}; "
        f"{wiki.server_url}/  (API {wiki.api_url}; credentials in {wiki_dir / ENV_FILE})", quiet)
    return wiki


def down(wiki_dir: Path = DEFAULT_DIR, quiet: bool = False) -> bool:
    """Stop the server and job runner of ``wiki_dir``; return True if anything was running."""
    wiki_dir = Path(wiki_dir).resolve()
    if not wiki_dir.exists():
        say(f"dev wiki: nothing in {wiki_dir}", quiet)
        return False
    with _locked(wiki_dir):
        jr = wikiserver.stop_jobrunner(wiki_dir)
        sv = wikiserver.stop_server(wiki_dir)
    say(f"dev wiki: {'stopped' if (jr or sv) else 'was not running'} ({wiki_dir})", quiet)
    return jr or sv


def _looks_like_devwiki(wiki_dir: Path) -> bool:
    if not wiki_dir.exists():
        return True
    entries = {p.name for p in wiki_dir.iterdir()}
    return not entries or STATE_FILE in entries or settings.SETTINGS_FILE in entries


def reset(wiki_dir: Path = DEFAULT_DIR, port: int | None = None, host: str = DEFAULT_HOST,
          quiet: bool = False) -> DevWiki:
    """``down``, delete ``wiki_dir`` and ``up`` again; returns the fresh wiki.

    Refuses (:class:`DevWikiError` (exit code 2)) to delete a non-empty directory that is not a dev wiki.
    """
    wiki_dir = Path(wiki_dir).resolve()
    port = resolve_port(port)
    if not _looks_like_devwiki(wiki_dir):
        raise DevWikiError(f"refusing to delete {wiki_dir}: it does not look like a dev wiki "
                          f"(no {STATE_FILE} or {settings.SETTINGS_FILE})", exit_code=2)
    down(wiki_dir, quiet=quiet)
    with _locked(wiki_dir):
        if wiki_dir.exists():
            shutil.rmtree(wiki_dir)
    say(f"dev wiki: deleted {wiki_dir}", quiet)
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
    paths = wikiserver.paths(wiki_dir)
    if not _installed(wiki_dir):
        return Status(wiki_dir, False, None, None, None, False, "not installed", False, None)
    wiki = wiki_from_state(wiki_dir)
    server_pid = wikiserver.server_pid(wiki_dir)
    jr_pid = wikiserver.jobrunner_pid(wiki_dir)
    api_ok, api_error = False, None
    try:
        wikiserver.siteinfo(wiki.api_url)
        api_ok = True
    except RepositoryError as exc:
        api_error = str(exc)
    jr_ok, age, _ = wikiserver.jobrunner_freshness(paths["jobrunner_state"])
    return Status(wiki_dir, True, wiki.server_url, server_pid, jr_pid, api_ok, api_error, jr_ok, age)


def ensure_template(template_dir: Path = DEFAULT_TEMPLATE_DIR, quiet: bool = True) -> Path:
    """Install the test template wiki into ``template_dir`` unless a current one is there.

    The template is never served; :func:`start_test_wiki` copies it. A template
    from another :data:`INSTALL_VERSION` or MediaWiki version is rebuilt, one
    with other account specs is updated. Safe to call from concurrent
    processes. Raises :class:`DevWikiError` if PHP/MediaWiki are missing.
    """
    template_dir = Path(template_dir).resolve()
    packages.ensure_packages(install=False)
    with _locked(template_dir):
        if _installed(template_dir):
            state = read_state(template_dir)
            if state.get("install_version") == INSTALL_VERSION and \
                    state.get("mediawiki_version") == packages.mediawiki_version():
                if state.get("accounts_fingerprint") != accounts.accounts_fingerprint():
                    accounts.ensure_accounts(template_dir, state, quiet=quiet)
                    _save_state(template_dir, state, state["host"], int(state["port"]))
                return template_dir
        if template_dir.exists():
            if not _looks_like_devwiki(template_dir):
                raise DevWikiError(f"refusing to replace {template_dir}: it is not a dev wiki", exit_code=2)
            shutil.rmtree(template_dir)
        install(template_dir, DEFAULT_HOST, 1, quiet=quiet)
        # warm the localisation cache so every copy starts fast
        packages.run_maintenance(template_dir, "rebuildLocalisationCache.php", "--lang", f"{CONTENT_LANGUAGE},en",
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
        raise DevWikiError(f"{target_dir} is not empty", exit_code=2)
    if target_dir.exists():
        target_dir.rmdir()
    with _locked(template_dir):
        shutil.copytree(template_dir, target_dir, symlinks=True, ignore=shutil.ignore_patterns(
            "run", "logs", wikiserver.JOBRUNNER_STATE_FILE, "router.php"))
    last: DevWikiError | None = None
    for _ in range(attempts):
        port = wikiserver.free_port()
        try:
            return up(target_dir, port, DEFAULT_HOST, install_packages=False,
                      watch_pid=watch_pid or os.getpid(), quiet=True)
        except DevWikiError as exc:  # e.g. the free port was taken meanwhile
            last = exc
            down(target_dir, quiet=True)
    assert last is not None
    raise last


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
        p.set_defaults(handler=fn, error_prefix="s3rm dev wiki: error")


