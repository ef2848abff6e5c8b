#!/usr/bin/env python3
"""Write the committed table of how long each test file takes (tests/durations.json) from junit reports.

    python -m pytest -q --junitxml=.dev/junit.xml        # one full run (its durations)
    python scripts/test_durations.py .dev/junit.xml      # rewrite tests/durations.json
    python scripts/test_durations.py full.xml module.xml # a later report's files replace the earlier's

The table is ``{"<test file path>": seconds}``: each file's test cases summed (pytest's junit
``time`` is setup + call + teardown, so a module fixture's start-up counts), rounded up to whole
seconds, slowest first. ``tests/conftest.py`` schedules the slowest files first with it, because with
``--dist loadfile`` a long file that starts last sets the end of the run (README "Tests"). It is an
ordering hint only: no test reads it, a stale or missing entry changes nothing but the order.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO / "tests" / "durations.json"


def file_of(classname: str, repo: Path = REPO) -> str | None:
    """The test file of a junit ``classname`` (``tests.a.test_b`` or ``tests.a.test_b.TestC``), or None."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (repo / path).is_file():
            return path
    return None


def durations(report: Path, repo: Path = REPO) -> dict[str, float]:
    """Seconds per test file in one junit XML report (test cases of files that no longer exist are left out)."""
    out: dict[str, float] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        path = file_of(case.get("classname", ""), repo)
        if path is not None:
            out[path] = out.get(path, 0.0) + float(case.get("time") or 0.0)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("reports", nargs="+", type=Path, help="junit XML reports, oldest first")
    p.add_argument("--output", type=Path, default=TABLE)
    args = p.parse_args(argv)
    table: dict[str, float] = {}
    for report in args.reports:
        table.update(durations(report))
    if not table:
        print("no test cases of existing test files in the reports", file=sys.stderr)
        return 1
    ordered = dict(sorted(((k, math.ceil(v)) for k, v in table.items()), key=lambda kv: (-kv[1], kv[0])))
    args.output.write_text(json.dumps(ordered, indent=0) + "\n")
    print(f"{args.output}: {len(ordered)} files, {sum(ordered.values())} s in all, slowest "
          f"{next(iter(ordered))} ({next(iter(ordered.values()))} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
