"""The CLI's one settings reader (s3rm/settings.py): precedence, defaults, and nobody else reading S3RM_*."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from s3rm.devstack import devwiki
from s3rm.mcpsearch import DEFAULT_MCP_URL, resolve_mcp_url
from s3rm.settings import SETTINGS, STACK, WIKI, CliSettings

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def files(tmp_path):
    """A .dev/wiki/env and a .dev/stack.env with one value each."""
    wiki = tmp_path / "wiki.env"
    wiki.write_text("export S3RM_SYNC_USERNAME=from-file\nexport S3RM_SYNC_PASSWORD=''\n", encoding="utf-8")
    stack = tmp_path / "stack.env"
    stack.write_text("S3RM_MCP_URL=http://127.0.0.1:9999/mcp\nS3RM_PG_DSN=postgresql://dev/s3rm\n", encoding="utf-8")
    return wiki, stack


def test_environment_wins_then_the_dev_file_then_the_default(files):
    wiki, stack = files
    read = lambda env: CliSettings(env, wiki_file=wiki, stack_file=stack)  # noqa: E731
    assert read({"S3RM_MCP_URL": "http://gw/mcp"}).mcp_url == "http://gw/mcp"
    assert read({}).mcp_url == "http://127.0.0.1:9999/mcp"
    assert read({"S3RM_MCP_URL": ""}).mcp_url == "http://127.0.0.1:9999/mcp"  # empty counts as unset
    assert CliSettings({}, stack_file=None).mcp_url == DEFAULT_MCP_URL == SETTINGS["S3RM_MCP_URL"].default
    assert read({}).pg_dsn == "postgresql://dev/s3rm" and CliSettings({}, stack_file=None).pg_dsn == ""
    assert read({}).metrics_token == "" and read({"S3RM_METRICS_TOKEN": "t"}).metrics_token == "t"


def test_lookup_reports_what_came_from_the_file_and_leaves_out_empty_values(files):
    wiki, stack = files
    names = ("S3RM_WIKI_API_URL", "S3RM_SYNC_USERNAME", "S3RM_SYNC_PASSWORD")
    found, from_file = CliSettings({"S3RM_WIKI_API_URL": "http://w/api.php"}, wiki_file=wiki).lookup(names)
    assert found == {"S3RM_WIKI_API_URL": "http://w/api.php", "S3RM_SYNC_USERNAME": "from-file"}
    assert from_file == ("S3RM_SYNC_USERNAME",)
    assert CliSettings({}, wiki_file=None).lookup(names) == ({}, ())


def test_ports_are_integers_with_the_documented_defaults():
    assert CliSettings({}).port("S3RM_DEV_WIKI_PORT") == devwiki.DEFAULT_PORT == 8081
    assert {n: CliSettings({}).port(n) for n in SETTINGS if n.endswith("_PORT")} == {
        "S3RM_DEV_WIKI_PORT": 8081, "S3RM_DEV_GATEWAY_PORT": 8080, "S3RM_DEV_EMBEDDING_PORT": 8082,
        "S3RM_DEV_EMBEDDING_DOCUMENT_PORT": 8084, "S3RM_DEV_PG_PORT": 8083}
    with pytest.raises(ValueError):
        CliSettings({"S3RM_DEV_PG_PORT": "x"}).port("S3RM_DEV_PG_PORT")


def test_resolve_mcp_url_takes_the_explicit_value_first(monkeypatch):
    monkeypatch.setenv("S3RM_MCP_URL", "http://env/mcp")
    assert resolve_mcp_url("http://flag/mcp") == "http://flag/mcp"
    assert resolve_mcp_url() == "http://env/mcp"


def test_every_setting_names_a_known_fallback():
    assert all(s.fallback in ("", WIKI, STACK) and s.name.startswith("S3RM_") for s in SETTINGS.values())


#: reading one variable or a .dev file directly, outside s3rm/settings.py
_DIRECT_READ = re.compile(r"environ(?:\.get\(|\[)\s*[\"']S3RM_|getenv\(|read_env_file\(|(?<![.\w])lookup\(")


def test_no_other_cli_module_reads_a_setting_itself():
    offenders = sorted(
        f"{path.relative_to(REPO)}:{number}"
        for path in (REPO / "s3rm").rglob("*.py") if path != REPO / "s3rm" / "settings.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _DIRECT_READ.search(line)
    )
    assert not offenders, f"read these through s3rm.settings.CliSettings: {offenders}"
