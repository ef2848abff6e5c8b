"""Signed v1 cursors (gateway/retrieval/cursors.py): round trip, forgery, mismatch, expiry."""
from __future__ import annotations

import base64
import json

import pytest

from gateway.core.errors import ToolError
from gateway.retrieval.cursors import CursorCodec, fingerprint

KEY = b"k" * 32


def codec(now: float = 1_000_000.0, key: bytes = KEY) -> CursorCodec:
    return CursorCodec(key, ttl_seconds=60, clock=lambda: now)


def refused(fn) -> str:
    with pytest.raises(ToolError) as info:
        fn()
    assert info.value.code == "invalid_cursor"
    assert "first page" in info.value.message
    return info.value.message


def test_round_trip_keeps_any_json_position():
    fp = fingerprint({"tool": "t", "query": "단편화"})
    for position in (0, 17, {"o": 3, "s": "abc"}, {"rc": "20260101000000|12"}, {"rc": None}):
        token = codec().encode("search_lessons", fp, position)
        assert codec().decode(token, "search_lessons", fp) == position
        assert "=" not in token and "+" not in token and "/" not in token


def test_fingerprint_is_canonical_and_sensitive():
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert len(fingerprint({})) == 64


def test_other_request_tool_or_key_is_refused():
    fp = fingerprint({"q": "x"})
    token = codec().encode("search_lessons", fp, {"o": 7})
    assert "different request" in refused(lambda: codec().decode(token, "search_lessons", fingerprint({"q": "y"})))
    refused(lambda: codec().decode(token, "find_analogies", fp))
    assert "not issued" in refused(lambda: codec(key=b"z" * 32).decode(token, "search_lessons", fp))


def test_forged_position_is_refused():
    fp = fingerprint({"q": "x"})
    token = codec().encode("search_lessons", fp, {"o": 7})
    body, mac = token.split(".")
    envelope = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    envelope["p"] = {"o": 0}
    forged = base64.urlsafe_b64encode(json.dumps(envelope).encode()).rstrip(b"=").decode() + "." + mac
    refused(lambda: codec().decode(forged, "search_lessons", fp))


@pytest.mark.parametrize("junk", ["", "abc", "a.b.c", "!!!.???", "e30.e30", "x" * 5000])
def test_garbage_is_refused(junk):
    refused(lambda: codec().decode(junk, "search_lessons", "fp"))


def test_expired_cursor_is_refused():
    fp = fingerprint({})
    token = codec(now=1000.0).encode("t", fp, 1)
    assert codec(now=1059.0).decode(token, "t", fp) == 1
    assert "expired" in refused(lambda: codec(now=1061.0).decode(token, "t", fp))


def test_short_key_is_rejected():
    with pytest.raises(ValueError):
        CursorCodec(b"short")
