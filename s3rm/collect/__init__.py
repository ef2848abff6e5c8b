"""``s3rm collect-candidates``: bounded, read-only candidates from code, docs and a Slack export.

Contract: docs/research-tools.md#collect-candidates. Modules: :mod:`.secrets`
(masking), :mod:`.chunks` (the candidate value and size caps), :mod:`.code`,
:mod:`.docs`, :mod:`.slack` (the three sources), :mod:`.checkpoint`
(incremental runs).

Reads up to three sources (``--code-root``, ``--docs-root``,
``--slack-export``), masks secrets (:mod:`s3rm.collect.secrets`), cuts
everything into bounded candidates (:mod:`s3rm.collect.chunks`) and writes
the new and changed ones as JSON Lines to ``--output`` (``-`` = stdout). With
``--checkpoint DIR`` a second run writes only candidates that are new or whose
masked content changed. It never talks to the wiki or the gateway: no Lesson
and no evidence is saved; a person or agent checks the source and attaches
evidence explicitly over MCP.

Progress bars go to stderr, only when stderr is a terminal or with
``--progress``. The closing summary (stderr) counts files, messages,
candidates (new, changed, unchanged, removed) and masked secrets by kind.
Nothing printed names a masked value; error messages name files, never
their content.

Exit codes: 0 done; 2 usage (no source, a root that is not a directory, not a
Slack export, a foreign checkpoint, an output that cannot be written).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, TextIO

from s3rm.errors import CliError
from s3rm.collect.checkpoint import Checkpoint, CheckpointError, namespace
from s3rm.collect.chunks import FileStats
from s3rm.collect.code import code_candidates
from s3rm.collect.docs import docs_candidates
from s3rm.collect.slack import SlackExportError, slack_candidates

__all__ = ["RunSummary", "collect", "format_summary", "register"]

#: (option attribute, source kind, candidate generator, progress unit)
SOURCES: tuple[tuple[str, str, Callable, str], ...] = (
    ("code_root", "code", code_candidates, "file"),
    ("docs_root", "docs", docs_candidates, "file"),
    ("slack_export", "slack", slack_candidates, "day"),
)


@dataclass
class RunSummary:
    """What one run did: per-source :class:`FileStats`, candidate counts by status, removed count."""

    stats: dict[str, FileStats] = field(default_factory=dict)
    candidates: Counter = field(default_factory=Counter)
    removed: int = 0

    @property
    def masked(self) -> Counter:
        """Masked values per kind over every source."""
        total: Counter = Counter()
        for s in self.stats.values():
            total.update(s.masked)
        return total


@contextmanager
def _progress(enabled: bool, desc: str, unit: str) -> Iterator[Callable[[int], None] | None]:
    if not enabled:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(desc=desc, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)
    try:
        yield bar.update
    finally:
        bar.close()


def collect(roots: dict[str, Path], out: TextIO, checkpoint: Checkpoint, *, progress: bool = False) -> RunSummary:
    """Write the new/changed candidates of every source in ``roots`` (kind → path) to ``out``.

    Updates ``checkpoint.current`` (the caller saves it after ``out`` is safely written).
    Raises ``NotADirectoryError`` or :class:`SlackExportError` for a bad root.
    """
    summary = RunSummary()
    for attr, kind, generate, unit in SOURCES:
        root = roots.get(kind)
        if root is None:
            continue
        stats = summary.stats.setdefault(kind, FileStats())
        space = namespace(kind, root)
        with _progress(progress, kind, unit) as tick:
            for cand in generate(root, stats, tick):
                status = checkpoint.status(space, cand.key, cand.digest)
                summary.candidates[status] += 1
                if status != "unchanged":
                    out.write(json.dumps({**cand.to_json(), "status": status}, ensure_ascii=False) + "\n")
        summary.removed += checkpoint.removed(space)
    return summary


def format_summary(summary: RunSummary) -> str:
    """The closing summary as text lines (counts only, never content)."""
    lines = []
    for kind, s in summary.stats.items():
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(s.skipped.items())) or "none"
        unit = "day files" if kind == "slack" else "files"
        extra = f", {s.messages} messages" if kind == "slack" else ""
        lines.append(f"{kind}: {s.files} {unit} read{extra}; skipped: {skipped}")
    c = summary.candidates
    lines.append(f"candidates: {c['new'] + c['changed']} written (new {c['new']}, changed {c['changed']}), "
                 f"unchanged {c['unchanged']}, removed {summary.removed}")
    masked = summary.masked
    detail = ", ".join(f"{k} {v}" for k, v in sorted(masked.items()))
    lines.append(f"masked secrets: {sum(masked.values())}" + (f" ({detail})" if detail else ""))
    return "\n".join(lines)


def cmd_collect(args: argparse.Namespace) -> int:
    """Handler of ``s3rm collect-candidates`` (module docstring); returns the exit code."""
    roots = {kind: Path(getattr(args, attr)) for attr, kind, _, _ in SOURCES if getattr(args, attr)}
    if not roots:
        raise CliError("name at least one source: --code-root, --docs-root or --slack-export", 2)
    for kind, root in roots.items():
        if kind != "slack" and not root.is_dir():
            raise CliError(f"{root}: not a directory", 2)
        if kind == "slack" and not root.exists():
            raise CliError(f"{root}: no such file or directory", 2)
    try:
        checkpoint = Checkpoint.load(Path(args.checkpoint) if args.checkpoint else None)
    except CheckpointError as exc:
        raise CliError(str(exc), 2) from exc
    progress = args.progress if args.progress is not None else sys.stderr.isatty()
    to_stdout = args.output == "-"
    target = Path(args.output)
    tmp = None
    try:
        if to_stdout:
            summary = collect(roots, sys.stdout, checkpoint, progress=progress)
            sys.stdout.flush()
        else:
            fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".",
                                       prefix=f".{target.name}.", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                summary = collect(roots, out, checkpoint, progress=progress)
            os.replace(tmp, target)
            tmp = None
        checkpoint.save()
    except SlackExportError as exc:
        raise CliError(str(exc), 2) from exc
    except NotADirectoryError as exc:
        raise CliError(f"{exc}: not a directory", 2) from exc
    except OSError as exc:
        raise CliError(f"cannot write the output or checkpoint ({type(exc).__name__}: {exc.filename or target})",
                       2) from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    print(format_summary(summary), file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``s3rm collect-candidates`` to the ``s3rm`` parser."""
    p = subparsers.add_parser(
        "collect-candidates",
        help="turn a code checkout, a docs tree and a Slack export into read-only candidates (secrets masked)",
        description="Read a code checkout (its git file list), a docs directory (Markdown, reStructuredText, "
                    "plain text, HTML) and a Slack export (directory or zip in Slack's export layout) and write "
                    "bounded candidates as JSON Lines: source, stable locator, title and a body with secrets "
                    "masked. With --checkpoint a later run writes only new or changed candidates. Saves no "
                    "Lesson and no evidence. See docs/research-tools.md.",
    )
    p.add_argument("--code-root", metavar="DIR", help="a code checkout (git ls-files decides the files)")
    p.add_argument("--docs-root", metavar="DIR", help="a directory of documents")
    p.add_argument("--slack-export", metavar="PATH", help="a Slack export directory or .zip")
    p.add_argument("--checkpoint", metavar="DIR", help="directory of the checkpoint (hashes only); created if missing")
    p.add_argument("--output", metavar="FILE.jsonl", required=True, help="JSON Lines output file, or - for stdout")
    bars = p.add_mutually_exclusive_group()
    bars.add_argument("--progress", dest="progress", action="store_true", default=None,
                      help="show progress bars on stderr even when it is not a terminal")
    bars.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress bars")
    p.set_defaults(handler=cmd_collect, error_prefix="s3rm collect-candidates")
