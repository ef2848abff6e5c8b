"""The gateway's ONE configuration object and its loader.

:func:`load_config` reads every ``S3RM_*`` setting of the gateway, its gunicorn
process and the retrieval layer from a mapping of environment variables,
validates each value and returns an immutable :class:`GatewayConfig`
(retrieval settings under ``GatewayConfig.retrieval``). It is the only reader
of the environment: ``create_app(config)`` and every layer below receive the
value; the serving entry points (``gateway/serving/``) and the ``s3rm``
commands call ``load_config(os.environ)``. Errors are
:class:`~gateway.config.values.ConfigError` naming the offending variable and
never echoing a secret.

Contract: docs/transport.md#host-and-origin (public URL, exact Host/Origin
allowlists without wildcards), docs/transport.md#write-auth (token/open write
modes), docs/transport.md#github-mode (github mode, :mod:`gateway.config.github`), docs/retrieval.md#one-process, docs/operations.md#health.
"""
from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping
from urllib.parse import urlsplit

from gateway.config.github import GithubSettings, load_github
from gateway.config.retrieval import RetrievalSettings, load_retrieval
from gateway.config.schema import Schema, SchemaError, load_schema
from gateway.config.values import (
    ConfigError,
    Getter,
    hex_digest,
    make_getter,
    number,
    parse_hmac_keys,
    parse_hosts,
    parse_origins,
    parse_public_url,
    parse_scope_principals,
    parse_scopes,
    redacted_repr,
)

__all__ = ["ADMISSION_RESERVED_THREADS", "DEFAULT_SCHEMA_DIR", "GatewayConfig", "REPO_ROOT", "load_config",
           "read_schema_setting", "schema_dir_setting"]

#: Repository root (the directory holding ``gateway/`` and ``schema/``).
REPO_ROOT = Path(__file__).resolve().parents[2]
#: Default ``S3RM_SCHEMA_DIR``: the committed, generated schema tree.
DEFAULT_SCHEMA_DIR = REPO_ROOT / "schema"


def schema_dir_setting(environ: Mapping[str, str]) -> Path:
    """The schema folder an environment selects: ``S3RM_SCHEMA_DIR``, or :data:`DEFAULT_SCHEMA_DIR` when unset/empty.

    The one place that reads this variable (docs/data-contract.md#schema-source); the
    folder holds ``lesson.toml`` and the generated ``tools/`` schemas.
    """
    return Path(environ.get("S3RM_SCHEMA_DIR") or DEFAULT_SCHEMA_DIR)


def read_schema_setting(folder: Path, variable: str = "S3RM_SCHEMA_DIR") -> Schema:
    """The schema source ``folder/lesson.toml``, loaded once per path (docs/data-contract.md#schema-source).

    Raises :class:`~gateway.config.values.ConfigError` naming ``variable`` when the
    file is missing, unreadable or malformed.
    """
    path = Path(folder) / "lesson.toml"
    try:
        return load_schema(path)
    except OSError as exc:
        raise ConfigError(variable, f"cannot read the schema source {path}: {exc.strerror}") from None
    except (SchemaError, ValueError, KeyError) as exc:
        raise ConfigError(variable, f"the schema source {path} is malformed: {exc}") from None


_SECRET_FIELDS = (
    "write_token_sha256",
    "wiki_password",
    "cursor_secret",
    "cursor_keys",
    "revision_hmac_keys",
    "proxy_secret",
    "metrics_token_sha256",
)
#: gunicorn threads kept free of admitted and queued tool calls (health probes, fast 429s).
ADMISSION_RESERVED_THREADS = 1
_BIND = re.compile(r"^(?:\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$")


