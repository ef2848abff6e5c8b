"""Raw-socket attacks on the worker's early refusal (docs/operations.md#early-refusal).

One real gunicorn gateway whose read class (one slot, no queue) is held by a call stuck on a wiki that never
answers, with two request threads left free: a read the loop may refuse gets its 429 from the event loop, and
everything else reaches a free thread at once, so each answer below is what the client really gets. A request
that gunicorn's parser refuses (400, 417) must never be answered 429 by the loop instead; framing must put
every pipelined request at the right offset (a body is never read as a request); and the loop must keep
serving afterwards.
"""
from __future__ import annotations

import json
import re
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from support.services import MCP_HEADERS, Gateway, StalledWiki, wait_until
from test_early_refusal import (  # DRAFT: a write that reaches the (stalled) wiki
    DRAFT,
    TOKEN,
    stalled_env,
)

from gateway.serving.reading import RequestScan, Verdict

BODY = b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "get_lesson", "arguments": {"id": "refused"}}}'


@pytest.fixture(scope="module")
def shedding():
    """``(gateway, host)`` with the read and the write class full and refusing, two request threads free."""
    wiki = StalledWiki()
    env = stalled_env(wiki)
    try:
        with Gateway(env, threads=4) as gw, ThreadPoolExecutor(2) as pool:
            host = f"127.0.0.1:{gw.port}"
            headers = {**MCP_HEADERS, "Host": host}
            held = [pool.submit(requests.post, gw.url, data=BODY.replace(b"refused", b"stalled"), headers=headers,
                                timeout=400)]
            wait_until(lambda: _read_stats(gw)["in_use"] == 1, 120, "the read never took its slot")
            held.append(pool.submit(requests.post, gw.url, data=_call("create_lesson_draft", DRAFT),
                                    headers={**headers, "Authorization": f"Bearer {TOKEN}"}, timeout=400))
            wait_until(lambda: _read_stats(gw, "write")["in_use"] == 1, 120, "the write never took its slot")
            yield gw, host
            wiki.close()
            assert [future.result(120).status_code in (200, 503) for future in held] == [True, True]
    finally:
        wiki.close()


def _read_stats(gw: Gateway, kind: str = "read") -> dict:
    return requests.get(f"{gw.base}/metrics", timeout=30).json()["admission"][kind]


def _call(tool: str, arguments: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments}}).encode()


def _post(host: str, extra: bytes = b"", target: bytes = b"/mcp", version: bytes = b"HTTP/1.1",
          body: bytes = BODY) -> bytes:
    return (b"POST " + target + b" " + version + b"\r\nHost: " + host.encode() + b"\r\nAccept: application/json\r\n"
            b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n" + extra
            + b"\r\n" + body)


def _exchange(gw: Gateway, *parts: bytes, wait_for: bytes = b"") -> list[tuple[int, bytes, bytes]]:
    """Send ``parts`` on one connection (one write each; after the first, only once ``wait_for`` has been
    answered) and read every ``(status, head, body)`` until the server closes it (each request list ends
    with one that asks to close, or one gunicorn refuses)."""
    with socket.create_connection(("127.0.0.1", gw.port), timeout=120) as sock:
        data = b""
        for number, part in enumerate(parts):
            while number and wait_for not in data and (chunk := sock.recv(65536)):
                data += chunk
            sock.sendall(part)
        while chunk := sock.recv(65536):
            data += chunk
    answers = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = re.search(rb"\r\ncontent-length: *(\d+)", head, re.IGNORECASE)
        size = int(length.group(1)) if length else 0
        answers.append((status, head, rest[:size]))
        data = rest[size:]
    return answers


CLOSE = b"Connection: close\r\n"


