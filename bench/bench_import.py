#!/usr/bin/env python3
"""The first-build import of ``s3rm stack up``: the shipped corpus into a fresh development wiki.

Not a CI test (docs/operations.md#dev-wiki-sqlite). Each round copies the test
wiki template twice (``devwiki.start_test_wiki``, free loopback ports), pushes
the site pages (``s3rm sync push``) and imports the cloud-incidents corpus
(``s3rm import cloud-incidents``, ``--workers`` as the stack runs it) into each:

* **baseline** — the main database back at SQLite's default ``synchronous=FULL``
  (an ``S3RM.local.php`` override of the dev settings), as before;
* **shipped** — the dev settings as they are (``synchronous=NORMAL``).

Rounds alternate the order of the two. Prints one table: per variant the
import's wall time (median and worst of the rounds), Lessons per second and
the load average at the end.

    python bench/bench_import.py                 # 2 rounds, all 356 Lessons, ~5 minutes on two idle cores
    python bench/bench_import.py --rounds 3 --limit 120
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout, not whatever an editable install points at

from s3rm.devstack import devwiki  # noqa: E402
from s3rm.devstack.stack import CORPUS  # noqa: E402

BASELINE_OVERRIDE = "<?php\n$wgDBservers[0]['variables']['synchronous'] = 'FULL';\n"
VARIANTS = ("baseline", "shipped")


def _s3rm(env: dict[str, str], *args: str) -> None:
    """Run ``python -m s3rm ARGS`` against the wiki in ``env``; raise when it fails."""
    subprocess.run([sys.executable, "-m", "s3rm", *args], env=env, cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1800)


def one_run(variant: str, scratch: Path, limit: int, workers: int) -> float:
    """Import into a fresh wiki copy with ``variant``'s settings; return the import's wall seconds."""
    wiki = devwiki.start_test_wiki(scratch / variant)
    try:
        if variant == "baseline":
            (wiki.dir / "S3RM.local.php").write_text(BASELINE_OVERRIDE)
        env = dict(os.environ, **wiki.env(), PYTHONPATH=str(REPO))
        _s3rm(env, "sync", "push")
        args = ["import", "cloud-incidents", str(CORPUS), "--quiet", "--workers", str(workers)]
        if limit:
            args += ["--limit", str(limit)]
        start = time.perf_counter()
        _s3rm(env, *args)
        return time.perf_counter() - start
    finally:
        devwiki.down(wiki.dir, quiet=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="import only the first N records (0: all 356)")
    parser.add_argument("--workers", type=int, default=4, help="import workers (default 4, as the stack)")
    args = parser.parse_args(argv)
    walls: dict[str, list[float]] = {v: [] for v in VARIANTS}
    lessons = args.limit or 356
    for rnd in range(args.rounds):
        for variant in (VARIANTS if rnd % 2 == 0 else VARIANTS[::-1]):
            with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
                walls[variant].append(one_run(variant, Path(tmp), args.limit, args.workers))
            print(f"round {rnd + 1} {variant}: {walls[variant][-1]:.1f} s", file=sys.stderr, flush=True)
    load = os.getloadavg()[0]
    print(f"\nimport of {lessons} Lessons, {args.workers} workers, {args.rounds} rounds (load average {load:.1f})\n")
    print("| main database | import median | import worst | Lessons/s (median) |")
    print("| --- | --- | --- | --- |")
    for variant, label in zip(VARIANTS, ("synchronous=FULL (baseline)", "synchronous=NORMAL (shipped)")):
        med = statistics.median(walls[variant])
        print(f"| {label} | {med:.1f} s | {max(walls[variant]):.1f} s | {lessons / med:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
