"""Where one HTTP/1.1 request ends in the bytes read so far (docs/operations.md#request-reading).

The gateway's worker (``gateway/serving/worker.py``) reads every request —
head and body — in its event loop, without a thread, and hands it to a
request thread only once it is complete. :class:`RequestScan` is the part
that decides "complete": it is fed the bytes of one connection as they
arrive and answers with a :class:`Verdict`:

* ``need``  — not complete yet; keep reading (the worker's deadline runs);
* ``ready`` — the request ends at ``end`` (bytes after it belong to the next,
  pipelined request);
* ``parse`` — the framing is something gunicorn's own parser refuses before it
  reads any body (a bare-LF head, a duplicate or non-numeric
  ``Content-Length``, a ``Transfer-Encoding`` not ending in ``chunked``,
  chunked HTTP/1.0, ``Content-Length`` with ``Transfer-Encoding``): the request
  goes to a thread at once and gunicorn answers it with its JSON 400;
* ``refuse`` — answered here with ``status`` (413 body over the limit, 431 head
  over :data:`HEAD_LIMIT`, 400 malformed chunked framing).

The framing rules are RFC 9112 §6 as gunicorn applies them
(``gunicorn.http.message.Message.set_body_reader``): the two must agree, or
a thread could be handed a request whose body is still on the wire.
Incremental: each :meth:`RequestScan.feed` looks only at what it has not
examined before, so a body dripped one byte at a time costs linear work.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

__all__ = ["HEAD_LIMIT", "HeadFields", "RequestScan", "Verdict", "parse_head"]

#: Largest request head (request line + header fields + the blank line), bytes; 431 beyond.
HEAD_LIMIT = 65536
#: Framing overhead allowed on top of the body limit for a chunked body (size lines, extensions, trailers), bytes.
CHUNK_OVERHEAD = 65536
_CHUNK_LINE_MAX = 1024
#: Head limits of gateway/serving/gunicorn.conf.py (a head past them goes to gunicorn's parser, which refuses it).
_LINE_MAX, _FIELDS_MAX, _FIELD_MAX = 8190, 100, 16384
_VERSIONS = ("HTTP/1.0", "HTTP/1.1")
_VERSION = re.compile(rb"HTTP/1\.[0-9]")  # what gunicorn serves
#: A field name: an RFC 9110 token without ``_`` (gunicorn drops or refuses names with it).
_NAME = re.compile(r"[!#$%&'*+.^`|~0-9A-Za-z-]+")
#: What gunicorn refuses (400) in a field value (controls but HTAB, DEL) and in a request target (all but VCHAR).
_VALUE_INVALID = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_TARGET_INVALID = re.compile(r"[^\x21-\x7e]")
#: Fields gunicorn refuses to see twice (400), and its default scheme fields (400 when they disagree).
_SINGLETONS = frozenset(("host", "content-type"))
_SCHEME_FIELDS = frozenset(("x-forwarded-proto", "x-forwarded-protocol", "x-forwarded-ssl"))


@dataclass(frozen=True)
class Verdict:
    """One answer of :meth:`RequestScan.feed`: ``kind`` ``need`` | ``ready`` | ``parse`` | ``refuse``;
    ``end`` the offset just past the request (``ready``); ``status`` and ``reason`` for ``refuse``;
    ``expect_continue``: the head asked for ``100 Continue`` and the body is not all there yet."""

    kind: str
    end: int = 0
    status: int = 0
    reason: str = ""
    expect_continue: bool = False


NEED = Verdict("need")
PARSE = Verdict("parse")


def _refuse(status: int, reason: str) -> Verdict:
    return Verdict("refuse", status=status, reason=reason)


class RequestScan:
    """Incremental end-of-request detection over one connection's byte buffer.

    ``body_limit``: the largest body accepted (bytes, ``S3RM_MAX_BODY_BYTES``);
    a larger ``Content-Length`` is refused as soon as the head is in, a chunked
    body as soon as its chunks add up to more. Feed the whole buffer each time
    (it only grows); the scan remembers how far it got.
    """

    def __init__(self, body_limit: int):
        self.body_limit = body_limit
        self._head_end = -1       # offset just past the blank line ending the head
        self._searched = 0        # head, then trailers: bytes already searched for the blank line
        self._length = None       # Content-Length body: its size
        self._chunked = False
        self._chunk_pos = 0       # chunked: offset of the next chunk-size line
        self._chunk_total = 0     # chunked: body bytes so far
        self._trailers = False    # chunked: the last chunk is in, reading trailers
        self.expect_continue = False

    @property
    def head_end(self) -> int:
        """Offset just past the blank line ending the head (-1 while the head is incomplete)."""
        return self._head_end

    @property
    def chunked(self) -> bool:
        """The body is chunked (its bytes on the wire are framing plus data, not the body itself)."""
        return self._chunked

    def feed(self, buf: bytes | bytearray) -> Verdict:
        """The verdict on ``buf`` (all bytes of this request read so far, possibly more)."""
        if self._head_end < 0:
            verdict = self._scan_head(buf)
            if verdict is not None:
                return verdict
        if self._chunked:
            return self._scan_chunks(buf)
        end = self._head_end + (self._length or 0)
        if len(buf) >= end:
            return Verdict("ready", end=end)
        return Verdict("need", expect_continue=self.expect_continue)

    # ------------------------------------------------------------------ head
    def _scan_head(self, buf) -> Verdict | None:
        start = max(0, self._searched - 3)
        crlf = buf.find(b"\r\n\r\n", start, HEAD_LIMIT + 4)
        bare = buf.find(b"\n\n", start, HEAD_LIMIT + 4)
        if bare >= 0 and (crlf < 0 or bare < crlf + 2):
            return PARSE  # a head ending in bare LF: gunicorn's parser refuses it (400)
        if crlf < 0:
            if len(buf) > HEAD_LIMIT:
                return _refuse(431, "Request Header Fields Too Large")
            self._searched = len(buf)
            return NEED
        self._head_end = crlf + 4
        return self._framing(bytes(buf[:crlf]))

    def _framing(self, head: bytes) -> Verdict | None:
        if head.startswith(b"\r\n"):  # gunicorn skips one empty line before the request line (RFC 9112 §2.2)
            head = head[2:]
        lines = head.split(b"\r\n")
        version = lines[0].rsplit(b" ", 1)[-1]
        lengths, codings, expect = [], [], False
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                return PARSE
            name = name.lower()
            if name == b"content-length":
                lengths.append(value.strip(b" \t"))
            elif name == b"transfer-encoding":
                codings += [c.strip(b" \t").lower() for c in value.split(b",")]
            elif name == b"expect" and value.strip(b" \t").lower() == b"100-continue":
                expect = True
        # gunicorn serves HTTP/1.0 to 1.9 and reads a chunked body from 1.1 on (anything else: 400)
        modern = _VERSION.fullmatch(version) is not None and version != b"HTTP/1.0"
        if codings:
            if codings[-1] != b"chunked" or codings.count(b"chunked") != 1 or lengths or not modern:
                return PARSE
            self._chunked = True
            self._chunk_pos = self._head_end
        elif lengths:
            if len(lengths) != 1 or not lengths[0].isdigit():
                return PARSE
            digits = lengths[0].lstrip(b"0")  # int() raises past 4,300 digits: never in the event loop
            if len(digits) > 18:
                return _refuse(413, "Payload Too Large")
            self._length = int(digits or b"0")
            if self._length > self.body_limit:
                return _refuse(413, "Payload Too Large")
        self.expect_continue = expect and modern and (self._chunked or bool(self._length))
        return None

    # ---------------------------------------------------------------- chunks
    def _scan_chunks(self, buf) -> Verdict:
        need = Verdict("need", expect_continue=self.expect_continue)
        while True:
            if len(buf) - self._head_end > self.body_limit + CHUNK_OVERHEAD:
                return _refuse(413, "Payload Too Large")
            pos = self._chunk_pos
            if self._trailers:  # after the last chunk: trailer fields, then an empty line
                if buf[pos:pos + 2] == b"\r\n":
                    return Verdict("ready", end=pos + 2)
                if len(buf) < pos + 2:
                    return need
                end = buf.find(b"\r\n\r\n", max(pos, self._searched - 3))
                if end < 0:
                    self._searched = len(buf)  # searched up to here: the next feed goes on from it
                    return need
                return Verdict("ready", end=end + 4)
            eol = buf.find(b"\r\n", pos, pos + _CHUNK_LINE_MAX)
            if eol < 0:
                if len(buf) - pos >= _CHUNK_LINE_MAX:
                    return _refuse(400, "Bad Request")
                return need
            size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip(b" \t")
            if not size_text or any(c not in b"0123456789abcdefABCDEF" for c in size_text) or len(size_text) > 16:
                return _refuse(400, "Bad Request")
            size = int(size_text, 16)
            if size == 0:
                self._trailers = True
                self._chunk_pos = eol + 2
                continue
            self._chunk_total += size
            if self._chunk_total > self.body_limit:
                return _refuse(413, "Payload Too Large")
            data_end = eol + 2 + size
            if len(buf) < data_end + 2:
                self._chunk_total -= size  # counted again when the chunk is complete
                return need
            if buf[data_end:data_end + 2] != b"\r\n":
                return _refuse(400, "Bad Request")
            self._chunk_pos = data_end + 2


class HeadFields(Mapping[str, str]):
    """A request head's header fields: case-insensitive lookup, names as sent, repeats joined by ``,``."""

    def __init__(self, fields: dict[str, tuple[str, str]]):
        self._fields = fields  # lower-case name -> (name as sent, value)

    def __getitem__(self, key: str) -> str:
        return self._fields[key.lower()][1]

    def get(self, key: str, default=None):
        field = self._fields.get(key.lower())
        return default if field is None else field[1]

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._fields.values())

    def __len__(self) -> int:
        return len(self._fields)

    def items(self) -> list[tuple[str, str]]:  # type: ignore[override]
        """``(name as sent, value)`` pairs in order of first appearance."""
        return list(self._fields.values())


