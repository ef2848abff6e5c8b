"""``S3RM_TEST_LOAD=N``: N busy processes beside the whole test session (README, "Tests").

Started once per pytest session by the controlling process (never by an xdist worker, see
``tests/conftest.py``), stopped when the session ends however it ends (pass, failure, Ctrl-C): pytest runs
the config's cleanups at unconfigure. Each process spins on the CPU and also ends by itself as soon as the
process that started it is gone (its parent id changes), so a killed pytest leaves no busy loop behind.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

__all__ = ["ENV", "BusyLoad", "load_from_env"]

ENV = "S3RM_TEST_LOAD"
#: Spins until its parent (the pid given as its argument) is gone: it is re-parented, os.getppid() changes.
#: The pid comes from the parent, so a parent that dies before the child starts is noticed too.
_SPIN = "import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent:\n    pass\n"


def load_from_env(environ: dict[str, str] | os._Environ = os.environ) -> int:
    """N from ``S3RM_TEST_LOAD`` (unset or empty: 0). Raises ValueError unless it is an integer 0..64."""
    raw = (environ.get(ENV) or "").strip()
    if not raw:
        return 0
    if not raw.isdigit() or int(raw) > 64:
        raise ValueError(f"{ENV}={raw!r}: give a number of busy processes from 0 to 64")
    return int(raw)


class BusyLoad:
    """``n`` busy Python processes; :meth:`start` and :meth:`stop` (idempotent), ``pids``."""

    def __init__(self, n: int):
        self.n = n
        self.procs: list[subprocess.Popen] = []

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def start(self) -> "BusyLoad":
        for _ in range(self.n):
            argv = [sys.executable, "-c", _SPIN, str(os.getpid())]
            self.procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL))
        return self

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs:
            proc.wait(timeout=30)
        self.procs.clear()
