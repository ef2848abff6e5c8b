"""``GET /mcp/graph``: the knowledge-graph data the wiki's home page draws.

This is a plain read-only JSON route, not an MCP tool (the Lesson tools stay
ten). It lives under ``/mcp/…`` because production routes only that prefix to
the gateway and everything else to MediaWiki (docs/browser.md#gateway-json).

Response (``application/json``)::

    {"nodes": [{"id", "title", "confidence", "updated_at"}, ...],
     "edges": [{"from", "to", "relation"}, ...],
     "similar": [{"from", "to", "score"}, ...],  # estimated, NOT stored relations
     "similar_basis": "lexical-tfidf-v1",
     "generated_at": "2026-01-01T00:00:00Z",   # when the data was read from the wiki
     "truncated": false,                        # true when a node or edge cap cut the data
     "stale": false,                            # true when the wiki failed and older data is served
     "source": "scan" | "ask",
     "max_nodes": 2000, "max_edges": 10000}

``id`` is the bare Lesson id (no ``Lesson:``), ``relation`` one of the seven
relation names, and every edge joins two listed nodes (relations pointing at
a Lesson that is missing or beyond the cap are left out). ``similar`` holds
each Lesson's nearest neighbours by shared words (``score`` a 0–1 cosine,
``from`` < ``to``; :mod:`gateway.web.similarity`): an estimate the page draws
apart from the stored relations (docs/read-path.md#graph-similarity). Nodes are sorted
newest ``updated_at`` first, so the first six are the home page's recent list.

Why it is built this way
------------------------
The home page is opened often and must be cheap on every visit, so no
request ever reads every page just for itself:

How the data is read is :mod:`gateway.web.graphdata`: the app always uses the
bounded snapshot scan (values through the page codec), also on a wiki with
SMW; the ``ask`` source exists for a caller that passes ``ask``.

Either result is cached in the process. Freshness (docs/browser.md#freshness, "a Lesson
saved in the browser or over MCP appears at once"):

* Browser saves do not pass through the gateway, so on the snapshot path a
  request asks MediaWiki at most once per ``probe_seconds`` (default 1 s) for
  the ten most recently edited Lessons (``list_recent``, one API request) and
  patches the cached graph in place when any of them changed. The probe runs
  in the request, so the page that follows a save already shows it.
* After an MCP write the app calls :meth:`GraphCache.invalidate` (exposed as
  ``blueprint.graph_cache``): the next request probes at once instead of
  waiting for the interval (with an ``ask`` source it re-runs the two queries).
* The whole graph is re-read when it is older than ``ttl_seconds`` (default
  10 s), which also drops deleted Lessons. That re-read runs in a background
  thread while requests keep getting the previous data, so no visitor waits
  for a full scan after the first one. A probe that sees more changes than
  it can patch (all ten probed Lessons changed) triggers a synchronous
  rebuild instead.
* Responses carry an ETag and ``Cache-Control: no-cache``, so a browser
  revalidates every time and gets a cheap 304 when nothing changed.

Only one request refreshes at a time; concurrent requests are answered from
the current data. If the wiki fails and older data exists, that data is
served with ``"stale": true``; with no data at all the route answers 503.

CORS: a request whose ``Origin`` is not in the gateway's exact allowlist
(``GatewayConfig.allowed_origins``: the public URL's origin plus
``S3RM_MCP_ALLOWED_ORIGINS``) is refused with 403; an allowlisted origin gets
``Access-Control-Allow-Origin`` echoed back (with ``Vary: Origin``). Requests
without ``Origin`` (same-origin GETs, curl) are served normally. No
credentials are accepted or needed: the data is public, like the wiki.
"""
from __future__ import annotations

import hashlib
import threading
import time
from typing import Any, Callable, Mapping

from flask import Blueprint, Response, request

from gateway.core.jsonio import encode_json, json_response
from gateway.domain.repository import LessonRepository, RepositoryError
from gateway.web.graphdata import (
    DEFAULT_MAX_EDGES,
    DEFAULT_MAX_NODES,
    AskGraphSource,
    GraphData,
    SnapshotGraphSource,
)

__all__ = [
    "DEFAULT_PROBE_SECONDS",
    "DEFAULT_TTL_SECONDS",
    "GraphCache",
    "create_graph_blueprint",
]

#: Longest time cached graph data is reused before a full rebuild.
DEFAULT_TTL_SECONDS = 10.0
#: Shortest time between two "what changed recently?" probes (snapshot path).
DEFAULT_PROBE_SECONDS = 1.0

ROUTE = "/mcp/graph"


