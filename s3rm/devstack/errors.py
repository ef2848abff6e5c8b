"""The dev wiki's error type.

:class:`DevWikiError` carries the CLI exit code (1: an operation failed, 2: bad
configuration or usage) and a message for humans; it is a
:class:`~s3rm.errors.CliError`, so ``s3rm`` prints it without a traceback.
"""
from __future__ import annotations

from s3rm.errors import CliError


class DevWikiError(CliError):
    """A dev-wiki operation failed; ``str(exc)`` is a message for humans.

    ``exit_code`` is what the CLI returns: 1 for a failed operation, 2 for bad
    configuration or usage (port, directory, environment variable).
    """
