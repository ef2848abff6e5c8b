"""A local HTTP server that answers from a script: the retry tests of the wiki client
(tests/gateway/wiki/test_repository.py) and of the MCP search client (tests/s3rm/test_mcpsearch.py).
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedServer:
    """``with ScriptedServer(default) as server:`` serves ``server.url`` on 127.0.0.1.

    Each GET or POST takes the next ``(status, body, headers)`` of ``server.script`` (``default``
    once the script is used up); ``body`` is sent as JSON. ``server.bodies`` holds every request
    body received, in order.
    """

    def __init__(self, default: tuple[int, Any, dict[str, str]] = (200, {}, {})):
        self.script: list[tuple[int, Any, dict[str, str]]] = []
        self.bodies: list[bytes] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                owner.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                status, body, headers = owner.script.pop(0) if owner.script else default
                payload = json.dumps(body).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _answer  # noqa: N815 (http.server API)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (append any path)."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> "ScriptedServer":
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
