"""The SDK producer and consumer against a real broker process."""

from __future__ import annotations

import asyncio
import time

import pytest

from brokernodes.client.consumer import AsyncConsumer, Consumer, TopicPartition
from brokernodes.client.http import BATCH_CONTENT_TYPE, HttpTransport
from brokernodes.client.partitioner import partition_for_key
from brokernodes.client.producer import AsyncProducer, Producer
from brokernodes.errors import BrokerConnectionError, BrokerError
from brokernodes.records.batch import encode_batch
from tests.integration.client.conftest import CODECS


def run(coro, timeout: float = 30.0):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


async def read_all(broker, topic: str, expected: int, partitions=None) -> list:
    async with AsyncConsumer(broker.url, broker.api_key, fetch_max_wait_ms=100) as c:
        tps = partitions or await c.partitions_for(topic)
        c.assign(tps)
        await c.seek_to_beginning()
        records = []
        deadline = time.monotonic() + 10
        while len(records) < expected and time.monotonic() < deadline:
            records.extend(await c.poll(0.5))
        await asyncio.sleep(0.2)
        records.extend(await c.poll(0.1))  # nothing more may arrive
        return records


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_with_keys_headers_and_compression(client_broker, codec):
    topic = f"rt-{codec}"
    sent = [
        (b"key-%d" % (i % 7), b"value-%d-" % i + b"x" * (i % 50), [("n", b"%d" % i), ("z", None)])
        for i in range(300)
    ] + [(None, b"keyless-%d" % i, []) for i in range(20)]

    async def main():
        async with AsyncProducer(
            client_broker.url, client_broker.api_key, compression=codec, batch_size=2048
        ) as p:
            futures = [
                p.send(topic, v, key=k, headers=h, timestamp=5000 + i)
                for i, (k, v, h) in enumerate(sent)
            ]
            metas = [await f for f in futures]
        return metas, await read_all(client_broker, topic, len(sent))

    metas, records = run(main())
    assert len(records) == len(sent)
    got = {(r.partition, r.offset): r for r in records}
    for i, ((key, value, headers), meta) in enumerate(zip(sent, metas, strict=True)):
        r = got[(meta.partition, meta.offset)]
        assert (r.key, r.value, r.headers, r.timestamp) == (key, value, headers, 5000 + i)


def test_keyed_records_land_on_murmur2_partitions_in_order(client_broker):
    keys = [b"customer-%d" % i for i in range(25)]

    async def main():
        async with AsyncProducer(client_broker.url, client_broker.api_key, linger_ms=2) as p:
            for seq in range(40):
                for key in keys:
                    p.send("keyed", b"%d" % seq, key=key)
            await p.flush()
        return await read_all(client_broker, "keyed", 1000)

    records = run(main())
    assert len(records) == 1000
    per_key: dict[bytes, list[int]] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert r.partition == partition_for_key(r.key, 4)
        per_key.setdefault(r.key, []).append(int(r.value))
    assert all(seqs == list(range(40)) for seqs in per_key.values())


class LosingTransport(HttpTransport):
    """The real HTTP transport, except that the answers to the first N produce requests are
    lost after the broker has applied them: the producer must resend the same batch."""

    def __init__(self, api_key: str, lose: int) -> None:
        super().__init__(api_key)
        self.lose = lose
        self.bodies: list[bytes] = []

    async def request(self, method, url, **kwargs):
        response = await super().request(method, url, **kwargs)
        if method == "POST" and url.endswith("/batches"):
            self.bodies.append(kwargs.get("body"))
            if self.lose:
                self.lose -= 1
                raise BrokerConnectionError("answer lost (injected after the broker applied it)")
        return response


