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
    #: True when the failure can belong to the texts sent (it counts a quarantine strike against a Lesson
    #: that fails alone, docs/hybrid-search.md#quarantine); False when it says the provider is busy.
    blames_text = True


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
    """The deadline passed before the provider answered. A load signal, not the text's fault: the
    servers truncate every input to the model's context, so no Lesson is slow by itself."""

    code = "timeout"
    blames_text = False


class EmbeddingUnavailable(EmbeddingError):
    """Connection failure (``status`` None), HTTP 429 or 5xx (``status``). A connection failure, 429, 502,
    503 or 504 says the provider is busy or away (``blames_text`` False); any other 5xx may be the text's."""

    code = "unavailable"

    def __init__(self, message: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.blames_text = status not in BUSY_STATUSES


#: HTTP statuses (and None: no answer) that say the embedding provider is busy or away, not that a text failed.
BUSY_STATUSES = frozenset({None, 429, 502, 503, 504})


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
