"""The one reader of the ``s3rm`` command's own settings, and where the dev wiki and stack record theirs.

Every ``S3RM_*`` variable the CLI reads for itself is declared once in
:data:`SETTINGS` with its default and, where one applies, the ``.dev`` file it
falls back to; :class:`CliSettings` reads them: a non-empty environment value
wins, then a non-empty value in that file, then the default. The gateway's own
variables are read by :func:`gateway.config.load_config` (``serve``, ``audit``,
``auth`` and ``index`` hand it the environment). ``research-query``'s optional
endpoints (``S3RM_RESEARCH_*``) are one validated group:
:meth:`CliSettings.research` (:func:`load_research_settings`).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping
from urllib.parse import urlsplit

from gateway.config import ConfigError, is_private_endpoint
from gateway.config.loader import read_schema_setting, schema_dir_setting
from gateway.config.schema import REPO_ROOT, Schema
from gateway.config.values import make_getter, number, redacted_repr
from s3rm.errors import CliError

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


# ------------------------------------------------------------ the CLI's own settings
#: ``Setting.fallback`` naming ``.dev/wiki/env`` (:data:`DEV_ENV_FILE`)
WIKI = "wiki"
#: ``Setting.fallback`` naming ``.dev/stack.env`` (:data:`DEV_STACK_ENV_FILE`)
STACK = "stack"


@dataclass(frozen=True)
class Setting:
    """One ``S3RM_*`` variable the CLI reads: its default and the ``.dev`` file it falls back to ("": none)."""

    name: str
    default: str = ""
    fallback: str = ""
    help: str = ""


#: Every ``S3RM_*`` variable the ``s3rm`` command reads for itself, by name.
SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("S3RM_MCP_URL", "http://127.0.0.1:8080/mcp", STACK,
            "MCP endpoint of evaluate, research-query and index retry-quarantined"),
    Setting("S3RM_MCP_PUBLIC_URL", "", STACK, "public MCP URL the synced pages show"),
    Setting("S3RM_PG_DSN", "", STACK, "the shared pgvector store of s3rm index"),
    Setting("S3RM_METRICS_TOKEN", "", "", "bearer token of s3rm index retry-quarantined"),
    Setting("S3RM_GITHUB_LOOKUP_TOKEN", "", "", "GitHub token s3rm auth pin looks a login's id up with"),
    Setting("S3RM_WIKI_API_URL", "", WIKI, "the wiki's api.php URL (sync, import)"),
    Setting("S3RM_SYNC_USERNAME", "", WIKI, "the sync account (interface-admin)"),
    Setting("S3RM_SYNC_PASSWORD", "", WIKI, "the sync account's bot password"),
    Setting("S3RM_IMPORT_USERNAME", "", WIKI, "the import account"),
    Setting("S3RM_IMPORT_PASSWORD", "", WIKI, "the import account's bot password"),
    Setting("S3RM_DEV_WIKI_PORT", "8081", "", "port of the dev wiki"),
    Setting("S3RM_DEV_GATEWAY_PORT", "8080", "", "port of the dev stack's gateway"),
    Setting("S3RM_DEV_EMBEDDING_PORT", "8082", "", "port of the dev stack's embedding server"),
    Setting("S3RM_DEV_EMBEDDING_DOCUMENT_PORT", "8084", "", "port of the dev stack's document embedding server"),
    Setting("S3RM_DEV_PG_PORT", "8083", "", "port of the dev stack's PostgreSQL"),
)}


#: "the ``.dev`` file as it is now" for :class:`CliSettings` (``None`` means no file)
_DEV_FILE = object()


class CliSettings:
    """The CLI's settings over ``environ`` (default ``os.environ``) and the ``.dev`` files.

    ``wiki_file`` and ``stack_file`` default to :data:`DEV_ENV_FILE` and
    :data:`DEV_STACK_ENV_FILE` as they are when the object is made; ``None``
    turns a fallback off. Files are read once, on first use.
    """

    def __init__(self, environ: Mapping[str, str] | None = None, *,
                 wiki_file: Path | None | object = _DEV_FILE, stack_file: Path | None | object = _DEV_FILE) -> None:
        self.environ = os.environ if environ is None else environ
        self._files: dict[str, Path | None] = {WIKI: DEV_ENV_FILE if wiki_file is _DEV_FILE else wiki_file,
                                               STACK: DEV_STACK_ENV_FILE if stack_file is _DEV_FILE else stack_file}
        self._read: dict[str, dict[str, str]] = {}

    def _file_values(self, fallback: str) -> dict[str, str]:
        if fallback not in self._read:
            path = self._files.get(fallback)
            self._read[fallback] = read_env_file(path) if path else {}
        return self._read[fallback]

    def value(self, name: str) -> str:
        """``name``'s non-empty environment value, else its fallback file's, else its default."""
        setting = SETTINGS[name]
        if self.environ.get(name):
            return self.environ[name]
        if setting.fallback and self._file_values(setting.fallback).get(name):
            return self._file_values(setting.fallback)[name]
        return setting.default

    def port(self, name: str) -> int:
        """``name`` as an integer (:meth:`value`); raises ValueError when it is not one."""
        return int(self.value(name))

    def lookup(self, names: Iterable[str]) -> tuple[dict[str, str], tuple[str, ...]]:
        """:func:`lookup` of ``names`` (all with the same fallback file), without defaults."""
        files = {SETTINGS[n].fallback for n in names}
        assert len(files) == 1, f"{sorted(names)} fall back to different files"
        return lookup(names, self.environ, self._files.get(files.pop()))

    @property
    def mcp_url(self) -> str:
        """The MCP endpoint (``S3RM_MCP_URL``, the running dev stack's, else the loopback default)."""
        return self.value("S3RM_MCP_URL")

    @property
    def pg_dsn(self) -> str:
        """The pgvector store (``S3RM_PG_DSN``, else the running dev stack's); "" when none."""
        return self.value("S3RM_PG_DSN")

    @property
    def public_mcp_url(self) -> str:
        """The public MCP URL for the synced pages (``S3RM_MCP_PUBLIC_URL``, else the dev stack's), stripped."""
        return self.value("S3RM_MCP_PUBLIC_URL").strip()

    @property
    def metrics_token(self) -> str:
        """The bearer token of the gateway's admin routes (``S3RM_METRICS_TOKEN``); "" when unset."""
        return self.value("S3RM_METRICS_TOKEN")

    @property
    def github_lookup_token(self) -> str:
        """The token ``s3rm auth pin`` looks GitHub ids up with (``S3RM_GITHUB_LOOKUP_TOKEN``)."""
        return self.value("S3RM_GITHUB_LOOKUP_TOKEN")

    @property
    def schema_dir(self) -> Path:
        """The schema folder (``S3RM_SCHEMA_DIR``, else the committed ``schema/``)."""
        return schema_dir_setting(self.environ)

    @property
    def schema(self) -> Schema:
        """The schema source ``<schema_dir>/lesson.toml`` (loaded once per path); raises
        :class:`~s3rm.errors.CliError` (exit 2) naming ``S3RM_SCHEMA_DIR`` when unreadable or malformed."""
        try:
            return read_schema_setting(self.schema_dir)
        except ConfigError as exc:
            raise CliError(str(exc), 2) from None

    def research(self) -> "ResearchSettings":
        """``research-query``'s validated endpoint settings (:func:`load_research_settings`)."""
        return load_research_settings(self.environ)

# ------------------------------------------------ research-query's optional endpoints
# Settings of ``s3rm research-query``: the optional rerank and chat endpoints.
#
# Contract: docs/research-tools.md#research-settings.
#
# Both endpoints are off unless their URL is set. A URL whose host is not
# loopback, a private/link-local address or a dotless name needs the explicit
# opt-in ``…_ALLOW_EXTERNAL=1`` and https — the same rule as the gateway's
# embedding provider (:func:`gateway.config.is_private_endpoint`).
#
# =====================================  ========================================  =========
# variable                               meaning                                   default
# =====================================  ========================================  =========
# S3RM_RESEARCH_LLM_URL                  OpenAI-compatible ``/v1/chat/completions``  unset (off)
# S3RM_RESEARCH_LLM_MODEL                ``model`` sent to it (required with URL)  —
# S3RM_RESEARCH_LLM_API_KEY              Bearer key (secret, never printed)        none
# S3RM_RESEARCH_LLM_ALLOW_EXTERNAL       ``1``: the URL may leave private networks  ``0``
# S3RM_RESEARCH_LLM_MAX_TOKENS           ``max_tokens`` of the answer               512
# S3RM_RESEARCH_RERANK_URL               rerank endpoint (``/v1/rerank`` or TEI ``/rerank``)  unset (off)
# S3RM_RESEARCH_RERANK_MODEL             ``model`` sent to it                      empty
# S3RM_RESEARCH_RERANK_API_KEY           Bearer key (secret, never printed)        none
# S3RM_RESEARCH_RERANK_ALLOW_EXTERNAL    ``1``: the URL may leave private networks  ``0``
# S3RM_RESEARCH_TIMEOUT_SECONDS          per HTTP call to either endpoint          30
# S3RM_RESEARCH_DOCUMENT_CHARS           characters of one result sent to either   1200
# =====================================  ========================================  =========
#
# Errors: :class:`gateway.config.ConfigError` naming the variable, never a value.


@dataclass(frozen=True)
class Endpoint:
    """One opt-in endpoint: full ``url``, ``model``, Bearer ``api_key`` (redacted in repr)."""

    url: str
    model: str
    api_key: str = ""

    def __repr__(self) -> str:
        return redacted_repr(self, ("api_key",))

    __str__ = __repr__


@dataclass(frozen=True)
class ResearchSettings:
    """Validated settings; ``llm`` / ``rerank`` are None when not configured.

    Units: seconds (``timeout_seconds``), tokens (``max_tokens``), characters (``document_chars``).
    """

    llm: Endpoint | None = None
    rerank: Endpoint | None = None
    timeout_seconds: float = 30.0
    max_tokens: int = 512
    document_chars: int = 1200


def _endpoint(get, environ: Mapping[str, str], prefix: str, *, model_required: bool) -> Endpoint | None:
    url = get(f"{prefix}_URL")
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise ConfigError(f"{prefix}_URL", "must be an http(s) URL without credentials")
    allow = get(f"{prefix}_ALLOW_EXTERNAL", "0").lower()
    if allow not in ("0", "1", "true", "false", "yes", "no"):
        raise ConfigError(f"{prefix}_ALLOW_EXTERNAL", "must be 0 or 1")
    if not is_private_endpoint(url):
        if allow not in ("1", "true", "yes"):
            raise ConfigError(f"{prefix}_URL", "points outside loopback/private networks; an external endpoint "
                                               f"needs the explicit opt-in {prefix}_ALLOW_EXTERNAL=1")
        if parts.scheme != "https":
            raise ConfigError(f"{prefix}_URL", "an external endpoint must use https")
    model = get(f"{prefix}_MODEL")
    if model_required and not model:
        raise ConfigError(f"{prefix}_MODEL", f"must be set when {prefix}_URL is set")
    return Endpoint(url=url, model=model, api_key=environ.get(f"{prefix}_API_KEY") or "")


def load_research_settings(environ: Mapping[str, str]) -> ResearchSettings:
    """Read the ``S3RM_RESEARCH_*`` variables (the table above); raises ConfigError."""
    get = make_getter(environ)
    return ResearchSettings(
        llm=_endpoint(get, environ, "S3RM_RESEARCH_LLM", model_required=True),
        rerank=_endpoint(get, environ, "S3RM_RESEARCH_RERANK", model_required=False),
        timeout_seconds=number(get, "S3RM_RESEARCH_TIMEOUT_SECONDS", 30.0, float, 0.1, 600.0),
        max_tokens=number(get, "S3RM_RESEARCH_LLM_MAX_TOKENS", 512, int, 16, 8192),
        document_chars=number(get, "S3RM_RESEARCH_DOCUMENT_CHARS", 1200, int, 100, 20000),
    )