def test_idempotent_retry_of_an_applied_batch_produces_no_duplicates(client_broker):
    transport = LosingTransport(client_broker.api_key, lose=3)

    async def main():
        p = AsyncProducer(
            client_broker.url,
            transport=transport,
            retry_backoff_ms=5,
            batch_size=1024,
            linger_ms=1,
        )
        async with p:
            futures = [p.send("idem", b"r%03d" % i, key=b"k") for i in range(100)]
            metas = [await f for f in futures]
        await transport.close()
        return metas, await read_all(client_broker, "idem", 100)

    metas, records = run(main())
    assert transport.bodies[0] == transport.bodies[1]  # resent byte for byte
    assert [r.value for r in records] == [b"r%03d" % i for i in range(100)]  # no duplicates
    assert [m.offset for m in metas] == list(range(100))  # duplicates answered original offsets


def test_broker_deduplicates_a_resent_batch_and_refuses_a_gap(client_broker):
    async def main():
        transport = HttpTransport(client_broker.api_key)
        try:
            ids = (
                await transport.request(
                    "POST", client_broker.url + "/sluice/v1/producer-ids", json={}
                )
            ).json()
            url = client_broker.url + "/sluice/v1/topics/idem-sync/partitions/1/batches"
            body = encode_batch(
                [(1, None, b"a"), (2, None, b"b")],
                producer_id=ids["producer_id"],
                producer_epoch=ids["producer_epoch"],
                base_sequence=0,
            )
            first = (
                await transport.request("POST", url, body=body, content_type=BATCH_CONTENT_TYPE)
            ).json()
            again = (
                await transport.request("POST", url, body=body, content_type=BATCH_CONTENT_TYPE)
            ).json()
            gap = encode_batch(
                [(3, None, b"c")],
                producer_id=ids["producer_id"],
                producer_epoch=ids["producer_epoch"],
                base_sequence=5,
            )
            with pytest.raises(BrokerError) as info:
                await transport.request("POST", url, body=gap, content_type=BATCH_CONTENT_TYPE)
            return first, again, info.value
        finally:
            await transport.close()

    first, again, error = run(main())
    assert again["duplicate"] is True
    assert (again["base_offset"], again["last_offset"]) == (
        first["base_offset"],
        first["last_offset"],
    )
    assert error.error_code == "OUT_OF_ORDER_SEQUENCE_NUMBER" and error.status == 409


def test_consumer_seeks_to_beginning_end_and_timestamp(client_broker):
    tp = TopicPartition("seek", 0)

    async def main():
        async with AsyncProducer(client_broker.url, client_broker.api_key, batch_size=200) as p:
            for i in range(50):
                p.send("seek", b"%d" % i, timestamp=1_000_000 + 1000 * i)
            await p.flush()
        async with AsyncConsumer(
            client_broker.url, client_broker.api_key, fetch_max_wait_ms=50
        ) as c:
            c.assign([tp])
            await c.seek_to_end()
            end = await c.position(tp)
            none = await c.poll(0.3)
            await c.seek_to_beginning(tp)
            first = (await c.poll(2.0))[0]
            await c.seek_to_timestamp(1_000_000 + 1000 * 30, tp)
            at_30 = next(r for r in await c.poll(2.0) if r.timestamp >= 1_030_000)
            times = await c.offsets_for_times({tp: 1_000_000 + 1000 * 30})
            c.seek(tp, 42)
            at_42 = (await c.poll(2.0))[0]
            return end, none, first, at_30, times, at_42

    end, none, first, at_30, times, at_42 = run(main())
    assert end == 50 and none == []
    assert first.offset == 0
    assert at_30.offset == 30 and at_30.value == b"30"
    assert times[tp].offset <= 30
    assert at_42.offset == 42


def test_out_of_range_offset_resets_or_raises(client_broker):
    tp = TopicPartition("reset", 0)

    async def main():
        async with AsyncProducer(client_broker.url, client_broker.api_key) as p:
            for i in range(5):
                p.send("reset", b"%d" % i)
            await p.flush()
        async with AsyncConsumer(
            client_broker.url, client_broker.api_key, auto_offset_reset="earliest"
        ) as c:
            c.assign([tp])
            c.seek(tp, 1000)
            reset = await c.poll(3.0)
        async with AsyncConsumer(
            client_broker.url, client_broker.api_key, auto_offset_reset="none"
        ) as c:
            c.assign([tp])
            c.seek(tp, 1000)
            with pytest.raises(BrokerError) as info:
                await c.poll(3.0)
        return reset, info.value

    reset, error = run(main())
    assert [r.offset for r in reset] == list(range(5))
    assert error.error_code == "OFFSET_OUT_OF_RANGE"