@pytest.mark.parametrize(("extra", "target", "status"), [
    (b"X-A: a\x01b\r\n", b"/mcp", 400),                        # a control character in a field value
    (b"X-A: a\x7fb\r\n", b"/mcp", 400),                        # DEL
    (b"X-A: a\x0bb\r\n", b"/mcp", 400),                        # vertical tab
    (b"", b"/mcp?\xff", 400),                                  # a byte outside visible ASCII in the target
    (b"", b"/mcp?a\x7f", 400),
    (b"Expect: bogus\r\n", b"/mcp", 417),                      # an expectation gunicorn cannot meet
    (b"X-Forwarded-Proto: https\r\nX-Forwarded-Ssl: off\r\n", b"/mcp", 400),  # disagreeing scheme fields
    (b"Content-Type: application/json\r\n", b"/mcp", 400),     # a repeated singleton field
    (b"Host: {host}\r\n", b"/mcp", 400),
    (b"X-A: a\r\n b\r\n", b"/mcp", 400),                       # obsolete line folding
    (b"Transfer-Encoding: chunked\r\n", b"/mcp", 400),         # Content-Length with Transfer-Encoding
], ids=["ctl", "del", "vt", "target-8bit", "target-del", "expect", "scheme", "dup-type", "dup-host", "fold", "te-cl"])
def test_a_request_gunicorn_refuses_is_never_answered_429_by_the_loop(shedding, extra, target, status):
    gw, host = shedding
    early = _read_stats(gw)["rejected_early"]
    answers = _exchange(gw, _post(host, extra.replace(b"{host}", host.encode()) + CLOSE, target))
    assert [answer[0] for answer in answers] == [status], answers
    assert json.loads(answers[0][2])["id"] is None
    assert _read_stats(gw)["rejected_early"] == early
    # the loop still refuses a well-formed read at once
    assert [answer[0] for answer in _exchange(gw, _post(host, CLOSE))] == [429]


def test_pipelined_requests_after_an_early_429_are_read_at_the_right_offset(shedding):
    gw, host = shedding
    metrics = f"GET /metrics HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    smuggled = _post(host, body=metrics)  # a body that looks like a request: never parsed as one
    answers = _exchange(gw, _post(host) + metrics + smuggled + _post(host, CLOSE))
    assert [status for status, _, _ in answers] == [429, 200, 400, 429], answers
    assert json.loads(answers[1][2])["admission"]["read"]["in_use"] == 1
    # HTTP/1.0 with keep-alive, a 100-continue head sent alone, then a close
    head, _, body = _post(host, b"Expect: 100-continue\r\n").partition(b"\r\n\r\n")
    answers = _exchange(gw, _post(host, b"Connection: keep-alive\r\n", version=b"HTTP/1.0") + head + b"\r\n\r\n",
                        body + _post(host, CLOSE), wait_for=b"HTTP/1.1 100 Continue\r\n\r\n")
    assert [status for status, _, _ in answers] == [429, 100, 429, 429], answers
    assert all(b"retry-after: " in h.lower() for s, h, _ in answers if s == 429)
    # an origin server's 4xx carries Date (RFC 9110 §6.6.1), from the loop as from a thread
    assert all(re.search(rb"\r\nDate: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT(?:\r\n|$)", h) for s, h, _ in answers
               if s != 100), [h for _, h, _ in answers]
    # a chunked read is never refused by the loop (a thread parses chunks) and still gets its 429
    chunked = (f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\nContent-Type: application/json\r\n"
               f"Transfer-Encoding: chunked\r\n\r\n{len(BODY):x}\r\n").encode() + BODY + b"\r\n0\r\n\r\n"
    early = _read_stats(gw)["rejected_early"]
    assert [status for status, _, _ in _exchange(gw, chunked + _post(host, CLOSE))] == [429, 429]
    assert _read_stats(gw)["rejected_early"] == early + 1


class _CountingBuffer(bytearray):
    """A request buffer that counts the bytes each ``find`` may examine."""

    examined = 0

    def find(self, sub, start=0, end=None):
        stop = len(self) if end is None else min(end, len(self))
        self.examined += max(0, stop - (start or 0))
        return super().find(sub, start, end)


def test_trailers_dripped_a_little_at_a_time_cost_the_event_loop_linear_work():
    """The scan runs in the event loop: a chunked body's trailer section sent in small pieces (up to the
    body limit) must not be searched from its start again on every read, or a few slow clients keep the
    loop busy for seconds (what looks at the trailers: RequestScan's ``find`` for the blank line)."""
    scan = RequestScan(1048576)
    buf = _CountingBuffer(b"POST /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n")
    start = buf.examined
    pieces = 400
    for _ in range(pieces):
        buf += b"X-Trailer: " + b"a" * 987 + b"\r\n"  # 1,000 bytes, no blank line yet
        assert scan.feed(buf).kind == "need"
    buf += b"\r\n"
    assert scan.feed(buf) == Verdict("ready", end=len(buf))
    assert buf.examined - start < 3 * len(buf)  # each byte looked at a bounded number of times


