"""Docs candidates: Markdown, reStructuredText, plain text and HTML, one candidate per section.

Contract: docs/research-tools.md#docs-source.

Files under ``root`` with an extension in :data:`DOC_EXTENSIONS` (sorted walk,
hidden directories and :data:`~s3rm.collect.code.VENDORED_DIRS` skipped;
huge, binary and non-UTF-8 files skipped as for code). Each file is masked as
a whole, then split into sections:

* Markdown: ATX (``# …``) and setext (underlined ``===`` / ``---``) headings
  outside fenced code blocks;
* reStructuredText: a title line underlined (optionally overlined) with one
  repeated punctuation character at least as long as the title;
* HTML: text content (``script``/``style`` dropped, entities decoded), a new
  section at every ``h1``–``h6``; line numbers are those of the HTML source;
* plain text: the whole file.

A section longer than the caps is cut into parts. Locator ``{"path",
"lines": [first, last], "section": heading path}``; key
``docs:<path>#<heading path>#<n>`` where ``n`` counts equal heading paths and
parts, so editing one section leaves the other sections' keys and digests alone.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterator

from s3rm.collect.chunks import MAX_TITLE_CHARS, Candidate, FileStats, markers_in, shorten, split_lines
from s3rm.collect.code import VENDORED_DIRS, masked_file
from s3rm.collect.secrets import mask_text

__all__ = ["DOC_EXTENSIONS", "Section", "sections_of", "docs_candidates", "list_doc_files"]

DOC_EXTENSIONS = {".md": "markdown", ".markdown": "markdown", ".rst": "rst", ".txt": "text", ".text": "text",
                  ".html": "html", ".htm": "html"}
_ATX = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
_RST_ADORN = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}\s*$")

#: One section: (heading path, numbered lines ``[(source line 1-based, text)]``).
Section = tuple[tuple[str, ...], list[tuple[int, str]]]


def _nest(path: list[tuple[int, str]], level: int, title: str) -> list[tuple[int, str]]:
    return [p for p in path if p[0] < level] + [(level, title)]


def _markdown(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, title) of every heading."""
    heads, fence = [], None
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if m:
            mark = m.group(1)[0]
            fence = None if fence == mark else (fence or mark)
            continue
        if fence:
            continue
        m = _ATX.match(line)
        if m:
            heads.append((i, len(m.group(1)), m.group(2)))
        elif i > 0 and _SETEXT.match(line) and lines[i - 1].strip() and not _ATX.match(lines[i - 1]) \
                and (line.strip()[0] == "=" or not lines[i - 1].lstrip().startswith(("-", "*", "+"))):
            heads.append((i - 1, 1 if line.strip()[0] == "=" else 2, lines[i - 1].strip()))
    return heads


def _rst(lines: list[str]) -> list[tuple[int, int, str]]:
    heads, levels = [], []
    for i in range(1, len(lines)):
        m = _RST_ADORN.match(lines[i])
        title = lines[i - 1].strip()
        if not m or not title or _RST_ADORN.match(lines[i - 1]) or len(lines[i].rstrip()) < len(title):
            continue
        over = i >= 2 and lines[i - 2].rstrip() == lines[i].rstrip()
        style = (m.group(1), over)
        if style not in levels:
            levels.append(style)
        heads.append((i - 2 if over else i - 1, levels.index(style) + 1, title))
    return heads


class _HtmlText(HTMLParser):
    """Text of an HTML document as (source line, text) pieces, headings marked."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.pieces: list[tuple[int, str, int]] = []  # (line, text, heading level or 0)
        self._skip = 0
        self._heading = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self._heading = int(tag[1])

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1
        elif re.fullmatch(r"h[1-6]", tag):
            self._heading = 0

    def handle_data(self, data):
        if self._skip or not data.strip():
            return
        self.pieces.append((self.getpos()[0], " ".join(data.split()), self._heading))


def _html_sections(text: str) -> list[Section]:
    parser = _HtmlText()
    parser.feed(text)
    parser.close()
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    current: Section | None = None
    for line, piece, level in parser.pieces:
        if level:
            path = _nest(path, level, piece)
            current = (tuple(t for _, t in path), [(line, piece)])
            sections.append(current)
        else:
            if current is None:
                current = ((), [])
                sections.append(current)
            current[1].append((line, piece))
    return sections


def sections_of(text: str, kind: str) -> list[Section]:
    """Split a (masked) document into sections: ``[(heading path, numbered lines)]`` (module docstring)."""
    if kind == "html":
        return _html_sections(text)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    heads = _markdown(lines) if kind == "markdown" else _rst(lines) if kind == "rst" else []
    numbered = list(enumerate(lines, 1))
    sections: list[Section] = []
    starts = [h[0] for h in heads]
    if not heads or starts[0] > 0:
        sections.append(((), numbered[: starts[0] if heads else len(lines)]))
    path: list[tuple[int, str]] = []
    for n, (index, level, title) in enumerate(heads):
        path = _nest(path, level, title)
        end = starts[n + 1] if n + 1 < len(heads) else len(lines)
        sections.append((tuple(t for _, t in path), numbered[index:end]))
    return [s for s in sections if any(text.strip() for _, text in s[1])]


def list_doc_files(root: Path) -> list[str]:
    """Relative POSIX paths of the documents under ``root`` (sorted; module docstring)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in VENDORED_DIRS)
        for name in sorted(filenames):
            if Path(name).suffix.lower() in DOC_EXTENSIONS:
                found.append(Path(dirpath, name).relative_to(root).as_posix())
    return sorted(found)


def docs_candidates(root: Path, stats: FileStats, progress=None) -> Iterator[Candidate]:
    """Candidates of every document under ``root`` (module docstring); updates ``stats``.

    Raises ``NotADirectoryError`` when ``root`` is not a directory.
    """
    if not root.is_dir():
        raise NotADirectoryError(str(root))
    for rel in list_doc_files(root):
        if progress:
            progress(1)
        masked = masked_file(root, rel, stats)
        if masked is None:
            continue
        seen: Counter = Counter()
        for heading, lines in sections_of(masked, DOC_EXTENSIONS[Path(rel).suffix.lower()]):
            label = " > ".join(heading)
            for first, last, body in split_lines(lines):
                n = seen[label]
                seen[label] += 1
                yield Candidate(source="docs", key=f"docs:{rel}#{label}#{n}",
                                locator={"path": rel, "lines": [first, last], "section": label},
                                title=shorten(mask_text(f"{rel} — {label}" if label else rel).text, MAX_TITLE_CHARS),
                                body=body, masked=markers_in(body))
