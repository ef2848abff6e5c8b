"""Gateway configuration, read from the environment in exactly one place.

Every setting the gateway (and its gunicorn configuration) reads lives in
:class:`GatewayConfig`; nothing else in the package looks at ``os.environ``.
``GatewayConfig.from_env()`` validates every value and raises
:class:`ConfigError` naming the offending variable (never echoing a secret).

Contract sources: DESIGN.md §3 and §5, seeds/architecture.ko.wiki
"연구실 공용 MCP 연결" (public URL, exact Host/Origin allowlists without
wildcards, token/open write modes), CHECKLIST R1, R3, R9.
"""
from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping
from urllib.parse import urlsplit

from gateway.envparse import number

__all__ = ["ConfigError", "GatewayConfig", "REPO_ROOT", "DEFAULT_SCHEMA_DIR"]

#: Repository root (the directory holding ``gateway/`` and ``schema/``).
REPO_ROOT = Path(__file__).resolve().parents[1]
#: Default ``S3RM_SCHEMA_DIR``: the committed, generated schema tree.
DEFAULT_SCHEMA_DIR = REPO_ROOT / "schema"

_DEFAULT_PORTS = {"http": 80, "https": 443}
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# host[:port] where host is a DNS name, an IPv4 address or a bracketed IPv6 address.
_HOST_PORT = re.compile(r"^(?:\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::[0-9]{1,5})?$")
_SCOPE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_MAX_SCOPES = 16
_SECRET_FIELDS = (
    "write_token_sha256",
    "wiki_password",
    "cursor_secret",
    "revision_hmac_keys",
    "proxy_secret",
    "metrics_token_sha256",
)
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
#: gunicorn threads kept free of admitted and queued tool calls (health probes, fast 429s).
ADMISSION_RESERVED_THREADS = 1
_REDACTED = "<redacted>"


class ConfigError(ValueError):
    """A configuration value is missing or invalid.

    ``variable`` names the environment variable; the message never contains the
    value of a secret.
    """

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(f"{variable}: {message}")
        self.variable = variable


