"""The dev job runner's CPU priority (s3rm/devstack/procs.py ``lower_cpu_priority``,
docs/operations.md#job-priority).

That the runner drains the queue and merges the search index on a real wiki is tested in
test_devwiki.py.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from s3rm.devstack.jobrunner import JOB_NICENESS
from s3rm.devstack.procs import AUTOGROUP_FILE

REPO = Path(__file__).resolve().parents[3]
PROBE = ("import os; from s3rm.devstack.procs import lower_cpu_priority; lower_cpu_priority({n}); "
         "print(os.nice(0)); f = '/proc/self/autogroup'; print(open(f).read().strip() if os.path.exists(f) else '')")


def _probe(niceness: int, *, new_session: bool) -> tuple[int, str]:
    child = subprocess.run([sys.executable, "-c", PROBE.format(n=niceness)], capture_output=True, text=True,
                           check=True, cwd=REPO, start_new_session=new_session)
    nice, autogroup = (child.stdout.splitlines() + [""])[:2]
    return int(nice), autogroup


def test_a_background_session_runs_at_a_lower_priority_and_so_does_its_autogroup() -> None:
    runner = os.nice(0)
    nice, autogroup = _probe(JOB_NICENESS, new_session=True)
    assert JOB_NICENESS > 0 and nice == min(19, runner + JOB_NICENESS)
    if AUTOGROUP_FILE.exists():  # autogroup kernels: the whole session yields, not just its nice value
        assert autogroup.endswith(f"nice {JOB_NICENESS}"), autogroup
    assert os.nice(0) == runner  # only the child was lowered


def test_a_process_in_someone_elses_session_leaves_that_sessions_autogroup_alone() -> None:
    before = AUTOGROUP_FILE.read_text().strip() if AUTOGROUP_FILE.exists() else ""
    nice, autogroup = _probe(5, new_session=False)
    assert nice == min(19, os.nice(0) + 5)
    assert autogroup == before  # this test session's autogroup keeps its nice value


def test_a_helper_started_as_background_work_runs_lowered(tmp_path) -> None:
    """procs.start(niceness=…): a helper that is background work from its first instruction."""
    from s3rm.devstack import procs

    log = tmp_path / "probe.log"
    pid = procs.start([sys.executable, "-c", PROBE.replace("lower_cpu_priority({n}); ", "")],
                      pid_file=tmp_path / "probe.pid", log_file=log, cwd=REPO, niceness=7)
    deadline = time.monotonic() + 60  # a Python start-up, longer on a busy machine
    while time.monotonic() < deadline:
        if len(log.read_text().splitlines()) >= 2 or not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.05)
    nice, autogroup = (log.read_text().splitlines() + ["", ""])[:2]
    assert int(nice) == min(19, os.nice(0) + 7)
    if AUTOGROUP_FILE.exists():
        assert autogroup.endswith("nice 7"), autogroup


def test_a_running_server_is_lowered_from_outside_once_it_has_loaded(tmp_path) -> None:
    """procs.lower_cpu_priority_of — how the dev stack lowers its document embedding server once it answers
    (it loads its model at full priority meanwhile): every thread and the session's autogroup."""
    from s3rm.devstack import procs

    log = tmp_path / "server.log"
    server = ("import threading, time; threading.Thread(target=time.sleep, args=(120,), daemon=True).start(); "
              "print('up', flush=True); time.sleep(120)")
    pid = procs.start([sys.executable, "-c", server], pid_file=tmp_path / "server.pid", log_file=log, cwd=REPO)
    try:
        deadline = time.monotonic() + 60  # a Python start-up, longer on a busy machine
        while time.monotonic() < deadline and "up" not in log.read_text():
            time.sleep(0.05)
        tasks = sorted(Path(f"/proc/{pid}/task").iterdir())
        assert len(tasks) == 2  # the main thread and the one it started
        lowered = procs.lower_cpu_priority_of(pid, 7)
        for task in tasks:
            assert int((task / "stat").read_text().rsplit(")", 1)[1].split()[16]) == min(19, os.nice(0) + 7), task
        if AUTOGROUP_FILE.exists():
            assert lowered and Path(f"/proc/{pid}/autogroup").read_text().strip().endswith("nice 7")
        assert procs.lower_cpu_priority_of(999_999_999, 7) is False  # gone: nothing to lower, no error
    finally:
        procs.stop(tmp_path / "server.pid", "time.sleep(120)")
