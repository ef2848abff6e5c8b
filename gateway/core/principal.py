"""The caller of one request, as far as the transport can tell (docs/transport.md#authorisation-and-the-2025-11-25-discovery-flow)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Principal"]


@dataclass(frozen=True)
class Principal:
    """Who is calling, as far as the transport can tell.

    ``kind`` is ``anonymous`` (no or unverified credentials, token mode),
    ``token`` (the shared write token was presented and verified) or ``ip``
    (open mode: the client address, used only as a rate principal). ``subject``
    is a short non-secret identifier (``shared-write-token``, an IP address or
    ``""``). It is never a verified person.
    """

    kind: Literal["anonymous", "token", "ip"] = "anonymous"
    subject: str = ""
