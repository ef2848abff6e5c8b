"""The schema source travels on the configuration: no product module finds it on its own.

``gateway.config.loader.load_config`` loads ``<S3RM_SCHEMA_DIR>/lesson.toml``
once and carries it as ``GatewayConfig.schema``; the CLI's one settings reader,
``s3rm.settings.CliSettings``, does the same for the commands. Every other
module is handed the :class:`~gateway.config.schema.Schema`
(docs/data-contract.md#schema-source). The test parses every module of
gateway/, hooks_spec/ and s3rm/ with ``ast`` and fails on

* a call of ``load_schema`` without a path (there is no default path to fall back on),
* the name ``S3RM_SCHEMA_DIR`` used as a value outside the two configuration readers,
* a call of ``schema_dir_setting`` (the environment → folder rule) outside them.
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("gateway", "hooks_spec", "s3rm")
#: The configuration readers: the only modules that turn the environment into a schema folder.
CONFIG_READERS = ("gateway/config/loader.py", "s3rm/settings.py")


def _modules():
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _called(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _problems(name: str, tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) == "load_schema":
            if not node.args and not any(k.arg == "path" for k in node.keywords):
                out.append(f"{name}:{node.lineno}: load_schema() without a path")
        if name in CONFIG_READERS:
            continue
        if isinstance(node, ast.Constant) and node.value == "S3RM_SCHEMA_DIR":
            out.append(f"{name}:{node.lineno}: reads S3RM_SCHEMA_DIR outside the configuration readers")
        if isinstance(node, ast.Call) and _called(node) == "schema_dir_setting":
            out.append(f"{name}:{node.lineno}: schema_dir_setting() outside the configuration readers")
    return out


def test_no_module_finds_the_schema_source_by_itself():
    problems = [p for name, tree in _modules() for p in _problems(name, tree)]
    assert not problems, "the schema comes from the configuration:\n" + "\n".join(problems)


def test_the_rules_catch_what_they_should():
    source = ("import os\nfrom gateway.config.schema import load_schema\n"
              "S = load_schema()\nD = os.environ.get('S3RM_SCHEMA_DIR')\nF = schema_dir_setting(os.environ)\n"
              "OK = load_schema(FOLDER / 'lesson.toml')\n")
    found = _problems("gateway/example.py", ast.parse(source))
    assert sorted(p.split(": ", 1)[1] for p in found) == [
        "load_schema() without a path", "reads S3RM_SCHEMA_DIR outside the configuration readers",
        "schema_dir_setting() outside the configuration readers"]
    assert _problems("s3rm/settings.py", ast.parse("D = schema_dir_setting({'S3RM_SCHEMA_DIR': 'x'})\n")) == []


def test_the_stored_timestamp_form_is_the_schema_sources():
    # parse_ts needs no schema: the form is the one format_ts writes, which the schema source states too
    from support.schema_dirs import SCHEMA

    from gateway.domain.timestamps import TIMESTAMP_PATTERN

    assert SCHEMA.meta["timestamp_pattern"] == TIMESTAMP_PATTERN
