"""Document vectors kept on disk between runs of one gateway (docs/hybrid-search.md#vector-cache).

Without it every gateway start embeds every Lesson again. With
``S3RM_SEMANTIC_STATE_DIR`` set, :class:`~gateway.retrieval.embedding.client.OpenAICompatibleProvider`
looks each document text up here after its in-memory memo and before the
model, and stores what the model returns. A restart with an unchanged wiki
then makes no embedding call for Lesson texts (the profile probe is always
sent); an edited Lesson is embedded because its text, hence its key, changed.

The file is a cache, never a source of truth:

* one SQLite file (``vectors.sqlite3``, mode 600, in a directory created with
  mode 700) per gateway process: an exclusive, non-blocking ``flock`` on
  ``vectors.lock`` is held while it is open, so a second process (a gunicorn
  worker starting while the old one drains, an ``s3rm`` command) runs without
  it instead of sharing it;
* key = SHA-256 of the profile identity digest and the SHA-256 of the exact
  formatted input; value = little-endian float32 bytes plus an 8-byte BLAKE2b
  checksum of key and value;
* on open the whole file is verified: SQLite's ``quick_check``, the format,
  the profile identity and dimensions, then ONE sequential pass over every
  row checks its length and checksum (and notes unused rows). A missing file
  starts empty; a truncated, corrupt, unreadable or other-profile file is
  ignored with ONE log line and the metric
  ``semantic_vector_cache_discarded{reason}``, deleted and started afresh —
  nothing is ever served from it. The call that opens the file (a restart's
  first build, which asks for every Lesson text at once) is answered from that
  same pass, so a restart reads the file once; later look-ups go by key and
  are not checksummed again (verified at open, and only this process writes
  the file while it holds the lock);
* any SQLite or file error while in use turns the cache off for the rest of
  the process (one log line, the same metric); embedding goes on as before;
  a process that found the file locked tries again every
  :data:`IN_USE_RETRY_SECONDS` (one log line in all);
* rows unused for :data:`KEEP_DAYS` days are dropped on open, so the file
  follows the corpus instead of growing with every text ever embedded; a
  row's day of use is rewritten only when it is :data:`STAMP_DAYS` old, so a
  daily restart does not rewrite the whole file (a row goes 23 to 30 days
  after its last use).

It holds vectors and digests only, never text; it is disposable and not
backed up (docs/operations.md#state-directory).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from gateway.config.profiles import EmbeddingProfile
from gateway.core.errors import GatewayError

__all__ = ["CACHE_FILE", "FORMAT", "KEEP_DAYS", "LOCK_FILE", "VectorCache", "profile_digest"]

log = logging.getLogger("s3rm.embedding")

FORMAT = "s3rm-vector-cache-1"
CACHE_FILE = "vectors.sqlite3"
LOCK_FILE = "vectors.lock"
#: Rows not read or written for this many days are dropped when the file is opened.
KEEP_DAYS = 30
#: A process that found the file locked by another tries again after this many seconds (a gunicorn
#: worker started while the old one drains gets the file once the old one has exited).
IN_USE_RETRY_SECONDS = 60.0
#: A row's day of use is rewritten only once it is this many days old: a restart each day does not
#: rewrite every row of the file (so a row is dropped 23 to 30 days after its last use).
STAMP_DAYS = 7
#: Keys per SELECT (SQLite's default bound on host parameters is far above it).
_CHUNK = 500
#: Rows per fetch of the verifying pass.
_SCAN_BATCH = 4096
_SUM_BYTES = 8


def profile_digest(profile: EmbeddingProfile) -> bytes:
    """SHA-256 of the profile's canonical identity (every attribute the generation hash uses).

    ``document_facet_request_fields`` is left out: a text embedded with other
    request fields has those fields in its memo key already, so a profile that
    only changes how one facet is sent keeps every other facet's stored vectors.
    """
    identity = profile.identity()
    identity.pop("document_facet_request_fields", None)
    return hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":"))
                          .encode("utf-8")).digest()


def _checksum(key: bytes, blob: bytes) -> bytes:
    return hashlib.blake2b(key + blob, digest_size=_SUM_BYTES).digest()


def _matrix(blobs: list[bytes], dims: int) -> np.ndarray:
    """``(len(blobs), dims)`` read-only float32 rows from little-endian float32 blobs, in one copy."""
    return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dims)


class _Unusable(GatewayError):
    """The file cannot be used; ``reason`` is a short code for the log line and the metric."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class VectorCache:
    """The on-disk vectors of one profile in ``directory`` (opened on first use; thread-safe).

    Args:
        directory: the state directory (``S3RM_SEMANTIC_STATE_DIR``).
        profile: the pinned profile; its identity is part of every key and of the file's header.
        metrics: optional ``gateway.ops.metrics.Metrics``.
        today: days since the epoch (injectable for tests of the pruning).
    """

    def __init__(self, directory: str | Path, profile: EmbeddingProfile, *, metrics: Any = None,
                 today: Callable[[], int] = lambda: int(time.time() // 86400)):
        self.directory = Path(directory)
        self.path = self.directory / CACHE_FILE
        self.profile = profile
        self.metrics = metrics
        self._today = today
        self._digest = profile_digest(profile)
        self._width = profile.dims * 4
        self._dims = profile.dims
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        self.state = "closed"  # closed → on | off
        self._retry_at: float | None = None  # when an "in_use" cache tries to open again
        self.discarded: str | None = None  # why an existing file was ignored, if one was
        self.hits = 0
        self.loaded_rows = 0
        #: (vectors, rows to stamp) of the get_many call that opened the file, taken by that call
        self._opened_with: tuple[dict[bytes, np.ndarray], list[bytes]] | None = None

    # ------------------------------------------------------------ public
    def key(self, memo_key: bytes) -> bytes:
        """The file key of a text whose in-memory memo key (SHA-256 of the formatted input) is ``memo_key``."""
        return hashlib.sha256(self._digest + memo_key).digest()

    def open(self) -> bool:
        """Open and verify the file once; True when the cache is usable. Never raises."""
        with self._lock:
            return self._ensure_open()

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Vectors stored under ``keys`` (file keys, :meth:`key`); never raises.

        The returned vectors are read-only float32 views. When this call opens the
        file, the rows asked for are taken from the one pass that verifies the file
        (a restart's first build asks for every Lesson text at once, so the file is
        read once, not twice); afterwards rows are looked up by key. Every row was
        verified when the file was opened, and only this process writes it while it
        holds the lock, so rows are not checksummed a second time.
        """
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            if not keys:
                return found
            if self.state != "on":
                wanted = set(keys)
                if not self._ensure_open(wanted):
                    return found
                if self._opened_with is not None:  # this call opened the file: served from its verifying pass
                    found, stale = self._opened_with
                    self._opened_with = None
                    return self._stamped(found, stale)
            stale: list[bytes] = []
            today = self._today()
            try:
                for start in range(0, len(keys), _CHUNK):
                    chunk = list(keys[start:start + _CHUNK])
                    rows = self._conn.execute(  # type: ignore[union-attr]
                        f"SELECT key, vec, used FROM vectors WHERE key IN ({','.join('?' * len(chunk))})",
                        chunk).fetchall()
                    rows = [r for r in rows if len(r[1]) == self._width]
                    found.update(zip((bytes(r[0]) for r in rows), _matrix([r[1] for r in rows], self._dims)))
                    stale += [r[0] for r in rows if r[2] < today - STAMP_DAYS]
            except sqlite3.Error as exc:
                self._turn_off("read_error", exc)
                return {}
            return self._stamped(found, stale)

    def _stamped(self, found: dict[bytes, np.ndarray], stale: list[bytes]) -> dict[bytes, np.ndarray]:
        """Record today as the day of use of ``stale`` rows (read, not stamped for :data:`STAMP_DAYS`)."""
        if stale:
            today = self._today()
            try:
                with self._conn:  # type: ignore[union-attr]
                    self._conn.executemany("UPDATE vectors SET used = ? WHERE key = ?",  # type: ignore[union-attr]
                                           [(today, k) for k in stale])
            except sqlite3.Error as exc:
                self._turn_off("write_error", exc)
                return {}
        self.hits += len(found)
        return found

    def put_many(self, keys: Sequence[bytes], matrix: np.ndarray) -> None:
        """Store row ``i`` of ``matrix`` under ``keys[i]`` (file keys); never raises."""
        with self._lock:
            if not keys or not self._ensure_open():
                return
            today = self._today()
            rows = []
            for key, row in zip(keys, np.asarray(matrix, dtype="<f4")):
                blob = row.tobytes()
                rows.append((key, blob, _checksum(key, blob), today))
            try:
                with self._conn:  # type: ignore[union-attr]
                    self._conn.executemany(  # type: ignore[union-attr]
                        "INSERT OR REPLACE INTO vectors (key, vec, sum, used) VALUES (?, ?, ?, ?)", rows)
            except sqlite3.Error as exc:
                self._turn_off("write_error", exc)

    def stats(self) -> dict[str, Any]:
        """State, verified rows at open, hits since; no paths, no keys."""
        return {"state": self.state, "rows": self.loaded_rows, "hits": self.hits, "discarded": self.discarded}

    def close(self) -> None:
        """Close the file and release the process lock."""
        with self._lock:
            self._close()
            if self.state == "on":
                self.state = "closed"

    # ----------------------------------------------------------- opening
    def _ensure_open(self, wanted: set[bytes] | None = None) -> bool:
        if self.state == "off" and self._retry_at is not None and time.monotonic() >= self._retry_at:
            self.state, self._retry_at = "closed", None
        if self.state == "closed":
            self.state = "on" if self._open(wanted) else "off"
        return self.state == "on"

    def _open(self, wanted: set[bytes] | None) -> bool:
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            self._report("unwritable", exc)
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            if self.discarded != "in_use":  # one line, not one per retry
                self._report("in_use", None)  # another process owns it: never share one file
            self.discarded = "in_use"
            self._retry_at = time.monotonic() + IN_USE_RETRY_SECONDS
            return False
        self._lock_fd = fd
        try:
            if self.path.exists():
                try:
                    self._conn = self._verified(wanted)
                    return True
                except _Unusable as exc:
                    self._report(exc.reason, None, discarded=True)
                except (sqlite3.Error, OSError) as exc:
                    self._report("unreadable", exc, discarded=True)
                self._close_conn()
                self._remove_files()
            self._conn = self._create()
            if wanted is not None:
                self._opened_with = ({}, [])
            return True
        except (sqlite3.Error, OSError) as exc:
            self._report("unwritable", exc)
            self._close()
            return False

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")  # a commit appends, no fsync per batch (with NORMAL)
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _verified(self, wanted: set[bytes] | None) -> sqlite3.Connection:
        """The existing file, checked whole (raises _Unusable / sqlite3.Error); prunes unused rows.

        One sequential pass reads every row, checks its key and value lengths and
        its checksum, notes rows unused for :data:`KEEP_DAYS` days, and keeps the
        rows in ``wanted`` (as ``self._opened_with``; nothing is kept unless the
        whole file verified).
        """
        conn = self._connect()
        self._conn = conn  # closed by the caller on failure
        check = conn.execute("PRAGMA quick_check").fetchall()
        if check != [("ok",)]:
            raise _Unusable("corrupt")
        try:
            meta = dict(conn.execute("SELECT name, value FROM meta").fetchall())
        except sqlite3.Error:
            raise _Unusable("foreign") from None
        if meta.get("format") != FORMAT:
            raise _Unusable("foreign")
        if meta.get("profile") != self._digest.hex() or meta.get("dims") != str(self.profile.dims):
            raise _Unusable("other_profile")
        today = self._today()
        cutoff = today - KEEP_DAYS
        width, blake2b = self._width, hashlib.blake2b
        rows = 0
        unused: list[int] = []
        found: dict[bytes, np.ndarray] = {}
        stale: list[bytes] = []
        cursor = conn.execute("SELECT rowid, key, vec, sum, used FROM vectors")
        while batch := cursor.fetchmany(_SCAN_BATCH):
            rows += len(batch)
            if any(len(key) != 32 or len(vec) != width or blake2b(key + vec, digest_size=_SUM_BYTES).digest() != total
                   for _, key, vec, total, _ in batch):
                raise _Unusable("corrupt")
            unused += [rowid for rowid, _, _, _, used in batch if used < cutoff]
            if wanted:
                keep = [(key, vec, used) for _, key, vec, _, used in batch if key in wanted and used >= cutoff]
                found.update(zip((k for k, _, _ in keep), _matrix([v for _, v, _ in keep], self.profile.dims)))
                stale += [k for k, _, used in keep if used < today - STAMP_DAYS]
        if unused:
            with conn:
                for start in range(0, len(unused), _CHUNK):
                    part = unused[start:start + _CHUNK]
                    conn.execute(f"DELETE FROM vectors WHERE rowid IN ({','.join('?' * len(part))})", part)
        self.loaded_rows = rows - len(unused)
        if wanted is not None:
            self._opened_with = (found, stale)
        return conn

    def _create(self) -> sqlite3.Connection:
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
        conn = self._connect()
        with conn:
            conn.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
            conn.execute("CREATE TABLE vectors (key BLOB PRIMARY KEY, vec BLOB NOT NULL, sum BLOB NOT NULL, "
                         "used INTEGER NOT NULL)")
            conn.executemany("INSERT INTO meta (name, value) VALUES (?, ?)",
                             [("format", FORMAT), ("profile", self._digest.hex()),
                              ("dims", str(self.profile.dims)), ("profile_name", self.profile.name)])
        self.loaded_rows = 0
        return conn

    # ----------------------------------------------------------- failure
    def _turn_off(self, reason: str, exc: Exception) -> None:
        self._report(reason, exc)
        self._close()
        self.state = "off"

    def _report(self, reason: str, exc: Exception | None, *, discarded: bool = False) -> None:
        detail = f" ({type(exc).__name__})" if exc is not None else ""
        if discarded:
            self.discarded = reason
            log.warning("vector cache file ignored and rebuilt (reason=%s%s): every Lesson text it held is "
                        "embedded again", reason, detail)
        else:
            log.warning("vector cache not used (reason=%s%s): Lesson texts are embedded as "
                        "without a state directory", reason, detail)
        if self.metrics is not None:
            self.metrics.incr("semantic_vector_cache_discarded", reason=reason)

    def _remove_files(self) -> None:
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except FileNotFoundError:
                pass

    def _close_conn(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None

    def _close(self) -> None:
        self._close_conn()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None
