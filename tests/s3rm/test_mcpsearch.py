"""The MCP search client's HTTP transport (s3rm/mcpsearch.py): 429/503 answers are retried (tenacity).

Against a real HTTP server on 127.0.0.1 that answers from a script; each refusal asks for
``Retry-After: 0``, which the transport raises to its 0.1 s floor.
"""
from __future__ import annotations

import anyio
import httpx
import pytest

from s3rm.mcpsearch import _retry_transport
from support.scripted_http import ScriptedServer

REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


@pytest.fixture
def server():
    with ScriptedServer(default=(200, {"jsonrpc": "2.0", "id": 1, "result": {}}, {})) as scripted:
        yield scripted


def _post(server: ScriptedServer, statuses: list[int]) -> httpx.Response:
    server.script[:] = [(status, {}, {"Retry-After": "0"}) for status in statuses]

    async def send() -> httpx.Response:
        async with httpx.AsyncClient(transport=_retry_transport()) as client:
            return await client.post(server.url + "/mcp", content=REQUEST)

    return anyio.run(send)


def test_refusals_are_retried_with_the_same_request_until_one_is_answered(server):
    response = _post(server, [503, 429])
    assert response.status_code == 200 and response.json()["result"] == {}
    assert server.bodies == [REQUEST] * 3


def test_the_third_refusal_is_the_answer(server):
    response = _post(server, [429, 429, 429, 429])
    assert response.status_code == 429 and len(server.bodies) == 3


def test_other_errors_are_not_retried(server):
    response = _post(server, [500])
    assert response.status_code == 500 and len(server.bodies) == 1
