"""The dev wiki's MediaWiki settings: a template FILE rendered with the schema's constants.

``LocalSettings.dev.php`` (beside this module) is the template of the wiki
directory's ``S3RM.php``; :func:`write_settings` renders it on every
``s3rm dev wiki up`` and makes the installer's ``LocalSettings.php`` include
it once. Placeholders are ``@@NAME@@``:

* ``SERVER`` — ``http://host:port`` as a PHP string literal;
* ``NS_LESSON`` / ``NS_LESSON_TALK`` — ``[meta] namespace_id`` of
  ``schema/lesson.toml`` and the id after it (MediaWiki pairs every subject
  namespace with the talk namespace ``id + 1``);
* ``LESSON_NAMESPACE`` / ``LESSON_TALK_NAMESPACE`` — ``[meta] namespace``
  and ``<namespace>_talk``.

The schema source is the ONLY place those constants are written. Blocks
between ``# >>> s3rm shared: NAME`` and ``# <<< s3rm shared: NAME`` are the
settings the dev wiki and the production wiki must agree on (the Lesson
namespace, site scripts, bot passwords, no three-way merges); production's
``deploy/mediawiki/LocalSettings.php`` carries the same blocks with the values
written out, and :func:`shared_blocks` lets a test compare the two byte for byte.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

from gateway.config.schema import Schema
from s3rm.devstack.errors import DevWikiError

#: The template of ``S3RM.php``.
TEMPLATE_FILE = Path(__file__).with_name("LocalSettings.dev.php")
#: The settings file written into the wiki directory.
SETTINGS_FILE = "S3RM.php"
_INCLUDE_MARKER = "# s3rm dev wiki: generated settings"
_PLACEHOLDER = re.compile(r"@@([A-Z_]+)@@")
_SHARED = re.compile(r"^# >>> s3rm shared: ([a-z-]+)\n(.*?)^# <<< s3rm shared: \1\n", re.M | re.S)


def php_str(value: str) -> str:
    """A PHP single-quoted string literal for ``value``."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def server_url(host: str, port: int) -> str:
    """``http://host:port`` as browsers reach the wiki (``0.0.0.0`` shown as 127.0.0.1, IPv6 bracketed)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def schema_values(schema: Schema) -> dict[str, str]:
    """The placeholders that come from the schema source (``NS_LESSON``, names, …)."""
    return {
        "NS_LESSON": str(schema.namespace_id),
        "NS_LESSON_TALK": str(schema.namespace_id + 1),
        "LESSON_NAMESPACE": schema.namespace,
        "LESSON_TALK_NAMESPACE": f"{schema.namespace}_talk",
    }


def render(template: str, values: Mapping[str, str]) -> str:
    """Fill every ``@@NAME@@`` of ``template`` from ``values``.

    Raises:
        DevWikiError: a placeholder has no value (nothing is half-rendered).
    """
    missing = sorted({m.group(1) for m in _PLACEHOLDER.finditer(template)} - set(values))
    if missing:
        raise DevWikiError(f"{TEMPLATE_FILE.name}: no value for placeholder(s) {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def render_settings(host: str, port: int, schema: Schema) -> str:
    """The text of ``S3RM.php`` for a wiki served at ``host:port``."""
    values = {"SERVER": php_str(server_url(host, port)), **schema_values(schema)}
    return render(TEMPLATE_FILE.read_text(encoding="utf-8"), values)


def shared_blocks(php: str) -> dict[str, str]:
    """``{block name: lines between its markers}`` of a settings file (see the module doc)."""
    return {m.group(1): m.group(2) for m in _SHARED.finditer(php)}


def write_settings(wiki_dir: Path, host: str, port: int, schema: Schema) -> None:
    """(Re)write ``S3RM.php`` for ``host:port`` (namespace from ``schema``) and make sure ``LocalSettings.php``
    includes it exactly once.

    Raises :class:`DevWikiError` if ``LocalSettings.php`` is missing.
    """
    ls = wiki_dir / "LocalSettings.php"
    if not ls.is_file():
        raise DevWikiError(f"{ls} is missing: {wiki_dir} is not an installed dev wiki (use `reset`)")
    (wiki_dir / SETTINGS_FILE).write_text(render_settings(host, port, schema), encoding="utf-8")
    text = ls.read_text(encoding="utf-8")
    if _INCLUDE_MARKER not in text:
        if not text.endswith("\n"):
            text += "\n"
        text += f"\n{_INCLUDE_MARKER}\nrequire_once __DIR__ . '/{SETTINGS_FILE}';\n"
        ls.write_text(text, encoding="utf-8")


def make_relocatable(wiki_dir: Path) -> None:
    """Point ``$wgSQLiteDataDir`` at ``__DIR__/data`` so the directory can be moved or copied.

    Raises :class:`DevWikiError` when ``install.php`` wrote no such line.
    """
    ls = wiki_dir / "LocalSettings.php"
    text = ls.read_text(encoding="utf-8")
    new, n = re.subn(r'^\$wgSQLiteDataDir = .*;$', "$wgSQLiteDataDir = __DIR__ . '/data';",
                     text, flags=re.M)
    if n != 1:
        raise DevWikiError("unexpected LocalSettings.php from install.php: no $wgSQLiteDataDir line")
    ls.write_text(new, encoding="utf-8")
