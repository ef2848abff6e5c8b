"""Errors of the embedding client: one base class, a short stable ``code`` per failure.

Every failure of :mod:`gateway.retrieval.embedding.client` is one of these classes, so a
caller (hybrid search, the refresher, write-time duplicate checks) catches
:class:`EmbeddingError` and reads ``code`` (``disabled``, ``saturated``, ``timeout``,
``unavailable``, ``circuit_open``, ``bad_response``, ``profile_mismatch``) and
``retryable``. Codes are what logs and metrics carry (docs/retrieval.md#privacy).
"""
from __future__ import annotations

from gateway.core.errors import GatewayError

__all__ = [
    "EmbeddingError",
    "EmbeddingDisabled",
    "EmbeddingSaturated",
    "EmbeddingTimeout",
    "EmbeddingUnavailable",
    "CircuitOpen",
    "EmbeddingResponseError",
    "ProviderProfileMismatch",
]


class EmbeddingError(GatewayError):
    """Base of provider failures; ``code`` is a short stable string, ``retryable`` a hint."""

    code = "embedding_error"
    retryable = True


class EmbeddingDisabled(EmbeddingError):
    """The provider is ``disabled`` (the shipped default)."""

    code = "disabled"
    retryable = False


class EmbeddingSaturated(EmbeddingError):
    """The shared semaphore is full and the waiting queue is at its limit (or the wait ran out).

    ``waited`` is True when the caller queued and its wait ran out (``queue_timeout``), False
    when the queue was full at once (``queue_full``).
    """

    code = "saturated"
    waited = False


class EmbeddingTimeout(EmbeddingError):
    """The deadline passed before the provider answered."""

    code = "timeout"


class EmbeddingUnavailable(EmbeddingError):
    """Connection failure, HTTP 429 or 5xx."""

    code = "unavailable"


class CircuitOpen(EmbeddingUnavailable):
    """The circuit breaker is open: calls fail at once until the reset interval passes."""

    code = "circuit_open"


class EmbeddingResponseError(EmbeddingError):
    """The provider answered with something that is not a valid embedding response (or HTTP 4xx)."""

    code = "bad_response"
    retryable = False


class ProviderProfileMismatch(EmbeddingError):
    """Wraps :class:`ProfileMismatch` so callers can catch one base class (docs/retrieval.md#generation)."""

    code = "profile_mismatch"
    retryable = False
