"""An embedding provider that keeps every vector it got on disk (benchmarks only).

The quality and load benchmarks re-embed the same few thousand texts on every
run; on a shared 2-core machine that costs minutes of CPU each time. This
provider is the real :class:`~gateway.retrieval.embedding.client.OpenAICompatibleProvider`
(same gate, batching, breaker, profile checks) with one change: each text of a
request is looked up first in a directory cache keyed by
``sha256(profile name, request fields, text)``; only the misses go to the
server, and what comes back is stored as ``<key>.npy`` (float32, ``(dims,)``).
Vectors are those the real server returned for exactly that input, so cached
and uncached runs rank the same. Delete the directory to re-measure the model.

:class:`CachedEndpoint` serves the same cache over HTTP (a loopback
``/v1/embeddings``) so that gateway processes, e.g. two gateways compared by
``bench/bench_read.py``, can take their document vectors from it.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import requests

from gateway.config.profiles import EmbeddingProfile
from gateway.config.retrieval import RetrievalSettings
from gateway.retrieval.embedding.client import OpenAICompatibleProvider
from gateway.retrieval.embedding.errors import EmbeddingError

__all__ = ["CachingProvider", "CachedEndpoint", "DEFAULT_CACHE_DIR"]

DEFAULT_CACHE_DIR = Path(__file__).resolve().parents[1] / ".dev" / "embedding-cache"


class CachingProvider(OpenAICompatibleProvider):
    """:class:`OpenAICompatibleProvider` with an on-disk vector cache (``cache_dir``).

    ``hits`` / ``misses`` count texts served from / sent past the cache.
    """

    def __init__(self, *args: Any, cache_dir: Path = DEFAULT_CACHE_DIR, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.cache_dir = Path(cache_dir) / self.profile.name
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0

    def _key(self, text: str, fields: Mapping[str, Any]) -> Path:
        blob = json.dumps([self.profile.name, dict(fields), text], ensure_ascii=False, sort_keys=True)
        digest = hashlib.sha256(blob.encode("utf-8")).hexdigest()
        return self.cache_dir / digest[:2] / f"{digest}.npy"

    def vectors(self, texts: list[str], fields: Mapping[str, Any], timeout: float) -> np.ndarray:
        """Vectors of ``texts`` sent with request ``fields``: cached ones from disk, the rest from the server."""
        return self._post(self.url, texts, fields, timeout)

    def _post(self, url: str, texts: list[str], fields: Mapping[str, Any], timeout: float) -> np.ndarray:
        paths = [self._key(t, fields) for t in texts]
        rows: list[np.ndarray | None] = []
        for path in paths:
            try:
                rows.append(np.load(path))
            except (OSError, ValueError):
                rows.append(None)
        todo = [i for i, row in enumerate(rows) if row is None]
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        if todo:
            fresh = super()._post(url, [texts[i] for i in todo], fields, timeout)  # one model on every URL
            for i, vec in zip(todo, fresh):
                rows[i] = vec
                paths[i].parent.mkdir(exist_ok=True)
                tmp = paths[i].with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
                with open(tmp, "wb") as fh:
                    np.save(fh, np.asarray(vec, dtype=np.float32))
                os.replace(tmp, paths[i])
        return np.vstack(rows).astype(np.float32)


class CachedEndpoint:
    """A loopback OpenAI-style ``/v1/embeddings`` answered through a :class:`CachingProvider` over ``upstream``.

    A POST's ``input`` texts come from the cache or, once, from ``upstream`` (the request's other
    fields, e.g. ``input_type``, are part of the key); GETs (``/v1/models``, ``/health``) are relayed.
    ``url`` is the endpoint, ``provider`` counts hits and misses; :meth:`close` stops it.
    """

    def __init__(self, upstream: str, profile: EmbeddingProfile, cache_dir: Path = DEFAULT_CACHE_DIR,
                 timeout: float = 120.0):
        settings = RetrievalSettings(provider="openai_compatible", embedding_url=upstream, timeout_seconds=timeout,
                                     max_concurrency=4, queue_limit=8, batch_size=profile.max_batch_items,
                                     reconcile_seconds=3600.0, max_lag_seconds=7200.0)
        self.provider = CachingProvider(settings, profile, cache_dir=cache_dir)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(upstream, profile, self.provider, timeout))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}/v1/embeddings"
        threading.Thread(target=self._server.serve_forever, name="cached-embeddings", daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.provider.close()

    @staticmethod
    def _handler(upstream: str, profile: EmbeddingProfile, provider: CachingProvider, timeout: float):
        base = upstream.rsplit("/v1/", 1)[0]

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                try:
                    r = requests.get(base + self.path, timeout=timeout)
                except requests.RequestException:
                    return self._send(502, b'{"error": "upstream unreachable"}')
                self._send(r.status_code, r.content, r.headers.get("Content-Type", "application/json"))

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                fields = {k: v for k, v in body.items() if k not in ("input", "encoding_format", "model")}
                try:
                    matrix = provider.vectors(texts, fields, timeout)
                except EmbeddingError as exc:
                    return self._send(503, json.dumps({"error": str(exc)}).encode())
                as_base64 = body.get("encoding_format") == "base64"
                data = [{"object": "embedding", "index": i,
                         "embedding": (base64.b64encode(row.astype("<f4").tobytes()).decode() if as_base64
                                       else row.tolist())} for i, row in enumerate(matrix)]
                self._send(200, json.dumps({"object": "list", "model": profile.model_id, "data": data}).encode())

        return Handler
