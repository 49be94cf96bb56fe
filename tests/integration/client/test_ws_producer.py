"""The SDK producer with ``produce_mode="websocket"`` against real broker processes: acks
per request, keyed order, the broker's error codes, idempotent retries after a lost answer,
and NOT_LEADER_OR_FOLLOWER sending it to the named leader."""

from __future__ import annotations

import asyncio

import pytest

from brokernodes.client.partitioner import partition_for_key
from brokernodes.client.produce_stream import ProduceStream
from brokernodes.client.producer import AsyncProducer, Producer
from brokernodes.errors import BrokerError
from tests.integration.broker.util import fetch_all_values
from tests.integration.client.test_sdk import read_all, run
from tests.integration.conftest import free_port, make_metadata


def ws_producer(broker_or_url, api_key=None, **kw) -> AsyncProducer:
    url = getattr(broker_or_url, "url", broker_or_url)
    key = api_key or getattr(broker_or_url, "api_key", None)
    return AsyncProducer(url, key, produce_mode="websocket", **kw)


def test_keyed_records_are_acknowledged_in_order_per_partition(client_broker):
    keys = [b"k%d" % i for i in range(12)]

    async def main():
        async with ws_producer(client_broker, linger_ms=0, batch_size=2048) as p:
            futures = [p.send("ws-produce", b"v%04d" % i, keys[i % 12]) for i in range(600)]
            metas = [await f for f in futures]
            streams = list(p._streams._streams.values())
        return metas, streams, await read_all(client_broker, "ws-produce", 600)

    metas, streams, records = run(main())
    assert len(streams) == 1 and not streams[0].open  # one stream, closed with the producer
    for i, m in enumerate(metas):
        assert m.partition == partition_for_key(keys[i % 12], 4)
    by_partition: dict[int, list] = {}
    for r in records:
        by_partition.setdefault(r.partition, []).append(r)
    for p, rs in by_partition.items():
        assert [r.offset for r in rs] == list(range(len(rs)))  # no gaps, no duplicates
        sent = [metas[i].offset for i in range(600) if metas[i].partition == p]
        assert sorted(sent) == [r.offset for r in rs]
    got = {(r.partition, r.offset): r.value for r in records}
    assert all(got[(m.partition, m.offset)] == b"v%04d" % i for i, m in enumerate(metas))


def test_sync_producer_over_the_stream(client_broker):
    with Producer(client_broker.url, client_broker.api_key, produce_mode="websocket") as p:
        metas = [p.send("ws-sync", b"s%d" % i, partition=0).result(10) for i in range(5)]
    assert [m.offset for m in metas] == list(range(5))


def test_broker_errors_fail_the_records_with_their_codes(client_broker):
    async def main():
        async with ws_producer(client_broker, retries=0) as p:
            # the topic's max.message.bytes is 2048
            with pytest.raises(BrokerError) as too_big:
                await p.send("tiny", b"x" * 4096)
            fine = await p.send("tiny", b"small")  # the stream is still good
            return too_big.value, fine

    too_big, fine = run(main())
    assert too_big.error_code == "MESSAGE_TOO_LARGE" and "2048" in too_big.message
    assert fine.offset >= 0


def test_acks_zero_needs_the_http_path():
    with pytest.raises(ValueError, match="acks=1 or acks=all"):
        AsyncProducer("http://127.0.0.1:1", acks=0, produce_mode="websocket")
    with pytest.raises(ValueError, match="produce_mode"):
        AsyncProducer("http://127.0.0.1:1", produce_mode="carrier-pigeon")


def test_a_lost_answer_is_retried_without_duplicates(client_broker, monkeypatch):
    """The broker appends, then the connection drops before the answer is read: the
    producer reopens the stream and resends the same bytes; the broker answers them with
    their original offsets and appends nothing twice."""
    lost = {"left": 3}
    deliver = ProduceStream._on_answer

    def lose_some(self, text):
        if lost["left"] and '"base_offset"' in text:
            lost["left"] -= 1
            # the connection goes before this answer is read
            asyncio.get_running_loop().create_task(self.ws.close())
            return
        deliver(self, text)

    monkeypatch.setattr(ProduceStream, "_on_answer", lose_some)

    async def main():
        async with ws_producer(
            client_broker, retry_backoff_ms=5, linger_ms=1, batch_size=1024
        ) as p:
            futures = [p.send("ws-idem", b"r%03d" % i, key=b"k") for i in range(100)]
            metas = [await f for f in futures]
        return metas, await read_all(client_broker, "ws-idem", 100)

    metas, records = run(main())
    assert lost["left"] == 0
    assert [r.value for r in records] == [b"r%03d" % i for i in range(100)]  # no duplicates
    assert [m.offset for m in metas] == list(range(100))  # original offsets answered


