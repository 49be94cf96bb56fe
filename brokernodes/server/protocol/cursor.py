"""Stateless read cursors: the position of a read over a topic's partitions, signed so any
broker of the cluster can serve the next read and nobody can forge or alter one (pure).

A cursor is ``base64url(payload) "." base64url(HMAC-SHA256(key, payload))`` where the key is
the brokers' shared secret (``http.log_offsets.cluster_token``) and the payload is compact JSON:
``{"v": 1, "tenant", "topic", "topic_id", "pos": {partition: next offset}}``. The tenant and
topic id bind it: another tenant's key, or a topic re-created under the same name, gets
INVALID_CURSOR. Cursors carry no secret and no expiry (like a Kafka offset, one stays valid
while its records are retained; a read below the log start answers OFFSET_OUT_OF_RANGE with
the log start, from where a new cursor can be asked).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

import orjson

from brokernodes.errors import SluiceError

MAX_CURSOR_BYTES = 64 * 1024


class InvalidCursorError(SluiceError):
    error_code = "INVALID_CURSOR"


@dataclass(frozen=True)
class Cursor:
    tenant: str | None
    topic: str
    topic_id: str
    positions: dict[int, int]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def encode(cursor: Cursor, key: str) -> str:
    payload = orjson.dumps(
        {
            "v": 1,
            "tenant": cursor.tenant,
            "topic": cursor.topic,
            "topic_id": cursor.topic_id,
            "pos": {str(p): o for p, o in sorted(cursor.positions.items())},
        }
    )
    mac = hmac.new(key.encode(), payload, hashlib.sha256).digest()
    return f"{_b64(payload)}.{_b64(mac)}"


def decode(text: str, key: str) -> Cursor:
    """Verify and parse; raises INVALID_CURSOR for anything not made by this cluster."""
    if len(text) > MAX_CURSOR_BYTES or text.count(".") != 1:
        raise InvalidCursorError("not a Sluice cursor; ask for one with GET .../cursor")
    body, mac = text.split(".")
    try:
        payload, given = _unb64(body), _unb64(mac)
    except (ValueError, TypeError):
        raise InvalidCursorError("not a Sluice cursor (bad encoding)") from None
    expected = hmac.new(key.encode(), payload, hashlib.sha256).digest()
    if not hmac.compare_digest(given, expected):
        raise InvalidCursorError(
            "the cursor's signature does not match: it was altered or made elsewhere"
        )
    try:
        doc = orjson.loads(payload)
        return Cursor(
            doc["tenant"],
            str(doc["topic"]),
            str(doc["topic_id"]),
            {int(p): int(o) for p, o in doc["pos"].items()},
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        raise InvalidCursorError("the cursor's content is not readable") from None
