"""Signed cursors (gateway/tools/cursors.py): round trip, forgery, mismatch, expiry, key rotation,
and the restart message for cursors of the hand-written format they replaced."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
from itsdangerous import URLSafeSerializer

from gateway.core.errors import ToolError
from gateway.tools.cursors import CursorCodec, fingerprint

KEY = b"k" * 32
#: Reads and writes cursor payloads without a key (the payload is not secret, only signed).
UNSIGNED = URLSafeSerializer(b"unused")


def envelope(token: str) -> dict:
    """The envelope a cursor carries (read without checking its signature)."""
    return UNSIGNED.load_payload(token.rsplit(".", 1)[0].encode())


def with_envelope(token: str, changed: dict) -> str:
    """``token``'s signature on another envelope (a forgery)."""
    return UNSIGNED.dump_payload(changed).decode() + "." + token.rsplit(".", 1)[1]


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
    forged = with_envelope(token, {**envelope(token), "p": {"o": 0}})
    assert "not issued" in refused(lambda: codec().decode(forged, "search_lessons", fp))
    later = with_envelope(token, {**envelope(token), "x": envelope(token)["x"] + 3600})
    assert "not issued" in refused(lambda: codec().decode(later, "search_lessons", fp))


@pytest.mark.parametrize("junk", ["", "abc", "a.b.c", "!!!.???", "e30.e30", "x" * 5000])
def test_garbage_is_refused(junk):
    refused(lambda: codec().decode(junk, "search_lessons", "fp"))


def test_non_ascii_cursor_is_malformed():
    """A lone surrogate (JSON allows "\\ud800") or any non-ASCII character is refused as malformed,
    never a UnicodeEncodeError: the cursors we issue are ASCII."""
    fp = fingerprint({})
    head, sig = codec().encode("search_lessons", fp, {"o": 1}).rsplit(".", 1)
    for token in ("\ud800", "\ud800." + sig, head + ".\ud800", head + "." + sig + "\ud800", head + "é." + sig):
        assert "malformed" in refused(lambda: codec().decode(token, "search_lessons", fp))


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
    assert envelope(token)["v"] == 3 and envelope(token)["k"] == 1
    assert b.decode(token, "search_lessons", fp) == 5
    rotated = CursorCodec(b"c" * 32, ttl_seconds=60, clock=lambda: 1_000_000.0, keys={1: b"1" * 32, 2: b"2" * 32})
    assert rotated.decode(token, "search_lessons", fp) == 5  # an older kid still verifies
    assert envelope(rotated.encode("t", fp, 1))["k"] == 2  # the newest kid signs
    refused(lambda: CursorCodec(b"d" * 32, keys={3: b"3" * 32}).decode(token, "search_lessons", fp))  # kid unknown
    refused(lambda: b.decode(token, "search_lessons", fingerprint({"tool": "t", "generation": "gen-b"})))
    later = CursorCodec(b"b" * 32, ttl_seconds=60, clock=lambda: 1_000_100.0, keys=dict(ring))
    assert "expired" in refused(lambda: later.decode(token, "search_lessons", fp))
    own = CursorCodec(b"a" * 32, ttl_seconds=60, clock=lambda: 1_000_000.0).encode("t", fp, 2)
    assert "k" not in envelope(own)
    assert a.decode(own, "t", fp) == 2  # cursors of this process's own key keep working beside the ring
    assert "not issued" in refused(lambda: b.decode(own, "t", fp))


def _hand_written(body: dict, key: bytes, context: bytes) -> str:
    """A cursor of the hand-written format (envelope versions 1 and 2) that itsdangerous replaced."""
    raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    mac = hmac.new(key, context + raw, hashlib.sha256).digest()
    return ".".join(base64.urlsafe_b64encode(part).rstrip(b"=").decode() for part in (raw, mac))


def test_a_cursor_of_the_replaced_format_gets_the_restart_message():
    fp = fingerprint({"q": "x"})
    old = {"v": 1, "t": "search_lessons", "fp": fp, "p": {"o": 5}, "x": 1_000_030}
    for token in (_hand_written(old, KEY, b"s3rm-cursor.v1."),
                  _hand_written({**old, "v": 2, "k": 1}, b"1" * 32, b"s3rm-cursor.v2.")):
        message = refused(lambda: codec().decode(token, "search_lessons", fp))
        assert message == ("The cursor has an unsupported version. "
                           "Restart from the first page: repeat the call without a cursor.")


def test_a_long_position_is_compressed_and_still_signed():
    fp = fingerprint({})
    position = {"rc": "20260101000000|" + "7" * 400}
    token = codec().encode("t", fp, position)
    assert token.startswith(".") and len(token) < 300  # itsdangerous compresses when that is shorter
    assert codec().decode(token, "t", fp) == position
    refused(lambda: codec(key=b"z" * 32).decode(token, "t", fp))
