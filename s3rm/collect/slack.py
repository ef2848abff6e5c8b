"""Slack candidates: a workspace export in Slack's documented layout, one candidate per thread.

Contract: docs/research-tools.md#slack-source.

The export is a directory or the ``.zip`` Slack hands out, holding
``channels.json`` (public channels) and optionally ``groups.json`` (private
channels), ``mpims.json`` (group DMs), ``dms.json`` (DMs), ``users.json`` (or
``org_users.json``), and one folder per conversation (named after the
channel's ``name``, or its ``id`` for DMs) with one ``YYYY-MM-DD.json`` file
per day: a JSON array of message objects (``type``, ``user``, ``text``,
``ts``, optional ``thread_ts``, ``subtype``, ``files``).

Threads: a message whose ``thread_ts`` differs from its ``ts`` is a reply and
joins its parent's candidate (wherever its day file is); every other message
starts a candidate. Join/leave/topic/purpose/pin notices are skipped. Text is
made readable (``<@U…>`` → ``@name``, ``<#C…|name>`` → ``#name``,
``<url|label>`` → ``label <url>``, ``&lt;`` ``&gt;`` ``&amp;`` decoded) and then
masked. One line per message: ``YYYY-MM-DD HH:MM name: text`` (UTC). A thread
longer than the caps is cut into parts.

Locator ``{"channel", "channel_id", "ts", "thread_ts", "messages": count,
"part"}`` (``thread_ts`` is ``null`` for a message without replies); key
``slack:<channel id>:<ts>#<part>``. Errors: :class:`SlackExportError` (not an
export, unreadable JSON) naming the file, never its content.
"""
from __future__ import annotations

import html
import json
import re
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from s3rm.errors import S3rmError
from s3rm.collect.chunks import MAX_TITLE_CHARS, Candidate, FileStats, markers_in, shorten, split_lines
from s3rm.collect.secrets import mask_text

__all__ = ["SlackExportError", "SlackExport", "slack_candidates", "readable_text", "CONVERSATION_FILES"]

#: Conversation lists of an export and whether their folders are named by ``name`` (else ``id``).
CONVERSATION_FILES = (("channels.json", True), ("groups.json", True), ("mpims.json", True), ("dms.json", False))
SKIPPED_SUBTYPES = frozenset({"channel_join", "channel_leave", "group_join", "group_leave", "channel_topic",
                              "channel_purpose", "group_topic", "group_purpose", "pinned_item", "unpinned_item",
                              "channel_archive", "channel_unarchive", "channel_name", "group_name"})
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}\.json$")
_MAX_JSON_BYTES = 50_000_000


class SlackExportError(S3rmError):
    """The path is not a readable Slack export (message names the file and the problem only)."""


@dataclass
class SlackExport:
    """Read access to an export directory or zip (member names are POSIX paths relative to its root)."""

    path: Path

    def __post_init__(self) -> None:
        self._zip = None
        self._prefix = ""
        if self.path.is_file():
            try:
                self._zip = zipfile.ZipFile(self.path)
            except (OSError, zipfile.BadZipFile):
                raise SlackExportError(f"{self.path}: not a directory or a zip file") from None
            names = self._zip.namelist()
            roots = [n[: -len("channels.json")] for n in names if n.endswith("channels.json")
                     and n.count("/") <= 1 and PurePosixPath(n).name == "channels.json"]
            self._prefix = min(roots, key=len) if roots else ""
        elif not self.path.is_dir():
            raise SlackExportError(f"{self.path}: not a directory or a zip file")
        if not self.exists("channels.json"):
            raise SlackExportError(f"{self.path}: no channels.json (not a Slack export)")

    def exists(self, name: str) -> bool:
        """True when the member ``name`` exists."""
        if self._zip is not None:
            try:
                self._zip.getinfo(self._prefix + name)
                return True
            except KeyError:
                return False
        return (self.path / name).is_file()

    def read_json(self, name: str) -> Any:
        """Parse member ``name`` (raises :class:`SlackExportError` naming it on any failure)."""
        try:
            if self._zip is not None:
                info = self._zip.getinfo(self._prefix + name)
                if info.file_size > _MAX_JSON_BYTES:
                    raise SlackExportError(f"{name}: larger than {_MAX_JSON_BYTES} bytes")
                data = self._zip.read(info)
            else:
                file = self.path / name
                if file.stat().st_size > _MAX_JSON_BYTES:
                    raise SlackExportError(f"{name}: larger than {_MAX_JSON_BYTES} bytes")
                data = file.read_bytes()
            return json.loads(data.decode("utf-8"))
        except SlackExportError:
            raise
        except (OSError, KeyError, UnicodeDecodeError, ValueError) as exc:
            raise SlackExportError(f"{name}: cannot be read as JSON ({type(exc).__name__})") from None

    def day_files(self, folder: str) -> list[str]:
        """Sorted ``folder/YYYY-MM-DD.json`` member names."""
        if self._zip is not None:
            start = self._prefix + folder + "/"
            names = [n[len(self._prefix):] for n in self._zip.namelist() if n.startswith(start)
                     and "/" not in n[len(start):] and _DAY.match(n[len(start):])]
        else:
            base = self.path / folder
            names = [f"{folder}/{p.name}" for p in base.iterdir() if p.is_file() and _DAY.match(p.name)] \
                if base.is_dir() else []
        return sorted(names)

    def close(self) -> None:
        """Close the zip file (no-op for a directory)."""
        if self._zip is not None:
            self._zip.close()


