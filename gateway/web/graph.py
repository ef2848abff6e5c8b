"""``GET /mcp/graph``: the knowledge-graph data the wiki's home page draws.

This is a plain read-only JSON route, not an MCP tool (the ten tools stay
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

* **With Semantic MediaWiki** (an ``ask`` callable is passed in): two bounded
  ``ask`` queries — Lessons with title, confidence and updated time, and the
  relation subobjects — read in pages of 500. SMW already holds exactly
  these values as properties.
* **Without SMW** (the development wiki; Debian ships no SMW): one bounded
  scan of the Lesson snapshots (``LessonRepository.scan_snapshots`` in batches
  of 50, at most ``max_nodes`` Lessons), edges taken from each snapshot's
  ``{{Lesson relation}}`` records. Plain MediaWiki has no cheaper source for
  typed relations: the link tables know *that* two pages link, not *how*.

Either result is cached in the process. Freshness (docs/browser.md#freshness, "a Lesson
saved in the browser or over MCP appears at once"):

* Browser saves do not pass through the gateway, so on the snapshot path a
  request asks MediaWiki at most once per ``probe_seconds`` (default 1 s) for
  the ten most recently edited Lessons (``list_recent``, one API request) and
  patches the cached graph in place when any of them changed. The probe runs
  in the request, so the page that follows a save already shows it.
* After an MCP write the app calls :meth:`GraphCache.invalidate` (exposed as
  ``blueprint.graph_cache``): the next request probes at once instead of
  waiting for the interval (on the SMW path it re-runs the two queries).
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
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping

from flask import Blueprint, Response, request

from gateway.core.jsonio import encode_json, json_response
from gateway.domain.repository import SNAPSHOT_BATCH, LessonRepository, RepositoryError
from gateway.web.similarity import BASIS as SIMILARITY_BASIS
from gateway.web.similarity import nearest_neighbours

__all__ = [
    "DEFAULT_MAX_EDGES",
    "DEFAULT_MAX_NODES",
    "DEFAULT_PROBE_SECONDS",
    "DEFAULT_TTL_SECONDS",
    "RELATIONS",
    "AskGraphSource",
    "GraphCache",
    "GraphData",
    "SnapshotGraphSource",
    "create_graph_blueprint",
]

#: Hard cap on nodes in one response (the home page's bound).
DEFAULT_MAX_NODES = 2000
#: Hard cap on edges in one response.
DEFAULT_MAX_EDGES = 10000
#: Longest time cached graph data is reused before a full rebuild.
DEFAULT_TTL_SECONDS = 10.0
#: Shortest time between two "what changed recently?" probes (snapshot path).
DEFAULT_PROBE_SECONDS = 1.0
#: How many most recently edited Lessons one probe reads.
PROBE_LIMIT = 10
#: The seven relation names an edge may carry (schema/lesson.toml ``enums.relation``).
RELATIONS = ("supports", "contradicts", "analogous_to", "failed_because", "works_when", "suggests", "supersedes")

#: Lesson fields whose words define content similarity (title, where/what, why).
SIMILARITY_FIELDS = ("title", "context", "interpretation")

ROUTE = "/mcp/graph"
ASK_PAGE = 500


def _utc_now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class _Node:
    id: str
    title: str
    confidence: str
    updated_at: str
    revision_id: int = 0
    text: str = ""  # what similarity is computed over (never sent)


@dataclass
class GraphData:
    """The graph as read from the wiki.

    ``nodes`` maps id → node; ``outgoing`` maps a source id → its stored
    relations as ``(relation, target)`` pairs (targets not yet filtered);
    ``truncated`` is True when a cap stopped the read.
    """

    nodes: dict[str, _Node]
    outgoing: dict[str, list[tuple[str, str]]]
    truncated: bool
    generated_at: str
    source: str

    def to_json(self, max_edges: int) -> dict[str, Any]:
        """The response object: nodes newest first, edges between listed nodes only, deduplicated."""
        nodes = sorted(self.nodes.values(), key=lambda n: (n.updated_at, n.id), reverse=True)
        edges: list[dict[str, str]] = []
        seen: set[tuple[str, str, str]] = set()
        truncated = self.truncated
        for source in sorted(self.outgoing):
            if source not in self.nodes:
                continue
            for relation, target in self.outgoing[source]:
                key = (source, target, relation)
                if target not in self.nodes or target == source or key in seen:
                    continue
                if len(edges) >= max_edges:
                    truncated = True
                    break
                seen.add(key)
                edges.append({"from": source, "to": target, "relation": relation})
        texts = {n.id: n.text or n.title for n in nodes}
        similar = [{"from": a, "to": b, "score": score}
                   for a, b, score in nearest_neighbours(texts, max_pairs=max_edges)]
        return {
            "nodes": [
                {"id": n.id, "title": n.title, "confidence": n.confidence, "updated_at": n.updated_at} for n in nodes
            ],
            "edges": edges,
            "similar": similar,
            "similar_basis": SIMILARITY_BASIS,
            "generated_at": self.generated_at,
            "truncated": truncated,
            "source": self.source,
        }


def _relations_of(page_relations: Iterable[Mapping[str, str]]) -> list[tuple[str, str]]:
    out = []
    for rel in page_relations:
        relation = (rel.get("relation") or "").strip()
        target = (rel.get("to") or "").strip()
        if target.startswith("Lesson:"):
            target = target[len("Lesson:"):]
        if relation in RELATIONS and target:
            out.append((relation, target))
    return out


def _node_from_snapshot(snapshot) -> _Node:
    fields = snapshot.page.fields
    return _Node(
        id=snapshot.id,
        title=(fields.get("title") or "").strip() or snapshot.id,
        confidence=(fields.get("confidence") or "").strip(),
        updated_at=(fields.get("updated_at") or "").strip() or snapshot.timestamp,
        revision_id=int(snapshot.revision_id or 0),
        text=" ".join(fields.get(name) or "" for name in SIMILARITY_FIELDS),
    )


class SnapshotGraphSource:
    """Reads the graph from Lesson snapshots (plain MediaWiki, no SMW).

    ``get_repository`` is a zero-argument callable returning the
    :class:`LessonRepository` to use (called once per build or probe).
    """

    name = "scan"
    supports_probe = True

    def __init__(self, get_repository: Callable[[], LessonRepository], *, max_nodes: int = DEFAULT_MAX_NODES):
        self._get_repository = get_repository
        self.max_nodes = max_nodes

    def build(self) -> GraphData:
        """Scan at most ``max_nodes`` Lessons in batches of SNAPSHOT_BATCH (bounded loop)."""
        repo = self._get_repository()
        nodes: dict[str, _Node] = {}
        outgoing: dict[str, list[tuple[str, str]]] = {}
        truncated = False
        cursor: str | None = None
        # Batches may come back short; allow some slack but never loop unboundedly.
        max_batches = 2 * (self.max_nodes // SNAPSHOT_BATCH + 1) + 2
        for _ in range(max_batches):
            page = repo.scan_snapshots(cursor, SNAPSHOT_BATCH)
            for snapshot in page.snapshots:
                if len(nodes) >= self.max_nodes:
                    truncated = True
                    break
                nodes[snapshot.id] = _node_from_snapshot(snapshot)
                outgoing[snapshot.id] = _relations_of(snapshot.page.relations)
            cursor = page.next_cursor
            if truncated or not cursor:
                if page.partial and not cursor:
                    truncated = True
                break
        else:
            truncated = True
        return GraphData(nodes, outgoing, truncated, _utc_now_iso(), self.name)

    def probe(self, data: GraphData) -> bool | None:
        """Patch ``data`` with the most recently edited Lessons.

        Returns True when something changed, False when nothing did, and None
        when the change is too large to patch (every probed Lesson changed,
        or a new Lesson would exceed the node cap): rebuild instead.
        """
        page = self._get_repository().list_recent(None, PROBE_LIMIT)
        changed = 0
        for snapshot in page.snapshots:
            known = data.nodes.get(snapshot.id)
            if known is not None and known.revision_id == int(snapshot.revision_id or 0):
                continue
            if known is None and len(data.nodes) >= self.max_nodes:
                return None
            data.nodes[snapshot.id] = _node_from_snapshot(snapshot)
            data.outgoing[snapshot.id] = _relations_of(snapshot.page.relations)
            changed += 1
        if page.snapshots and changed >= len(page.snapshots) and len(page.snapshots) >= PROBE_LIMIT:
            return None
        if changed:
            data.generated_at = _utc_now_iso()
        return bool(changed)


def _first(values: Any) -> Any:
    if isinstance(values, list):
        return values[0] if values else None
    return values


def _page_id(value: Any) -> str:
    if isinstance(value, Mapping):
        value = value.get("fulltext", "")
    text = str(value or "").split("#", 1)[0].strip()
    if text.startswith("Lesson:"):
        text = text[len("Lesson:"):]
    return text.replace(" ", "_")


def _smw_time(value: Any) -> str:
    if isinstance(value, Mapping):
        stamp = value.get("timestamp")
        if stamp not in (None, ""):
            try:
                return datetime.fromtimestamp(int(stamp), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            except (TypeError, ValueError, OverflowError):
                pass
        value = value.get("raw", "")
    return str(value or "")


class AskGraphSource:
    """Reads the graph with Semantic MediaWiki ``ask`` queries.

    ``ask`` takes an ask query string (conditions, printouts and parameters,
    ``|``-separated as in ``action=ask&query=…``) and returns the decoded API
    response (``{"query": {"results": …}, "query-continue-offset": n}``).
    """

    name = "ask"
    supports_probe = False

    def __init__(self, ask: Callable[[str], Mapping[str, Any]], *, max_nodes: int = DEFAULT_MAX_NODES,
                 max_edges: int = DEFAULT_MAX_EDGES):
        self._ask = ask
        self.max_nodes = max_nodes
        self.max_edges = max_edges

    def _pages(self, query: str, cap: int) -> tuple[list[tuple[str, Mapping[str, Any]]], bool]:
        rows: list[tuple[str, Mapping[str, Any]]] = []
        offset = 0
        for _ in range(cap // ASK_PAGE + 2):
            response = self._ask(f"{query}|limit={ASK_PAGE}|offset={offset}")
            results = (response.get("query") or {}).get("results") or {}
            items = results.items() if isinstance(results, Mapping) else ()
            for key, row in items:
                if len(rows) >= cap:
                    return rows, True
                rows.append((key, row))
            nxt = response.get("query-continue-offset")
            if not nxt or int(nxt) <= offset:
                return rows, False
            offset = int(nxt)
        return rows, True

    def build(self) -> GraphData:
        """Two bounded ask queries: the Lessons, then the relation subobjects."""
        lesson_rows, cut_nodes = self._pages(
            "[[Category:Lessons]]|?Lesson title|?Confidence|?Updated at|sort=Updated at|order=descending",
            self.max_nodes,
        )
        nodes: dict[str, _Node] = {}
        for key, row in lesson_rows:
            lesson_id = _page_id(row.get("fulltext") or key)
            if not lesson_id:
                continue
            printouts = row.get("printouts") or {}
            nodes[lesson_id] = _Node(
                id=lesson_id,
                title=str(_first(printouts.get("Lesson title")) or lesson_id),
                confidence=str(_first(printouts.get("Confidence")) or ""),
                updated_at=_smw_time(_first(printouts.get("Updated at"))),
            )
        relation_rows, cut_edges = self._pages(
            "[[Relation type::+]]|?Relation from|?Relation type|?Relation to", self.max_edges
        )
        outgoing: dict[str, list[tuple[str, str]]] = {}
        for key, row in relation_rows:
            printouts = row.get("printouts") or {}
            source = _page_id(_first(printouts.get("Relation from")) or key)
            relation = str(_first(printouts.get("Relation type")) or "")
            target = _page_id(_first(printouts.get("Relation to")))
            if relation in RELATIONS and source and target:
                outgoing.setdefault(source, []).append((relation, target))
        return GraphData(nodes, outgoing, cut_nodes or cut_edges, _utc_now_iso(), self.name)


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
