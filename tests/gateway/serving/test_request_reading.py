"""Whole requests before a thread (docs/operations.md#request-reading).

:class:`gateway.serving.reading.RequestScan` alone (framing: length, chunked,
pipelining, refusals), then the worker in real gunicorn gateways: more slow
bodies than threads on every kind of route leave a quick request answered;
a request not complete by ``S3RM_REQUEST_READ_SECONDS`` gets a JSON 408 and
its connection closed; an oversized body 413 before it is sent; chunked
bodies, ``Expect: 100-continue`` and pipelined requests still work.
"""
from __future__ import annotations

import json
import socket

import pytest
import requests
from support.services import MCP_HEADERS, Gateway, rpc
from support.slow_bodies import assert_unanswered, slow_body

from gateway.serving.reading import HEAD_LIMIT, RequestScan


def _feed_bytewise(scan: RequestScan, data: bytes):
    """Feed ``data`` one byte more each time; the first verdict that is not ``need`` (and its offset)."""
    for n in range(1, len(data) + 1):
        verdict = scan.feed(data[:n])
        if verdict.kind != "need":
            return verdict, n
    return verdict, len(data)


# ------------------------------------------------------------------ the scan
def test_a_length_body_is_ready_exactly_when_its_last_byte_is_in():
    head = b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"
    verdict, at = _feed_bytewise(RequestScan(100), head + b"hello" + b"GET / HTTP/1.1\r\n")
    assert (verdict.kind, verdict.end, at) == ("ready", len(head) + 5, len(head) + 5)


def test_a_request_without_body_is_ready_at_the_end_of_its_head():
    data = b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
    assert RequestScan(100).feed(data + data).end == len(data)


def test_a_chunked_body_is_ready_after_its_last_chunk_and_trailers():
    head = b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = b"3;ext=1\r\nabc\r\n10\r\n" + b"x" * 16 + b"\r\n0\r\nTrailer: y\r\n\r\n"
    verdict, at = _feed_bytewise(RequestScan(100), head + body + b"next")
    assert (verdict.kind, verdict.end, at) == ("ready", len(head + body), len(head + body))
    plain = head + b"0\r\n\r\n"
    assert RequestScan(100).feed(plain).end == len(plain)


@pytest.mark.parametrize("data, status", [
    (b"POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 413),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n", 413),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + b"x" * 64 + b"\r\n40\r\n", 413),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX", 400),
    (b"GET / HTTP/1.1\r\nX: " + b"a" * HEAD_LIMIT, 431),
])
def test_oversized_or_malformed_requests_are_refused_before_their_end(data, status):
    verdict = RequestScan(100).feed(data)
    assert (verdict.kind, verdict.status) == ("refuse", status)


@pytest.mark.parametrize("head", [
    b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
    b"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
    b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
    b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"POST / HTTP/1.1\nContent-Length: 5\n\n",
    b"POST / HTTP/1.1\r\nno colon here\r\n\r\n",
])
def test_framing_gunicorn_refuses_goes_to_its_parser_at_once(head):
    assert RequestScan(100).feed(head).kind == "parse"


def test_expect_continue_is_reported_while_the_body_is_missing():
    head = b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"
    scan = RequestScan(100)
    assert scan.feed(head).expect_continue
    assert scan.feed(head + b"body").kind == "ready"
    assert not RequestScan(100).feed(b"GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n").expect_continue


# ------------------------------------------------------------- the worker
PATHS = ("/mcp", "/token", "/register", "/authorize/consent", "/admin/reindex", "/mcp")


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


@pytest.fixture(scope="module")
def patient():
    """Two request threads and a long read deadline."""
    with Gateway({"S3RM_MCP_WRITE_AUTH_MODE": "open", "S3RM_REQUEST_READ_SECONDS": "300"}, threads=2) as gw:
        yield gw


@pytest.fixture(scope="module")
def strict():
    """A one-second read deadline."""
    with Gateway({"S3RM_MCP_WRITE_AUTH_MODE": "open", "S3RM_REQUEST_READ_SECONDS": "1"}, threads=2) as gw:
        yield gw


def test_more_slow_bodies_than_threads_on_every_route_leave_requests_answered(patient):
    slow = [slow_body(patient.port, path) for path in PATHS]
    for round_ in range(3):
        answer = rpc(patient.url, "ping", {}, id_=round_)
        assert answer.status_code == 200 and answer.json()["result"] == {}
    assert requests.get(f"{patient.base}/livez", timeout=30).status_code == 200
    assert_unanswered(slow)  # none of them was answered or given up on: they are still being read


@pytest.mark.parametrize("path", sorted(set(PATHS)))
def test_a_request_not_complete_by_the_deadline_gets_a_json_408(strict, path):
    sock = slow_body(strict.port, path)
    with sock:
        answer = _answer(sock)  # the server closes the connection after its answer
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 Request Timeout\r\n") and b"Connection: close" in head
    error = json.loads(body)["error"]
    assert error["code"] == -32600 and "read deadline" in error["message"]


def test_a_slow_head_gets_a_408_too(strict):
    with socket.create_connection(("127.0.0.1", strict.port), timeout=60) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        assert _answer(sock).startswith(b"HTTP/1.1 408 ")


def test_an_announced_body_over_the_limit_is_413_before_it_is_sent(patient):
    with socket.create_connection(("127.0.0.1", patient.port), timeout=60) as sock:
        sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{patient.port}\r\nContent-Length: {1048577}\r\n\r\n"
                     .encode())
        head, _, body = _answer(sock).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ") and "exceeds" in json.loads(body)["error"]["message"]


def test_chunked_bodies_expect_continue_and_pipelining_still_work(patient):
    ping = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"}).encode()
    chunked = requests.post(patient.url, data=iter([ping[:10], ping[10:]]), timeout=30,
                            headers={**MCP_HEADERS, "Host": f"127.0.0.1:{patient.port}"})
    assert chunked.status_code == 200 and chunked.json()["id"] == 7
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{patient.port}\r\nAccept: {MCP_HEADERS['Accept']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(ping)}\r\n").encode()
    with socket.create_connection(("127.0.0.1", patient.port), timeout=60) as sock:
        sock.sendall(head + b"Expect: 100-continue\r\n\r\n")
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"  # asked for the body before any thread
        sock.sendall(ping)
        # then two pipelined requests on the same kept-alive connection, the last one closing it
        sock.sendall(head + b"\r\n" + ping + head + b"Connection: close\r\n\r\n" + ping)
        answers = _answer(sock)
    assert answers.count(b"HTTP/1.1 200 OK\r\n") == 3 and b"100 Continue" not in answers
