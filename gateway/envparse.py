"""Parsing helpers shared by the gateway's configuration readers (``gateway.config``,
``gateway.retrieval.settings``), so every setting is validated the same way."""
from __future__ import annotations

from typing import Callable


def number(get: Callable[[str], str], name: str, default, kind, low, high, *,
           error: Callable[[str, str], Exception]):
    """Read ``name`` through ``get`` as ``kind`` (int or float) within ``[low, high]``.

    An empty value gives ``default``. A value that does not parse or is out of
    range raises ``error(name, message)``; the message never repeats the value.
    """
    raw = get(name)
    if raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise error(name, f"must be {'an integer' if kind is int else 'a number'}") from None
    if not (low <= value <= high):
        raise error(name, f"must be between {low} and {high}")
    return value
