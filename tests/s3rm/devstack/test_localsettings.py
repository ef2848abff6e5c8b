"""The dev wiki's settings template and production's LocalSettings agree, and both follow schema/lesson.toml.

``s3rm/devstack/LocalSettings.dev.php`` is rendered by ``s3rm/devstack/settings.py``
with the Lesson namespace id and name from the schema source; the blocks between
``s3rm shared`` markers must be byte-identical to the same blocks of
``deploy/mediawiki/LocalSettings.php``. The real dev wiki serving the rendered
file is checked in tests/s3rm/devstack/test_devwiki.py (namespace id, case, content flag).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
import re
import shutil
import subprocess

from support.schema_dirs import SCHEMA
import pytest

from gateway.config.schema import REPO_ROOT
from s3rm.devstack import settings
from s3rm.devstack.errors import DevWikiError

DEPLOY = REPO_ROOT / "deploy" / "mediawiki" / "LocalSettings.php"


def test_shared_blocks_are_identical_in_dev_and_production() -> None:
    dev = settings.shared_blocks(settings.render_settings("127.0.0.1", 8081, SCHEMA))
    prod = settings.shared_blocks(DEPLOY.read_text(encoding="utf-8"))
    assert set(dev) == {"lesson-namespace", "scribunto", "editing", "skin", "rights"}
    assert set(prod) == set(dev)
    for name in dev:
        assert prod[name] == dev[name], f"block {name!r} differs; edit s3rm/devstack/LocalSettings.dev.php " \
                                        f"and copy the rendered block into {DEPLOY.relative_to(REPO_ROOT)}"


def test_production_namespace_id_comes_from_the_schema() -> None:
    schema = SCHEMA
    text = DEPLOY.read_text(encoding="utf-8")
    assert re.findall(r"define\( 'NS_LESSON', (\d+) \);", text) == [str(schema.namespace_id)]
    assert re.findall(r"define\( 'NS_LESSON_TALK', (\d+) \);", text) == [str(schema.namespace_id + 1)]
    assert f"$wgExtraNamespaces[NS_LESSON] = '{schema.namespace}';" in text


def test_template_takes_the_namespace_from_the_schema_source() -> None:
    schema = SCHEMA
    other = dataclasses.replace(schema, meta={**schema.meta, "namespace_id": 4100, "namespace": "Memo"})
    text = settings.render_settings("127.0.0.1", 8081, other)
    assert "define( 'NS_LESSON', 4100 );" in text and "define( 'NS_LESSON_TALK', 4101 );" in text
    assert "$wgExtraNamespaces[NS_LESSON_TALK] = 'Memo_talk';" in text
    assert "3000" not in text
    # the committed template writes no namespace constant itself
    assert str(schema.namespace_id) not in settings.TEMPLATE_FILE.read_text(encoding="utf-8")


def test_rendered_settings_carry_the_server_and_no_placeholder() -> None:
    text = settings.render_settings("::1", 9123, SCHEMA)
    assert "$wgServer = 'http://[::1]:9123';" in text
    assert "@@" not in text


def test_a_placeholder_without_value_is_an_error() -> None:
    with pytest.raises(DevWikiError, match="NS_OTHER"):
        settings.render("define( 'X', @@NS_OTHER@@ );", {"NS_LESSON": "3000"})


def test_rendered_settings_are_valid_php(tmp_path) -> None:
    assert shutil.which("php"), "php-cli is required (scripts/install.sh installs it)"
    path = tmp_path / "S3RM.php"
    path.write_text(settings.render_settings("127.0.0.1", 8081, SCHEMA), encoding="utf-8")
    proc = subprocess.run(["php", "-l", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dev_throttle_settings_have_the_types_update_php_accepts() -> None:
    """MediaWiki's MainConfigSchema types PasswordAttemptThrottle as ``list`` and
    AccountCreationThrottle as ``int|list``; update.php (needed to install SMW on the dev
    settings) refuses ``false``."""
    text = settings.render_settings("127.0.0.1", 8081, SCHEMA)
    assert re.search(r"^\$wgPasswordAttemptThrottle = \[\];$", text, re.M)
    assert re.search(r"^\$wgAccountCreationThrottle = \[\];$", text, re.M)
    assert not re.search(r"^\$wg\w+Throttle = (false|true);", text, re.M)
    schema = Path("/usr/share/mediawiki/includes/MainConfigSchema.php")
    if schema.exists():
        src = schema.read_text(encoding="utf-8")
        for name, kinds in (("PasswordAttemptThrottle", "'list'"), ("AccountCreationThrottle", "'int|list'")):
            block = src[src.index(f"public const {name} = ["):]
            assert f"'type' => {kinds}" in block[:block.index("];")], name
