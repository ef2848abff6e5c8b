"""SSRF-safe fetching of client ID metadata documents (docs/transport.md#client-id-metadata).

A client may use an ``https`` URL as its ``client_id``; the authorization
server then fetches that URL to learn the client's name and redirect URIs.
That fetch is an SSRF surface, so :func:`fetch_json`:

* accepts only ``https`` URLs without credentials or fragment, on port 443
  or an explicit port;
* resolves the host once and refuses it when ANY resolved address is not a
  public unicast address (private, loopback, link-local, multicast,
  reserved, unspecified, CGNAT 100.64/10, IPv4-mapped forms of those) —
  :func:`address_allowed`;
* connects to the vetted address itself (no second DNS lookup, so DNS
  rebinding cannot swap the address), verifying TLS for the host name;
* follows no redirects, caps the body at ``max_bytes`` and the whole
  exchange at ``timeout`` seconds, and requires a JSON object.

Errors are :class:`FetchError` with a short reason code (``scheme``,
``address``, ``resolve``, ``size``, ``timeout``, ``status``, ``json``,
``network``) and never include the body.
"""
from __future__ import annotations

import http.client
import ipaddress
import json
import socket
import ssl
import time
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

__all__ = ["FetchError", "address_allowed", "fetch_json", "Resolver"]

#: ``resolve(host, port) -> [address, ...]`` (strings); defaults to :func:`socket.getaddrinfo`.
Resolver = Callable[[str, int], list[str]]


class FetchError(Exception):
    """A metadata document could not be fetched safely; ``reason`` is a short code (module doc)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def address_allowed(address: str) -> bool:
    """True only for a public unicast IP address (``is_global`` and not multicast)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to a fixed, already vetted address, with SNI and certificate checks for ``host``."""

    def __init__(self, host: str, address: str, port: int, timeout: float, context: ssl.SSLContext):
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def _vetted(addresses: Iterable[str], allow: Callable[[str], bool]) -> str:
    found = list(addresses)
    if not found:
        raise FetchError("resolve", "the host name does not resolve")
    for address in found:
        if not allow(address):
            raise FetchError("address", "the host resolves to a private, loopback or link-local address")
    return found[0]


def fetch_json(url: str, *, max_bytes: int = 5120, timeout: float = 5.0, resolve: Resolver | None = None,
               allow: Callable[[str], bool] = address_allowed,
               ssl_context: ssl.SSLContext | None = None) -> dict[str, Any]:
    """GET ``url`` and return its JSON object, under the rules of the module doc.

    ``resolve``, ``allow`` and ``ssl_context`` exist for tests (a local TLS
    server with its own certificate); production uses the defaults. Raises
    :class:`FetchError`.
    """
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname or parts.username or parts.password or parts.fragment:
        raise FetchError("scheme", "a client metadata document must be an https URL without credentials")
    try:
        port = parts.port or 443
    except ValueError:
        raise FetchError("scheme", "the URL has an invalid port") from None
    host = parts.hostname
    deadline = time.monotonic() + timeout
    try:
        address = _vetted((resolve or _system_resolver)(host, port), allow)
    except OSError:
        raise FetchError("resolve", "the host name does not resolve") from None
    context = ssl_context or ssl.create_default_context()
    conn = _PinnedHTTPSConnection(host, address, port, timeout, context)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request("GET", path, headers={"Accept": "application/json", "User-Agent": "s3rm-gateway"})
        response = conn.getresponse()
        if response.status != 200:
            raise FetchError("status", f"the document answered HTTP {response.status} (redirects are not followed)")
        declared = response.getheader("Content-Length")
        if declared and declared.isdigit() and int(declared) > max_bytes:
            raise FetchError("size", f"the document is larger than {max_bytes} bytes")
        chunks, total = [], 0
        while True:
            if time.monotonic() > deadline:
                raise FetchError("timeout", f"the document took longer than {timeout} s")
            chunk = response.read(min(4096, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise FetchError("size", f"the document is larger than {max_bytes} bytes")
    except (socket.timeout, TimeoutError):
        raise FetchError("timeout", f"the document took longer than {timeout} s") from None
    except (OSError, http.client.HTTPException) as exc:
        raise FetchError("network", f"the document could not be fetched ({type(exc).__name__})") from None
    finally:
        conn.close()
    try:
        value = json.loads(b"".join(chunks).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise FetchError("json", "the document is not UTF-8 JSON") from None
    if not isinstance(value, dict):
        raise FetchError("json", "the document is not a JSON object")
    return value
