"""Slowest test files first (tests/support/schedule.py): the order xdist hands files to workers."""
from __future__ import annotations

import json
from types import SimpleNamespace

from support.schedule import load_table, slowest_files_first


def _items(*nodeids: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(nodeid=n) for n in nodeids]


def test_files_are_ordered_slowest_first_and_each_keeps_its_tests_in_order():
    items = _items("t/a.py::x", "t/a.py::y", "t/b.py::x", "t/c.py::x", "t/c.py::y[1]", "t/c.py::y[2]")
    ordered = slowest_files_first(items, {"t/a.py": 5, "t/b.py": 1, "t/c.py": 90})
    assert [i.nodeid for i in ordered] == ["t/c.py::x", "t/c.py::y[1]", "t/c.py::y[2]", "t/a.py::x",
                                           "t/a.py::y", "t/b.py::x"]


def test_an_unknown_file_counts_as_the_median_and_ties_keep_the_collection_order():
    items = _items("t/new.py::x", "t/slow.py::x", "t/fast.py::x", "t/mid.py::x", "t/mid2.py::x")
    table = {"t/slow.py": 100, "t/mid.py": 10, "t/mid2.py": 10, "t/fast.py": 1}  # median 10
    assert [i.nodeid.split("::")[0] for i in slowest_files_first(items, table)] == [
        "t/slow.py", "t/new.py", "t/mid.py", "t/mid2.py", "t/fast.py"]


def test_without_a_table_the_collection_order_stands(tmp_path):
    items = _items("t/b.py::x", "t/a.py::x")
    assert slowest_files_first(items, {}) == items
    assert load_table(tmp_path / "missing.json") == {}
    (tmp_path / "bad.json").write_text("[1, 2")
    assert load_table(tmp_path / "bad.json") == {}
    (tmp_path / "t.json").write_text(json.dumps({"t/a.py": 3, "t/b.py": "x"}))
    assert load_table(tmp_path / "t.json") == {"t/a.py": 3.0}


def test_the_committed_table_names_test_files_with_positive_seconds():
    table = load_table()
    assert table, "tests/durations.json is missing: python scripts/test_durations.py <junit.xml>"
    assert all(path.startswith("tests/") and path.endswith(".py") and seconds > 0 for path, seconds in table.items())


def test_the_table_sums_each_files_junit_cases_and_a_later_report_replaces_a_file(tmp_path):
    """scripts/test_durations.py: junit ``time`` (setup + call + teardown) summed per file, rounded up."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    full, again = tmp_path / "full.xml", tmp_path / "again.xml"
    full.write_text('<testsuites><testsuite name="pytest">'
                    '<testcase classname="tests.test_schedule" name="a" time="1.2"/>'
                    '<testcase classname="tests.test_schedule" name="b" time="0.5"/>'
                    '<testcase classname="tests.test_layers" name="c" time="3.0"/>'
                    '<testcase classname="tests.gone.test_removed" name="d" time="9.0"/>'
                    '</testsuite></testsuites>')
    again.write_text('<testsuites><testsuite name="pytest">'
                     '<testcase classname="tests.test_layers" name="c" time="0.4"/></testsuite></testsuites>')
    out = tmp_path / "durations.json"
    done = subprocess.run([sys.executable, str(repo / "scripts" / "test_durations.py"), str(full), str(again),
                           "--output", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.read_text().split() == ["{", '"tests/test_schedule.py":', "2,", '"tests/test_layers.py":', "1", "}"]
    assert load_table(out) == {"tests/test_schedule.py": 2.0, "tests/test_layers.py": 1.0}
