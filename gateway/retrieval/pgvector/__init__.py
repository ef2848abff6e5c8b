"""The PostgreSQL + pgvector index backend (``S3RM_INDEX_BACKEND=pgvector``).

Contract: docs/hybrid-search.md#pgvector-backend, docs/operations.md#pgvector-backend.

* :mod:`.store` — the shared store: generation registry and alias, indexer
  lease with fencing tokens, per-generation rows, dirty queue, cursor keys;
* :mod:`.snapshot` — :class:`PgSnapshot`, one gateway's immutable view
  (local records + BM25, vectors searched in PostgreSQL);
* :mod:`.refresher` — :class:`SharedRefresher`, leader/follower refresh;
* :mod:`.lifecycle` — change watermarks, propagation into companion
  generations, retirement after the rollback window, step events, shadow figures.

:func:`refresher_factory` is what ``create_app`` hands to
:class:`gateway.retrieval.hybrid.service.RetrievalService` when the backend is pgvector.
"""
from __future__ import annotations

from typing import Any, Callable

from gateway.config.retrieval import RetrievalSettings

__all__ = ["refresher_factory"]


def refresher_factory(settings: RetrievalSettings, store: Any = None) -> Callable[..., Any]:
    """A factory with :class:`~gateway.retrieval.indexing.refresher.IndexRefresher`'s signature that builds a
    :class:`~gateway.retrieval.pgvector.refresher.SharedRefresher` over ``store`` (default: a new
    :class:`~gateway.retrieval.pgvector.store.PgStore` on ``settings.pg_dsn``)."""
    from gateway.retrieval.pgvector.refresher import SharedRefresher
    from gateway.retrieval.pgvector.snapshot import SearchOptions
    from gateway.retrieval.pgvector.store import PgStore

    shared = store if store is not None else PgStore(settings.pg_dsn)
    options = SearchOptions(approximate=settings.pg_search == "hnsw", ef_search=settings.pg_ef_search)

    def build(*args: Any, **kwargs: Any) -> SharedRefresher:
        return SharedRefresher(*args, store=shared, options=options, lease_seconds=settings.pg_lease_seconds,
                               poll_seconds=settings.pg_poll_seconds,
                               rollback_window_seconds=settings.rollback_window_seconds, **kwargs)

    build.store = shared  # type: ignore[attr-defined]
    return build
