"""The candidate value and its size caps.

Contract: docs/research-tools.md#candidate-format.

A :class:`Candidate` is what ``collect-candidates`` writes, one JSON object
per line: ``source`` (``code``, ``docs`` or ``slack``), ``locator`` (where it
is, stable across runs), ``title`` (≤ :data:`MAX_TITLE_CHARS`), ``body``
(≤ :data:`MAX_BODY_CHARS`, secrets already masked), ``masked`` (masked values
per kind) and ``digest`` (SHA-256 of title and body, both masked). ``key`` is
the checkpoint identity (locator without the line range, plus a part number),
so an edit inside one section changes only that section's candidate.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

__all__ = ["MAX_BODY_CHARS", "MAX_LINES", "MAX_TITLE_CHARS", "MAX_FILE_BYTES", "Candidate", "split_lines",
           "shorten", "FileStats", "markers_in"]

#: Caps of one candidate.
MAX_BODY_CHARS = 6000
MAX_LINES = 150
MAX_TITLE_CHARS = 200
#: Files larger than this are skipped as "huge" (code and docs).
MAX_FILE_BYTES = 1_000_000
_MARKER = re.compile(r"\[MASKED:([a-z0-9_]+)\]")


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``…`` when cut."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


@dataclass(frozen=True)
class Candidate:
    """One bounded, read-only candidate (module docstring). ``status`` is set by the checkpoint
    (``new`` or ``changed``)."""

    source: str
    key: str
    locator: dict[str, Any]
    title: str
    body: str
    masked: Counter = field(default_factory=Counter)
    status: str = "new"

    @property
    def digest(self) -> str:
        """Hex SHA-256 of the masked title and body (what the checkpoint compares)."""
        return hashlib.sha256(json.dumps([self.title, self.body], ensure_ascii=False).encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        """The JSON Lines object (key order fixed)."""
        return {"source": self.source, "locator": self.locator, "title": self.title, "body": self.body,
                "masked": dict(sorted(self.masked.items())), "digest": self.digest, "status": self.status}


def split_lines(lines: list[tuple[int, str]]) -> Iterator[tuple[int, int, str]]:
    """Split numbered ``lines`` (``(source line 1-based, text)``) into parts of at most
    :data:`MAX_LINES` lines and :data:`MAX_BODY_CHARS` characters; yields ``(first_line, last_line, text)``.

    A single line longer than the cap is cut (``…``). Empty input yields nothing.
    """
    start = 0
    while start < len(lines):
        size, end = 0, start
        while end < len(lines) and end - start < MAX_LINES:
            add = len(lines[end][1]) + 1
            if end > start and size + add > MAX_BODY_CHARS:
                break
            size += add
            end += 1
        text = shorten("\n".join(t for _, t in lines[start:end]), MAX_BODY_CHARS)
        yield lines[start][0], lines[end - 1][0], text
        start = end


@dataclass
class FileStats:
    """Counts of one source walk: ``files`` read, ``messages`` (Slack) read, ``skipped`` per reason,
    ``masked`` values per kind."""

    files: int = 0
    messages: int = 0
    skipped: Counter = field(default_factory=Counter)
    masked: Counter = field(default_factory=Counter)


def markers_in(text: str) -> Counter:
    """Masked values per kind in an already masked text (counts its ``[MASKED:kind]`` markers)."""
    return Counter(_MARKER.findall(text))