def test_long_poll_delivers_new_records_promptly(client_broker):
    async def main():
        async with AsyncConsumer(
            client_broker.url, client_broker.api_key, fetch_max_wait_ms=5000
        ) as c:
            c.assign([("tail", 0), ("tail", 1)])
            await c.seek_to_end()
            await asyncio.sleep(0.3)  # the long polls are parked at the broker
            async with AsyncProducer(client_broker.url, client_broker.api_key, linger_ms=0) as p:
                started = time.monotonic()
                await p.send("tail", b"now", partition=1)
                records = await c.poll(5.0)
                return records, time.monotonic() - started

    records, elapsed = run(main())
    assert [r.value for r in records] == [b"now"]
    assert elapsed < 1.0  # woken by the append, not by max_wait_ms


def test_sync_producer_and_consumer(client_broker):
    with Producer(client_broker.url, client_broker.api_key, compression="lz4") as p:
        futures = [p.send("sync", b"v%d" % i, key=b"%d" % (i % 5)) for i in range(500)]
        p.flush(timeout=10)
        metas = [f.result(timeout=10) for f in futures]
    assert len({(m.partition, m.offset) for m in metas}) == 500
    with Consumer(client_broker.url, client_broker.api_key, fetch_max_wait_ms=100) as c:
        c.assign(c.partitions_for("sync"))
        c.seek_to_beginning()
        records = []
        deadline = time.monotonic() + 10
        while len(records) < 500 and time.monotonic() < deadline:
            records.extend(c.poll(1.0))
        ends = c.end_offsets(c.assignment())
    assert sorted(r.value for r in records) == sorted(b"v%d" % i for i in range(500))
    assert sum(ends.values()) == 500


def test_message_too_large_fails_the_records_with_the_brokers_error(client_broker):
    async def main():
        async with AsyncProducer(client_broker.url, client_broker.api_key) as p:
            with pytest.raises(BrokerError) as info:
                await p.send("tiny", b"x" * 5000)
            ok = await p.send("tiny", b"small")
        return info.value, ok

    error, ok = run(main())
    assert error.error_code == "MESSAGE_TOO_LARGE"
    assert ok.offset == 0  # the sequence of the refused batch was given back


def test_connection_refused_names_the_url():
    async def main():
        with pytest.raises(BrokerConnectionError) as info:
            await AsyncProducer("http://127.0.0.1:9", "k.s").start()
        return str(info.value)

    message = run(main())
    assert "http://127.0.0.1:9" in message and "connection refused" in message


def test_bad_api_key_is_unauthenticated(client_broker):
    async def main():
        with pytest.raises(BrokerError) as info:
            await AsyncConsumer(client_broker.url, "sk_test.wrong").start()
        return info.value

    error = run(main())
    assert error.error_code == "UNAUTHENTICATED" and error.status == 401


def test_admin_describes_topics_and_lists_offsets(client_broker):
    from brokernodes.client import Admin
    from brokernodes.errors import SluiceError

    with Producer(client_broker.url, client_broker.api_key) as p:
        for i in range(3):
            p.send("idem-sync", b"%d" % i, partition=0)
        p.flush(timeout=10)
    # no control plane at that address: creating a topic says where it is created
    with Admin(
        client_broker.url, client_broker.api_key, control_plane_url="http://127.0.0.1:9"
    ) as admin:
        cluster = admin.describe_cluster()
        topic = admin.describe_topic("idem-sync")
        offsets = admin.list_offsets({("idem-sync", 0): "latest", ("idem-sync", 1): "earliest"})
        with pytest.raises(SluiceError, match="control plane"):
            admin.create_topic("new", 3)
    assert cluster.cluster_id == client_broker.cluster_id
    assert topic.num_partitions == 2
    assert "keyed" in {t.name for t in cluster.topics.values()}
    assert offsets[TopicPartition("idem-sync", 0)].offset == 3
