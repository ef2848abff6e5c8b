"""The dev job runner's job priority (sync/devstack/jobrunner.py, docs/operations.md#job-priority).

That the runner drains the queue and merges the search index on a real wiki is tested in
test_devwiki.py.
"""
from __future__ import annotations

import os
import subprocess
import sys

from sync.devstack.jobrunner import JOB_NICENESS, _lower_priority


def test_a_job_batch_runs_at_a_lower_cpu_priority_than_the_runner() -> None:
    runner = os.nice(0)
    child = subprocess.run([sys.executable, "-c", "import os; print(os.nice(0))"], capture_output=True,
                           text=True, check=True, preexec_fn=_lower_priority)
    assert JOB_NICENESS > 0 and int(child.stdout) == min(19, runner + JOB_NICENESS)
    assert os.nice(0) == runner  # only the child was lowered