def _user_names(export: SlackExport) -> dict[str, str]:
    for name in ("users.json", "org_users.json"):
        if export.exists(name):
            users = export.read_json(name)
            out = {}
            for u in users if isinstance(users, list) else []:
                if isinstance(u, dict) and isinstance(u.get("id"), str):
                    profile = u.get("profile") if isinstance(u.get("profile"), dict) else {}
                    out[u["id"]] = (profile.get("display_name") or u.get("name") or profile.get("real_name")
                                    or u["id"])
            return out
    return {}


_LINK = re.compile(r"<([^<>|]+)(?:\|([^<>]*))?>")


def readable_text(text: str, users: dict[str, str], channels: dict[str, str]) -> str:
    """Slack's message markup as plain text (module docstring)."""
    def link(m: re.Match[str]) -> str:
        target, label = m.group(1), m.group(2)
        if target.startswith("@"):
            return "@" + (label or users.get(target[1:], target[1:]))
        if target.startswith("#"):
            return "#" + (label or channels.get(target[1:], target[1:]))
        if target.startswith("!"):
            return "@" + (label or target[1:].split("^")[0])
        return f"{label} <{target}>" if label and label != target else target

    return html.unescape(_LINK.sub(link, text or ""))


def _ts_float(ts: Any) -> float | None:
    try:
        return float(ts)
    except (TypeError, ValueError):
        return None


def _line(msg: dict[str, Any], users: dict[str, str], channels: dict[str, str]) -> str:
    when = datetime.fromtimestamp(_ts_float(msg.get("ts")) or 0, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")
    who = users.get(msg.get("user", ""), msg.get("user") or msg.get("username") or msg.get("bot_id") or "?")
    text = readable_text(str(msg.get("text") or ""), users, channels)
    files = [f.get("name") or f.get("title") for f in msg.get("files") or [] if isinstance(f, dict)]
    if files:
        text += " [files: " + ", ".join(str(f) for f in files if f) + "]"
    return f"{when} {who}: " + " ".join(text.split("\n"))


def _conversations(export: SlackExport) -> list[tuple[str, str]]:
    """``[(folder, channel id, display name)]`` of every conversation the export lists."""
    out = []
    for list_name, by_name in CONVERSATION_FILES:
        if not export.exists(list_name):
            continue
        items = export.read_json(list_name)
        if not isinstance(items, list):
            raise SlackExportError(f"{list_name}: not a JSON array")
        for c in items:
            if not isinstance(c, dict) or not isinstance(c.get("id"), str):
                continue
            folder = c.get("name") if by_name and isinstance(c.get("name"), str) else c["id"]
            out.append((folder, c["id"], c.get("name") if isinstance(c.get("name"), str) else c["id"]))
    return out


def slack_candidates(path: Path, stats: FileStats, progress=None) -> Iterator[Candidate]:
    """Candidates of every thread in the export at ``path`` (module docstring).

    Updates ``stats``: ``files`` = day files read, ``messages`` = messages kept, ``skipped`` counts
    ``slack_notice`` and ``slack_malformed`` messages, ``masked`` = values per kind.
    Raises :class:`SlackExportError`.
    """
    export = SlackExport(path)
    try:
        users = _user_names(export)
        conversations = _conversations(export)
        channel_names = {cid: name for _, cid, name in conversations}
        for folder, cid, name in conversations:
            threads: dict[str, list[dict[str, Any]]] = {}
            for day in export.day_files(folder):
                if progress:
                    progress(1)
                messages = export.read_json(day)
                if not isinstance(messages, list):
                    raise SlackExportError(f"{day}: not a JSON array")
                stats.files += 1
                for msg in messages:
                    if not isinstance(msg, dict) or _ts_float(msg.get("ts")) is None:
                        stats.skipped["slack_malformed"] += 1
                        continue
                    if msg.get("subtype") in SKIPPED_SUBTYPES:
                        stats.skipped["slack_notice"] += 1
                        continue
                    stats.messages += 1
                    ts = str(msg["ts"])
                    root = str(msg.get("thread_ts") or ts)
                    threads.setdefault(root, []).append(msg)
            for root in sorted(threads, key=lambda t: _ts_float(t) or 0):
                msgs = sorted(threads[root], key=lambda m: _ts_float(m.get("ts")) or 0)
                result = mask_text("\n".join(_line(m, users, channel_names) for m in msgs))
                stats.masked.update(result.counts)
                lines = list(enumerate(result.text.split("\n"), 1))
                threaded = len(msgs) > 1 or any(m.get("reply_count") for m in msgs)
                first_text = result.text.split("\n", 1)[0].split(": ", 1)[-1]
                title = shorten(f"#{name} — {first_text}", MAX_TITLE_CHARS)
                for part, (_, _, body) in enumerate(split_lines(lines)):
                    yield Candidate(source="slack", key=f"slack:{cid}:{root}#{part}",
                                    locator={"channel": name, "channel_id": cid, "ts": root,
                                             "thread_ts": root if threaded else None, "messages": len(msgs),
                                             "part": part},
                                    title=title, body=body, masked=markers_in(body))
    finally:
        export.close()