def _one_answer(sock: socket.socket, request: bytes) -> int:
    """Send ``request`` on a kept-alive ``sock`` and read its whole answer (Content-Length framing); its status."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data and (chunk := sock.recv(65536)):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    size = int(re.search(rb"\r\ncontent-length: *(\d+)", head, re.IGNORECASE).group(1))
    while len(body) < size and (chunk := sock.recv(65536)):
        body += chunk
    return int(head.split(b" ", 2)[1])


@pytest.mark.parametrize(("length", "status"), [(b"9" * 5000, 413), (b"0" * 5000 + b"7", 400)],
                         ids=["huge", "zero-padded"])
def test_a_content_length_of_thousands_of_digits_is_refused_and_the_worker_lives_on(length, status):
    """Python refuses int() of more than 4,300 digits: the event loop's scan must not raise on such a head
    (an exception there ends the one worker process, every connection with it)."""
    wiki = StalledWiki()
    env = {"S3RM_WIKI_API_URL": f"http://127.0.0.1:{wiki.port}/api.php",
           "S3RM_WIKI_USERNAME": "S3Agent@gateway", "S3RM_WIKI_PASSWORD": "never-checked"}
    try:
        with Gateway(env, threads=2) as gw:
            host = f"127.0.0.1:{gw.port}"
            metrics = f"GET /metrics HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
            with socket.create_connection(("127.0.0.1", gw.port), timeout=120) as kept:
                assert _one_answer(kept, metrics) == 200
                attack = (f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n"
                          f"Content-Type: application/json\r\nContent-Length: ").encode() + length + b'\r\n\r\n{"a":1}'
                answers = _exchange(gw, attack)
                assert [answer[0] for answer in answers] == [status], answers
                assert _one_answer(kept, metrics) == 200  # the worker still serves the connection it kept
    finally:
        wiki.close()


@pytest.mark.parametrize("opening", [
    "POST /mcp HTTP/1.2\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n{{\"jsonrpc\"",
    "\r\nPOST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\"",
], ids=["chunked-http-1.2", "leading-empty-line"])
def test_a_body_dripped_in_framing_gunicorn_accepts_never_holds_a_request_thread(opening):
    """gunicorn serves any HTTP/1.x from 1.0 to 1.9, reads a chunked body for 1.1 and later, and skips one
    empty line before the request line (RFC 9112 §2.2): the event loop must read such a body itself (and
    answer 408 at its deadline), never hand a thread a request whose body is still on the wire."""
    wiki = StalledWiki()
    env = {"S3RM_WIKI_API_URL": f"http://127.0.0.1:{wiki.port}/api.php",
           "S3RM_WIKI_USERNAME": "S3Agent@gateway", "S3RM_WIKI_PASSWORD": "never-checked",
           "S3RM_REQUEST_READ_SECONDS": "5"}
    try:
        with Gateway(env, threads=2) as gw:
            host = f"127.0.0.1:{gw.port}"
            drips = [socket.create_connection(("127.0.0.1", gw.port), timeout=120) for _ in range(2)]
            try:
                for sock in drips:  # one per request thread, each stalled mid-chunk
                    sock.sendall(opening.format(host=host).encode())
                with socket.create_connection(("127.0.0.1", gw.port), timeout=60) as probe:
                    assert _one_answer(probe, f"GET /livez HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()) == 200
                for sock in drips:  # the loop's read deadline
                    answer = b""
                    while chunk := sock.recv(65536):
                        answer += chunk
                    assert answer.startswith(b"HTTP/1.1 408 "), answer
            finally:
                for sock in drips:
                    sock.close()
    finally:
        wiki.close()


@pytest.mark.parametrize(("authorization", "status"), [
    (None, 401), (b"Bearer wrong-token-0123456789", 403), (b"Basic " + TOKEN.encode(), 403),
    (f"Bearer {TOKEN}, Bearer {TOKEN}".encode(), 403), (f"Bearer {TOKEN}".encode(), 429),
], ids=["none", "wrong", "basic", "repeated", "valid"])
def test_a_write_is_refused_early_only_with_a_valid_token(shedding, authorization, status):
    """The write class is refusing: a write without a valid token gets the thread's 401/403, never the early
    429 that would tell an unauthenticated caller the token guess was good (or let it skip the check)."""
    gw, host = shedding
    early = _read_stats(gw, "write")["rejected_early"]
    write = _call("create_lesson_draft", {**DRAFT, "operation_id": "early-refusal-attack"})
    extra = b"" if authorization is None else b"Authorization: " + authorization + b"\r\n"
    answers = _exchange(gw, _post(host, extra + CLOSE, body=write))
    assert [answer[0] for answer in answers] == [status], answers
    assert _read_stats(gw, "write")["rejected_early"] == early + (status == 429)
