"""gunicorn's gthread worker that reads whole requests before a thread, refuses overload there, with JSON errors.

Three changes to :class:`gunicorn.workers.gthread.ThreadWorker`, all in
:class:`JsonErrorThreadWorker` (``worker_class`` in ``gateway/serving/gunicorn.conf.py``):

**Whole requests before a thread** (docs/operations.md#request-reading). The
plain gthread worker hands a connection to a request thread as soon as its
first byte arrives, and the thread then blocks reading the head and the body:
a client sending ``Content-Length: 5000`` and one byte every 2 s holds a
thread for as long as it likes, and as many such clients as threads stop
every request. This worker reads each request — head and body, also on
kept-alive and pipelined connections — in its event loop, non-blocking,
under one deadline (``S3RM_REQUEST_READ_SECONDS`` from the moment the
connection is accepted or turns readable) and the body limit
(``S3RM_MAX_BODY_BYTES``), and submits it to the thread pool only when it is
complete (:class:`~gateway.serving.reading.RequestScan` decides). A request
not complete by the deadline is answered 408 and closed from the event loop;
a body over the limit 413, a head over 64 KiB 431 — no thread is ever taken.
A ``100-continue`` expectation is answered by the event loop when the head
is in. Every route (``/mcp``, OAuth, admin, health) goes through it.

**Overload refusals before a thread** (docs/operations.md#early-refusal). When
a request is complete and the read or write admission class is refusing
callers, the event loop asks :func:`~gateway.transport.http.overload_refusal`
whether this request is a tool call that class would refuse, and if so sends
its 429 itself and keeps the connection alive for the next request; no
thread is taken, none is waited for. Every other request goes to a thread.
``S3RM_EARLY_REFUSAL=off`` turns this off.

**JSON error pages** (docs/transport.md#http-rules: JSON errors everywhere).

Requests that gunicorn's own HTTP parser refuses — invalid header names or
values (CR, LF or NUL inside a header, obsolete line folding), a bad request
line, oversized header sections, bad chunked framing — never reach the Flask
app, and gunicorn answers them with a small HTML page. This worker class
(``worker_class`` in ``gateway/serving/gunicorn.conf.py``) answers them instead with
a JSON body shaped like every other gateway error (a JSON-RPC error object,
``id: null``, code -32600), status and reason unchanged. The body names only
the status: never the offending header, value or request line. The event
loop's 408/413/431 answers have the same shape.
"""
from __future__ import annotations

import logging
import os
import selectors
import socket
import time
from collections import deque
from functools import partial
from http import HTTPStatus

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

from gateway.config import load_config
from gateway.core.errors import INTERNAL_ERROR, INVALID_REQUEST, error_body
from gateway.core.jsonio import encode_json
from gateway.serving.reading import RequestScan, parse_head
from gateway.transport.http import overload_refusal
from gateway.transport.headers import security_headers

__all__ = ["JsonErrorThreadWorker", "json_error_response"]

log = logging.getLogger("s3rm.serving")

_REFUSALS = {
    408: "the request was not complete within the server's read deadline",
    413: "the request body exceeds the server's limit",
    431: "the request head exceeds the server's limit",
    400: "the HTTP request is malformed",
}
_RECV = 65536


def json_error_response(status_int: int, reason: str, detail: str = "the HTTP request is malformed") -> bytes:
    """The raw HTTP/1.1 response for a request answered before any WSGI app runs.

    The body is :func:`~gateway.core.errors.error_body` (``id: null``; -32600
    below 500, else -32603; message ``"<reason>: <detail>"``) encoded by
    :func:`~gateway.core.jsonio.encode_json`, the same bytes
    :func:`~gateway.core.jsonio.json_response` would carry; the head is written
    by hand because gunicorn (or this worker's event loop) answers before any
    WSGI app runs. Always ``Connection: close``, with the app's security headers
    (:func:`~gateway.transport.headers.security_headers`).
    """
    if status_int < 500:
        body = encode_json(error_body(None, INVALID_REQUEST, f"{reason}: {detail}"))
    else:
        body = encode_json(error_body(None, INTERNAL_ERROR, reason))
    fields = {"Connection": "close", "Content-Type": "application/json", **security_headers(False),
              "Content-Length": str(len(body))}
    return _raw_response(status_int, reason, fields, body)


