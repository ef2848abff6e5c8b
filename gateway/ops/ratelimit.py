"""Per-principal rate limits (open mode) and the trusted client address.

Contract: docs/operations.md#admission (per-principal rate limits in open
mode) and docs/operations.md#public-domain (client IP trusted only with the
proxy secret):
Caddy overwrites the caller-supplied client-IP and proxy-secret headers, and
``mcp-http`` uses the forwarded IP as the ``open``-mode rate principal only
when the separate server secret matches.

* :func:`client_address` — the peer address, or the value of
  :data:`CLIENT_IP_HEADER` when the request also carries
  :data:`PROXY_SECRET_HEADER` equal to ``S3RM_PROXY_SECRET`` (constant-time
  compare). Without a configured secret, forwarded headers are never trusted.
  ``X-Forwarded-For`` is never read: any client can send it.
* :class:`RateLimiter` — one token bucket per principal key
  (``S3RM_RATE_LIMIT_PER_SECOND`` refill, ``S3RM_RATE_LIMIT_BURST`` capacity),
  at most ``S3RM_RATE_LIMIT_MAX_PRINCIPALS`` buckets (least recently used
  evicted, so memory stays bounded under address spraying). Over the limit →
  :class:`~gateway.ops.admission.AdmissionRejected` 429 ``rate_limited`` with
  ``Retry-After``.

Principal keys are never logged; metrics count rejections only.
"""
from __future__ import annotations

import hmac
import ipaddress
import math
import threading
import time
from collections import OrderedDict
from typing import Callable, Mapping

from gateway.ops.admission import AdmissionRejected

__all__ = ["CLIENT_IP_HEADER", "PROXY_SECRET_HEADER", "RateLimiter", "client_address", "principal_key"]

#: Header in which the proxy (Caddy) passes the client address; overwritten by Caddy on every request.
CLIENT_IP_HEADER = "X-S3RM-Client-IP"
#: Header in which the proxy proves it is the proxy (value = S3RM_PROXY_SECRET); overwritten by Caddy.
PROXY_SECRET_HEADER = "X-S3RM-Proxy-Secret"


def _normalise_ip(value: str | None) -> str | None:
    if not value:
        return None
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def client_address(headers: Mapping[str, str], remote_addr: str | None, proxy_secret: str) -> str:
    """The address to use as the caller's rate principal.

    Returns the forwarded :data:`CLIENT_IP_HEADER` value only when
    ``proxy_secret`` is set, :data:`PROXY_SECRET_HEADER` matches it exactly
    (``hmac.compare_digest``) and the forwarded value is one valid IP address;
    otherwise the socket peer ``remote_addr`` (``""`` when unknown).
    """
    peer = _normalise_ip(remote_addr) or ""
    if not proxy_secret:
        return peer
    presented = headers.get(PROXY_SECRET_HEADER)
    if presented is None:
        return peer
    if not hmac.compare_digest(presented.encode("utf-8", "surrogatepass"), proxy_secret.encode("utf-8")):
        return peer
    return _normalise_ip(headers.get(CLIENT_IP_HEADER)) or peer


def principal_key(kind: str, subject: str) -> str:
    """The bucket key of a principal: ``"<kind>:<subject>"`` (e.g. ``ip:203.0.113.9``, ``token:shared-write-token``)."""
    return f"{kind}:{subject}"


class RateLimiter:
    """Token buckets keyed by principal; thread-safe and bounded in memory.

    ``rate`` tokens per second refill each bucket up to ``burst``; one call
    spends one token. :meth:`check` raises ``AdmissionRejected`` (HTTP 429,
    ``data.code = "rate_limited"``, ``Retry-After`` = seconds until one token
    is back, at least 1).
    """

    def __init__(self, rate: float, burst: int, max_principals: int = 10000, *,
                 monotonic: Callable[[], float] = time.monotonic, metrics=None):
        if rate <= 0 or burst < 1 or max_principals < 1:
            raise ValueError("rate must be > 0, burst ≥ 1 and max_principals ≥ 1")
        self.rate = rate
        self.burst = burst
        self.max_principals = max_principals
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()  # key -> [tokens, last]
        self.metrics = metrics
        self.rejected = 0

    @classmethod
    def from_config(cls, config, *, metrics=None) -> "RateLimiter":
        """Build from ``GatewayConfig`` (``rate_limit_*``)."""
        return cls(config.rate_limit_per_second, config.rate_limit_burst, config.rate_limit_max_principals,
                   metrics=metrics)

    def check(self, key: str) -> None:
        """Spend one token of ``key``'s bucket or raise ``AdmissionRejected`` 429 ``rate_limited``."""
        now = self._monotonic()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = [float(self.burst), now]
                self._buckets[key] = bucket
                while len(self._buckets) > self.max_principals:
                    self._buckets.popitem(last=False)
            else:
                self._buckets.move_to_end(key)
                bucket[0] = min(float(self.burst), bucket[0] + (now - bucket[1]) * self.rate)
                bucket[1] = now
            if bucket[0] >= 1.0:
                bucket[0] -= 1.0
                return
            wait = max(1, math.ceil((1.0 - bucket[0]) / self.rate))
            self.rejected += 1
        if self.metrics is not None:
            self.metrics.incr("rate_limit_rejections")
        raise AdmissionRejected(
            "rate", "rate_limited", 429, wait,
            f"Too Many Requests: this client's request rate is over the server's limit; retry after {wait} s",
        )

    def __len__(self) -> int:
        with self._lock:
            return len(self._buckets)
