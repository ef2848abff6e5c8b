#!/usr/bin/env python3
"""Benchmark: github mode under the known attacks on its public endpoints (docs/operations.md#github-limits).

Not a test. Starts (on free ports, stopped at exit) a dev wiki copy, the
GitHub stand-in, a slow HTTPS client-metadata server (one header line every
0.5 s) and a github-mode gunicorn gateway with 6 threads, the OAuth rate
limits OFF (part 1; parts 2 and 3 use a second gateway on default
settings), then prints a table per part::

    python bench/bench_auth_attack.py                    # .dev/wiki (a test-wiki copy if missing)
    python bench/bench_auth_attack.py --no-stall           # only the lockout and state-size parts

1. ``search_lessons`` (signed-in, legacy) latency, median and p95: quiet, and
   while ``--slow`` concurrent ``/authorize`` requests name ``--slow``
   distinct slow metadata URLs (each attacker repeats with a new URL as soon
   as it is answered), in the same process; plus the longest ``/authorize``
   answer against the documented deadline. Target: attacked p95 ≤ 2× quiet.
2. ``--lockout`` (on unless ``--no-lockout``): a second gateway on DEFAULT
   settings (quotas, caps, rate limits) attacked from many loopback source
   addresses (127.x.y.1, one per /24), each registering and starting
   sign-ins past its quota with the largest records the limits allow: after
   (needed - 1) addresses and after (needed), a newcomer's registration and
   first sign-in from a fresh address, and a used client's sign-in; prints
   the number of IPv4 addresses needed to lock anyone out.
3. The state store's size at those default caps, and on disk after a purge.
Slow-body part (``--slow-body``, default 50; 0 skips; ``--slow-body-only`` runs just this part):
   ``search_lessons`` (signed-in) latency, median and p95, quiet and while
   ``--slow-body`` connections each send ``POST /token`` or ``POST /mcp`` with
   ``Content-Length: 5000`` and one body byte every 2 s (reconnecting when
   answered), against a gateway with the default thread count — directly, and
   through real Caddy running the shipped Caddyfile (``tests/support/caddy.py``),
   in the same run. Target: attacked p95 ≤ 2× quiet on both
   (docs/operations.md#request-reading).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import secrets
import selectors
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "gateway" / "auth"))
sys.path.insert(0, str(REPO / "bench"))

import requests  # noqa: E402
from gateway.config import GatewayConfig  # noqa: E402
from bench_read import running_wiki  # noqa: E402
from support.caddy import Caddy  # noqa: E402
from support.github_standin import GithubStandIn, StandInUser  # noqa: E402
from support.services import Gateway, call_tool  # noqa: E402
from support.tls_servers import DripServer  # noqa: E402
from test_github_mode import CLIENT_SECRET, Login, bearer  # noqa: E402

DEADLINE = 3.0  # S3RM_OAUTH_CIMD_TIMEOUT_SECONDS default
QUERIES = ["allocator", "timeout retry", "disk full", "메모리 누수", "deploy rollback"]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _searches(gw: Gateway, token: str, rounds: int) -> list[float]:
    out = []
    for i in range(rounds):
        started = time.perf_counter()
        answer = call_tool(gw.url, "search_lessons", {"query": QUERIES[i % len(QUERIES)]}, headers=bearer(token))
        out.append(time.perf_counter() - started)
        assert answer.status_code == 200, answer.text[:200]
    return out


def stall(env: dict[str, str], drip: DripServer, slow: int, rounds: int) -> None:
    env = {**env, "S3RM_OAUTH_CIMD_ALLOW_NETWORKS": "127.0.0.1/32", "S3RM_OAUTH_CIMD_CA_FILE": str(drip.cert),
           "S3RM_OAUTH_RATE_LIMIT_PER_SECOND": "0"}
    gw = Gateway(env, threads=6)
    users = [StandInUser("alice", 5001, {"s3lab"}, {"s3lab/writers"})]
    with GithubStandIn("Iv1.standin", CLIENT_SECRET, f"{gw.base}/oauth/github/callback", users) as standin:
        gw.env.update(standin.env())
        with gw:
            login = Login(gw, standin)
            token = login.token(login.code()).json()["access_token"]
            _searches(gw, token, 5)  # warm-up
            quiet = _searches(gw, token, rounds)
            stop, durations = threading.Event(), []

            def attacker(n: int) -> None:
                k = 0
                while not stop.is_set():
                    k += 1
                    started = time.perf_counter()
                    requests.get(f"{gw.base}/authorize", params={"response_type": "code", "client_id": drip.url(
                        f"/{n}/{k}/{secrets.token_hex(2)}.json")}, allow_redirects=False, timeout=120)
                    durations.append(time.perf_counter() - started)
                    stop.wait(max(0.0, DEADLINE - durations[-1]))

            threads = [threading.Thread(target=attacker, args=(n,), daemon=True) for n in range(slow)]
            for t in threads:
                t.start()
            time.sleep(DEADLINE)  # the attack is under way before the first timed search
            attacked = _searches(gw, token, rounds)
            stop.set()
            for t in threads:
                t.join()
    q_med, q_p95 = statistics.median(quiet) * 1000, _pct(quiet, 0.95) * 1000
    a_med, a_p95 = statistics.median(attacked) * 1000, _pct(attacked, 0.95) * 1000
    print(f"\n1. search_lessons under {slow} concurrent slow-metadata /authorize (6 gunicorn threads, "
          f"{rounds} calls each)")
    print(f"{'phase':<12}{'median ms':>12}{'p95 ms':>10}")
    print(f"{'quiet':<12}{q_med:>12.1f}{q_p95:>10.1f}")
    print(f"{'attacked':<12}{a_med:>12.1f}{a_p95:>10.1f}")
    print(f"attacked/quiet p95: {a_p95 / q_p95:.2f}x (target <= 2x); /authorize answers: {len(durations)}, "
          f"longest {max(durations):.2f} s (fetch deadline {DEADLINE} s)")


def _address(i: int) -> str:
    """The i-th attacking source address: one per /24 (127.1.0.1, 127.1.1.1, ...), so the /24 budget never
    helps the defence and the figure is the per-address bound alone."""
    return f"127.{1 + i // 250}.{i % 250}.1"


def lockout(env: dict[str, str]) -> None:
    """Part 2: how many IPv4 addresses it takes to lock anyone out, against a gateway on DEFAULT settings
    (quotas, caps, rate limits), filled with the largest records the limits allow; then the state's size
    at the default caps, and after a purge."""
    import math

    from gateway.auth.service import open_auth_store
    from gateway.config import load_config
    from gateway.config.github import GithubSettings
    from support.source_address import session_from

    defaults = GithubSettings("x", "x", "x", "x")
    per_address = min(defaults.address_quota, defaults.prefix_quota)
    needed = {"pending logins": math.ceil(defaults.max_pending / per_address),
              "registrations": math.ceil(defaults.max_clients / per_address)}
    gw = Gateway(env, threads=8)
    big = {"client_name": "x" * 200, "redirect_uris": [f"https://a{i}.example/{'p' * 1900}" for i in range(10)]}
    users = [StandInUser("alice", 5001, {"s3lab"}, {"s3lab/writers"})]
    with GithubStandIn("Iv1.standin", CLIENT_SECRET, f"{gw.base}/oauth/github/callback", users) as standin:
        gw.env.update(standin.env())
        with gw:
            used = Login(gw, standin)  # a client that already got a token (the lab's MCP client)
            assert used.token(used.code()).status_code == 200

            def fill(i: int) -> tuple[list[int], list[int]]:
                attempts = defaults.address_quota + 5
                with session_from(_address(i)) as http:
                    regs = [http.post(f"{gw.base}/register", json=big, timeout=120) for _ in range(attempts)]
                    ids = [r.json()["client_id"] for r in regs if r.status_code == 201] or [used.client_id]
                    auths = [http.get(f"{gw.base}/authorize", params={
                        "response_type": "code", "client_id": ids[-1], "redirect_uri": big["redirect_uris"][0],
                        "code_challenge": "x" * 43, "code_challenge_method": "S256", "state": "s" * 2048,
                        "scope": "mcp:read", "resource": gw.url}, allow_redirects=False, timeout=120)
                        for _ in range(attempts)]
                return [r.status_code for r in regs], [a.status_code for a in auths]

            def probe() -> tuple[int, int, int]:
                """A newcomer's registration and first sign-in from a fresh address, and the used client's."""
                with session_from("127.254.254.254") as http:
                    reg = http.post(f"{gw.base}/register", json={"redirect_uris": ["http://127.0.0.1:9/cb"]},
                                    timeout=60)
                    fresh = http.get(f"{gw.base}/authorize", params={
                        "response_type": "code", "client_id": newcomer, "redirect_uri": "http://127.0.0.1:9/cb",
                        "code_challenge": "x" * 43, "code_challenge_method": "S256"}, allow_redirects=False,
                        timeout=60)
                known = used.http.get(f"{gw.base}/authorize", params=used.params(), allow_redirects=False, timeout=60)
                return reg.status_code, fresh.status_code, known.status_code

            newcomer = requests.post(f"{gw.base}/register", json={"redirect_uris": ["http://127.0.0.1:9/cb"]},
                                     timeout=60).json()["client_id"]  # registered before the attack, never used
            rows, started = [], time.perf_counter()
            done = 0
            store = open_auth_store(load_config(gw.env))
            for upto in (min(needed.values()) - 1, max(needed.values())):
                with concurrent.futures.ThreadPoolExecutor(8) as pool:
                    list(pool.map(fill, range(done, upto)))
                done = upto
                size = store.size()
                rows.append((done, size["pending"], size["clients"], *probe()))
            elapsed = time.perf_counter() - started
            full = store.size()
            disk_full = store.file_bytes() if hasattr(store, "file_bytes") else 0
            later = int(time.time()) + 2 * 86400  # every anonymous row has expired two days later
            removed = store.purge(later, unused_client_before=later, idle_client_before=0)
            disk_purged = store.file_bytes() if hasattr(store, "file_bytes") else 0
    print(f"\n2. Locking others out with many addresses (default settings: {defaults.address_quota} per address, "
          f"{defaults.prefix_quota} per /24 or /48, caps {defaults.max_pending} pending / {defaults.max_clients} "
          f"clients, rate limits on; {elapsed:.0f} s)")
    print(f"{'attacking IPv4 addresses':<26}{'pending':>9}{'clients':>9}{'new reg':>9}{'new sign-in':>13}"
          f"{'used client':>13}")
    for done, pending, clients, reg, fresh, known in rows:
        print(f"{done:<26}{pending:>9}{clients:>9}{reg:>9}{fresh:>13}{known:>13}")
    for what, count in needed.items():
        print(f"addresses needed to refuse new {what}: {count} (= cap / {per_address} per address, each in its "
              f"own /24; target >= 200)")
    print("a client that already got a token is never refused by the caps (its sign-in evicts the oldest "
          "anonymous one)")
    print(f"\n3. State at the default caps (largest records the limits allow): {full['pending']} pending logins, "
          f"{full['clients']} clients, payload {full['bytes'] / 1e6:.1f} MB, SQLite file + WAL "
          f"{disk_full / 1e6:.1f} MB; after a purge ({removed['pending']} pending and {removed['clients']} "
          f"clients removed): {disk_purged / 1e6:.1f} MB")


class SlowBodies:
    """``count`` connections to ``host:port`` each sending a ``POST`` head announcing 5000 body bytes, then
    one body byte every ``interval`` s; a connection the server answers or closes is counted by status and
    replaced. One thread, non-blocking sockets (the attack costs the bench next to nothing)."""

    def __init__(self, port: int, host_header: str, count: int, interval: float = 2.0):
        self.port, self.host_header, self.count, self.interval = port, host_header, count, interval
        self.answers: dict[str, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self, n: int, selector) -> None:
        path = ("/token", "/mcp")[n % 2]
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {self.host_header}\r\nContent-Type: application/"
                     f"{'json' if path == '/mcp' else 'x-www-form-urlencoded'}\r\nContent-Length: 5000\r\n\r\n"
                     .encode())
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, n)

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        for n in range(self.count):
            self._open(n, selector)
        next_drip = time.monotonic()
        while not self.stop.is_set():
            for key, _ in selector.select(timeout=max(0.0, next_drip - time.monotonic())):
                try:
                    data = key.fileobj.recv(4096)
                except OSError:
                    data = b""
                status = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "closed"
                self.answers[status] = self.answers.get(status, 0) + 1
                selector.unregister(key.fileobj)
                key.fileobj.close()
                self._open(key.data, selector)
            if time.monotonic() >= next_drip:
                for key in list(selector.get_map().values()):
                    try:
                        key.fileobj.send(b" ")
                    except OSError:
                        pass
                next_drip = time.monotonic() + self.interval
        for key in list(selector.get_map().values()):
            key.fileobj.close()

    def __enter__(self) -> "SlowBodies":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def slow_body(env: dict[str, str], count: int, rounds: int) -> None:
    users = [StandInUser("alice", 5001, {"s3lab"}, {"s3lab/writers"})]
    rows = []
    for route in ("direct", "caddy"):
        secret = "bench-proxy-secret-0123456789"
        gw = Gateway({**env, "S3RM_PROXY_SECRET": secret}, threads=GatewayConfig.gunicorn_threads)  # the default
        caddy = Caddy(f"127.0.0.1:{gw.port}", secret) if route == "caddy" else None
        front = SimpleNamespace(base=caddy.base, url=f"{caddy.base}/mcp", port=caddy.port) if caddy else gw
        gw.env["S3RM_MCP_PUBLIC_URL"] = front.url
        with GithubStandIn("Iv1.standin", CLIENT_SECRET, f"{front.base}/oauth/github/callback", users) as standin:
            gw.env.update(standin.env())
            with gw, (caddy or contextlib.nullcontext()):
                login = Login(front, standin)
                token = login.token(login.code()).json()["access_token"]
                _searches(front, token, 5)  # warm-up
                quiet = _searches(front, token, rounds)
                with SlowBodies(front.port, front.base.split("//", 1)[1], count) as attack:
                    time.sleep(2.0)  # every connection has sent its head and a first byte
                    attacked = _searches(front, token, rounds)
                rows.append((route, quiet, attacked, dict(attack.answers)))
    print(f"\nslow-body: search_lessons under {count} slow-body connections (POST /token and /mcp, Content-Length "
          f"5000, 1 byte / 2 s), {GatewayConfig.gunicorn_threads} gunicorn threads, {rounds} calls per phase")
    print(f"{'route':<8}{'quiet med':>11}{'quiet p95':>11}{'att. med':>10}{'att. p95':>10}{'p95 x':>7}  slow answers")
    for route, quiet, attacked, answers in rows:
        (q_med, q_p95), (a_med, a_p95) = [(statistics.median(v) * 1000, _pct(v, 0.95) * 1000)
                                          for v in (quiet, attacked)]
        print(f"{route:<8}{q_med:>11.1f}{q_p95:>11.1f}{a_med:>10.1f}{a_p95:>10.1f}{a_p95 / q_p95:>7.2f}  "
              + (" ".join(f"{k}:{v}" for k, v in sorted(answers.items())) or "none yet"))
    print("target: attacked p95 <= 2x quiet on each route (ms; same run)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wiki-dir", default=str(REPO / ".dev" / "wiki"))
    parser.add_argument("--slow", type=int, default=50, help="concurrent slow-metadata /authorize requests")
    parser.add_argument("--rounds", type=int, default=40, help="search_lessons calls per phase")
    parser.add_argument("--no-lockout", dest="lockout", action="store_false",
                        help="skip parts 2 and 3 (many-address lockout, state size at the default caps)")
    parser.add_argument("--no-stall", dest="stall", action="store_false", help="skip part 1")
    parser.add_argument("--slow-body", type=int, default=50, help="slow-body connections of the slow-body part (0: skip)")
    parser.add_argument("--slow-body-only", action="store_true", help="run the slow-body part only")
    args = parser.parse_args(argv)
    wiki = running_wiki(Path(args.wiki_dir))
    folder = Path(tempfile.mkdtemp(prefix="s3rm-bench-auth-"))
    env = {k: v for k, v in wiki.env().items() if k.startswith("S3RM_WIKI_")}
    env.update({"S3RM_MCP_WRITE_AUTH_MODE": "github", "S3RM_OAUTH_STATE_DB": str(folder / "oauth.sqlite3"),
                "S3RM_GITHUB_READ_ORGS": "s3lab", "S3RM_GITHUB_WRITE_TEAMS": "s3lab/writers",
                "S3RM_CURSOR_SECRET": "bench-cursor-secret-0123456789", "S3RM_GITHUB_CLIENT_ID": "Iv1.standin",
                "S3RM_GITHUB_CLIENT_SECRET": CLIENT_SECRET})
    if args.slow_body_only:
        slow_body(env, args.slow_body, args.rounds)
        return 0
    drip = DripServer(folder)
    try:
        if args.stall:
            stall(env, drip, args.slow, args.rounds)
        if args.slow_body > 0:
            slow_body({**env, "S3RM_OAUTH_STATE_DB": str(folder / "slow-body.sqlite3")}, args.slow_body, args.rounds)
        if args.lockout:
            lockout({**env, "S3RM_OAUTH_STATE_DB": str(folder / "lockout.sqlite3")})
    finally:
        drip.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
