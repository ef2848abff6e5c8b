"""SSRF-safe fetching of client ID metadata documents (docs/transport.md#client-id-metadata).

A client may use an ``https`` URL as its ``client_id``; the authorization
server then fetches that URL to learn the client's name and redirect URIs.
That fetch is reachable by anyone on the internet, so :func:`fetch_json`:

* accepts only ``https`` URLs without credentials or fragment, on port 443
  or an explicit port;
* resolves the host once and refuses it when ANY resolved address falls in
  an IANA special-purpose range (:data:`DENIED_NETWORKS`: the IPv4 and IPv6
  special-purpose address registries, including NAT64, 6to4, Teredo and
  IPv4-compatible/-mapped forms, whose embedded IPv4 address is checked too)
  or is not ``is_global`` — :func:`address_allowed`;
* connects to the vetted address itself (no second DNS lookup, so DNS
  rebinding cannot swap the address), verifying TLS for the host name;
* follows no redirects, caps the body at ``max_bytes``, and holds the WHOLE
  exchange (connect, TLS handshake, request, every header and body read) to
  one absolute deadline of ``timeout`` seconds: every socket operation gets
  only the time that is left (:class:`_DeadlineSocket`), so a server that
  drips one byte at a time cannot stretch it; requires a JSON object.

Errors are :class:`FetchError` with a short reason code (``scheme``,
``address``, ``resolve``, ``size``, ``timeout``, ``status``, ``json``,
``network``) for the server's log; callers show one generic message
(the reason would turn the fetcher into a port scanner) and never the body.
The resolver itself has no timeout: :class:`gateway.auth.server` runs the
fetch on a small worker pool and stops waiting at the deadline.
"""
from __future__ import annotations

import http.client
import io
import ipaddress
import json
import socket
import ssl
import time
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

from gateway.core.errors import GatewayError

__all__ = ["DENIED_NETWORKS", "FetchError", "MetadataFetcher", "address_allowed", "fetch_json", "Resolver"]

#: ``resolve(host, port) -> [address, ...]`` (strings); defaults to :func:`socket.getaddrinfo`.
Resolver = Callable[[str, int], list[str]]

#: Special-purpose ranges never fetched (IANA IPv4 and IPv6 Special-Purpose Address Registries, incl. the
#: RFC 9780 dummy prefix 100:0:0:1::/64, plus multicast, site-local, the SIIT IPv4-translated form
#: ::ffff:0:a.b.c.d and the transition prefixes whose embedded IPv4 address is vetted separately).
DENIED_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24", "192.168.0.0/16",
    "192.175.48.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
    "255.255.255.255/32",
    "::/128", "::1/128", "::/96", "::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48",
    "100::/64", "100:0:0:1::/64", "2001::/23",
    "2001::/32", "2001:2::/48", "2001:db8::/32", "2001:10::/28", "2001:20::/28", "2002::/16", "3fff::/20",
    "5f00::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
))


class FetchError(GatewayError):
    """A metadata document could not be fetched safely; ``reason`` is a short code (module doc)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address carried by a mapped, compatible, NAT64, 6to4 or Teredo IPv6 address."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    packed = ip.packed
    if packed[:12] == bytes(12) or packed[:12] == bytes.fromhex("0064ff9b0000000000000000"):
        return ipaddress.IPv4Address(packed[12:])
    return None


def address_allowed(address: str, allow_networks: Iterable[str] = ()) -> bool:
    """True only for a public unicast address outside :data:`DENIED_NETWORKS` (module doc).

    ``allow_networks`` (CIDR strings, ``S3RM_OAUTH_CIMD_ALLOW_NETWORKS``) lets
    an operator admit an internal range explicitly.
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if any(ip in ipaddress.ip_network(n) for n in allow_networks):
        return True
    if any(ip in net for net in DENIED_NETWORKS if net.version == ip.version):
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None and not address_allowed(str(inner)):
            return False
    return ip.is_global and not ip.is_multicast


class _DeadlineReader(io.RawIOBase):
    """Raw reads from ``sock``, each limited to the time left before ``deadline`` (monotonic seconds)."""

    def __init__(self, sock: socket.socket, deadline: float):
        self._sock, self._deadline = sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        self._sock.settimeout(_left(self._deadline))
        return self._sock.recv_into(buffer)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline")
    return left


class _DeadlineSocket:
    """The socket http.client sees: every send and read gets only the time left before the deadline."""

    def __init__(self, sock: socket.socket, deadline: float):
        self._sock, self._deadline = sock, deadline

    def sendall(self, data: bytes) -> None:
        self._sock.settimeout(_left(self._deadline))
        self._sock.sendall(data)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any):
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline))

    def close(self) -> None:
        self._sock.close()