def _raw_response(status_int: int, reason: str, fields: dict[str, str], body: bytes) -> bytes:
    """``HTTP/1.1 <status> <reason>``, the header ``fields`` in order, a blank line and ``body``, as bytes."""
    head = f"HTTP/1.1 {status_int} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    return head.encode("latin-1") + body


def _write_json_error(sock, status_int, reason, mesg) -> None:  # gunicorn.util.write_error's signature
    util.write_nonblock(sock, json_error_response(int(status_int), str(reason)))


class JsonErrorThreadWorker(ThreadWorker):
    """:class:`gunicorn.workers.gthread.ThreadWorker` that reads whole requests in its event loop before a
    thread takes them, and whose parser-level errors are JSON (module doc)."""

    def init_process(self) -> None:
        # gunicorn's Worker.handle_error calls ``util.write_error`` at call time; swap it in
        # this worker process only (the master never writes error pages).
        util.write_error = _write_json_error
        config = load_config(os.environ)
        self.body_limit = config.max_body_bytes
        self.read_seconds = config.request_read_seconds
        self.early_refusal = config.early_refusal
        self.reading: deque = deque()  # connections whose request is being read, oldest deadline first
        super().init_process()

    # ------------------------------------------------- reading in the event loop
    def enqueue_req(self, conn) -> None:
        """Submit a connection whose request is complete; otherwise start reading it (event loop only)."""
        kept_alive = conn.initialized or getattr(conn, "s3rm_answered", False)
        if getattr(conn, "s3rm_request", None) is not None or self.cfg.is_ssl:
            super().enqueue_req(conn)  # complete (or TLS terminated by gunicorn: not scanned)
            return
        buf = bytearray(getattr(conn, "s3rm_ahead", b""))  # pipelined behind an early refusal
        conn.s3rm_ahead = b""
        if conn.parser is not None:  # kept alive: bytes read ahead belong to this request
            buf += conn.parser.unreader.take_buffered()
        conn.s3rm_buf, conn.s3rm_scan = buf, RequestScan(self.body_limit)
        conn.s3rm_deadline = time.monotonic() + self.read_seconds
        conn.s3rm_continued = False
        conn.sock.setblocking(False)
        if buf and self._advance(conn, registered=False):
            return
        self.reading.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))
        if kept_alive:  # it turned readable: read now rather than after one more turn of the loop
            self._on_readable(conn, conn.sock)

    def _on_readable(self, conn, _sock) -> None:
        try:
            data = conn.sock.recv(_RECV)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client went away
            self._stop_reading(conn)
            self._close(conn)
            return
        conn.s3rm_buf += data
        self._advance(conn, registered=True)

    def _advance(self, conn, *, registered: bool) -> bool:
        """Act on the scan of what was read; True when the connection left the reading state."""
        verdict = conn.s3rm_scan.feed(conn.s3rm_buf)
        if verdict.kind == "need":
            if verdict.expect_continue and not conn.s3rm_continued:
                conn.s3rm_continued = True
                self._send(conn, b"HTTP/1.1 100 Continue\r\n\r\n")
            return False
        if registered:
            self._stop_reading(conn)
        if verdict.kind == "refuse":
            self._refuse(conn, verdict.status, verdict.reason)
            return True
        if verdict.kind == "ready" and self._refused_early(conn, verdict.end):
            return True
        # ready, or framing gunicorn's parser refuses before reading a body: a thread answers at once
        conn.s3rm_request = bytes(conn.s3rm_buf)
        conn.s3rm_buf = conn.s3rm_scan = None
        super().enqueue_req(conn)
        return True

    # ----------------------------------------------- refusing under overload, in the event loop
    def _gateway_state(self):
        """The app's :class:`~gateway.app.GatewayState` (``None`` for an app without one)."""
        extensions = getattr(self.wsgi, "extensions", None)
        return extensions.get("s3rm") if isinstance(extensions, dict) else None

    def _refused_early(self, conn, end: int) -> bool:
        """Answer 429 from the event loop when admission is refusing this request's class
        (:func:`~gateway.transport.http.overload_refusal`); True when answered (docs/operations.md#early-refusal)."""
        state = self._gateway_state() if self.early_refusal else None
        admission = getattr(state, "admission", None)
        if admission is None or not admission.shedding() or conn.s3rm_scan.chunked:
            return False  # the usual case costs this one check
        buf = conn.s3rm_buf
        try:  # never let a request break the event loop: on any failure a thread serves it
            answer = self._early_answer(state, conn, bytes(buf[:end]))
        except Exception as exc:
            log.error("early refusal failed, a thread answers exception=%s", type(exc).__name__)
            return False
        if answer is None:
            return False
        data, keep = answer
        ahead = bytes(buf[end:])
        conn.s3rm_buf = conn.s3rm_scan = None
        try:
            complete = conn.sock.send(data) == len(data)  # a few hundred bytes: the send buffer takes them
        except OSError:
            complete = False
        if not (keep and complete):
            try:
                conn.sock.shutdown(socket.SHUT_WR)  # the answer first, then the end
            except OSError:
                pass
            self._close(conn)
            return True
        conn.s3rm_ahead, conn.s3rm_answered = ahead, True
        if ahead:  # a pipelined request: read on in the next loop turn (no recursion over a long pipeline)
            self.method_queue.defer(self.enqueue_req, conn)
            return True
        conn.set_timeout()  # kept alive, as gunicorn parks a connection after a response
        self.keepalived_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_client_socket_readable, conn))
        return True

    def _early_answer(self, state, conn, request: bytes) -> tuple[bytes, bool] | None:
        """The raw 429 for ``request`` (head and body) and whether the connection stays open, or ``None``."""
        head_end = conn.s3rm_scan.head_end
        head = parse_head(request[:head_end - 4])
        if head is None:
            return None
        method, target, version, headers = head
        peer = conn.client[0] if isinstance(conn.client, tuple) and conn.client else None
        answer = overload_refusal(state, method, target, headers, request[head_end:], peer)
        if answer is None:
            return None
        status, fields, body = answer
        tokens = {t.strip().lower() for t in headers.get("Connection", "").split(",")}
        keep = bool(self.alive and self.cfg.keepalive and len(self.keepalived_conns) < self.max_keepalived
                    and (("keep-alive" in tokens) if version == "HTTP/1.0" else ("close" not in tokens)))
        fields = {**fields, "Content-Length": str(len(body)), "Connection": "keep-alive" if keep else "close",
                  "Date": util.http_date()}  # as gunicorn dates a thread's answer (RFC 9110 §6.6.1)
        return _raw_response(status, HTTPStatus(status).phrase, fields, body), keep

    def _stop_reading(self, conn) -> None:
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass
        try:
            self.reading.remove(conn)
        except ValueError:
            pass

    def _send(self, conn, data: bytes) -> None:
        try:
            conn.sock.send(data)  # small; a full send buffer only loses a courtesy answer
        except OSError:
            pass

    def _refuse(self, conn, status: int, reason: str) -> None:
        log.debug("request refused before a thread: %s %s", status, reason)
        self._send(conn, json_error_response(status, reason, _REFUSALS[status]))
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self._close(conn)

    def _close(self, conn) -> None:
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        """gunicorn's expiry of idle connections, plus 408 for every request not read by its deadline."""
        super().murder_pending()
        now = time.monotonic()
        while self.reading and self.reading[0].s3rm_deadline <= now:
            conn = self.reading[0]
            self._stop_reading(conn)
            self._refuse(conn, 408, "Request Timeout")

    # ------------------------------------------------------- in a request thread
    def handle(self, conn):
        """Serve the request read by the event loop (its bytes go back in front of the parser)."""
        data, conn.s3rm_request = conn.s3rm_request, None
        conn.data_ready = True  # no wait for a first byte: the whole request is here
        if data is not None:
            conn.sock.setblocking(True)
            conn.init()
            conn.parser.unreader.unread(data)
        return super().handle(conn)

    def handle_request(self, req, conn):
        """gunicorn's request handling, minus its ``100 Continue``: the body has already been read."""
        req._expected_100_continue = False
        return super().handle_request(req, conn)
