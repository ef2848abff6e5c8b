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
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from gateway.retrieval.embedding.client import OpenAICompatibleProvider

__all__ = ["CachingProvider", "DEFAULT_CACHE_DIR"]

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
                tmp = paths[i].with_suffix(f".{os.getpid()}.tmp")
                with open(tmp, "wb") as fh:
                    np.save(fh, np.asarray(vec, dtype=np.float32))
                os.replace(tmp, paths[i])
        return np.vstack(rows).astype(np.float32)
