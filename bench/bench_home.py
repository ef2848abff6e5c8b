#!/usr/bin/env python3
"""Home-page time to interactive in a real browser, on the full imported corpus (docs/browser.md#home-page).

Not a CI test. Loopback only. Builds the same kind of stack as
``tests/schema/site/test_browser.py`` but bigger: a throw-away copy of the test MediaWiki on a
free port, ``s3rm sync push`` with ``S3RM_MCP_PUBLIC_URL`` pointing at a gateway
under gunicorn (embedding provider disabled), ALL 356 cloud-incident records
imported plus the three Korean synthetic Lessons, and ``--relations`` (500)
relation records. Then Debian's Chromium (headless, Playwright) opens
``연구 메모리`` and reads the site script's performance marks:

* ``s3rm-graph-interactive`` — the graph is drawn and takes input: the time to
  interactive reported here (ms since navigation start);
* ``s3rm-graph-data`` — the ``/mcp/graph`` JSON arrived;
* ``s3rm-graph-layout`` — the layout finished;
* plus DOMContentLoaded and the load event from the navigation entry, and the
  ``/mcp/graph`` resource timing.

Two series of ``--runs`` each:

* **cold** — a NEW browser profile per run (empty HTTP cache, empty
  ResourceLoader localStorage), server caches warm;
* **warm** — repeated navigations in one profile (cached modules, the graph
  revalidated with its ETag → 304).

One discarded load first warms the server side (ResourceLoader module cache,
parser cache, the gateway's graph cache); its numbers are printed separately
as "first load after start". p95 is the nearest-rank percentile: with n runs
the value at rank ceil(0.95·n), i.e. the slowest run whenever n ≤ 19.

    python bench/bench_home.py                 # 356 Lessons, 500 relations, 10 runs each (~2-3 min)
    python bench/bench_home.py --runs 20 --relations 800
"""
from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import requests  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from s3rm.devstack import devwiki  # noqa: E402
from support import browser as bh  # noqa: E402

TARGET_MS = 1500.0
READY = ("() => { const g = document.getElementById('s3rm-knowledge-graph');"
         " return !!g && ['ready', 'empty', 'error'].includes(g.dataset.state)"
         " && performance.getEntriesByName('s3rm-graph-interactive').length > 0; }")
COLLECT = """() => {
    const mark = n => { const e = performance.getEntriesByName(n, 'mark')[0]; return e ? e.startTime : null; };
    const nav = performance.getEntriesByType('navigation')[0];
    const graph = performance.getEntriesByType('resource').find(r => /\\/mcp\\/graph(\\?|$)/.test(r.name));
    const g = document.getElementById('s3rm-knowledge-graph');
    return {
        interactive: mark('s3rm-graph-interactive'),
        data: mark('s3rm-graph-data'),
        layout: mark('s3rm-graph-layout'),
        dcl: nav ? nav.domContentLoadedEventEnd : null,
        load: nav ? nav.loadEventEnd : null,
        ttfb: nav ? nav.responseStart : null,
        graph_start: graph ? graph.startTime : null,
        graph_fetch: graph ? graph.responseEnd - graph.startTime : null,
        state: g ? g.dataset.state : null,
        nodes: g ? Number(g.dataset.nodeCount) : null,
        edges: g ? Number(g.dataset.edgeCount) : null,
        labels: g ? Number(g.dataset.visibleLabels) : null,
    };
}"""
METRICS = (
    ("interactive", "time to interactive (s3rm-graph-interactive)"),
    ("data", "graph JSON in hand (s3rm-graph-data)"),
    ("layout", "layout done (s3rm-graph-layout)"),
    ("layout_ms", "  layout + first draw (interactive − data)"),
    ("graph_start", "/mcp/graph request sent (site script running)"),
    ("graph_fetch", "  /mcp/graph request duration"),
    ("ttfb", "HTML first byte (responseStart)"),
    ("dcl", "DOMContentLoaded end"),
    ("load", "load event end"),
)


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def measure(page, url: str) -> dict:
    page.goto(url, wait_until="load")
    page.wait_for_function(READY, timeout=60_000)
    page.wait_for_timeout(50)  # let loadEventEnd settle when the graph won the race
    sample = page.evaluate(COLLECT)
    if sample["interactive"] is not None and sample["data"] is not None:
        sample["layout_ms"] = sample["interactive"] - sample["data"]
    return sample


