"""Value parsers of the configuration loader and its one error type.

Every parser takes the raw (stripped) text of one environment variable and
either returns the validated value or raises :class:`ConfigError` naming the
variable. Messages never repeat the value: it may be a secret (a token digest,
a JSON object of keys). Used only by :mod:`gateway.config.loader` and
:mod:`gateway.config.retrieval`.
"""
from __future__ import annotations

import json
import re
from dataclasses import fields
from types import MappingProxyType
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from gateway.core.errors import GatewayError

__all__ = [
    "ConfigError",
    "Getter",
    "make_getter",
    "number",
    "hex_digest",
    "redacted_repr",
    "parse_public_url",
    "parse_hosts",
    "parse_origins",
    "parse_json",
    "parse_hmac_keys",
    "parse_scopes",
    "parse_scope_principals",
]

#: ``get(name, default="") -> str``: the stripped value of one variable, ``default`` when unset or blank.
Getter = Callable[..., str]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# host[:port] where host is a DNS name, an IPv4 address or a bracketed IPv6 address.
_HOST_PORT = re.compile(r"^(?:\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::[0-9]{1,5})?$")
_SCOPE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_MAX_SCOPES = 16
_HEX16 = re.compile(r"^[0-9a-f]{16}$")


class ConfigError(GatewayError, ValueError):
    """A configuration value is missing or invalid.

    ``variable`` names the environment variable; the message never contains the
    value of a secret.
    """

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(f"{variable}: {message}")
        self.variable = variable



def make_getter(environ: Mapping[str, str]) -> Getter:
    """The :data:`Getter` over ``environ``: values are stripped; empty or blank counts as unset."""

    def get(name: str, default: str = "") -> str:
        value = environ.get(name)
        return default if value is None or value.strip() == "" else value.strip()

    return get


def number(get: Getter, name: str, default, kind, low, high):
    """Read ``name`` through ``get`` as ``kind`` (int or float) within ``[low, high]``.

    An empty value gives ``default``. A value that does not parse or is out of
    range raises :class:`ConfigError`; the message never repeats the value.
    """
    raw = get(name)
    if raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(name, f"must be {'an integer' if kind is int else 'a number'}") from None
    if not (low <= value <= high):
        raise ConfigError(name, f"must be between {low} and {high}")
    return value


def redacted_repr(value: Any, secret_fields: tuple[str, ...]) -> str:
    """``ClassName(field=repr, ...)`` of a dataclass ``value``; each of ``secret_fields`` shows
    ``<redacted>`` when set and ``''`` when empty, so a secret never reaches a log."""
    parts = []
    for f in fields(value):
        if not f.repr:
            continue
        item = getattr(value, f.name)
        shown = ("<redacted>" if item else "''") if f.name in secret_fields else repr(item)
        parts.append(f"{f.name}={shown}")
    return f"{type(value).__name__}({', '.join(parts)})"


def hex_digest(get: Getter, name: str, what: str) -> str:
    """``name`` as a lower-case 64-hex SHA-256 digest (``""`` when unset); ``what`` names the hashed secret."""
    digest = get(name).lower()
    if digest and not _HEX64.match(digest):
        raise ConfigError(name, f"must be the 64-character hex SHA-256 digest of {what}")
    return digest


def parse_public_url(url: str) -> tuple[str, set[str], str]:
    """Return (url, accepted Host header forms, Origin) for ``S3RM_MCP_PUBLIC_URL``."""
    name = "S3RM_MCP_PUBLIC_URL"
    if "*" in url:
        raise ConfigError(name, "wildcards are not allowed")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(name, "must be an absolute http(s) URL such as https://wiki.example.org/mcp")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError(name, "must not contain credentials, a query or a fragment")
    if parts.path.rstrip("/") != "/mcp":
        raise ConfigError(name, "path must be /mcp (the proxy forwards /mcp unchanged)")
    host, port, explicit = _host_port(parts, name, "has an invalid port")
    forms = {f"{host}:{port}"} | (set() if explicit else {host})
    origin = f"{parts.scheme}://{host}" + (f":{port}" if explicit else "")
    return url, forms, origin


def _host_port(parts, name: str, invalid: str) -> tuple[str, int, bool]:
    """(lower-case host with IPv6 literals bracketed, port, whether the port differs from the scheme's default)
    of an http(s) ``urlsplit`` result; an unparsable port raises ConfigError(``name``, ``invalid``)."""
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(name, invalid) from None
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    default = _DEFAULT_PORTS[parts.scheme]
    return host, default if port is None else port, port not in (None, default)


