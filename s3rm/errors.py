"""The exception root of the ``s3rm`` command and its one error type for verbs.

Every exception class of the CLI derives from :class:`S3rmError`. A verb that
must stop raises :class:`CliError` (or a subclass); :func:`s3rm.cli.main`
catches it in one place, prints ``<verb prefix>: <message>`` on stderr and
returns its exit code: 1 an operation failed, 2 usage or configuration error.
The verb prefix is the ``error_prefix`` its parser sets (default ``s3rm``).
"""
from __future__ import annotations

__all__ = ["CliError", "S3rmError"]


class S3rmError(Exception):
    """The root of every exception class the ``s3rm`` command defines."""


class CliError(S3rmError):
    """Stop the running verb: ``main`` prints ``str(exc)`` after the verb's prefix and exits ``exit_code``."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
