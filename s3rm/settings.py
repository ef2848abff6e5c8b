"""Where the development wiki and stack record their settings, and the reader of those files.

``s3rm dev wiki up`` writes the dev wiki's URL and bot passwords to
``.dev/wiki/env`` (mode 600); ``s3rm stack up`` writes the gateway's public MCP
URL to ``.dev/stack.env``. The sync, import, audit and evaluate commands fall
back to these files for values the environment does not set, so they work
against a running dev stack without extra settings (docs/operations.md).
"""
from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Iterable, Mapping

from gateway.domain.schema import REPO_ROOT

#: Everything the development wiki and stack create lives here (git-ignored).
DEV_DIR = REPO_ROOT / ".dev"
#: ``export`` lines written by ``s3rm dev wiki up`` (git-ignored).
DEV_ENV_FILE = DEV_DIR / "wiki" / "env"
#: Non-secret settings of the running dev stack (``s3rm stack up``): the gateway's
#: public MCP URL, so ``sync diff/check`` and ``evaluate`` use what the stack uses.
DEV_STACK_ENV_FILE = DEV_DIR / "stack.env"
#: The dev stack's generated secrets (write token, seal key, cursor key; mode 600, ``s3rm stack up``).
DEV_SECRETS_FILE = DEV_DIR / "secrets.json"
#: The seal settings every reader of seals needs (the gateway signs, ``s3rm audit`` verifies).
SEAL_SETTINGS = ("S3RM_REVISION_HMAC_KEYS", "S3RM_REVISION_HMAC_ACTIVE_KEY_ID")


def read_env_file(path: Path) -> dict[str, str]:
    """Parse ``export NAME=value`` / ``NAME=value`` lines (shell quoting) into a dict.

    Comments and blank lines are ignored; a missing file gives ``{}``.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].strip()
        name, sep, value = line.partition("=")
        if not sep or not name.isidentifier():
            continue
        try:
            parts = shlex.split(value, posix=True)
        except ValueError:
            continue
        out[name] = parts[0] if parts else ""
    return out


def lookup(names: Iterable[str], environ: Mapping[str, str] | None = None,
           env_file: Path | None = DEV_ENV_FILE) -> tuple[dict[str, str], tuple[str, ...]]:
    """Find each of ``names``: a non-empty value in ``environ`` (default ``os.environ``)
    wins, else a non-empty value in ``env_file``.

    Returns ``(found, from_file)``: the values found (names without a value are
    absent) and, in ``names`` order, the names whose value came from the file.
    """
    environ = os.environ if environ is None else environ
    file_values = read_env_file(env_file) if env_file else {}
    found: dict[str, str] = {}
    from_file: list[str] = []
    for name in names:
        if environ.get(name):
            found[name] = environ[name]
        elif file_values.get(name):
            found[name] = file_values[name]
            from_file.append(name)
    return found, tuple(from_file)


def seal_settings(secrets: Mapping[str, str]) -> dict[str, str]:
    """The dev gateway's seal settings (:data:`SEAL_SETTINGS`) from the dev stack's secrets."""
    return {"S3RM_REVISION_HMAC_KEYS": json.dumps({secrets["hmac_key_id"]: secrets["hmac_key"]}),
            "S3RM_REVISION_HMAC_ACTIVE_KEY_ID": secrets["hmac_key_id"]}


def dev_stack_settings(dev_dir: Path | None = None) -> dict[str, str]:
    """The settings the running dev stack's gateway has that CLI verbs need, from ``dev_dir``
    (default ``.dev``): the wiki URL and bot passwords (``wiki/env``), the recorded URLs
    (``stack.env``) and the seal settings (``secrets.json``). Missing files give no values;
    nothing is created.
    """
    dev_dir = DEV_DIR if dev_dir is None else Path(dev_dir)
    values = {**read_env_file(dev_dir / "wiki" / "env"), **read_env_file(dev_dir / "stack.env")}
    try:
        secrets = json.loads((dev_dir / "secrets.json").read_text(encoding="utf-8"))
        values.update(seal_settings(secrets))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        pass
    return values
