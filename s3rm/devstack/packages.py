"""The dev wiki's Debian packages, PHP modules and MediaWiki maintenance scripts.

The dev wiki runs Debian's ``mediawiki`` 1.39 package from :data:`MW_ROOT`
(read-only for us). Every PHP process is pointed at the wiki directory's
``LocalSettings.php`` through ``MW_CONFIG_FILE`` (read by MediaWiki 1.39's
``wfDetectLocalSettingsFile()``), so nothing under ``/etc/mediawiki`` or
``/var/lib/mediawiki`` is written. ``scripts/install.sh`` installs the same
package list on a fresh machine.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from s3rm.devstack.console import say
from s3rm.devstack.errors import DevWikiError

#: Where Debian's mediawiki package puts the code (read-only for us).
MW_ROOT = Path("/usr/share/mediawiki")
#: Debian packages the dev wiki needs (CI installs the same list, see .ci/run).
DEBIAN_PACKAGES = ("mediawiki", "php-cli", "php-sqlite3", "php-intl", "php-mbstring", "php-xml", "lua5.1")
#: PHP modules (``php -m`` names) that must be loaded.
PHP_MODULES = ("pdo_sqlite", "intl", "mbstring", "xml")


def missing_packages() -> list[str]:
    """Return the entries of :data:`DEBIAN_PACKAGES` that dpkg does not list as installed.

    Raises :class:`DevWikiError` on a machine without ``dpkg-query`` (not Debian).
    """
    if shutil.which("dpkg-query") is None:
        raise DevWikiError(
            "the dev wiki needs Debian packages (" + " ".join(DEBIAN_PACKAGES) + ") "
            "but dpkg-query is not available: this is not a Debian/Ubuntu machine"
        )
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\n", *DEBIAN_PACKAGES],
        capture_output=True, text=True, check=False,
    )
    installed = {
        parts[0].split(":")[0]
        for parts in (line.split() for line in proc.stdout.splitlines())
        if len(parts) == 2 and parts[1] == "installed"
    }
    return [p for p in DEBIAN_PACKAGES if p not in installed]


def ensure_packages(install: bool = True, quiet: bool = False) -> None:
    """Make sure the Debian packages, ``php`` and MediaWiki are present.

    With ``install`` true, missing packages are installed with
    ``apt-get install -y --no-install-recommends`` (as root, or via ``sudo -n``).
    Raises :class:`DevWikiError` if something is missing and cannot be installed.
    """
    missing = missing_packages()
    if missing:
        if not install:
            raise DevWikiError(
                "the dev wiki needs Debian packages that are not installed: " + " ".join(missing)
                + "\n  install them with: apt-get install -y --no-install-recommends " + " ".join(missing)
                + "\n  (or run `s3rm dev wiki up`, which installs them, or .ci/run)"
            )
        prefix: list[str] = []
        if os.geteuid() != 0:
            if shutil.which("sudo") is None:
                raise DevWikiError(
                    "missing Debian packages " + " ".join(missing) + " and not running as root; run:\n"
                    "  apt-get update && apt-get install -y --no-install-recommends " + " ".join(missing)
                )
            prefix = ["sudo", "-n"]
        say("dev wiki: installing Debian packages: " + " ".join(missing), quiet)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for cmd in (["apt-get", "update", "-q"],
                    ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]):
            proc = subprocess.run(prefix + cmd, env=env, check=False)
            if proc.returncode != 0:
                raise DevWikiError(f"`{' '.join(prefix + cmd)}` failed with exit code {proc.returncode}")
        still = missing_packages()
        if still:
            raise DevWikiError("apt-get finished but these packages are still missing: " + " ".join(still))
    check_php()


def check_php() -> None:
    """Raise :class:`DevWikiError` unless ``php`` has :data:`PHP_MODULES` and MediaWiki is at :data:`MW_ROOT`."""
    if shutil.which("php") is None:
        raise DevWikiError("`php` is not on PATH (Debian package php-cli)")
    if not (MW_ROOT / "maintenance" / "install.php").is_file():
        raise DevWikiError(f"MediaWiki not found at {MW_ROOT} (Debian package mediawiki)")
    proc = subprocess.run(["php", "-m"], capture_output=True, text=True, check=False)
    loaded = {line.strip().lower() for line in proc.stdout.splitlines()}
    absent = [m for m in PHP_MODULES if m not in loaded]
    if absent:
        raise DevWikiError("PHP modules missing: " + ", ".join(absent)
                           + " (Debian packages php-sqlite3 php-intl php-mbstring php-xml)")


def mediawiki_version() -> str:
    """Return the installed MediaWiki version (e.g. ``"1.39.17"``) from ``includes/Defines.php``.

    Raises :class:`DevWikiError` if it cannot be read.
    """
    try:
        text = (MW_ROOT / "includes" / "Defines.php").read_text()
    except OSError as exc:
        raise DevWikiError(f"cannot read the MediaWiki version: {exc}") from None
    m = re.search(r"define\(\s*'MW_VERSION',\s*'([^']+)'", text)
    if not m:
        raise DevWikiError("cannot find MW_VERSION in MediaWiki's includes/Defines.php")
    return m.group(1)


def php_env(wiki_dir: Path) -> dict[str, str]:
    """The environment of a PHP process for the wiki in ``wiki_dir`` (``MW_CONFIG_FILE`` set)."""
    env = dict(os.environ)
    env["MW_CONFIG_FILE"] = str(wiki_dir / "LocalSettings.php")
    env.pop("MW_INSTALL_PATH", None)
    return env


def run_maintenance(wiki_dir: Path, script: str, *args: str, timeout: float = 600,
                    config: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``php maintenance/<script> args…`` for the wiki in ``wiki_dir``.

    Returns the completed process (stdout/stderr captured as text). Raises
    :class:`DevWikiError` with the script's output if it exits non-zero.
    """
    cmd = ["php", str(MW_ROOT / "maintenance" / script), *args]
    env = php_env(wiki_dir) if config else {k: v for k, v in os.environ.items() if k != "MW_CONFIG_FILE"}
    try:
        proc = subprocess.run(cmd, cwd=MW_ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise DevWikiError(f"maintenance/{script} timed out after {timeout:.0f} s") from None
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr).strip()
        out = "\n".join(out.splitlines()[-20:])
        raise DevWikiError(f"maintenance/{script} failed (exit {proc.returncode}):\n{out}")
    return proc