def test_unanswered_requests_time_out_and_are_resent_on_a_new_stream(client_broker, monkeypatch):
    """Answers that never come (the broker appends, the answer is ignored): past the request
    timeout the stream is closed, every request waiting on it fails with the timeout, and
    the retries on a new stream get the original offsets; nothing is appended twice."""
    ignored = {"left": 0}
    deliver = ProduceStream._on_answer

    def ignore_some(self, text):
        if ignored["left"] and '"base_offset"' in text:
            ignored["left"] -= 1
            return
        deliver(self, text)

    monkeypatch.setattr(ProduceStream, "_on_answer", ignore_some)

    async def main():
        async with ws_producer(
            client_broker, request_timeout_ms=300, retry_backoff_ms=5, linger_ms=0
        ) as p:
            await p.send("ws-silent", b"warm-up")  # the stream is open: the sender writes
            first = p._streams.get(p.metadata.leader_url("ws-silent", 0))
            ignored["left"] = 2
            started = asyncio.get_running_loop().time()
            futures = [p.send("ws-silent", b"r%02d" % i) for i in range(20)]
            metas = [await f for f in futures]
            waited = asyncio.get_running_loop().time() - started
            streams = list(p._streams._streams.values())
        return first, streams, metas, waited, await read_all(client_broker, "ws-silent", 21)

    first, streams, metas, waited, records = run(main())
    assert ignored["left"] == 0
    assert 0.6 <= waited < 5  # two timeouts of 0.3 s
    assert first is not None and not first.open and streams[0] is not first
    assert [m.offset for m in metas] == list(range(1, 21))
    assert [r.value for r in records] == [b"warm-up"] + [b"r%02d" % i for i in range(20)]


def test_a_stale_leader_gets_the_batch_to_the_leader(broker_factory):
    """Broker C's metadata says A leads ``moved``; A knows B does. The producer (bootstrapped
    at C) sends to A, which forwards the frames to B ("One front door"; or, had it answered
    NOT_LEADER_OR_FOLLOWER, the producer would follow B's URL): every record lands on B,
    once, in order."""
    topics = {"moved": (1, {})}
    b = broker_factory(topics, broker_id=2)
    a = broker_factory(
        topics, broker_id=1, other_brokers=[{"id": 2, "url": b.url}], leaders={"moved": [2]}
    )
    c_port = free_port()
    c = broker_factory(
        metadata=make_metadata(
            c_port,
            topics,
            broker_id=3,
            other_brokers=[{"id": 1, "url": a.url}],
            leaders={"moved": [1]},
        ),
        port=c_port,
    )

    async def main():
        async with ws_producer(c, retry_backoff_ms=5) as p:
            metas = [await p.send("moved", b"m%d" % i) for i in range(3)]
            urls = sorted(p._streams._streams)
        return metas, urls

    metas, urls = run(main())
    assert [m.offset for m in metas] == [0, 1, 2]
    assert a.url in urls and set(urls) <= {a.url, b.url}
    assert [v for _, v in fetch_all_values(b, "moved", 0)] == [b"m0", b"m1", b"m2"]


def test_a_broker_restart_reopens_the_stream_and_loses_nothing(broker_factory):
    """SIGTERM closes the stream (1001) after answering what is in flight; the next sends
    reconnect once the broker is back, and every record is there once."""
    b = broker_factory({"restart": (1, {})})

    async def main():
        async with ws_producer(b, retry_backoff_ms=20, linger_ms=0) as p:
            first = [await p.send("restart", b"before-%d" % i) for i in range(5)]
            await asyncio.to_thread(b.stop)
            await asyncio.to_thread(b.start)
            after = [await p.send("restart", b"after-%d" % i) for i in range(5)]
            opened = list(p._streams._streams.values())
        return first, after, opened

    first, after, opened = run(main(), timeout=60)
    assert [m.offset for m in first + after] == list(range(10))
    assert len(opened) == 1
    values = [v for _, v in fetch_all_values(b, "restart", 0)]
    assert values == [b"before-%d" % i for i in range(5)] + [b"after-%d" % i for i in range(5)]
