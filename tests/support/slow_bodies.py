"""Slow request bodies for the request-reading tests (docs/operations.md#request-reading).

* :func:`slow_body` — a connection to ``127.0.0.1:port`` that sent a ``POST`` head announcing
  5000 body bytes and one body byte, and then nothing.
* :func:`assert_unanswered` — each such connection got no answer yet (the server is still
  reading it, without a thread); closes them all.
"""
from __future__ import annotations

import socket

__all__ = ["assert_unanswered", "slow_body"]


def slow_body(port: int, path: str) -> socket.socket:
    """The connection, blocking, with a 60 s timeout."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                 "Content-Length: 5000\r\n\r\n{".encode())
    return sock


def assert_unanswered(socks: list[socket.socket]) -> None:
    """No byte is waiting on any of ``socks`` (and none was closed by the server); then close them."""
    try:
        for sock in socks:
            sock.setblocking(False)
            try:
                data = sock.recv(100)
            except BlockingIOError:
                continue
            raise AssertionError(f"a slow request was answered or closed: {data[:60]!r}")
    finally:
        for sock in socks:
            sock.close()
