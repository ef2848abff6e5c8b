"""Real processes for the security, fault and load checks, loopback only.

* :class:`Gateway` — runs the command ``s3rm serve`` executes (gunicorn with
  ``gateway/serving/gunicorn.conf.py``, one gthread worker; the serve pre-check is
  skipped to start faster) on a free 127.0.0.1 port with the given environment; ``with Gateway(env) as gw:``
  waits for ``/livez`` and stops (SIGTERM, then SIGKILL) on exit. ``gw.base``,
  ``gw.url`` (``…/mcp``), ``gw.pid``, ``gw.log_text()``, ``gw.restart()``.
  ``via_cli=True`` runs ``python -m s3rm serve`` itself (with its pre-check).
* :class:`AppServer` — the app in-process (werkzeug, threaded) on a free port.
* :func:`free_port` — THE free-port helper (``s3rm.devstack.wikiserver.free_port``).
* :class:`WikiProxy` — a threaded TCP proxy on a free loopback port in front of
  the dev wiki. ``delay`` (seconds before each upstream response is passed
  on) makes a slow wiki, ``post_delay`` delays only answers to POST requests
  (MediaWiki has applied an edit, its answer is in flight), ``down = True``
  resets every new connection (a wiki that is down). ``api_url`` is the
  proxied ``api.php``.
* :class:`StalledWiki` — a loopback port that accepts connections and never answers (a wiki stuck
  mid-request); ``close()`` resets them all.
* :func:`rpc` / :func:`call_tool` — one JSON-RPC POST with ``requests``.
* :func:`wait_until` — poll a condition until it holds or a deadline passes (then the test fails).

Used by ``tests/gateway/test_security.py``, ``tests/gateway/test_faults.py`` and ``bench/load.py``.
Every loop here is bounded in count and time.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
from werkzeug.serving import make_server

from s3rm.devstack.serve import gunicorn_argv
from s3rm.devstack.wikiserver import free_port

REPO = Path(__file__).resolve().parents[2]
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-11-25"}


class Gateway:
    """``s3rm serve`` on a free loopback port (see the module docstring)."""

    def __init__(self, env: dict[str, str], *, threads: int = 8, start_timeout: float = 180.0,
                 via_cli: bool = False):
        self.via_cli = via_cli
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        clean = {k: v for k, v in os.environ.items() if not k.startswith("S3RM_")}
        clean.update({
            "S3RM_BIND": f"127.0.0.1:{self.port}",
            "S3RM_MCP_PUBLIC_URL": self.url,
            "S3RM_GUNICORN_THREADS": str(threads),
        })
        clean.update(env)
        self.env = clean
        self.start_timeout = start_timeout
        self._logdir = tempfile.TemporaryDirectory(prefix="s3rm-gw-")
        self.log_path = Path(self._logdir.name) / "gunicorn.log"
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> "Gateway":
        log = open(self.log_path, "ab")
        argv = [sys.executable, "-m", "s3rm", "serve"] if self.via_cli else gunicorn_argv()
        self.proc = subprocess.Popen(argv, cwd=REPO, env=self.env,
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited: {self.log_text()[-3000:]}")
            try:
                if requests.get(f"{self.base}/livez", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"gunicorn did not become live in {self.start_timeout} s: {self.log_text()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def restart(self, sig: int = signal.SIGKILL) -> None:
        """Stop the whole process group with ``sig`` (default: a crash) and start again on the same port."""
        self.stop(sig)
        self.start()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> "Gateway":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        self._logdir.cleanup()


class AppServer:
    """A gateway app served in-process by werkzeug on a free loopback port (threaded).

    ``build(port) -> app`` makes the app once the port is known (the public URL
    names it). ``with AppServer(build) as server:`` yields ``server.url``
    (``…/mcp``) and shuts the server down on exit.
    """

    def __init__(self, build):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        self._server = make_server("127.0.0.1", self.port, build(self.port), threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, name="app-server", daemon=True)

    def __enter__(self) -> "AppServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)


class WikiProxy:
    """A TCP proxy to ``upstream_api_url``'s host:port with switchable delay and outage."""

    def __init__(self, upstream_api_url: str):
        parts = urlsplit(upstream_api_url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.port = free_port()
        self.api_url = f"http://127.0.0.1:{self.port}{parts.path}"
        self.delay = 0.0
        self.post_delay = 0.0
        self.down = False
        self._stop = threading.Event()
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._server.settimeout(0.2)
        self._thread = threading.Thread(target=self._accept, name="wiki-proxy", daemon=True)
        self.connections = 0

    def __enter__(self) -> "WikiProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
        self._server.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except (socket.timeout, OSError):
                continue
            if self.down:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                client.close()  # RST: connection refused/reset, like a wiki that is down
                continue
            self.connections += 1
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            client.close()
            return
        deadline = time.monotonic() + 120  # bounded: no connection lives longer
        last_was_post = False
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                readable, _, _ = select.select([client, upstream], [], [], 0.2)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is upstream:
                        wait = self.delay + (self.post_delay if last_was_post else 0.0)
                        if wait:
                            time.sleep(wait)
                        client.sendall(data)
                    else:
                        if data[:8].split(b" ", 1)[0] in (b"POST", b"GET", b"HEAD"):
                            last_was_post = data.startswith(b"POST ")
                        upstream.sendall(data)
        except OSError:
            pass
        finally:
            client.close()
            upstream.close()


def rpc(url: str, method: str, params: dict | None = None, *, id_: Any = 1, headers: dict | None = None,
        timeout: float = 30.0) -> requests.Response:
    """POST one JSON-RPC request to ``url`` with MCP headers (plus ``headers``)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        body["params"] = params
    host = urlsplit(url).netloc
    hdrs = {**MCP_HEADERS, "Host": host, **(headers or {})}
    return requests.post(url, data=json.dumps(body), headers=hdrs, timeout=timeout)


def call_tool(url: str, name: str, arguments: dict | None = None, **kwargs) -> requests.Response:
    """``tools/call`` of ``name`` with ``arguments``."""
    return rpc(url, "tools/call", {"name": name, "arguments": arguments or {}}, **kwargs)


def tool_payload(response: requests.Response) -> dict:
    """The tool result object: ``structuredContent`` on success, ``{"error": …}`` on a tool error."""
    result = response.json()["result"]
    if result.get("isError"):
        return json.loads(result["content"][0]["text"])
    return result["structuredContent"]


def wait_until(predicate, timeout: float, what: str, interval: float = 0.2):
    """Call ``predicate()`` every ``interval`` s until it returns a true value (returned), failing the test after
    ``timeout`` s with "``what`` did not happen"."""
    import pytest

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"{what} did not happen within {timeout:.0f} s")


class StalledWiki:
    """A loopback port that accepts connections and never answers (a wiki stuck mid-request).

    :meth:`close` resets every connection it accepted.
    """

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.closed.is_set():
                    _reset(sock)
                    return
                self.sockets.append(sock)

    def close(self) -> None:
        with self.lock:
            if self.closed.is_set():
                return
            self.closed.set()
            for sock in self.sockets:  # RST: the gateway's reads fail at once
                _reset(sock)
            self.sockets.clear()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); new connections are refused
        except OSError:
            pass
        self.listener.close()


def _reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