class GraphCache:
    """Process-local cache of the graph response (thread-safe).

    Args:
        source: a :class:`SnapshotGraphSource` or :class:`AskGraphSource`.
        ttl_seconds: age after which the whole graph is re-read (default 10 s).
        probe_seconds: shortest time between two change probes (snapshot source only).
        max_edges: edge cap applied when rendering.
        clock: monotonic clock (tests pass a fake).
        background: re-read an expired graph in a background thread while
            requests keep getting the previous data (default). With False the
            request that finds the graph expired rebuilds it itself.

    Refresh policy: the first build is synchronous. After that a request
    (1) probes for recent edits when ``probe_seconds`` passed or
    :meth:`invalidate` was called, and patches the graph synchronously (one
    small API request), rebuilding synchronously only when the probe sees more
    changes than it can patch; (2) starts a background rebuild when the graph
    is older than ``ttl_seconds``, which also catches deletions. Only one
    request refreshes at a time; concurrent requests get the current data.
    """

    def __init__(self, source, *, ttl_seconds: float = DEFAULT_TTL_SECONDS,
                 probe_seconds: float = DEFAULT_PROBE_SECONDS, max_edges: int = DEFAULT_MAX_EDGES,
                 clock: Callable[[], float] = time.monotonic, background: bool = True):
        self.source = source
        self.ttl_seconds = ttl_seconds
        self.probe_seconds = probe_seconds
        self.max_edges = max_edges
        self.background = background
        self._clock = clock
        self._lock = threading.Lock()
        self._data: GraphData | None = None
        self._body: bytes = b""
        self._etag: str = ""
        self._built_at = 0.0
        self._probed_at = 0.0
        self._probe_due = False
        self._worker: threading.Thread | None = None
        self.builds = 0
        self.probes = 0

    def invalidate(self) -> None:
        """Make the next request look for changes first (call after every successful MCP write)."""
        self._probe_due = True

    def prewarm(self) -> None:
        """Start the first build in a background thread (optional; call once at app start).

        Without it the first request builds synchronously. Failures are
        ignored here; the next request simply tries again.
        """
        def run() -> None:
            with self._lock:
                if self._data is None:
                    try:
                        self._build_now(self._clock())
                    except Exception:  # the first request will retry and report
                        pass

        if self._data is None and (self._worker is None or not self._worker.is_alive()):
            self._worker = threading.Thread(target=run, name="s3rm-graph-prewarm", daemon=True)
            self._worker.start()

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Wait for a running background rebuild (tests and shutdown)."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)

    def _render(self, stale: bool) -> None:
        payload = self._data.to_json(self.max_edges)
        payload["stale"] = stale
        payload["max_nodes"] = getattr(self.source, "max_nodes", DEFAULT_MAX_NODES)
        payload["max_edges"] = self.max_edges
        self._body = encode_json(payload)
        self._etag = hashlib.sha256(self._body).hexdigest()[:32]

    def _install(self, built: GraphData, now: float) -> None:
        """Swap in a full build (lock held)."""
        self.builds += 1
        self._data, self._built_at, self._probed_at = built, now, now
        self._render(stale=False)

    def _build_now(self, now: float) -> None:
        """Synchronous full build (lock held); on failure keep serving older data marked stale."""
        try:
            built = self.source.build()
        except RepositoryError:
            if self._data is None:
                raise
            self._built_at = now  # do not hammer a failing wiki: try again after the TTL
            self._render(stale=True)
            return
        self._install(built, now)

    def _background_build(self) -> None:
        try:
            built = self.source.build()
        except RepositoryError:
            with self._lock:
                self._built_at = self._clock()
                self._render(stale=True)
            return
        except Exception:  # pragma: no cover - never let a worker thread die loudly
            return
        with self._lock:
            self._install(built, self._clock())
            # edits that landed while the scan ran are picked up by the next probe
            self._probe_due = True

    def _refresh(self, now: float) -> None:
        """Probe, patch or rebuild as due; called with the lock held."""
        if self._data is None:
            self._build_now(now)
            return
        probing = getattr(self.source, "supports_probe", False)
        if self._probe_due or (probing and now - self._probed_at >= self.probe_seconds):
            self._probe_due = False
            self._probed_at = now
            if probing:
                self.probes += 1
                try:
                    outcome = self.source.probe(self._data)
                except RepositoryError:
                    self._render(stale=True)  # the wiki is failing: say so, keep the data
                    return
                if outcome is None:
                    self._build_now(now)
                    return
                if outcome:
                    self._render(stale=False)
            else:
                self._build_now(now)  # an ask build is two cheap queries
                return
        if now - self._built_at >= self.ttl_seconds:
            if not self.background:
                self._build_now(now)
            elif self._worker is None or not self._worker.is_alive():
                self._built_at = now  # one rebuild per TTL, even if it is slow
                self._worker = threading.Thread(target=self._background_build, name="s3rm-graph-rebuild",
                                                daemon=True)
                self._worker.start()

    def get(self) -> tuple[bytes, str]:
        """Return ``(json_body, etag)`` (etag unquoted), refreshing first when due.

        Raises :class:`RepositoryError` only when the wiki fails and no
        earlier data exists.
        """
        now = self._clock()
        if self._lock.acquire(blocking=self._data is None):
            try:
                self._refresh(now)
            except RepositoryError:
                if self._data is None:
                    raise
            finally:
                self._lock.release()
        return self._body, self._etag


