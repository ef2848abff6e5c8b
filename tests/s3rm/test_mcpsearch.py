"""The MCP search client's HTTP transport (s3rm/mcpsearch.py): 429/503 answers are retried (tenacity).

Against a real HTTP server on 127.0.0.1 that answers from a script; each refusal asks for
``Retry-After: 0``, which the transport raises to its 0.1 s floor.
"""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import httpx
import pytest

from s3rm.mcpsearch import _retry_transport


class _Scripted(BaseHTTPRequestHandler):
    """Answers each POST with the next status of ``statuses`` (then 200), echoing the body."""

    statuses: list[int] = []
    bodies: list[bytes] = []

    def do_POST(self):  # noqa: N802 (http.server API)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.bodies.append(body)
        status = self.statuses.pop(0) if self.statuses else 200
        self.send_response(status)
        if status != 200:
            self.send_header("Retry-After", "0")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def scripted():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    server.shutdown()
    server.server_close()


def _post(url: str, statuses: list[int]) -> tuple[httpx.Response, list[bytes]]:
    _Scripted.statuses[:] = statuses
    _Scripted.bodies.clear()

    async def send() -> httpx.Response:
        async with httpx.AsyncClient(transport=_retry_transport()) as client:
            return await client.post(url, content=b'{"jsonrpc":"2.0"}')

    return anyio.run(send), list(_Scripted.bodies)


def test_refusals_are_retried_with_the_same_request_until_one_is_answered(scripted):
    response, bodies = _post(scripted, [503, 429])
    assert response.status_code == 200 and response.content == b'{"jsonrpc":"2.0"}'
    assert bodies == [b'{"jsonrpc":"2.0"}'] * 3


def test_the_third_refusal_is_the_answer(scripted):
    response, bodies = _post(scripted, [429, 429, 429, 429])
    assert response.status_code == 429 and len(bodies) == 3


def test_other_errors_are_not_retried(scripted):
    response, bodies = _post(scripted, [500])
    assert response.status_code == 500 and len(bodies) == 1
