"""gunicorn's gthread worker with JSON error pages (docs/transport.md#http-rules: JSON errors everywhere).

Requests that gunicorn's own HTTP parser refuses — invalid header names or
values (CR, LF or NUL inside a header, obsolete line folding), a bad request
line, oversized header sections, bad chunked framing — never reach the Flask
app, and gunicorn answers them with a small HTML page. This worker class
(``worker_class`` in ``gateway/serving/gunicorn.conf.py``) answers them instead with
a JSON body shaped like every other gateway error (a JSON-RPC error object,
``id: null``, code -32600), status and reason unchanged. The body names only
the status: never the offending header, value or request line.
"""
from __future__ import annotations

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

from gateway.core.errors import INTERNAL_ERROR, INVALID_REQUEST, error_body
from gateway.core.jsonio import encode_json

__all__ = ["JsonErrorThreadWorker", "json_error_response"]


def json_error_response(status_int: int, reason: str) -> bytes:
    """The raw HTTP/1.1 response gunicorn sends for a request it could not parse.

    The body is :func:`~gateway.core.errors.error_body` (``id: null``; -32600
    below 500, else -32603) encoded by :func:`~gateway.core.jsonio.encode_json`,
    the same bytes :func:`~gateway.core.jsonio.json_response` would carry; the
    head is written by hand because gunicorn answers before any WSGI app runs.
    """
    if status_int < 500:
        body = encode_json(error_body(None, INVALID_REQUEST, f"{reason}: the HTTP request is malformed"))
    else:
        body = encode_json(error_body(None, INTERNAL_ERROR, reason))
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/json\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        "Cache-Control: no-store\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1")
    return head + body


def _write_json_error(sock, status_int, reason, mesg) -> None:  # gunicorn.util.write_error's signature
    util.write_nonblock(sock, json_error_response(int(status_int), str(reason)))


class JsonErrorThreadWorker(ThreadWorker):
    """:class:`gunicorn.workers.gthread.ThreadWorker` whose parser-level errors are JSON."""

    def init_process(self) -> None:
        # gunicorn's Worker.handle_error calls ``util.write_error`` at call time; swap it in
        # this worker process only (the master never writes error pages).
        util.write_error = _write_json_error
        super().init_process()
