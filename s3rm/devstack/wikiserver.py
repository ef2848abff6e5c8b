"""The dev wiki's two processes: ``php -S`` serving MediaWiki, and the job runner.

Both run detached (own session, pid file, log file; :mod:`s3rm.devstack.procs`)
and are recognised by a *marker* in their command line, so a recycled pid is
never taken for them. Files of a wiki directory (:func:`paths`)::

    run/server.pid, run/jobrunner.pid
    logs/server.log, logs/jobrunner.log, logs/exception.log
    jobrunner-state.json    {"last_run_at": ISO-8601 UTC, "ok": bool, ...}

Readiness is asked through the ONE MediaWiki client
(:class:`gateway.wiki.client.WikiClient`): ``meta=siteinfo`` must answer.
"""
from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import shutil
import socket
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from gateway.domain.repository import RepositoryError, WikiApiError
from gateway.config.schema import REPO_ROOT
from gateway.wiki.client import WikiClient
from s3rm.devstack import procs
from s3rm.devstack.accounts import DB_NAME
from s3rm.devstack.console import tail
from s3rm.devstack.errors import DevWikiError
from s3rm.devstack.packages import MW_ROOT, php_env

#: ``PHP_CLI_SERVER_WORKERS`` of the built-in server (concurrent requests).
SERVER_WORKERS = 8
JOBRUNNER_STATE_FILE = "jobrunner-state.json"
#: The router script copied into every wiki directory.
ROUTER_FILE = Path(__file__).with_name("router.php")
#: The project's logo (the production image copies the same file); the router serves the copy.
LOGO_FILE = Path(__file__).resolve().parents[2] / "deploy" / "mediawiki" / "assets" / "s3rm-logo.svg"
USER_AGENT = "s3rm-devwiki/0.1 (S3 Research Memory dev wiki readiness check)"


def paths(wiki_dir: Path) -> dict[str, Path]:
    """The pid, log and state files of the wiki in ``wiki_dir`` (see the module doc)."""
    return {
        "server_pid": wiki_dir / "run" / "server.pid",
        "jobrunner_pid": wiki_dir / "run" / "jobrunner.pid",
        "server_log": wiki_dir / "logs" / "server.log",
        "jobrunner_log": wiki_dir / "logs" / "jobrunner.log",
        "exception_log": wiki_dir / "logs" / "exception.log",
        "jobrunner_state": wiki_dir / JOBRUNNER_STATE_FILE,
    }


def server_marker(wiki_dir: Path) -> str:
    """The command-line substring that identifies this wiki's ``php -S``."""
    return f"{MW_ROOT} {wiki_dir / 'router.php'}"


def jobrunner_marker(wiki_dir: Path) -> str:
    """The command-line substring that identifies this wiki's job runner."""
    return f"jobrunner --dir {wiki_dir}"


def server_pid(wiki_dir: Path) -> int | None:
    """The pid of the running ``php -S`` of ``wiki_dir``, None when it is not running."""
    return procs.running(paths(wiki_dir)["server_pid"], server_marker(wiki_dir))


def jobrunner_pid(wiki_dir: Path) -> int | None:
    """The pid of the running job runner of ``wiki_dir``, None when it is not running."""
    return procs.running(paths(wiki_dir)["jobrunner_pid"], jobrunner_marker(wiki_dir))


def stop_server(wiki_dir: Path) -> bool:
    """Stop ``php -S`` of ``wiki_dir``; True if it ran."""
    return procs.stop(paths(wiki_dir)["server_pid"], server_marker(wiki_dir))


def stop_jobrunner(wiki_dir: Path) -> bool:
    """Stop the job runner of ``wiki_dir``; True if it ran."""
    return procs.stop(paths(wiki_dir)["jobrunner_pid"], jobrunner_marker(wiki_dir))


def free_port(host: str = "127.0.0.1") -> int:
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
            raise DevWikiError(f"cannot use {host}:{port}: {exc.strerror}", exit_code=2) from None
    return False