@dataclass(frozen=True)
class GatewayConfig:
    """Validated gateway settings (immutable; build with :meth:`from_env`).

    Derived fields: ``allowed_hosts`` / ``allowed_origins`` are the exact
    allowlists — the public URL's own Host and Origin plus the explicit extras
    (CHECKLIST R9). Secrets (``wiki_password``, ``cursor_secret``,
    ``revision_hmac_keys``, ``write_token_sha256``) are redacted by ``repr``.
    """

    public_url: str = "http://127.0.0.1:8080/mcp"
    allowed_hosts: frozenset[str] = frozenset()
    allowed_origins: frozenset[str] = frozenset()
    write_auth_mode: str = "token"
    write_token_sha256: str = ""
    wiki_api_url: str = "http://127.0.0.1:8081/api.php"
    wiki_username: str = ""
    wiki_password: str = ""
    wiki_timeout_seconds: float = 10.0
    jobrunner_state_file: Path | None = None
    jobrunner_max_age_seconds: int = 120
    output_max_bytes: int = 32768
    max_body_bytes: int = 1048576
    cursor_secret: bytes = b""
    cursor_secret_ephemeral: bool = True
    revision_hmac_keys: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    revision_hmac_active_key_id: str = ""
    search_scopes: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    schema_dir: Path = DEFAULT_SCHEMA_DIR
    retrieval_default_mode: str = "legacy"
    bind: str = "127.0.0.1:8080"
    gunicorn_threads: int = 16
    # admission control (gateway/admission.py): per-class slots, queue places, queue wait
    admission_read_concurrency: int = 8
    admission_read_queue: int = 5
    admission_read_timeout_seconds: float = 2.0
    admission_write_concurrency: int = 1
    admission_write_queue: int = 1
    admission_write_timeout_seconds: float = 5.0
    admission_semantic_concurrency: int = 2
    # per-principal token buckets in open mode (gateway/ratelimit.py)
    rate_limit_per_second: float = 5.0
    rate_limit_burst: int = 30
    rate_limit_max_principals: int = 10000
    proxy_secret: str = ""
    metrics_token_sha256: str = ""
    search_scope_principals: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))

    # ------------------------------------------------------------------ build
    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "GatewayConfig":
        """Read and validate every ``S3RM_*`` gateway setting.

        ``environ`` defaults to ``os.environ``. Empty values count as unset.
        Raises :class:`ConfigError` naming the first invalid variable.
        """
        env = os.environ if environ is None else environ

        def get(name: str, default: str = "") -> str:
            value = env.get(name)
            return default if value is None or value.strip() == "" else value.strip()

        public_url, public_host_forms, public_origin = _parse_public_url(
            get("S3RM_MCP_PUBLIC_URL", cls.public_url)
        )
        extra_hosts = _parse_hosts(get("S3RM_MCP_ALLOWED_HOSTS"))
        extra_origins = _parse_origins(get("S3RM_MCP_ALLOWED_ORIGINS"))

        mode = get("S3RM_MCP_WRITE_AUTH_MODE", "token").lower()
        if mode not in ("token", "open"):
            raise ConfigError("S3RM_MCP_WRITE_AUTH_MODE", "must be 'token' or 'open'")
        digest = get("S3RM_MCP_WRITE_TOKEN_SHA256").lower()
        if digest and not _HEX64.match(digest):
            raise ConfigError(
                "S3RM_MCP_WRITE_TOKEN_SHA256",
                "must be the 64-character hex SHA-256 digest of the write token",
            )

        wiki_api_url = get("S3RM_WIKI_API_URL", cls.wiki_api_url)
        parts = urlsplit(wiki_api_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError("S3RM_WIKI_API_URL", "must be an http(s) URL of the wiki's api.php")

        cursor_raw = env.get("S3RM_CURSOR_SECRET") or ""
        if cursor_raw:
            if len(cursor_raw.encode("utf-8")) < 16:
                raise ConfigError("S3RM_CURSOR_SECRET", "must be at least 16 bytes long")
            cursor_secret, ephemeral = cursor_raw.encode("utf-8"), False
        else:
            cursor_secret, ephemeral = secrets.token_bytes(32), True

        hmac_keys = _parse_hmac_keys(get("S3RM_REVISION_HMAC_KEYS"))
        active = get("S3RM_REVISION_HMAC_ACTIVE_KEY_ID")
        if active and active not in hmac_keys:
            raise ConfigError(
                "S3RM_REVISION_HMAC_ACTIVE_KEY_ID", "names a key id that S3RM_REVISION_HMAC_KEYS does not define"
            )
        if hmac_keys and not active:
            raise ConfigError(
                "S3RM_REVISION_HMAC_ACTIVE_KEY_ID", "must name one of the S3RM_REVISION_HMAC_KEYS key ids"
            )

        mode_default = get("S3RM_RETRIEVAL_DEFAULT_MODE", "legacy")
        if mode_default not in ("legacy", "hybrid_v1"):
            raise ConfigError("S3RM_RETRIEVAL_DEFAULT_MODE", "must be 'legacy' or 'hybrid_v1'")

        state_file = get("S3RM_JOBRUNNER_STATE_FILE")
        bind = get("S3RM_BIND", cls.bind)
        if not re.match(r"^(?:\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$", bind) and not bind.startswith("unix:"):
            raise ConfigError("S3RM_BIND", "must be HOST:PORT (e.g. 127.0.0.1:8080) or unix:PATH")

        threads = _number(get, "S3RM_GUNICORN_THREADS", cls.gunicorn_threads, int, 1, 256)
        admission = _admission(get, threads)
        scopes = _parse_scopes(get("S3RM_SEARCH_SCOPES_JSON"))
        proxy_secret = env.get("S3RM_PROXY_SECRET") or ""
        if proxy_secret and len(proxy_secret.encode("utf-8")) < 16:
            raise ConfigError("S3RM_PROXY_SECRET", "must be at least 16 bytes long")
        metrics_digest = get("S3RM_METRICS_TOKEN_SHA256").lower()
        if metrics_digest and not _HEX64.match(metrics_digest):
            raise ConfigError(
                "S3RM_METRICS_TOKEN_SHA256", "must be the 64-character hex SHA-256 digest of the metrics token"
            )

        return cls(
            public_url=public_url,
            allowed_hosts=frozenset(public_host_forms) | extra_hosts,
            allowed_origins=frozenset({public_origin}) | extra_origins,
            write_auth_mode=mode,
            write_token_sha256=digest,
            wiki_api_url=wiki_api_url,
            wiki_username=get("S3RM_WIKI_USERNAME"),
            wiki_password=env.get("S3RM_WIKI_PASSWORD") or "",
            wiki_timeout_seconds=_number(get, "S3RM_WIKI_TIMEOUT_SECONDS", 10.0, float, 0.1, 300.0),
            jobrunner_state_file=Path(state_file) if state_file else None,
            jobrunner_max_age_seconds=_number(get, "S3RM_JOBRUNNER_MAX_AGE_SECONDS", 120, int, 1, 86400),
            output_max_bytes=_number(get, "S3RM_OUTPUT_MAX_BYTES", 32768, int, 1024, 16 * 1024 * 1024),
            max_body_bytes=_number(get, "S3RM_MAX_BODY_BYTES", 1048576, int, 1024, 64 * 1024 * 1024),
            cursor_secret=cursor_secret,
            cursor_secret_ephemeral=ephemeral,
            revision_hmac_keys=MappingProxyType(hmac_keys),
            revision_hmac_active_key_id=active,
            search_scopes=scopes,
            schema_dir=Path(get("S3RM_SCHEMA_DIR", str(DEFAULT_SCHEMA_DIR))),
            retrieval_default_mode=mode_default,
            bind=bind,
            gunicorn_threads=threads,
            **admission,
            rate_limit_per_second=_number(get, "S3RM_RATE_LIMIT_PER_SECOND", 5.0, float, 0.01, 10000.0),
            rate_limit_burst=_number(get, "S3RM_RATE_LIMIT_BURST", 30, int, 1, 100000),
            rate_limit_max_principals=_number(get, "S3RM_RATE_LIMIT_MAX_PRINCIPALS", 10000, int, 16, 1000000),
            proxy_secret=proxy_secret,
            metrics_token_sha256=metrics_digest,
            search_scope_principals=_parse_scope_principals(get("S3RM_SEARCH_SCOPE_PRINCIPALS_JSON"), scopes),
        )

    # ------------------------------------------------------------- helpers
    @property
    def writes_enabled(self) -> bool:
        """True when a write can succeed at all: open mode, or token mode with a digest set."""
        return self.write_auth_mode == "open" or bool(self.write_token_sha256)

    def __repr__(self) -> str:
        """Show every setting except secrets, which appear as ``<redacted>`` (or ``''`` when unset)."""
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _SECRET_FIELDS:
                shown = _REDACTED if value else "''"
            else:
                shown = repr(value)
            parts.append(f"{f.name}={shown}")
        return f"GatewayConfig({', '.join(parts)})"

    __str__ = __repr__


# ---------------------------------------------------------------- parsers
def _number(get, name: str, default, kind, low, high):
    return number(get, name, default, kind, low, high, error=ConfigError)


def _parse_public_url(url: str) -> tuple[str, set[str], str]:
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
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(name, "has an invalid port") from None
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    default = _DEFAULT_PORTS[parts.scheme]
    forms = {host} if port in (None, default) else set()
    forms.add(f"{host}:{port if port is not None else default}")
    origin = f"{parts.scheme}://{host}" + ("" if port in (None, default) else f":{port}")
    return url, forms, origin


def _split(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


def _parse_hosts(raw: str) -> frozenset[str]:
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


def _parse_origins(raw: str) -> frozenset[str]:
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
        try:
            port = parts.port
        except ValueError:
            raise ConfigError(name, "has an entry with an invalid port") from None
        host = parts.hostname.lower()
        if ":" in host:
            host = f"[{host}]"
        suffix = "" if port in (None, _DEFAULT_PORTS[parts.scheme]) else f":{port}"
        out.add(f"{parts.scheme}://{host}{suffix}")
    return frozenset(out)


def _parse_json(name: str, raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        # never echo the value: it may hold secrets
        raise ConfigError(name, "is not valid JSON") from None


def _parse_hmac_keys(raw: str) -> dict[str, str]:
    name = "S3RM_REVISION_HMAC_KEYS"
    if not raw:
        return {}
    data = _parse_json(name, raw)
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) and len(v.encode("utf-8")) >= 16 for k, v in data.items()
    ):
        raise ConfigError(name, "must be a JSON object mapping key ids to secrets of at least 16 bytes")
    return dict(data)


def _parse_scopes(raw: str) -> Mapping[str, Mapping[str, Any]]:
    name = "S3RM_SEARCH_SCOPES_JSON"
    if not raw:
        return MappingProxyType({})
    data = _parse_json(name, raw)
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


def _admission(get, threads: int) -> dict[str, Any]:
    """Admission limits; unset counts are derived from ``threads`` so they always fit.

    Every admitted or queued read/write call holds one gunicorn thread, so the
    sum of read and write slots and queue places must leave
    :data:`ADMISSION_RESERVED_THREADS` threads free for health probes and
    immediate 429 answers (no thread exhaustion, issue 8). Defaults for
    ``threads`` = T: usable U = max(2, T - 1); writes 1 slot + 1 queue place
    (more from T >= 24); reads two thirds of the rest as slots, the remainder
    as queue places. Explicit values that do not fit raise :class:`ConfigError`.
    """
    usable = max(2, threads - ADMISSION_RESERVED_THREADS)
    write_default = max(1, usable // 16)
    rest = max(1, usable - 2 * write_default)
    read_default = max(1, (rest * 2) // 3)
    read_queue_default = max(0, rest - read_default)
    out = {
        "admission_read_concurrency": _number(get, "S3RM_ADMISSION_READ_CONCURRENCY", read_default, int, 1, 256),
        "admission_read_queue": _number(get, "S3RM_ADMISSION_READ_QUEUE", read_queue_default, int, 0, 1024),
        "admission_read_timeout_seconds": _number(
            get, "S3RM_ADMISSION_READ_TIMEOUT_SECONDS", 2.0, float, 0.01, 120.0
        ),
        "admission_write_concurrency": _number(get, "S3RM_ADMISSION_WRITE_CONCURRENCY", write_default, int, 1, 64),
        "admission_write_queue": _number(get, "S3RM_ADMISSION_WRITE_QUEUE", write_default, int, 0, 1024),
        "admission_write_timeout_seconds": _number(
            get, "S3RM_ADMISSION_WRITE_TIMEOUT_SECONDS", 5.0, float, 0.01, 120.0
        ),
        "admission_semantic_concurrency": _number(get, "S3RM_ADMISSION_SEMANTIC_CONCURRENCY", 2, int, 1, 64),
    }
    held = (
        out["admission_read_concurrency"]
        + out["admission_read_queue"]
        + out["admission_write_concurrency"]
        + out["admission_write_queue"]
    )
    explicit = any(
        get(name)
        for name in (
            "S3RM_ADMISSION_READ_CONCURRENCY",
            "S3RM_ADMISSION_READ_QUEUE",
            "S3RM_ADMISSION_WRITE_CONCURRENCY",
            "S3RM_ADMISSION_WRITE_QUEUE",
        )
    )
    if explicit and held > threads - ADMISSION_RESERVED_THREADS:
        raise ConfigError(
            "S3RM_GUNICORN_THREADS",
            f"read+write admission slots and queue places ({held}) must leave at least "
            f"{ADMISSION_RESERVED_THREADS} of the {threads} gunicorn threads free; raise the threads or lower "
            "S3RM_ADMISSION_{READ,WRITE}_{CONCURRENCY,QUEUE}",
        )
    if out["admission_semantic_concurrency"] > out["admission_read_concurrency"]:
        out["admission_semantic_concurrency"] = out["admission_read_concurrency"]
    return out


def _parse_scope_principals(raw: str, scopes: Mapping[str, Any]) -> Mapping[str, frozenset[str]]:
    """``S3RM_SEARCH_SCOPE_PRINCIPALS_JSON``: scope name → list of 16-hex principal hashes.

    A principal hash is the first 16 hex characters of SHA-256 of the token (or
    of a subject): never a raw credential. Every scope named must exist in
    ``S3RM_SEARCH_SCOPES_JSON``; an empty list locks the scope for everyone.
    """
    name = "S3RM_SEARCH_SCOPE_PRINCIPALS_JSON"
    if not raw:
        return MappingProxyType({})
    data = _parse_json(name, raw)
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
