"""Detached helper processes for the development stack (wiki, job runner, embedding server, gateway).

Each process runs in its own session (process group) with a pid file; a
*marker* (a substring of its command line) guards against recycled pids.
"""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence


#: Where Linux keeps the nice value of the calling process's autogroup (sched(7)).
AUTOGROUP_FILE = Path("/proc/self/autogroup")


def lower_cpu_priority(niceness: int, *, attempts: int = 10) -> bool:
    """Lower this process's CPU priority by ``niceness`` (1–19) so that it yields to the servers.

    Two steps, because a nice value alone does not reach across sessions: with
    the kernel's autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``,
    on by default) the CPU is first shared between *sessions*, and a process's
    nice value only orders it within its own session. Every helper here runs
    in its own session (:func:`start`), so the wiki server, the gateway and a
    background process would get equal shares whatever their nice values. So,
    besides ``os.nice``, a session leader also sets its session's autogroup
    nice value (``/proc/self/autogroup``), which weighs the whole session
    against the others. Without CAP_SYS_ADMIN the kernel accepts one such write
    per 100 ms on the whole host and answers EAGAIN otherwise, so the write is
    retried up to ``attempts`` times, 0.11 s apart. A process that is not a
    session leader (e.g. started by hand from a shell) leaves the shell's session
    alone; a kernel without autogroups skips that step. Returns True when the
    autogroup was set, False when it was skipped or refused (then the reason is
    printed on stderr, unless there is no autogroup file). Raises nothing;
    docs/operations.md#job-priority.
    """
    os.nice(niceness)
    if os.getsid(0) != os.getpid() or not AUTOGROUP_FILE.exists():
        return False
    return _set_autogroup(AUTOGROUP_FILE, niceness, attempts)


def _set_autogroup(path: Path, niceness: int, attempts: int) -> bool:
    """Write ``niceness`` to an autogroup file, retrying while the kernel answers EAGAIN (see above)."""
    for attempt in range(attempts):
        try:
            path.write_text(f"{niceness}\n")
            return True
        except OSError as exc:
            if exc.errno != errno.EAGAIN or attempt == attempts - 1:
                print(f"could not lower the session's autogroup priority: {exc}", file=sys.stderr, flush=True)
                return False
            time.sleep(0.11)
    return False


def lower_cpu_priority_of(pid: int, niceness: int, *, attempts: int = 10) -> bool:
    """Make the running session leader ``pid`` background work, as :func:`lower_cpu_priority` does
    from inside: each of its threads (Linux keeps a nice value per thread) ``niceness`` lower (at
    most 19), and its session's autogroup nice value (``/proc/<pid>/autogroup``) ``niceness``. For a server that should load
    at full speed and only then yield. Returns True when the autogroup was set; False when ``pid``
    is gone, not a session leader or the kernel has no autogroups. Raises nothing."""
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(ProcessLookupError):
                tid = int(task.name)
                os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + niceness))
        if os.getsid(pid) != pid:
            return False
    except (OSError, ValueError):
        return False
    path = Path(f"/proc/{pid}/autogroup")
    return path.exists() and _set_autogroup(path, niceness, attempts)


def background_command(cmd: Sequence[str], niceness: int) -> list[str]:
    """``cmd`` wrapped so that it runs as background work: this file, run as an isolated script
    (``-I``; it needs only the standard library), lowers itself with :func:`lower_cpu_priority` and
    then ``exec``s ``cmd`` — same pid, same command line afterwards, and every thread ``cmd`` starts
    inherits the priority."""
    return [sys.executable, "-I", str(Path(__file__).resolve()), "background", str(int(niceness)), "--", *cmd]


def start(cmd: Sequence[str], *, pid_file: Path, log_file: Path, env: Mapping[str, str] | None = None,
          cwd: Path | str | None = None, niceness: int = 0) -> int:
    """Start ``cmd`` detached (new session, stdin closed, output appended to ``log_file``); return its pid.

    ``niceness`` > 0 starts it as background work (:func:`background_command`).
    """
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    argv = background_command(cmd, niceness) if niceness > 0 else list(cmd)
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(argv, cwd=cwd, env=dict(env) if env is not None else None,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    pid_file.write_text(f"{proc.pid}\n")
    return proc.pid


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _proc_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` from /proc (``"Z"`` for zombies), None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def running(pid_file: Path, marker: str) -> int | None:
    """Return the pid in ``pid_file`` if that process is alive and its command line
    contains ``marker`` (guards against recycled pids), else None.

    Right after exec, /proc/PID/cmdline reads empty for a few milliseconds (the
    kernel has not set up the new argv yet); an empty read is retried, and a
    live process whose command line stays unreadable counts as running.
    """
    pid = read_pid(pid_file)
    if pid is None:
        return None
    for _ in range(50):
        state = _proc_state(pid)
        if state is None or state in ("Z", "X"):
            return None
        cmd = _cmdline(pid)
        if cmd:
            return pid if marker in " ".join(cmd) else None
        time.sleep(0.02)
    return pid


def stop(pid_file: Path, marker: str, timeout: float = 10.0) -> bool:
    """Terminate the process group led by the pid in ``pid_file``; return True if one ran."""
    pid = running(pid_file, marker)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and running(pid_file, marker) is not None:
            time.sleep(0.05)
        if running(pid_file, marker) is None:
            break
    pid_file.unlink(missing_ok=True)
    return True


def _main(argv: Sequence[str]) -> int:
    """``procs.py background N -- CMD…``: lower this process (:func:`lower_cpu_priority`), then exec CMD."""
    if len(argv) < 4 or argv[0] != "background" or argv[2] != "--" or not argv[1].isdigit():
        print("usage: procs.py background NICENESS -- COMMAND [ARG…]", file=sys.stderr)
        return 2
    lower_cpu_priority(int(argv[1]))
    try:
        os.execvp(argv[3], list(argv[3:]))
    except OSError as exc:  # not found / not executable: say so instead of a traceback
        print(f"procs.py background: cannot run {argv[3]}: {exc.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