def summarize(label: str, runs: list[dict]) -> dict[str, tuple[float, float]]:
    out = {}
    for key, _ in METRICS:
        values = [r[key] for r in runs if r.get(key) is not None]
        if values:
            out[key] = (statistics.median(values), p95(values))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="measured loads per series (default 10)")
    parser.add_argument("--records", type=int, default=0, help="corpus records to import (default: all 356)")
    parser.add_argument("--relations", type=int, default=500, help="relations to write (default 500)")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="s3rm-bench-home-"))
    target = workdir / "wiki"
    t0 = time.monotonic()
    wiki = devwiki.start_test_wiki(target)
    gateway = None
    try:
        gateway = bh.gateway_for(wiki)
        bh.push_pages(wiki, gateway.url)
        seeded = bh.seed(wiki, records=args.records or None, relations=args.relations, workers=8)
        gateway.start()
        graph = bh.graph_json(gateway.base)
        graph_bytes = len(requests.get(f"{gateway.base}/mcp/graph", timeout=60).content)
        print(f"stack ready in {time.monotonic() - t0:.0f} s: wiki {wiki.server_url}, gateway {gateway.base}; "
              f"{len(graph['nodes'])} Lessons, {len(graph['edges'])} relations in /mcp/graph "
              f"(import {seeded.import_seconds:.0f} s, relations {seeded.relation_seconds:.0f} s)", flush=True)
        url = bh.wiki_url(wiki, bh.HOME_TITLE)
        viewport = (args.width, args.height)
        with sync_playwright() as p:
            # server warm-up (discarded from the series, printed on its own)
            context = bh.launch_chromium(p, workdir / "profile-warmup", viewport=viewport)
            first = measure(context.new_page(), url)
            context.close()
            cold: list[dict] = []
            for i in range(args.runs):
                context = bh.launch_chromium(p, workdir / f"profile-cold-{i}", viewport=viewport)
                cold.append(measure(context.new_page(), url))
                context.close()
            warm: list[dict] = []
            context = bh.launch_chromium(p, workdir / "profile-warm", viewport=viewport)
            page = context.new_page()
            measure(page, url)  # fills this profile's caches
            for _ in range(args.runs):
                warm.append(measure(page, url))
            context.close()
    finally:
        if gateway is not None:
            gateway.stop()
        devwiki.down(target, quiet=True)
        shutil.rmtree(workdir, ignore_errors=True)

    bad = [r for r in cold + warm + [first] if r["state"] != "ready"]
    if bad:
        print(f"error: {len(bad)} load(s) did not end with a ready graph: {bad[:2]}", file=sys.stderr)
        return 1
    sample = cold[0]
    print(f"\nhome page '{bh.HOME_TITLE}' in headless Chromium ({bh.CHROMIUM}), viewport {args.width}×{args.height}, "
          f"{sample['nodes']} nodes / {sample['edges']} edges drawn, {sample['labels']} labels; "
          f"/mcp/graph {graph_bytes} bytes")
    print(f"first load after start (server caches cold): interactive {first['interactive']:.0f} ms, "
          f"graph JSON {first['data']:.0f} ms\n")
    c, w = summarize("cold", cold), summarize("warm", warm)
    header = f"{'metric (ms since navigation start)':46s} {'cold median':>11s} {'cold p95':>9s} " \
             f"{'warm median':>11s} {'warm p95':>9s}"
    print(header)
    print("-" * len(header))
    for key, label in METRICS:
        if key in c and key in w:
            print(f"{label:46s} {c[key][0]:11.0f} {c[key][1]:9.0f} {w[key][0]:11.0f} {w[key][1]:9.0f}")
    print(f"\nruns: {args.runs} cold (new profile each) + {args.runs} warm (one profile); p95 = nearest rank "
          f"(with {args.runs} runs: the {math.ceil(0.95 * args.runs)}th of {args.runs})")
    for name, series in (("cold", cold), ("warm", warm)):
        print(f"  {name} time to interactive, each run (ms): "
              + " ".join(f"{r['interactive']:.0f}" for r in series))
    worst = max(c["interactive"][1], w["interactive"][1])
    verdict = "meets" if worst < TARGET_MS else "MISSES"
    print(f"target: time to interactive < {TARGET_MS:.0f} ms — {verdict} it "
          f"(cold median {c['interactive'][0]:.0f} ms, p95 {c['interactive'][1]:.0f} ms; "
          f"warm median {w['interactive'][0]:.0f} ms, p95 {w['interactive'][1]:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