def create_graph_blueprint(get_repository: Callable[[], LessonRepository], config: Any, *,
                           ask: Callable[[str], Mapping[str, Any]] | None = None,
                           ttl_seconds: float = DEFAULT_TTL_SECONDS,
                           probe_seconds: float = DEFAULT_PROBE_SECONDS,
                           max_nodes: int = DEFAULT_MAX_NODES,
                           max_edges: int = DEFAULT_MAX_EDGES,
                           clock: Callable[[], float] = time.monotonic,
                           background: bool = True) -> Blueprint:
    """Build the Blueprint serving ``GET /mcp/graph`` (see the module docstring for the contract).

    Args:
        get_repository: zero-argument callable returning the app's LessonRepository.
        config: the :class:`gateway.config.GatewayConfig` (only ``allowed_origins`` is read).
        ask: SMW ask callable; when given, the graph is read with ``ask`` queries
            instead of a snapshot scan.
        ttl_seconds, probe_seconds, max_nodes, max_edges: cache and size bounds
            (``max_nodes`` is clamped to 1..2000).
        clock: monotonic clock, for tests.
        background: rebuild an expired graph in a background thread (see :class:`GraphCache`).

    The returned blueprint has a ``graph_cache`` attribute (:class:`GraphCache`);
    call ``blueprint.graph_cache.invalidate()`` after every successful MCP write,
    and optionally ``blueprint.graph_cache.prewarm()`` once at start-up so the
    first visitor does not wait for the first scan. Register it on the app
    without a URL prefix.
    """
    max_nodes = max(1, min(int(max_nodes), DEFAULT_MAX_NODES))
    if ask is not None:
        source = AskGraphSource(ask, max_nodes=max_nodes, max_edges=max_edges)
    else:
        source = SnapshotGraphSource(get_repository, max_nodes=max_nodes)
    cache = GraphCache(source, ttl_seconds=ttl_seconds, probe_seconds=probe_seconds, max_edges=max_edges,
                       clock=clock, background=background)
    allowed = frozenset(getattr(config, "allowed_origins", ()) or ())

    bp = Blueprint("s3rm_graph", __name__)
    bp.graph_cache = cache  # type: ignore[attr-defined]

    def cors(response: Response, origin: str | None) -> Response:
        response.headers.add("Vary", "Origin")
        if origin and origin in allowed:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Expose-Headers"] = "ETag"
        return response

    def origin_refused(origin: str | None) -> Response | None:
        if origin is not None and origin not in allowed:
            return json_response(
                {"error": {"code": "origin_not_allowed",
                           "message": "This Origin is not in the gateway's allowlist (S3RM_MCP_ALLOWED_ORIGINS)."}},
                403,
            )
        return None

    @bp.route(ROUTE, methods=["GET", "HEAD", "OPTIONS"], provide_automatic_options=False)
    def graph() -> Response:
        """Serve the cached graph JSON (ETag/304 aware)."""
        origin = request.headers.get("Origin")
        refused = origin_refused(origin)
        if refused is not None:
            return refused
        if request.method == "OPTIONS":
            response = Response(status=204)
            response.headers["Access-Control-Allow-Methods"] = "GET, HEAD, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = "Accept, If-None-Match"
            response.headers["Access-Control-Max-Age"] = "600"
            response.headers["Allow"] = "GET, HEAD, OPTIONS"
            return cors(response, origin)
        try:
            body, etag = cache.get()
        except RepositoryError as exc:
            response = json_response(
                {"error": {"code": "wiki_unavailable", "message": "The wiki could not be read; try again shortly.",
                           "retryable": bool(getattr(exc, "retryable", True))}},
                503,
            )
            response.headers["Retry-After"] = "5"
            response.headers["Cache-Control"] = "no-store"
            return cors(response, origin)
        if etag and request.if_none_match.contains(etag):
            response = Response(status=304)
        else:
            response = json_response(body, 200)
        response.set_etag(etag)
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return cors(response, origin)

    return bp
