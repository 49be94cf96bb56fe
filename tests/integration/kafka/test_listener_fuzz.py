"""Every API and version the broker advertises, with generated (schema-valid but arbitrary)
requests, sent after SASL to a real broker's Kafka listener in process (every handler:
data, groups, admin): each gets an answer its client can decode, on the same connection,
with no handler error logged. Names are biased towards a topic and group that exist, so
requests reach past the unknown-topic checks. Bounded: a few requests per version."""

from __future__ import annotations

import asyncio
import logging
import random
import struct
import uuid

from hypothesis import HealthCheck, given, settings

from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.protocol.kafka import apis
from tests.integration.kafka.test_listener_hardening import Node, in_loop
from tests.unit.kafka.codec_values import every_message_version, message_value

PER_VERSION = 4
TOPIC_ID = uuid.UUID("5c2f1e0a-0000-4000-8000-000000000001").bytes
BATCH = encode_batch([Record(1, b"k", b"v")])
SKIP = {apis.SASL_HANDSHAKE, apis.SASL_AUTHENTICATE}  # once per connection (test_sasl)


def _bias(value, rng: random.Random):
    if isinstance(value, list):
        return [_bias(v, rng) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for k, v in value.items():
        hit = rng.random() < 0.7
        if hit and k in ("name", "topic", "topic_name", "resource_name") and isinstance(v, str):
            v = "t"
        elif hit and k in ("group_id", "key", "group") and isinstance(v, str):
            v = "g"
        elif hit and k == "topic_id":
            v = TOPIC_ID
        elif hit and k in ("partition", "partition_index", "index") and isinstance(v, int):
            v = 0
        elif hit and k == "records" and v is not None:
            v = BATCH
        out[k] = _bias(v, rng)
    return out


def _draw(spec, version: int) -> list[dict]:
    """A few generated values of one request version (reproducible)."""
    drawn: list[dict] = []

    @settings(
        max_examples=PER_VERSION,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(message_value(spec, version))
    def collect(value):
        drawn.append(value)

    collect()
    return drawn[:PER_VERSION]


def _samples() -> list[tuple[int, int, dict]]:
    rng = random.Random(21)
    return [
        (spec.api_key, version, _bias(value, rng))
        for spec, version in every_message_version()
        if spec.kind == "request" and spec.api_key not in SKIP
        for value in _draw(spec, version)
    ]


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@in_loop
async def test_every_api_version_answers_generated_requests(tmp_path):
    samples = _samples()
    assert len(samples) > 300
    errors = _Errors()
    logging.getLogger().addHandler(errors)
    try:
        async with Node(tmp_path, max_wait_ms=100) as node:
            c = await node.connect()
            await c.authenticate()
            for api_key, version, body in samples:
                name = f"{apis.apis()[api_key].name} v{version}: {body!r:.300}"
                c.send(api_key, version, body)
                if api_key == apis.PRODUCE and body["acks"] == 0:
                    # unanswered; a failed acks=0 produce closes the connection (Kafka's way
                    # of making the producer refresh its metadata)
                    await asyncio.sleep(0.05)
                    if c.writer.transport.is_closing() or c.reader.at_eof():
                        c = await node.connect()
                        await c.authenticate()
                    continue
                async with asyncio.timeout(10):
                    frame = await c.read_frame()
                assert frame[:4] == struct.pack(">i", c.correlation), name
                flexible = apis.apis()[api_key].flexible(version)
                body_at = 5 if flexible and api_key != apis.API_VERSIONS else 4
                apis.response_codec(api_key, version).decode_all(frame[body_at:])
            assert not errors.records, [r.getMessage() for r in errors.records]
    finally:
        logging.getLogger().removeHandler(errors)
