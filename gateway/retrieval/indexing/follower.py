"""The recent-changes follower: a persistent checkpoint over MediaWiki's ``list=recentchanges``.

Contract: docs/hybrid-search.md#follower, docs/hybrid-search.md#tombstones.

:class:`ChangeFollower` turns the tail of the recent-changes stream after its
checkpoint into one :class:`FollowBatch`: the Lesson ids to re-read and the
tombstones (deleted Lessons, old titles of moved Lessons). It never touches
the index itself: the refresher's one worker applies a batch (re-reading the
latest snapshot of each id and upserting only a newer revision) and calls
:meth:`ChangeFollower.commit` afterwards, so a checkpoint never runs ahead of
what the index holds.

Stream rows map to actions (``gateway.domain.repository.CHANGE_KINDS``):

* ``new``, ``edit``, ``restore`` (undelete) and other log rows of a Lesson
  (protect, import, revision deletion) — re-read the page; a tombstone of the
  id is lifted (the page exists again);
* ``delete`` — tombstone the id and re-read it (absent → its row is removed);
* ``move`` — tombstone the old id (its title is now a redirect or gone), re-read
  it, and re-read the target when it is a Lesson.

Positions are ``(timestamp, rcid)``. Rows may commit slightly out of order,
so every poll starts ``overlap_seconds`` before the checkpoint and skips the
rcids it has already seen (re-applying a row is harmless: the refresher
re-reads the latest snapshot). A **gap** — no checkpoint, a checkpoint older
than ``$wgRCMaxAge`` (``S3RM_SEMANTIC_RC_MAX_AGE_SECONDS``), or one older than
the oldest row the wiki still keeps — means changes may be lost: the batch
says so and the refresher runs a full rebuild, then commits the stream head
it read before the rebuild started. A quiet stream advances the checkpoint
to five minutes ago once it is ten minutes old, so an idle wiki never ages
into a gap.

:class:`CheckpointStore` is the small persistence interface (load / save of
one position per generation); :class:`FileCheckpointStore` keeps it in a JSON
file written atomically, :class:`MemoryCheckpointStore` in memory. A store in
PostgreSQL can implement the same two methods.
"""
from __future__ import annotations

import abc
import json
import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from gateway.domain.repository import ChangePosition, LessonRepository

__all__ = ["ChangeFollower", "CheckpointStore", "FileCheckpointStore", "FollowBatch", "MemoryCheckpointStore",
           "build_checkpoint_store"]

log = logging.getLogger("s3rm.semantic.follow")

#: Rows examined per recent-changes request (MediaWiki's ``rclimit`` maximum).
PAGE_LIMIT = 500
#: Requests per poll; more rows wait for the next poll (the checkpoint advances over what was read).
MAX_PAGES = 4
#: Seconds re-read before the checkpoint on every poll (rows that commit out of timestamp order).
OVERLAP_SECONDS = 10.0
#: A quiet stream moves the checkpoint to ``now - QUIET_LAG_SECONDS`` once it is twice that old, so a
#: wiki without edits never ages into a gap (tolerates that much clock skew between gateway and wiki).
QUIET_LAG_SECONDS = 300.0


def _epoch(timestamp: str) -> float:
    return datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class CheckpointStore(abc.ABC):
    """Where the follower's position lives, one per index generation (docs/hybrid-search.md#follower)."""

    @abc.abstractmethod
    def load(self, generation: str) -> ChangePosition | None:
        """The saved position of ``generation``, None when there is none (or it is unreadable)."""

    @abc.abstractmethod
    def save(self, generation: str, position: ChangePosition) -> None:
        """Persist ``position`` for ``generation`` (replaces the previous one). Raises OSError on failure."""


class MemoryCheckpointStore(CheckpointStore):
    """Positions in memory: lost with the process (a configuration without a checkpoint file)."""

    def __init__(self) -> None:
        self._positions: dict[str, ChangePosition] = {}

    def load(self, generation: str) -> ChangePosition | None:
        return self._positions.get(generation)

    def save(self, generation: str, position: ChangePosition) -> None:
        self._positions[generation] = position