def parse_head(head: bytes) -> tuple[str, str, str, HeadFields] | None:
    """``(method, target, version, fields)`` of a request head without its blank line, or ``None``
    for anything gunicorn's parser might read differently or refuse (then a request thread parses it).

    Header names are matched case-insensitively; repeated fields are joined with ``,`` as gunicorn
    joins them in the WSGI environ. ``None`` for: a request line that is not ``METHOD SP target SP
    HTTP/1.x`` or whose target holds anything but visible ASCII, a field without ``:``, a name that is
    not a token or holds ``_``, a value with a control character other than HTAB (bare CR, LF, NUL, DEL),
    obsolete line folding, a second ``Host`` or ``Content-Type``, more than one ``X-Forwarded-Proto`` /
    ``-Protocol`` / ``-Ssl`` field, an ``Expect`` other than ``100-continue``, or more or longer lines than
    the limits in ``gateway/serving/gunicorn.conf.py`` (gunicorn 400/417/431 for each).
    """
    text = head.decode("latin-1")
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if (len(parts) != 3 or parts[2] not in _VERSIONS or len(lines[0]) > _LINE_MAX or len(lines) - 1 > _FIELDS_MAX
            or _TARGET_INVALID.search(parts[1])):
        return None
    fields: dict[str, tuple[str, str]] = {}
    schemes = 0
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or len(line) > _FIELD_MAX or _VALUE_INVALID.search(line) or not _NAME.fullmatch(name):
            return None
        value = value.strip(" \t")
        key = name.lower()
        field = fields.get(key)
        if key in _SCHEME_FIELDS:
            schemes += 1
        if (field is not None and key in _SINGLETONS) or schemes > 1 or (
                key == "expect" and value.lower() != "100-continue"):
            return None  # gunicorn: 400 for a repeated singleton or disagreeing scheme fields, 417 for the Expect
        fields[key] = (name, value) if field is None else (field[0], f"{field[1]},{value}")
    return parts[0], parts[1], parts[2], HeadFields(fields)
