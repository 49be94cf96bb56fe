"""The control plane's JSON body parser: bounded in size and in nesting depth.

Python's ``json`` module recurses per nesting level, so ``[[[[...]]]]`` 100,000 deep raised
RecursionError (a 500) before any view code ran. Here the body is read up to the request
limit (``DATA_UPLOAD_MAX_MEMORY_SIZE``: a chunked body has no Content-Length for the
middleware to check), its depth is counted in one pass over the bytes before decoding, and
any decoding failure is a 400 ``INVALID_REQUEST``.
"""

from __future__ import annotations

import json

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from backend.core.exceptions import PayloadTooLarge

MAX_DEPTH = 32
_OPEN, _CLOSE, _QUOTE, _BACKSLASH = frozenset(b"[{"), frozenset(b"]}"), ord('"'), ord("\\")


def nesting_depth(raw: bytes, limit: int = MAX_DEPTH) -> int:
    """The deepest nesting of arrays and objects in ``raw`` (brackets inside strings do not
    count); stops counting once past ``limit``."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == _BACKSLASH:
                escaped = True
            elif byte == _QUOTE:
                in_string = False
        elif byte == _QUOTE:
            in_string = True
        elif byte in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif byte in _CLOSE:
            depth -= 1
    return deepest


def max_body_bytes() -> int:
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        if stream is None:
            return {}
        limit = max_body_bytes()
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise PayloadTooLarge(f"the request body is larger than {limit} bytes")
        if nesting_depth(raw) > MAX_DEPTH:
            raise ParseError(f"the JSON body is nested deeper than {MAX_DEPTH} levels")
        try:
            return json.loads(raw.decode(self._encoding(parser_context)))
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"the body is not valid JSON: {exc}") from None

    @staticmethod
    def _encoding(parser_context) -> str:
        return (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
