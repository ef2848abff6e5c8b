"""One exception root per side: every exception class the product defines derives from its side's root.

The gateway's classes (and the shared save rules in ``hooks_spec``) derive from
:class:`gateway.core.errors.GatewayError`, the ``s3rm`` command's from
:class:`s3rm.errors.S3rmError`; a verb stops with :class:`s3rm.errors.CliError`.
The test imports every module of the product packages and checks each
exception class defined there.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from gateway.core.errors import GatewayError
from s3rm.errors import CliError, S3rmError
from sync.errors import SyncError

REPO = Path(__file__).resolve().parents[1]
#: package → the root every exception class defined in it derives from
ROOTS = {"gateway": GatewayError, "hooks_spec": GatewayError, "s3rm": S3rmError, "sync": SyncError}


def _module_names(package: str) -> list[str]:
    """Dotted names of every importable module under ``package``."""
    names = []
    for path in sorted((REPO / package).rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if all(part.isidentifier() for part in parts):
            names.append(".".join(parts))
    return names


def exception_classes(package: str) -> list[type[BaseException]]:
    """Every exception class defined (not only imported) in a module of ``package``."""
    found = []
    for name in _module_names(package):
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == name:
                found.append(value)
    return found


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_every_exception_class_derives_from_its_sides_root(package):
    classes = exception_classes(package)
    assert package == "hooks_spec" or classes, f"no exception class found in {package}"
    strays = sorted(f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, ROOTS[package]))
    assert not strays, f"derive these from {ROOTS[package].__name__}: {strays}"


def test_one_config_error_and_one_cli_error_type():
    configs = [c for package in ROOTS for c in exception_classes(package) if c.__name__ == "ConfigError"]
    assert [f"{c.__module__}.{c.__name__}" for c in configs] == ["gateway.config.values.ConfigError"]
    clis = [c for c in exception_classes("s3rm") if c.__name__ == "CliError"]
    assert clis == [CliError] and issubclass(CliError, S3rmError)


def test_classes_caught_as_builtin_types_keep_those_bases():
    from gateway.config.values import ConfigError
    from gateway.domain.codec import PageFormatError
    from gateway.tools.registry import SchemaLoadError

    assert issubclass(ConfigError, ValueError) and issubclass(PageFormatError, ValueError)
    assert issubclass(SchemaLoadError, RuntimeError)
