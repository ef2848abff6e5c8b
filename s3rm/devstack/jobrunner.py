"""The dev wiki's job runner: ``python -m s3rm.devstack.jobrunner jobrunner --dir DIR``.

MediaWiki runs no jobs during web requests on the dev wiki (``$wgJobRunRate =
0``); this loop runs ``maintenance/runJobs.php`` every few seconds and records
each run in ``jobrunner-state.json``, which the gateway's ``/readyz`` reads
(``S3RM_JOBRUNNER_STATE_FILE``). After each run it merges the SQLite search
index when saves have fragmented it (:mod:`s3rm.devstack.searchindex`). Started by ``s3rm dev wiki up``
(:func:`s3rm.devstack.wikiserver.start_jobrunner`).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from s3rm.devstack.statefiles import now_iso
from s3rm.devstack.packages import MW_ROOT, php_env
from s3rm.devstack.procs import lower_cpu_priority
from s3rm.devstack.searchindex import database, merge_if_fragmented
from s3rm.devstack.wikiserver import JOBRUNNER_STATE_FILE, stop_server

#: Seconds between two runs of ``runJobs.php``.
JOBRUNNER_INTERVAL_S = 2.0
#: Niceness of the job runner and so of each ``runJobs.php`` run and search-index merge (the wiki
#: server keeps the default); applied with :func:`s3rm.devstack.procs.lower_cpu_priority`.
JOB_NICENESS = 10


def run_jobrunner(wiki_dir: Path, interval: float = JOBRUNNER_INTERVAL_S,
                  watch_pid: int | None = None) -> int:
    """Run ``maintenance/runJobs.php`` every ``interval`` seconds until SIGTERM.

    After each run it atomically writes ``<dir>/jobrunner-state.json`` =
    ``{"last_run_at": "<UTC ISO-8601>Z", "ok": bool, "exit_code": int,
    "duration_s": float, "pid": int}`` (plus ``"error"`` when not ok). It exits
    when the wiki directory disappears, and, with ``watch_pid``, stops the wiki
    server and exits when that process is gone (so a killed test session does
    not leak servers). Returns the process exit code.
    """
    stop = False

    def _on_signal(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    lower_cpu_priority(JOB_NICENESS)  # jobs and merges are background work (docs/operations.md#job-priority)
    state_file = wiki_dir / JOBRUNNER_STATE_FILE
    print(f"{now_iso()} job runner started for {wiki_dir} (pid {os.getpid()})", flush=True)
    while not stop:
        if not (wiki_dir / "LocalSettings.php").is_file():
            print(f"{now_iso()} {wiki_dir} is gone; exiting", flush=True)
            return 0
        if watch_pid and not _pid_alive(watch_pid):
            print(f"{now_iso()} owner pid {watch_pid} is gone; stopping the wiki", flush=True)
            stop_server(wiki_dir)
            return 0
        t0 = time.monotonic()
        record: dict[str, Any]
        try:
            proc = subprocess.run(
                ["php", str(MW_ROOT / "maintenance" / "runJobs.php"), "--maxtime", "60"],
                cwd=MW_ROOT, env=php_env(wiki_dir), capture_output=True, text=True,
                timeout=300, check=False)
            ok = proc.returncode == 0
            record = {"ok": ok, "exit_code": proc.returncode}
            out = (proc.stdout + proc.stderr).strip()
            if out and out != "Job queue is empty.":
                print(f"{now_iso()} runJobs (exit {proc.returncode}):\n{out}", flush=True)
            if not ok:
                record["error"] = "\n".join(out.splitlines()[-5:])
        except subprocess.TimeoutExpired:
            record = {"ok": False, "exit_code": None, "error": "runJobs.php timed out after 300 s"}
            print(f"{now_iso()} runJobs timed out", flush=True)
        if stop:
            break
        try:
            merged = merge_if_fragmented(database(wiki_dir))
            if merged is not None:
                record["search_index_merged_segments"] = merged
        except (OSError, sqlite3.Error) as exc:  # a busy or missing database: try again next run
            print(f"{now_iso()} search index merge skipped: {exc}", flush=True)
        record.update({"last_run_at": now_iso(), "duration_s": round(time.monotonic() - t0, 3),
                       "pid": os.getpid()})
        tmp = state_file.with_name(f".{state_file.name}.tmp")
        try:
            tmp.write_text(json.dumps(record, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, state_file)
        except OSError:
            if not wiki_dir.exists():
                return 0
            raise
        deadline = time.monotonic() + interval
        while not stop and time.monotonic() < deadline:
            time.sleep(0.1)
    print(f"{now_iso()} job runner stopped", flush=True)
    return 0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m s3rm.devstack.jobrunner")
    sub = parser.add_subparsers(dest="cmd", required=True)
    jr = sub.add_parser("jobrunner", help="(internal) the job-runner loop started by `up`")
    jr.add_argument("--dir", type=Path, required=True)
    jr.add_argument("--interval", type=float, default=JOBRUNNER_INTERVAL_S)
    jr.add_argument("--watch-pid", type=int, default=None)
    args = parser.parse_args(argv)
    return run_jobrunner(args.dir, args.interval, args.watch_pid)



if __name__ == "__main__":
    sys.exit(main())
