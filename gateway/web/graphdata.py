"""The knowledge graph's data: nodes, typed relation edges and estimated similarity, read from the wiki.

:class:`GraphData` is what ``GET /mcp/graph`` (:mod:`gateway.web.graph`) serves;
a source builds it, and :class:`~gateway.web.graph.GraphCache` keeps it fresh.
No request ever reads every page just for itself:

* :class:`SnapshotGraphSource` — what the app uses on every wiki, with or
  without Semantic MediaWiki: one bounded scan of the Lesson snapshots (``LessonRepository.scan_snapshots`` in batches
  of 50, at most ``max_nodes`` Lessons), edges taken from each snapshot's
  ``{{Lesson relation}}`` records. Plain MediaWiki has no cheaper source for
  typed relations: the link tables know *that* two pages link, not *how*.
  Values come through the page codec, so they are exactly what agents read.
* :class:`AskGraphSource` — two bounded SMW ``ask`` queries (Lessons with
  title, confidence and updated time; the relation subobjects) in pages of
  500, used only when an ``ask`` callable is passed in. The app does not:
  SMW's stored values are not yet the decoded values agents read (its SQL
  store keeps ``htmlspecialchars_decode`` of the page encoding, so other
  character references stay literal: docs/browser.md#page-forms), and this
  source has no one-second probe.

Contract: docs/browser.md#gateway-json and docs/read-path.md#graph-similarity.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping

from gateway.domain.repository import SNAPSHOT_BATCH, LessonRepository
from gateway.web.similarity import BASIS as SIMILARITY_BASIS
from gateway.web.similarity import nearest_neighbours

__all__ = ["DEFAULT_MAX_EDGES", "DEFAULT_MAX_NODES", "PROBE_LIMIT", "RELATIONS", "AskGraphSource", "GraphData",
           "SnapshotGraphSource"]

#: Hard cap on nodes in one response (the home page's bound).
DEFAULT_MAX_NODES = 2000
#: Hard cap on edges in one response.
DEFAULT_MAX_EDGES = 10000
#: How many most recently edited Lessons one probe reads.
PROBE_LIMIT = 10
#: The seven relation names an edge may carry (schema/lesson.toml ``enums.relation``).
RELATIONS = ("supports", "contradicts", "analogous_to", "failed_because", "works_when", "suggests", "supersedes")

#: Lesson fields whose words define content similarity (title, where/what, why).
SIMILARITY_FIELDS = ("title", "context", "interpretation")

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
