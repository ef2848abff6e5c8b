"""The exception root of the ``sync`` package (tests/test_error_roots.py)."""
from __future__ import annotations

__all__ = ["SyncError", "SyncConfigError"]


class SyncError(Exception):
    """A sync operation failed; ``str(exc)`` is the message for humans.

    ``exit_code`` is what the CLI returns: 1 for a failed operation, 2 for
    configuration problems (settings, login, rights).
    """

    exit_code = 1


class SyncConfigError(SyncError):
    """Missing or wrong settings: API URL, credentials, unreachable wiki, unreadable sources (exit 2)."""

    exit_code = 2
