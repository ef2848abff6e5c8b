"""The collect-candidates checkpoint: hashes only, so a second run emits only what changed.

Contract: docs/research-tools.md#checkpoint.

File ``<DIR>/collect-candidates.checkpoint.json``::

    {"format": 1,
     "sources": {"<namespace>": {"<sha256 of key>": "<candidate digest>", ...}, ...}}

``namespace`` is the SHA-256 (first 16 hex digits) of the source kind and the
resolved root path, so runs over other roots or other sources leave each
other's entries alone. Keys and digests are SHA-256 values: the checkpoint
holds no path, title, text or secret. It is replaced atomically (temporary
file + rename, mode 600) only after the output was written.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from s3rm.errors import S3rmError

__all__ = ["CheckpointError", "Checkpoint", "FILE_NAME", "namespace"]

FILE_NAME = "collect-candidates.checkpoint.json"
_HEX64 = set("0123456789abcdef")


class CheckpointError(S3rmError):
    """The checkpoint file exists but is not one this command wrote (message names the file only)."""


def namespace(source: str, root: Path) -> str:
    """The checkpoint namespace of one source kind over one root."""
    return hashlib.sha256(f"{source}\0{root.resolve()}".encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def _valid_map(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) and len(k) == 64 and len(v) == 64 and set(k) <= _HEX64
        and set(v) <= _HEX64 for k, v in value.items())


class Checkpoint:
    """Previous digests per namespace and the ones seen in this run.

    ``Checkpoint.load(None)`` is an empty, unsaved checkpoint (every candidate is new).
    """

    def __init__(self, directory: Path | None, sources: dict[str, dict[str, str]]):
        self.directory = directory
        self.previous = sources
        self.current: dict[str, dict[str, str]] = {}

    @classmethod
    def load(cls, directory: Path | None) -> "Checkpoint":
        """Read ``directory``'s checkpoint (missing file → empty). Raises :class:`CheckpointError`."""
        if directory is None:
            return cls(None, {})
        path = directory / FILE_NAME
        if not path.exists():
            return cls(directory, {})
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            raise CheckpointError(f"{path}: unreadable checkpoint") from None
        sources = data.get("sources") if isinstance(data, dict) and data.get("format") == 1 else None
        if not isinstance(sources, dict) or not all(_valid_map(v) for v in sources.values()):
            raise CheckpointError(f"{path}: not a collect-candidates checkpoint (format 1)")
        return cls(directory, sources)

    def status(self, space: str, key: str, digest: str) -> str:
        """Record the candidate and return ``new``, ``changed`` or ``unchanged``."""
        h = _key_hash(key)
        self.current.setdefault(space, {})[h] = digest
        before = self.previous.get(space, {}).get(h)
        if before is None:
            return "new"
        return "unchanged" if before == digest else "changed"

    def removed(self, space: str) -> int:
        """Candidates of ``space`` in the previous run that this run did not see."""
        return len(set(self.previous.get(space, {})) - set(self.current.get(space, {})))

    def save(self) -> None:
        """Write the merged checkpoint atomically (namespaces not run this time are kept). No-op without a directory."""
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        merged = {**self.previous, **self.current}
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".checkpoint-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump({"format": 1, "sources": merged}, out, sort_keys=True)
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.directory / FILE_NAME)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
