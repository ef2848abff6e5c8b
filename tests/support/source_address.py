"""HTTP sessions that connect FROM a chosen local address (tests and benches only).

Linux routes the whole 127.0.0.0/8 to the loopback interface, so a client
bound to ``127.1.2.3`` reaches a server listening on ``127.0.0.1`` and the
server sees ``127.1.2.3`` as the peer: one machine plays many callers for the
per-address limits of github mode (docs/operations.md#github-quotas).
"""
from __future__ import annotations

import requests
from requests.adapters import HTTPAdapter

__all__ = ["session_from"]


class _BoundAdapter(HTTPAdapter):
    def __init__(self, address: str):
        self._address = address
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self._address, 0)
        super().init_poolmanager(*args, **kwargs)


def session_from(address: str) -> requests.Session:
    """A :class:`requests.Session` whose every connection starts from ``address`` (port chosen by the kernel)."""
    session = requests.Session()
    adapter = _BoundAdapter(address)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