@dataclass(frozen=True)
class GatewayConfig:
    """Validated gateway settings (immutable; build with :func:`load_config`).

    Derived fields: ``allowed_hosts`` / ``allowed_origins`` are the exact
    allowlists — the public URL's own Host and Origin plus the explicit extras
    (docs/transport.md#host-and-origin). Secrets (``wiki_password``, ``cursor_secret``,
    ``revision_hmac_keys``, ``write_token_sha256``) are redacted by ``repr``;
    ``retrieval`` holds the :class:`~gateway.config.retrieval.RetrievalSettings`
    (its API key redacted by its own ``repr``).
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
    #: seconds a client has to send one whole request (head and body) before 408 (docs/operations.md#request-reading)
    request_read_seconds: float = 10.0
    #: the worker answers an overload 429 from its event loop, before a request thread (docs/operations.md#early-refusal)
    early_refusal: bool = True
    cursor_secret: bytes = b""
    cursor_secret_ephemeral: bool = True
    #: cursor v2 signing keys ``((kid, secret), …)`` shared by every gateway on one store
    #: (filled by create_app from the pgvector store, docs/operations.md#pgvector-backend); empty = v1
    cursor_keys: tuple = ()
    revision_hmac_keys: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    revision_hmac_active_key_id: str = ""
    search_scopes: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    schema_dir: Path = DEFAULT_SCHEMA_DIR
    #: the schema source ``schema_dir/lesson.toml`` (:class:`~gateway.config.schema.Schema`), loaded once here
    #: and handed to every layer below (docs/data-contract.md#schema-source); left out, it is read from ``schema_dir``
    schema: Schema = field(default=None, compare=False, repr=False)  # type: ignore[assignment]
    retrieval_default_mode: str = "legacy"
    bind: str = "127.0.0.1:8080"
    gunicorn_threads: int = 64
    # admission control (gateway/ops/admission.py): per-class slots, queue places, queue wait
    admission_read_concurrency: int = 8
    admission_read_queue: int = 5
    admission_read_timeout_seconds: float = 10.0
    admission_write_concurrency: int = 3
    admission_write_queue: int = 15
    admission_write_timeout_seconds: float = 30.0
    admission_semantic_concurrency: int = 2
    # per-principal token buckets in open mode (gateway/ops/ratelimit.py)
    rate_limit_per_second: float = 5.0
    rate_limit_burst: int = 30
    rate_limit_max_principals: int = 10000
    proxy_secret: str = ""
    metrics_token_sha256: str = ""
    search_scope_principals: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    #: ``S3RM_CHATGPT_LESSON_URL``: the public URL of a Lesson page with ``{id}``; set, it turns on
    #: ChatGPT's ``search`` and ``fetch`` tools (gateway/tools/chatgpt.py); empty (default) serves the Lesson tools
    chatgpt_lesson_url: str = ""
    #: github mode's OAuth settings (:class:`~gateway.config.github.GithubSettings`), ``None`` otherwise
    github: GithubSettings | None = None

    def __post_init__(self) -> None:
        if self.schema is None:
            object.__setattr__(self, "schema", read_schema_setting(self.schema_dir))

    # ------------------------------------------------------------------ build
    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "GatewayConfig":
        """:func:`load_config` over ``environ``, or over ``os.environ`` when ``None``."""
        return load_config(os.environ if environ is None else environ)

    # ------------------------------------------------------------- helpers
    def __repr__(self) -> str:
        """Show every setting except secrets, which appear as ``<redacted>`` (or ``''`` when unset)."""
        return redacted_repr(self, _SECRET_FIELDS)

    __str__ = __repr__


def load_config(environ: Mapping[str, str]) -> GatewayConfig:
    """Read and validate every ``S3RM_*`` setting of the gateway and the retrieval layer.

    ``environ`` maps variable names to raw values (``os.environ`` in the
    serving entry points; a plain dict in tests). Empty values count as unset;
    an unset variable takes the default documented in README's configuration
    reference. Raises :class:`~gateway.config.values.ConfigError` naming the
    first invalid variable.
    """
    env = environ
    get = make_getter(env)
    schema_dir = schema_dir_setting(env)

    public_url, public_host_forms, public_origin = parse_public_url(
        get("S3RM_MCP_PUBLIC_URL", GatewayConfig.public_url)
    )
    extra_hosts = parse_hosts(get("S3RM_MCP_ALLOWED_HOSTS"))
    extra_origins = parse_origins(get("S3RM_MCP_ALLOWED_ORIGINS"))

    mode = get("S3RM_MCP_WRITE_AUTH_MODE", "token").lower()
    if mode not in ("token", "open", "github"):
        raise ConfigError("S3RM_MCP_WRITE_AUTH_MODE", "must be 'token', 'open' or 'github'")
    retrieval = load_retrieval(env)
    github = (load_github(get, public_url, public_origin, REPO_ROOT / ".dev" / "oauth-state.sqlite3",
                          index_backend=retrieval.index_backend, pg_dsn=retrieval.pg_dsn)
              if mode == "github" else None)
    digest = hex_digest(get, "S3RM_MCP_WRITE_TOKEN_SHA256", "the write token")

    wiki_api_url = get("S3RM_WIKI_API_URL", GatewayConfig.wiki_api_url)
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

    hmac_keys = parse_hmac_keys(get("S3RM_REVISION_HMAC_KEYS"))
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
    bind = get("S3RM_BIND", GatewayConfig.bind)
    if not _BIND.match(bind) and not bind.startswith("unix:"):
        raise ConfigError("S3RM_BIND", "must be HOST:PORT (e.g. 127.0.0.1:8080) or unix:PATH")

    threads = number(get, "S3RM_GUNICORN_THREADS", GatewayConfig.gunicorn_threads, int, 1, 256)
    admission = _admission(get, threads)
    scopes = parse_scopes(get("S3RM_SEARCH_SCOPES_JSON"))
    proxy_secret = env.get("S3RM_PROXY_SECRET") or ""
    if proxy_secret and len(proxy_secret.encode("utf-8")) < 16:
        raise ConfigError("S3RM_PROXY_SECRET", "must be at least 16 bytes long")
    metrics_digest = hex_digest(get, "S3RM_METRICS_TOKEN_SHA256", "the metrics token")

    chatgpt_lesson_url = get("S3RM_CHATGPT_LESSON_URL")
    if chatgpt_lesson_url:
        parts = urlsplit(chatgpt_lesson_url.replace("{id}", "x"))
        if parts.scheme not in ("http", "https") or not parts.hostname or "{id}" not in chatgpt_lesson_url:
            raise ConfigError("S3RM_CHATGPT_LESSON_URL", "must be an http(s) URL of a Lesson page containing {id} "
                              "(e.g. https://wiki.example.org/index.php?title=Lesson:{id})")

    return GatewayConfig(
        public_url=public_url,
        allowed_hosts=frozenset(public_host_forms) | extra_hosts,
        allowed_origins=frozenset({public_origin}) | extra_origins,
        write_auth_mode=mode,
        write_token_sha256=digest,
        wiki_api_url=wiki_api_url,
        wiki_username=get("S3RM_WIKI_USERNAME"),
        wiki_password=env.get("S3RM_WIKI_PASSWORD") or "",
        wiki_timeout_seconds=number(get, "S3RM_WIKI_TIMEOUT_SECONDS", 10.0, float, 0.1, 300.0),
        jobrunner_state_file=Path(state_file) if state_file else None,
        jobrunner_max_age_seconds=number(get, "S3RM_JOBRUNNER_MAX_AGE_SECONDS", 120, int, 1, 86400),
        output_max_bytes=number(get, "S3RM_OUTPUT_MAX_BYTES", 32768, int, 1024, 16 * 1024 * 1024),
        max_body_bytes=number(get, "S3RM_MAX_BODY_BYTES", 1048576, int, 1024, 64 * 1024 * 1024),
        request_read_seconds=number(get, "S3RM_REQUEST_READ_SECONDS", 10.0, float, 1.0, 600.0),
        early_refusal=_on_off(get, "S3RM_EARLY_REFUSAL"),
        cursor_secret=cursor_secret,
        cursor_secret_ephemeral=ephemeral,
        revision_hmac_keys=MappingProxyType(hmac_keys),
        revision_hmac_active_key_id=active,
        search_scopes=scopes,
        schema_dir=schema_dir,
        schema=read_schema_setting(schema_dir),
        retrieval_default_mode=mode_default,
        bind=bind,
        gunicorn_threads=threads,
        **admission,
        rate_limit_per_second=number(get, "S3RM_RATE_LIMIT_PER_SECOND", 5.0, float, 0.01, 10000.0),
        rate_limit_burst=number(get, "S3RM_RATE_LIMIT_BURST", 30, int, 1, 100000),
        rate_limit_max_principals=number(get, "S3RM_RATE_LIMIT_MAX_PRINCIPALS", 10000, int, 16, 1000000),
        proxy_secret=proxy_secret,
        metrics_token_sha256=metrics_digest,
        search_scope_principals=parse_scope_principals(get("S3RM_SEARCH_SCOPE_PRINCIPALS_JSON"), scopes),
        retrieval=retrieval,
        github=github,
        chatgpt_lesson_url=chatgpt_lesson_url,
    )


def _on_off(get: Getter, name: str) -> bool:
    """``on`` (the default, also when empty) or ``off``; anything else is a :class:`ConfigError`."""
    value = get(name).strip().lower() or "on"
    if value not in ("on", "off"):
        raise ConfigError(name, "must be on or off")
    return value == "on"


def _admission(get: Getter, threads: int) -> dict[str, Any]:
    """Admission limits; unset counts are derived from ``threads`` so they always fit.

    Every admitted or queued read/write call holds one gunicorn thread, so the
    sum of read and write slots and queue places must leave
    :data:`ADMISSION_RESERVED_THREADS` threads free for health probes and
    immediate 429 answers (no thread exhaustion). Queue places are the memory
    bound only: a caller queues while its expected wait fits its deadline
    (:class:`gateway.ops.admission.AdmissionClass`). Defaults for ``threads`` =
    T (docs/operations.md#admission): usable U = max(2, T - 1); writes
    min(3, U // 12) slots (at least 1) and min(32, U // 3) queue places (at
    least 1) — a burst of writes waits in that queue (up to 30 s) before any
    429, while writes to different Lessons run side by side (per-Lesson
    serialisation is ``gateway/wiki/edit.py``'s page lock); reads two thirds of
    the rest as slots (at most 8) and every remaining place as queue places.
    At the default T = 64: writes 3 + 21, reads 8 + 31. Explicit values that do
    not fit raise :class:`ConfigError`.
    """
    usable = max(2, threads - ADMISSION_RESERVED_THREADS)
    write_default = max(1, min(3, usable // 12))
    write_queue_default = max(1, min(32, usable // 3))
    rest = max(1, usable - write_default - write_queue_default)
    read_default = max(1, min(8, (rest * 2) // 3))
    read_queue_default = max(0, rest - read_default)
    out = {
        "admission_read_concurrency": number(get, "S3RM_ADMISSION_READ_CONCURRENCY", read_default, int, 1, 256),
        "admission_read_queue": number(get, "S3RM_ADMISSION_READ_QUEUE", read_queue_default, int, 0, 1024),
        "admission_read_timeout_seconds": number(
            get, "S3RM_ADMISSION_READ_TIMEOUT_SECONDS", 10.0, float, 0.01, 120.0
        ),
        "admission_write_concurrency": number(get, "S3RM_ADMISSION_WRITE_CONCURRENCY", write_default, int, 1, 64),
        "admission_write_queue": number(get, "S3RM_ADMISSION_WRITE_QUEUE", write_queue_default, int, 0, 1024),
        "admission_write_timeout_seconds": number(
            get, "S3RM_ADMISSION_WRITE_TIMEOUT_SECONDS", 30.0, float, 0.01, 120.0
        ),
        "admission_semantic_concurrency": number(get, "S3RM_ADMISSION_SEMANTIC_CONCURRENCY", 2, int, 1, 64),
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
