"""The official MCP conformance suite against ``s3rm serve`` on the real dev wiki.

``@modelcontextprotocol/conformance`` (pinned in ``tests/clients/package.json``, installed by
``scripts/install.sh``'s ``install_test_clients``) runs ``conformance server --url <gateway>/mcp
--requirements <revision>`` for the 2026-07-28 and the 2025-11-25 requirement sets, with the suite's
own baseline ``--expected-failures tests/gateway/conformance_expected_failures.<revision>.yaml``.

* a failing check (or warning) the file does not list fails the test;
* a listed entry that now passes is reported as a warning, so the list shrinks;
* every entry carries its reason (a trailing comment), and the file lists each scenario once.

Most listed scenarios call the suite's own fixture tools, prompts and resources (``test_*``,
``test://``), which a real server does not have; the rest need features this server deliberately
lacks (sampling, elicitation, tasks, …), each named beside its entry.
"""
from __future__ import annotations

import re
import subprocess
import warnings
from pathlib import Path

import pytest
from support.clients import CLIENTS, CONFORMANCE, NODE
from support.services import Gateway

HERE = Path(__file__).resolve().parent
REVISIONS = ("2026-07-28", "2025-11-25")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ENTRY = re.compile(r"^  - (?P<entry>[a-z0-9-]+(?::[a-z0-9-]+)?)(?P<comment>\s+#\s*\S.*)?$")


def expected_failures_file(revision: str) -> Path:
    return HERE / f"conformance_expected_failures.{revision}.yaml"


@pytest.fixture(scope="module")
def gateway(dev_wiki, installed_clients):
    """``s3rm serve`` on the dev wiki (open reads, token-mode writes)."""
    env = dict(dev_wiki.env())
    env.update({"S3RM_MCP_WRITE_TOKEN_SHA256": "0" * 64,
                "S3RM_CURSOR_SECRET": "conformance-tests-cursor-secret-012"})
    with Gateway(env, threads=4) as gw:
        yield gw


def _sections(stdout: str) -> dict[str, list[str]]:
    """The suite's baseline report: entries under 'Expected failures', 'Stale baseline entries' and
    'Unexpected failures'."""
    out: dict[str, list[str]] = {"expected": [], "stale": [], "unexpected": []}
    current = None
    for line in _ANSI.sub("", stdout).splitlines():
        if line.startswith("Expected failures"):
            current = "expected"
        elif line.startswith("Stale baseline entries"):
            current = "stale"
        elif line.startswith("Unexpected failures"):
            current = "unexpected"
        elif current and re.match(r"^  [~✓✗] ", line):
            out[current].append(line[4:].strip())
        elif line.strip():
            current = None
    return out


@pytest.mark.parametrize("revision", REVISIONS)
def test_expected_failures_file_gives_every_entry_a_reason(revision):
    lines = expected_failures_file(revision).read_text(encoding="utf-8").splitlines()
    assert "server:" in lines
    entries = [line for line in lines if line.startswith("  - ")]
    assert entries
    bad = [line for line in entries if not (m := _ENTRY.match(line)) or not m["comment"]]
    assert bad == [], "each entry is '  - <scenario>[:<check-id>]  # reason'"
    names = [_ENTRY.match(line)["entry"] for line in entries]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("revision", REVISIONS)
def test_conformance_suite_fails_only_where_expected(gateway, revision, tmp_path):
    done = subprocess.run(
        [str(NODE), str(CONFORMANCE), "server", "--url", gateway.url, "--requirements", revision,
         "--expected-failures", str(expected_failures_file(revision)), "-o", str(tmp_path / "results")],
        cwd=CLIENTS, capture_output=True, text=True, timeout=600)
    stdout = _ANSI.sub("", done.stdout)
    total = re.search(r"^Total: (\d+) passed, (\d+) failed", stdout, re.M)
    assert total, f"exit {done.returncode}\n{stdout[-3000:]}\n{done.stderr[-3000:]}"
    report = _sections(stdout)
    print(f"conformance {revision}: {total[0]}; expected failures {len(report['expected'])}")
    assert report["unexpected"] == [], f"new conformance failures ({revision}): {report['unexpected']}"
    if report["stale"]:
        warnings.warn(f"conformance {revision}: now passing, remove from {expected_failures_file(revision).name}: "
                      f"{report['stale']}", stacklevel=1)
    assert done.returncode == 0 or report["stale"], stdout[-3000:]
