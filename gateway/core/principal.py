"""The caller of one request, as far as the transport can tell (docs/transport.md#authorisation-and-the-2025-11-25-discovery-flow)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Principal"]


@dataclass(frozen=True)
class Principal:
    """Who is calling, as far as the transport can tell.

    ``kind`` is ``anonymous`` (no or unverified credentials, token mode),
    ``token`` (the shared write token was presented and verified), ``ip``
    (open mode: the client address, used only as a rate principal) or
    ``github`` (github mode: a verified access token of a GitHub user,
    docs/transport.md#github-mode). ``subject`` is a short non-secret
    identifier (``shared-write-token``, an IP address, ``""``, or the GitHub
    login). Only a ``github`` principal is a verified person; its
    ``user_id`` is GitHub's numeric user id (stable across login renames) and
    ``scopes`` the token's granted scopes.
    """

    kind: Literal["anonymous", "token", "ip", "github"] = "anonymous"
    subject: str = ""
    user_id: str = ""
    scopes: frozenset[str] = frozenset()
