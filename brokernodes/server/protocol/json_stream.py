"""Concatenated JSON objects -> one object's bytes at a time (pure, sans-IO).

Confluent's streaming produce mode sends several records in one (usually chunked) request
body, each a JSON object, back to back or separated by whitespace (curl sends them one per
line). ``ObjectSplitter`` is fed the body as it arrives and hands out each whole object's
bytes as soon as its closing brace is in, so the broker can append and answer a record
before the next has arrived. It only finds where objects end (strings, escapes and nesting);
parsing each is orjson's job. Anything between objects other than whitespace, or a
top-level value that is not an object, is an ``InvalidRequestError``: the stream cannot be
resynchronised after it.
"""

from __future__ import annotations

import re

from brokernodes.errors import InvalidRequestError

_WHITESPACE = b" \t\r\n"
# inside an object: the bytes that change the scanner's state
_STRUCTURAL = re.compile(rb'[{}"]')
_STRING_END = re.compile(rb'["\\]')


class ObjectSplitter:
    """Feed bytes with ``feed``; each call returns the objects completed by them, in order.
    ``close`` at the end of the body raises if an object was left unfinished."""

    __slots__ = ("_buf", "_depth", "_in_string", "_max_bytes", "_pos", "_start")

    def __init__(self, max_object_bytes: int) -> None:
        self._buf = bytearray()
        self._pos = 0  # next byte to scan
        self._start = -1  # where the object under way began (-1: between objects)
        self._depth = 0
        self._in_string = False
        self._max_bytes = max_object_bytes

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out: list[bytes] = []
        buf = self._buf
        pos = self._pos
        while pos < len(buf):
            if self._start < 0:  # between objects: skip whitespace, expect '{'
                byte = buf[pos]
                if byte in _WHITESPACE:
                    pos += 1
                    continue
                if byte != 0x7B:  # '{'
                    raise InvalidRequestError(
                        f"body: expected a JSON object at byte {pos} of the stream, got "
                        f"{bytes([byte])!r}; stream records as JSON objects, one after another"
                    )
                self._start = pos
                self._depth = 1
                pos += 1
                continue
            if self._in_string:
                m = _STRING_END.search(buf, pos)
                if m is None:
                    pos = len(buf)
                    break
                if m.group() == b"\\":
                    if m.end() >= len(buf):  # the escaped byte has not arrived yet
                        pos = m.start()
                        break
                    pos = m.end() + 1
                    continue
                self._in_string = False
                pos = m.end()
                continue
            m = _STRUCTURAL.search(buf, pos)
            if m is None:
                pos = len(buf)
                break
            pos = m.end()
            token = m.group()
            if token == b'"':
                self._in_string = True
            elif token == b"{":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == 0:
                    out.append(bytes(buf[self._start : pos]))
                    self._start = -1
        # drop what is done with, so the buffer holds at most the object under way
        cut = self._start if self._start >= 0 else pos
        if cut:
            del buf[:cut]
            pos -= cut
            if self._start >= 0:
                self._start = 0
        self._pos = pos
        if self._start >= 0 and len(buf) > self._max_bytes:
            raise InvalidRequestError(
                f"body: a streamed record is over {self._max_bytes} bytes; send smaller records"
            )
        return out

    def close(self) -> None:
        """The body ended: it must not end inside an object."""
        if self._start >= 0:
            raise InvalidRequestError(
                "body: the stream ended inside a JSON object; send each record whole"
            )


def split_objects(body: bytes, max_object_bytes: int) -> list[bytes]:
    """A whole body of concatenated objects -> each object's bytes."""
    splitter = ObjectSplitter(max_object_bytes)
    out = splitter.feed(body)
    splitter.close()
    return out