def start_server(wiki_dir: Path, host: str, port: int, port_env: str) -> int:
    """Start ``php -S host:port`` for ``wiki_dir`` with the router; return its pid.

    Raises :class:`DevWikiError` (exit code 2) when the port is taken (naming ``--port`` and ``port_env``).
    """
    shutil.copyfile(ROUTER_FILE, wiki_dir / "router.php")
    (wiki_dir / "s3rm-assets").mkdir(exist_ok=True)
    shutil.copyfile(LOGO_FILE, wiki_dir / "s3rm-assets" / "s3rm-logo.svg")
    if _port_in_use(host, port):
        raise DevWikiError(
            f"port {host}:{port} is already in use by another program; "
            f"choose another with --port or {port_env}", exit_code=2)
    env = php_env(wiki_dir)
    env["PHP_CLI_SERVER_WORKERS"] = str(SERVER_WORKERS)
    files = paths(wiki_dir)
    return procs.start(["php", "-S", f"{host}:{port}", "-t", str(MW_ROOT), str(wiki_dir / "router.php")],
                       pid_file=files["server_pid"], log_file=files["server_log"], env=env, cwd=MW_ROOT)


def start_jobrunner(wiki_dir: Path, watch_pid: int | None) -> int:
    """Start ``python -m s3rm.devstack.jobrunner --dir wiki_dir`` detached; return its pid."""
    cmd = [sys.executable, "-m", "s3rm.devstack.jobrunner", "jobrunner", "--dir", str(wiki_dir)]
    if watch_pid:
        cmd += ["--watch-pid", str(watch_pid)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    files = paths(wiki_dir)
    return procs.start(cmd, pid_file=files["jobrunner_pid"], log_file=files["jobrunner_log"], env=env,
                       cwd=REPO_ROOT)


def siteinfo(api_url: str, timeout: float = 5.0) -> dict[str, Any]:
    """``meta=siteinfo`` (general, namespaces, namespacealiases, extensions) of ``api_url``: the ``query`` object.

    One anonymous request through :class:`WikiClient`, no retries. Raises the
    client's :class:`~gateway.domain.repository.RepositoryError` subclasses
    (``WikiUnavailable`` when nothing answers, ``WikiApiError`` for an answer
    that is not a siteinfo).
    """
    info = WikiClient(api_url, timeout=timeout, max_retries=0, user_agent=USER_AGENT).siteinfo()
    if "general" not in info:
        exc = WikiApiError(f"unexpected siteinfo answer from {api_url}: {str(info)[:300]}")
        exc.wiki_code = "badresponse"
        raise exc
    return info


def wait_ready(wiki_dir: Path, api_url: str, timeout: float = 60.0) -> None:
    """Wait until ``api_url`` answers siteinfo; raise :class:`DevWikiError` when ``php -S`` died or time ran out."""
    files = paths(wiki_dir)
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if server_pid(wiki_dir) is None:
            raise DevWikiError(f"php -S exited during start-up; last lines of {files['server_log']}:\n"
                               f"{tail(files['server_log'])}")
        try:
            siteinfo(api_url)
            return
        except RepositoryError as exc:
            last = exc
            time.sleep(0.1)
    raise DevWikiError(f"{api_url} did not answer within {timeout:.0f} s ({last}); "
                       f"see {files['server_log']} and {files['exception_log']}")


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


def wait_jobrunner(wiki_dir: Path, timeout: float = 30.0) -> None:
    """Wait for the job runner's first state record; raise :class:`DevWikiError` if it failed or died."""
    files = paths(wiki_dir)
    log = files["jobrunner_log"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ok, age, _ = jobrunner_freshness(files["jobrunner_state"])
        if age is not None and age < 30:
            if not ok:
                raise DevWikiError(f"the job runner's first run failed; see {log}:\n{tail(log)}")
            return
        if jobrunner_pid(wiki_dir) is None:
            raise DevWikiError(f"the job runner exited during start-up; see {log}:\n{tail(log)}")
        time.sleep(0.1)
    raise DevWikiError(f"the job runner wrote no state to {files['jobrunner_state']} within {timeout:.0f} s")


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
