"""The gateway's ONE configuration: ``load_config(environ) -> GatewayConfig``.

Layer: directly above ``gateway/core``; imports nothing else from the gateway.

=====================  ==========================================================
module                 holds
=====================  ==========================================================
``loader``             :class:`GatewayConfig` (transport, wiki, admission, rate
                       limits, schema dir and the loaded schema source,
                       gunicorn) and :func:`load_config`
``schema``             the typed view of ``schema/lesson.toml``
                       (:class:`~gateway.config.schema.Schema`) and its loader
``retrieval``          :class:`RetrievalSettings` (``GatewayConfig.retrieval``):
                       the embedding provider, its gate limits, refresh intervals
``profiles``           the named embedding profiles ``S3RM_EMBEDDING_PROFILE``
                       selects from, and the index generation id
``values``             :class:`ConfigError` and the value parsers (numbers, URLs,
                       host/origin allowlists, JSON objects, digests)
=====================  ==========================================================

Every variable, its default and its meaning are listed in README's
configuration reference.
"""
from gateway.config.loader import (
    ADMISSION_RESERVED_THREADS,
    DEFAULT_SCHEMA_DIR,
    REPO_ROOT,
    GatewayConfig,
    load_config,
)
from gateway.config.retrieval import PROVIDERS, RetrievalSettings, is_private_endpoint
from gateway.config.values import ConfigError

__all__ = [
    "ADMISSION_RESERVED_THREADS",
    "ConfigError",
    "DEFAULT_SCHEMA_DIR",
    "GatewayConfig",
    "PROVIDERS",
    "REPO_ROOT",
    "RetrievalSettings",
    "is_private_endpoint",
    "load_config",
]