def _system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to a fixed, already vetted address, with SNI and certificate checks for ``host``,
    every socket operation bounded by the absolute ``deadline``."""

    def __init__(self, host: str, address: str, port: int, deadline: float, context: ssl.SSLContext):
        super().__init__(host, port, timeout=_left(deadline), context=context)
        self._address = address
        self._deadline = deadline

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), _left(self._deadline))
        try:
            sock.settimeout(_left(self._deadline))  # the handshake's own deadline (CPython keeps one per call)
            tls = self._context.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self.sock = _DeadlineSocket(tls, self._deadline)


def _vetted(addresses: Iterable[str], allow: Callable[[str], bool]) -> str:
    found = list(addresses)
    if not found:
        raise FetchError("resolve", "the host name does not resolve")
    for address in found:
        if not allow(address):
            raise FetchError("address", "the host resolves to a special-purpose (non-public) address")
    return found[0]


def fetch_json(url: str, *, max_bytes: int = 5120, timeout: float = 5.0, resolve: Resolver | None = None,
               allow: Callable[[str], bool] = address_allowed,
               ssl_context: ssl.SSLContext | None = None) -> dict[str, Any]:
    """GET ``url`` and return its JSON object, under the rules of the module doc.

    ``timeout`` is the absolute deadline of the whole fetch (seconds).
    ``resolve``, ``allow`` and ``ssl_context`` default to the system resolver,
    :func:`address_allowed` and the system trust store (tests and operators
    with an internal CA pass their own). Raises :class:`FetchError`.
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
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    conn = None
    try:
        conn = _PinnedHTTPSConnection(host, address, port, deadline, context)
        conn.request("GET", path, headers={"Accept": "application/json", "User-Agent": "s3rm-gateway"})
        response = conn.getresponse()
        if response.status != 200:
            raise FetchError("status", f"the document answered HTTP {response.status} (redirects are not followed)")
        declared = response.getheader("Content-Length")
        if declared and declared.isascii() and declared.isdigit() and int(declared) > max_bytes:
            raise FetchError("size", f"the document is larger than {max_bytes} bytes")
        chunks, total = [], 0
        while True:
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
        if conn is not None:
            conn.close()
    try:
        value = json.loads(b"".join(chunks).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise FetchError("json", "the document is not UTF-8 JSON") from None
    if not isinstance(value, dict):
        raise FetchError("json", "the document is not a JSON object")
    return value


class MetadataFetcher:
    """The policy around :func:`fetch_json` for anonymous callers (docs/operations.md#github-limits).

    * at most ``max_concurrent`` fetches run at once, on their own worker
      threads; a request finding every slot busy is refused at once
      (``FetchError("busy")``) instead of queueing;
    * one caller (address key) holds at most ``per_caller`` of those slots
      (default half of them, at least one): one address sending slow
      documents refuses only itself, the other slots stay free for everyone else;
    * the request thread waits at most ``timeout`` seconds (the fetch's own
      absolute deadline) plus a small grace, even when DNS hangs;
    * a failed URL is refused without a new fetch for ``failure_seconds``
      (negative cache, at most ``cache_size`` URLs, oldest dropped).

    ``fetch(url, timeout) -> dict`` defaults to :func:`fetch_json` with the
    allowed networks and CA file of the settings. Thread-safe; the worker
    pool starts on first use (so a pre-fork master never owns its threads).
    """

    _GRACE = 0.25

    def __init__(self, *, timeout: float, max_concurrent: int, failure_seconds: int,
                 allow_networks: Iterable[str] = (), ca_file: str = "",
                 fetch: Callable[[str, float], dict[str, Any]] | None = None, cache_size: int = 1024,
                 per_caller: int = 0):
        import threading

        self.timeout = timeout
        self.per_caller = per_caller or max(1, max_concurrent // 2)
        self._held: dict[str, int] = {}
        self.failure_seconds = failure_seconds
        self.max_concurrent = max_concurrent
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._lock = threading.Lock()
        self._failures: dict[str, tuple[float, str]] = {}
        self._cache_size = cache_size
        self._pool = None
        networks = tuple(allow_networks)
        context = ssl.create_default_context(cafile=ca_file) if ca_file else None
        self._fetch = fetch or (lambda url, limit: fetch_json(
            url, timeout=limit, allow=lambda a: address_allowed(a, networks), ssl_context=context))

    def _executor(self):
        from concurrent.futures import ThreadPoolExecutor

        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.max_concurrent, thread_name_prefix="s3rm-cimd")
            return self._pool

    def _remember(self, url: str, reason: str) -> None:
        if self.failure_seconds <= 0:
            return
        with self._lock:
            self._failures.pop(url, None)
            self._failures[url] = (time.monotonic() + self.failure_seconds, reason)
            while len(self._failures) > self._cache_size:
                self._failures.pop(next(iter(self._failures)))

    def _release(self, caller: str) -> None:
        with self._lock:
            left = self._held.get(caller, 1) - 1
            if left > 0:
                self._held[caller] = left
            else:
                self._held.pop(caller, None)
        self._slots.release()

    def get(self, url: str, caller: str = "") -> dict[str, Any]:
        """The JSON object at ``url`` for ``caller`` (its address key; ``""`` counts as one caller);
        raises :class:`FetchError` (``busy``, ``cached`` or a fetch reason)."""
        from concurrent.futures import TimeoutError as FutureTimeout

        with self._lock:
            failed = self._failures.get(url)
            if failed and failed[0] > time.monotonic():
                raise FetchError("cached", f"this document failed recently ({failed[1]})")
            if self._held.get(caller, 0) >= self.per_caller:
                raise FetchError("busy", "this address is already fetching client metadata documents")
            if not self._slots.acquire(blocking=False):
                raise FetchError("busy", "too many client metadata documents are being fetched at once")
            self._held[caller] = self._held.get(caller, 0) + 1
        try:
            future = self._executor().submit(self._fetch, url, self.timeout)
        except BaseException:
            self._release(caller)
            raise
        future.add_done_callback(lambda _: self._release(caller))
        try:
            return future.result(timeout=self.timeout + self._GRACE)
        except FutureTimeout:
            self._remember(url, "timeout")
            raise FetchError("timeout", f"the document took longer than {self.timeout} s") from None
        except FetchError as exc:
            self._remember(url, exc.reason)
            raise
        except Exception as exc:  # anything else the fetch raised: the same generic refusal
            self._remember(url, "network")
            raise FetchError("network", f"the document could not be fetched ({type(exc).__name__})") from None
