"""Revision memory: decoded Lesson pages kept by immutable revision id (docs/read-path.md#revision-memory).

:class:`~gateway.wiki.repository.MediaWikiRepository` keeps one
:class:`RevisionMemory`, so a revision it has read and parsed once is neither
parsed again nor, when MediaWiki reports the same sha1, read again with its
content.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from gateway.domain.model import LessonPage

__all__ = ["PARSED_CACHE_SIZE", "RevisionMemory"]

#: Decoded pages kept in memory (keyed by immutable revision id).
PARSED_CACHE_SIZE = 4096


class RevisionMemory:
    """Thread-safe LRU of decoded pages keyed by revision id (docs/read-path.md#revision-memory).

    A revision's content never changes, so re-reading a revision (every search
    re-reads its candidates fresh) can skip the wikitext parse. A read WITH
    content is compared with the remembered text (:meth:`get`); a read without
    content (revision id and sha1 only, :meth:`known`) is served from memory only
    when MediaWiki reports the same sha1 for that revision as when its text was
    read. Each hit returns fresh record dicts so callers cannot alter the cached page.
    """

    def __init__(self, size: int = PARSED_CACHE_SIZE):
        self._size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[int, tuple[str, LessonPage, str]] = OrderedDict()
        self._latest: OrderedDict[str, int] = OrderedDict()   # lesson id → last revision read

    def get(self, revid: int, text: str) -> LessonPage | None:
        with self._lock:
            hit = self._items.get(revid)
            if hit is None or hit[0] != text:
                return None
            self._items.move_to_end(revid)
        return _copy(hit[1])

    def known(self, revid: int, sha1: Any) -> tuple[str, LessonPage] | None:
        """(text, page copy) of revision ``revid`` when it was read with this ``sha1`` (non-empty), else None."""
        if not isinstance(sha1, str) or not sha1:
            return None
        with self._lock:
            hit = self._items.get(revid)
            if hit is None or hit[2] != sha1:
                return None
            self._items.move_to_end(revid)
        return hit[0], _copy(hit[1])

    def note(self, lesson_id: str, revid: int) -> None:
        """Remember that ``revid`` is the last revision of ``lesson_id`` read."""
        with self._lock:
            self._latest[lesson_id] = revid
            self._latest.move_to_end(lesson_id)
            while len(self._latest) > self._size:
                self._latest.popitem(last=False)

    def remembers(self, lesson_id: str) -> bool:
        """True when the last revision of ``lesson_id`` read is in memory with its sha1."""
        with self._lock:
            hit = self._items.get(self._latest.get(lesson_id, -1))
            return hit is not None and bool(hit[2])

    def forget(self, lesson_id: str) -> None:
        """Drop the last-read note of ``lesson_id`` (it is being edited)."""
        with self._lock:
            self._latest.pop(lesson_id, None)

    def put(self, revid: int, text: str, page: LessonPage, sha1: str = "") -> LessonPage:
        """Cache ``page`` (read with ``sha1``; empty: never served by :meth:`known`) and return a private copy."""
        with self._lock:
            self._items[revid] = (text, page, sha1)
            self._items.move_to_end(revid)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return _copy(page)


def _copy(page: LessonPage) -> LessonPage:
    return LessonPage(fields=dict(page.fields), evidence=tuple(dict(e) for e in page.evidence),
                      verifications=tuple(dict(v) for v in page.verifications),
                      relations=tuple(dict(r) for r in page.relations), extra_wikitext=page.extra_wikitext)