class FileCheckpointStore(CheckpointStore):
    """One JSON file ``{"generation", "timestamp", "rcid"}``, replaced atomically (write, fsync, rename).

    A missing, unreadable or other-generation file loads as None (the
    follower then rebuilds); nothing else is stored (no content, no URL).
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)

    def load(self, generation: str) -> ChangePosition | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("generation") != generation:
                return None
            return ChangePosition(str(data["timestamp"]), int(data["rcid"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            log.warning("follower checkpoint file is unreadable; a full rebuild follows")
            return None

    def save(self, generation: str, position: ChangePosition) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"generation": generation, "timestamp": position.timestamp, "rcid": position.rcid})
        fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(body)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def build_checkpoint_store(checkpoint_file: str) -> CheckpointStore:
    """A :class:`FileCheckpointStore` for a configured path, else a :class:`MemoryCheckpointStore`."""
    return FileCheckpointStore(checkpoint_file) if checkpoint_file else MemoryCheckpointStore()


@dataclass
class FollowBatch:
    """What one poll found (docs/hybrid-search.md#follower).

    Attributes:
        refresh: Lesson ids to re-read.
        tombstones: ids whose latest row deleted them or moved them away → the row's position.
        revived: ids whose latest row created, edited, restored or moved them in (tombstones lifted).
        position: the position to commit once the batch is applied (None: nothing read).
        counts: rows per change kind.
        newest_timestamp: timestamp of the newest Lesson row (for the lag), None when none.
        gap: ``no_checkpoint``, ``age`` or ``purged`` when a full rebuild is needed, else None.
        rcids: rcid → timestamp of every Lesson row taken (skipped by later polls once committed).
    """

    refresh: set[str] = field(default_factory=set)
    tombstones: dict[str, ChangePosition] = field(default_factory=dict)
    revived: set[str] = field(default_factory=set)
    position: ChangePosition | None = None
    counts: dict[str, int] = field(default_factory=dict)
    newest_timestamp: str | None = None
    gap: str | None = None
    rcids: dict[int, str] = field(default_factory=dict)


class ChangeFollower:
    """Reads the recent-changes tail after its checkpoint (module docstring).

    Args:
        repository: the Lesson repository (``recent_changes``, ``recent_change_bounds``).
        store: the checkpoint store.
        generation: the index generation the checkpoint belongs to.
        max_age_seconds: the wiki's ``$wgRCMaxAge``; an older checkpoint is a gap.
        wall: wall-clock epoch seconds (injectable).

    Not thread-safe by itself: the refresher's one worker thread calls it.
    """

    def __init__(self, repository: LessonRepository, store: CheckpointStore, generation: str, *,
                 max_age_seconds: float, overlap_seconds: float = OVERLAP_SECONDS,
                 wall: Callable[[], float] = time.time):
        self.repository = repository
        self.store = store
        self.generation = generation
        self.max_age_seconds = max_age_seconds
        self.overlap_seconds = overlap_seconds
        self.wall = wall
        self._lock = threading.Lock()
        self._position: ChangePosition | None = store.load(generation)
        self._seen: dict[int, str] = {}

    @property
    def position(self) -> ChangePosition | None:
        """The committed checkpoint (None before the first commit)."""
        with self._lock:
            return self._position

    def head(self) -> ChangePosition:
        """The newest position the wiki keeps now (read before a full rebuild). Raises RepositoryError.

        An empty stream yields ``(now - overlap, rcid 0)``: every later row is read.
        """
        newest = self.repository.recent_change_bounds()[1]
        return newest if newest is not None else ChangePosition(_iso(self.wall() - self.overlap_seconds), 0)

    def poll(self) -> FollowBatch:
        """The changes after the checkpoint, or a batch with ``gap`` set. Raises RepositoryError."""
        pos = self.position
        if pos is None:
            return FollowBatch(gap="no_checkpoint")
        now = self.wall()
        if now - _epoch(pos.timestamp) > self.max_age_seconds:
            return FollowBatch(gap="age")
        oldest, _ = self.repository.recent_change_bounds()  # one one-row request per poll
        if oldest is not None and oldest > pos:
            return FollowBatch(gap="purged")
        floor = _iso(_epoch(pos.timestamp) - self.overlap_seconds)
        batch = FollowBatch(position=pos)
        cursor = None
        for _ in range(MAX_PAGES):
            page = self.repository.recent_changes(floor, PAGE_LIMIT, cursor)
            for change in page.changes:
                if change.position.rcid in self._seen:
                    continue
                self._take(batch, change)
            if page.last_position is not None and page.last_position > batch.position:
                batch.position = page.last_position
            cursor = page.next_cursor
            if cursor is None:
                quiet = ChangePosition(_iso(now - QUIET_LAG_SECONDS), 0)
                if now - _epoch(batch.position.timestamp) > 2 * QUIET_LAG_SECONDS and quiet > batch.position:
                    batch.position = quiet
                break
        return batch

    @staticmethod
    def _take(batch: FollowBatch, change) -> None:
        batch.counts[change.kind] = batch.counts.get(change.kind, 0) + 1
        if batch.newest_timestamp is None or change.position.timestamp > batch.newest_timestamp:
            batch.newest_timestamp = change.position.timestamp
        gone = change.kind in ("delete", "move")
        if change.lesson_id is not None:
            batch.refresh.add(change.lesson_id)
            if gone:
                batch.tombstones[change.lesson_id] = change.position
                batch.revived.discard(change.lesson_id)
            else:
                batch.tombstones.pop(change.lesson_id, None)
                batch.revived.add(change.lesson_id)
        if change.kind == "move" and change.target_id is not None:
            batch.refresh.add(change.target_id)
            batch.tombstones.pop(change.target_id, None)
            batch.revived.add(change.target_id)
        batch.rcids[change.position.rcid] = change.position.timestamp

    def commit(self, batch: FollowBatch) -> None:
        """Persist ``batch.position`` after the batch was applied (never moves the checkpoint back)."""
        self._seen.update(batch.rcids)
        if batch.position is not None:
            self.commit_position(batch.position)

    def commit_position(self, position: ChangePosition | None) -> None:
        """Persist ``position`` (e.g. the head read before a full rebuild) when it is ahead of the checkpoint.

        Raises OSError when the store cannot write; the in-memory position then stays unchanged.
        """
        if position is None:
            return
        with self._lock:
            if self._position is not None and position <= self._position:
                return
            self.store.save(self.generation, position)
            self._position = position
            floor = _iso(_epoch(position.timestamp) - 2 * self.overlap_seconds)
            self._seen = {rcid: ts for rcid, ts in self._seen.items() if ts >= floor}
