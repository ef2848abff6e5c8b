"""Signed v1 cursors (gateway/tools/cursors.py): round trip, forgery, mismatch, expiry."""
from __future__ import annotations

import base64
import json

import pytest

from gateway.core.errors import ToolError
from gateway.tools.cursors import CursorCodec, fingerprint

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


def test_v2_key_ring_any_gateway_with_the_ring_continues_and_rotation_keeps_old_cursors():
    fp = fingerprint({"tool": "t", "generation": "gen-a"})
    ring = {1: b"1" * 32}
    a = CursorCodec(b"a" * 32, ttl_seconds=60, clock=lambda: 1_000_000.0, keys=ring)
    b = CursorCodec(b"b" * 32, ttl_seconds=60, clock=lambda: 1_000_000.0, keys=dict(ring))  # other process key
    token = a.encode("search_lessons", fp, 5)
    envelope = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert envelope["v"] == 2 and envelope["k"] == 1
    assert b.decode(token, "search_lessons", fp) == 5
    rotated = CursorCodec(b"c" * 32, ttl_seconds=60, clock=lambda: 1_000_000.0, keys={1: b"1" * 32, 2: b"2" * 32})
    assert rotated.decode(token, "search_lessons", fp) == 5  # an older kid still verifies
    assert json.loads(base64.urlsafe_b64decode(rotated.encode("t", fp, 1).split(".")[0] + "=="))["k"] == 2
    refused(lambda: CursorCodec(b"d" * 32, keys={3: b"3" * 32}).decode(token, "search_lessons", fp))  # kid unknown
    refused(lambda: b.decode(token, "search_lessons", fingerprint({"tool": "t", "generation": "gen-b"})))
    later = CursorCodec(b"b" * 32, ttl_seconds=60, clock=lambda: 1_000_100.0, keys=dict(ring))
    assert "expired" in refused(lambda: later.decode(token, "search_lessons", fp))
    v1 = CursorCodec(b"a" * 32, ttl_seconds=60, clock=lambda: 1_000_000.0).encode("t", fp, 2)
    assert a.decode(v1, "t", fp) == 2  # v1 cursors of this process keep working beside the ring
    assert "not issued" in refused(lambda: b.decode(v1, "t", fp))
