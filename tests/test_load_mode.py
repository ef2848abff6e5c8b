"""``S3RM_TEST_LOAD=N`` (tests/support/load.py, README "Tests"): a pytest run started here with it has exactly
N busy processes beside it for its whole length — N, not N per xdist worker — and none after it, whether it
passed, failed or was interrupted with Ctrl-C."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support.load import BusyLoad, load_from_env
from support.services import wait_until

REPO = Path(__file__).resolve().parents[1]

#: the inner session's one test: counts the busy processes whose parent is the controlling pytest
INNER = textwrap.dedent('''
    import os, pathlib

    def busy_children(parent):
        out = []
        for proc in pathlib.Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                stat = (proc / "stat").read_text()
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == parent and b"os.getppid() == parent" in cmd:
                out.append(int(proc.name))
        return out

    def test_busy_processes_run_beside_the_session():
        controller = int(os.environ["INNER_CONTROLLER_PID"])
        pathlib.Path(os.environ["INNER_SEEN"]).write_text(" ".join(map(str, busy_children(controller))))
        if os.environ.get("INNER_BLOCK"):
            pathlib.Path(os.environ["INNER_BLOCK"]).write_text("waiting")
            import time
            while True:  # until the outer test interrupts the session
                time.sleep(0.1)
        assert os.environ.get("INNER_FAIL") != "1", "failing on purpose"
''')


def _inner(tmp_path: Path, load: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    (tmp_path / "test_inner.py").write_text(INNER)
    full = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    # no plugin auto-loading (playwright, hypothesis, ...): an inner session starts in a fraction of the time;
    # xdist is named explicitly where a case needs it
    full.update({"S3RM_TEST_LOAD": load, "INNER_SEEN": str(tmp_path / "seen"), "PYTHONPATH": str(REPO),
                 "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}, **(env or {}))
    argv = [sys.executable, "-c",
            "import os, sys, pytest; os.environ['INNER_CONTROLLER_PID'] = str(os.getpid()); "
            "sys.exit(pytest.main(sys.argv[1:]))",
            "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "--confcutdir", str(tmp_path),
            "-c", os.devnull, "-p", "conftest_load", "-o", "addopts=", *extra, str(tmp_path / "test_inner.py")]
    # the plugin under test, as tests/conftest.py wires it (S3RM_TEST_LOAD in the controller only)
    (tmp_path / "conftest_load.py").write_text(
        "import sys\nsys.path.insert(0, %r)\nfrom conftest import pytest_configure, pytest_report_header\n"
        % str(REPO / "tests"))
    full["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(REPO / "tests"), str(REPO)])
    return subprocess.Popen(argv, cwd=tmp_path, env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _header_pids(output: str) -> list[int]:
    found = re.search(r"S3RM_TEST_LOAD: (\d+) busy processes \(pids \[([\d, ]*)\]\)", output)
    assert found, output[-3000:]
    return [int(p) for p in found.group(2).split(",") if p.strip()]


def _gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        return False
    return True


@pytest.mark.parametrize("extra, fail, code", [((), "0", 0), (("-p", "xdist.plugin", "-n", "2"), "0", 0), ((), "1", 1)],
                         ids=["plain", "xdist", "failing"])
def test_n_busy_processes_for_the_whole_session_and_none_after(tmp_path, extra, fail, code):
    proc = _inner(tmp_path, "2", *extra, env={"INNER_FAIL": fail})
    output, _ = proc.communicate(timeout=900)
    assert proc.returncode == code, output[-3000:]
    pids = _header_pids(output)
    assert len(pids) == 2
    assert sorted(map(int, (tmp_path / "seen").read_text().split())) == sorted(pids)
    wait_until(lambda: _gone(pids), 30, "the busy processes ending with the session")


def test_ctrl_c_stops_the_busy_processes(tmp_path):
    block = tmp_path / "blocked"
    proc = _inner(tmp_path, "2", env={"INNER_BLOCK": str(block)})
    try:
        wait_until(block.exists, 600, "the inner test starting")
        seen = list(map(int, (tmp_path / "seen").read_text().split()))
        assert len(seen) == 2
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 2, output[-3000:]  # pytest's "interrupted"
    wait_until(lambda: _gone(seen), 30, "the busy processes ending after Ctrl-C")


def test_unset_means_no_load_and_nonsense_is_refused():
    assert load_from_env({}) == 0 and load_from_env({"S3RM_TEST_LOAD": " "}) == 0
    assert load_from_env({"S3RM_TEST_LOAD": "3"}) == 3
    for bad in ("-1", "two", "1.5", "65"):
        with pytest.raises(ValueError, match="S3RM_TEST_LOAD"):
            load_from_env({"S3RM_TEST_LOAD": bad})


def test_busy_processes_end_with_their_parent(tmp_path):
    """A pytest killed outright (no cleanup runs) leaves no busy loop behind: each one watches its parent."""
    script = tmp_path / "parent.py"
    script.write_text(f"import sys, time\nsys.path.insert(0, {str(REPO / 'tests')!r})\n"
                      "from support.load import BusyLoad\n"
                      "load = BusyLoad(1).start()\nprint(load.pids[0], flush=True)\ntime.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert not _gone([child])
        parent.kill()
        parent.wait(30)
        wait_until(lambda: _gone([child]) or _zombie(child), 30, "the orphaned busy process ending")
    finally:
        if parent.poll() is None:
            parent.kill()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_busy_load_stop_is_idempotent():
    load = BusyLoad(1).start()
    pids = load.pids
    load.stop()
    load.stop()
    assert _gone(pids) or all(_zombie(p) for p in pids)