def _split(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


def parse_hosts(raw: str) -> frozenset[str]:
    """``S3RM_MCP_ALLOWED_HOSTS``: comma-separated exact ``host[:port]`` values (lower-cased, no wildcards)."""
    name = "S3RM_MCP_ALLOWED_HOSTS"
    out = set()
    for item in _split(raw):
        value = item.lower()
        if "*" in value:
            raise ConfigError(name, "wildcards are not allowed; list each exact host[:port]")
        if not _HOST_PORT.match(value):
            raise ConfigError(name, "entries must be exact host or host:port values (no scheme or path)")
        out.add(value)
    return frozenset(out)


def parse_origins(raw: str) -> frozenset[str]:
    """``S3RM_MCP_ALLOWED_ORIGINS``: comma-separated exact origins, normalised (default ports dropped)."""
    name = "S3RM_MCP_ALLOWED_ORIGINS"
    out = set()
    for item in _split(raw):
        if "*" in item:
            raise ConfigError(name, "wildcards are not allowed; list each exact origin")
        parts = urlsplit(item)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
            or parts.username
        ):
            raise ConfigError(name, "entries must be exact origins such as https://wiki.example.org:8443")
        host, port, explicit = _host_port(parts, name, "has an entry with an invalid port")
        out.add(f"{parts.scheme}://{host}" + (f":{port}" if explicit else ""))
    return frozenset(out)


def parse_json(name: str, raw: str) -> Any:
    """``raw`` as JSON; a parse error names ``name`` and never echoes the text (it may hold secrets)."""
    try:
        return json.loads(raw)
    except ValueError:
        # never echo the value: it may hold secrets
        raise ConfigError(name, "is not valid JSON") from None


def parse_hmac_keys(raw: str) -> dict[str, str]:
    """``S3RM_REVISION_HMAC_KEYS``: JSON object key id → secret of at least 16 bytes (``{}`` when unset)."""
    name = "S3RM_REVISION_HMAC_KEYS"
    if not raw:
        return {}
    data = parse_json(name, raw)
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) and len(v.encode("utf-8")) >= 16 for k, v in data.items()
    ):
        raise ConfigError(name, "must be a JSON object mapping key ids to secrets of at least 16 bytes")
    return dict(data)


def parse_scopes(raw: str) -> Mapping[str, Mapping[str, Any]]:
    """``S3RM_SEARCH_SCOPES_JSON``: at most 16 named scopes, each a JSON object of search filters."""
    name = "S3RM_SEARCH_SCOPES_JSON"
    if not raw:
        return MappingProxyType({})
    data = parse_json(name, raw)
    if not isinstance(data, dict):
        raise ConfigError(name, "must be a JSON object mapping scope names to filter objects")
    if len(data) > _MAX_SCOPES:
        raise ConfigError(name, f"defines more than {_MAX_SCOPES} scopes")
    for scope, filters in data.items():
        if not _SCOPE_NAME.match(scope):
            raise ConfigError(name, "scope names must match [a-z0-9][a-z0-9_-]{0,63}")
        if not isinstance(filters, dict):
            raise ConfigError(name, f"scope {scope!r} must map to a JSON object of filters")
    return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in data.items()})


def parse_scope_principals(raw: str, scopes: Mapping[str, Any]) -> Mapping[str, frozenset[str]]:
    """``S3RM_SEARCH_SCOPE_PRINCIPALS_JSON``: scope name → list of 16-hex principal hashes.

    A principal hash is the first 16 hex characters of SHA-256 of the token (or
    of a subject): never a raw credential. Every scope named must exist in
    ``S3RM_SEARCH_SCOPES_JSON``; an empty list locks the scope for everyone.
    """
    name = "S3RM_SEARCH_SCOPE_PRINCIPALS_JSON"
    if not raw:
        return MappingProxyType({})
    data = parse_json(name, raw)
    if not isinstance(data, dict):
        raise ConfigError(name, "must be a JSON object mapping scope names to lists of principal hashes")
    out: dict[str, frozenset[str]] = {}
    for scope, hashes in data.items():
        if scope not in scopes:
            raise ConfigError(name, f"names scope {scope[:64]!r}, which S3RM_SEARCH_SCOPES_JSON does not define")
        if not isinstance(hashes, list) or not all(isinstance(h, str) and _HEX16.match(h.lower()) for h in hashes):
            raise ConfigError(
                name,
                f"scope {scope!r} must map to a list of 16-hex-character principal hashes "
                "(the first 16 hex of SHA-256 of the token or subject), never raw credentials",
            )
        out[scope] = frozenset(h.lower() for h in hashes)
    return MappingProxyType(out)
