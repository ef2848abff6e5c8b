"""Settings of ``s3rm research-query``: the optional rerank and chat endpoints.

Contract: docs/research-tools.md#research-settings.

Both endpoints are off unless their URL is set. A URL whose host is not
loopback, a private/link-local address or a dotless name needs the explicit
opt-in ``…_ALLOW_EXTERNAL=1`` and https — the same rule as the gateway's
embedding provider (:func:`gateway.config.is_private_endpoint`).

=====================================  ========================================  =========
variable                               meaning                                   default
=====================================  ========================================  =========
S3RM_RESEARCH_LLM_URL                  OpenAI-compatible ``/v1/chat/completions``  unset (off)
S3RM_RESEARCH_LLM_MODEL                ``model`` sent to it (required with URL)  —
S3RM_RESEARCH_LLM_API_KEY              Bearer key (secret, never printed)        none
S3RM_RESEARCH_LLM_ALLOW_EXTERNAL       ``1``: the URL may leave private networks  ``0``
S3RM_RESEARCH_LLM_MAX_TOKENS           ``max_tokens`` of the answer               512
S3RM_RESEARCH_RERANK_URL               rerank endpoint (``/v1/rerank`` or TEI ``/rerank``)  unset (off)
S3RM_RESEARCH_RERANK_MODEL             ``model`` sent to it                      empty
S3RM_RESEARCH_RERANK_API_KEY           Bearer key (secret, never printed)        none
S3RM_RESEARCH_RERANK_ALLOW_EXTERNAL    ``1``: the URL may leave private networks  ``0``
S3RM_RESEARCH_TIMEOUT_SECONDS          per HTTP call to either endpoint          30
S3RM_RESEARCH_DOCUMENT_CHARS           characters of one result sent to either   1200
=====================================  ========================================  =========

Errors: :class:`gateway.config.ConfigError` naming the variable, never a value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

from gateway.config import ConfigError, is_private_endpoint
from gateway.config.values import make_getter, number, redacted_repr

__all__ = ["Endpoint", "ResearchSettings", "load_research_settings"]


@dataclass(frozen=True)
class Endpoint:
    """One opt-in endpoint: full ``url``, ``model``, Bearer ``api_key`` (redacted in repr)."""

    url: str
    model: str
    api_key: str = ""

    def __repr__(self) -> str:
        return redacted_repr(self, ("api_key",))

    __str__ = __repr__


@dataclass(frozen=True)
class ResearchSettings:
    """Validated settings; ``llm`` / ``rerank`` are None when not configured.

    Units: seconds (``timeout_seconds``), tokens (``max_tokens``), characters (``document_chars``).
    """

    llm: Endpoint | None = None
    rerank: Endpoint | None = None
    timeout_seconds: float = 30.0
    max_tokens: int = 512
    document_chars: int = 1200


def _endpoint(get, environ: Mapping[str, str], prefix: str, *, model_required: bool) -> Endpoint | None:
    url = get(f"{prefix}_URL")
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise ConfigError(f"{prefix}_URL", "must be an http(s) URL without credentials")
    allow = get(f"{prefix}_ALLOW_EXTERNAL", "0").lower()
    if allow not in ("0", "1", "true", "false", "yes", "no"):
        raise ConfigError(f"{prefix}_ALLOW_EXTERNAL", "must be 0 or 1")
    if not is_private_endpoint(url):
        if allow not in ("1", "true", "yes"):
            raise ConfigError(f"{prefix}_URL", "points outside loopback/private networks; an external endpoint "
                                               f"needs the explicit opt-in {prefix}_ALLOW_EXTERNAL=1")
        if parts.scheme != "https":
            raise ConfigError(f"{prefix}_URL", "an external endpoint must use https")
    model = get(f"{prefix}_MODEL")
    if model_required and not model:
        raise ConfigError(f"{prefix}_MODEL", f"must be set when {prefix}_URL is set")
    return Endpoint(url=url, model=model, api_key=environ.get(f"{prefix}_API_KEY") or "")


def load_research_settings(environ: Mapping[str, str]) -> ResearchSettings:
    """Read the ``S3RM_RESEARCH_*`` variables (module docstring); raises ConfigError."""
    get = make_getter(environ)
    return ResearchSettings(
        llm=_endpoint(get, environ, "S3RM_RESEARCH_LLM", model_required=True),
        rerank=_endpoint(get, environ, "S3RM_RESEARCH_RERANK", model_required=False),
        timeout_seconds=number(get, "S3RM_RESEARCH_TIMEOUT_SECONDS", 30.0, float, 0.1, 600.0),
        max_tokens=number(get, "S3RM_RESEARCH_LLM_MAX_TOKENS", 512, int, 16, 8192),
        document_chars=number(get, "S3RM_RESEARCH_DOCUMENT_CHARS", 1200, int, 100, 20000),
    )
