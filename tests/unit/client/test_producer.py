"""Producer logic against the in-memory fake broker: batching, linger, sequences, retries."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from brokernodes.client.partitioner import partition_for_key
from brokernodes.client.producer import AsyncProducer, Producer
from brokernodes.errors import (
    BrokerConnectionError,
    BrokerError,
    BufferFullError,
    ClientClosedError,
    ClientTimeoutError,
    UnknownTopicError,
)
from brokernodes.records.batch import decode_batches
from brokernodes.records.header import iter_batches
from tests.unit.client.fakes import URL, FakeTransport


def run(coro, timeout: float = 10.0):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


def producer(fake: FakeTransport, **config) -> AsyncProducer:
    config.setdefault("retry_backoff_ms", 1)
    config.setdefault("retry_backoff_max_ms", 5)
    return AsyncProducer(URL, "key.secret", transport=fake, **config)


def batch_headers(request):
    return list(iter_batches(request.body))


def test_records_arrive_in_order_with_their_offsets():
    fake = FakeTransport({"t": 1})

    async def main():
        async with producer(fake, linger_ms=1) as p:
            futures = [p.send("t", f"v{i}".encode(), key=b"k") for i in range(100)]
            metas = [await f for f in futures]
        return metas

    metas = run(main())
    assert [m.offset for m in metas] == list(range(100))
    assert all(m.topic == "t" and m.partition == 0 for m in metas)
    assert [r.value for r in fake.records("t", 0)] == [f"v{i}".encode() for i in range(100)]


def test_batches_are_cut_at_batch_size():
    fake = FakeTransport({"t": 1})

    async def main():
        async with producer(fake, batch_size=1000, linger_ms=10_000) as p:
            for _ in range(50):
                p.send("t", b"x" * 100)
            await p.flush()

    run(main())
    batches = [h for r in fake.produce_requests() for h in batch_headers(r)]
    assert sum(h.records_count for h in batches) == 50
    assert len(batches) >= 6
    assert all(h.size <= 1000 + 61 + 50 for h in batches)


def test_linger_holds_a_small_batch_until_it_expires():
    fake = FakeTransport({"t": 1})

    async def main():
        async with producer(fake, linger_ms=200) as p:
            started = time.monotonic()
            future = p.send("t", b"one")
            await asyncio.sleep(0.05)
            assert fake.produce_requests() == []
            await future
            return time.monotonic() - started

    elapsed = run(main())
    assert 0.15 <= elapsed < 2.0


def test_flush_sends_without_waiting_for_linger():
    fake = FakeTransport({"t": 1})

    async def main():
        async with producer(fake, linger_ms=60_000) as p:
            future = p.send("t", b"one")
            started = time.monotonic()
            await p.flush(timeout=5)
            assert future.done()
            return time.monotonic() - started

    assert run(main()) < 1.0


def test_idempotent_batches_carry_producer_id_and_consecutive_sequences():
    fake = FakeTransport({"t": 1})

    async def main():
        async with producer(fake, batch_size=500, linger_ms=0) as p:
            for _ in range(30):
                p.send("t", b"y" * 100)
            await p.flush()
            return p.producer_id

    producer_id = run(main())
    headers = [h for r in fake.produce_requests() for h in batch_headers(r)]
    assert {h.producer_id for h in headers} == {producer_id}
    assert {h.producer_epoch for h in headers} == {0}
    expected = 0
    for h in headers:
        assert h.base_sequence == expected
        expected += h.records_count
    assert expected == 30


def test_a_lost_answer_is_retried_with_the_same_bytes_and_not_duplicated():
    fake = FakeTransport({"t": 1})
    fake.lose_answers = 1

    async def main():
        async with producer(fake, linger_ms=1) as p:
            futures = [p.send("t", f"r{i}".encode()) for i in range(10)]
            return [await f for f in futures]

    metas = run(main())
    requests = fake.produce_requests()
    assert len(requests) == 2
    assert requests[0].body == requests[1].body  # the very same batch bytes
    assert [m.offset for m in metas] == list(range(10))
    assert len(fake.records("t", 0)) == 10  # the broker deduplicated the resend


def test_connection_errors_are_retried_until_delivered():
    fake = FakeTransport({"t": 1})
    failures = [2]

    def refuse(request):
        if request.method == "POST" and request.path.endswith("/batches") and failures[0]:
            failures[0] -= 1
            raise BrokerConnectionError("refused (injected)")

    fake.hooks.append(refuse)

    async def main():
        async with producer(fake) as p:
            return await p.send("t", b"v")

    assert run(main()).offset == 0
    assert len(fake.produce_requests()) == 3
    assert len(fake.records("t", 0)) == 1


def test_not_leader_refreshes_metadata_and_retries():
    fake = FakeTransport({"t": 2})
    failures = [1]

    def not_leader(request):
        if request.path.endswith("/batches") and failures[0]:
            failures[0] -= 1
            raise BrokerError("NOT_LEADER_OR_FOLLOWER", "moved", status=421)

    fake.hooks.append(not_leader)

    async def main():
        async with producer(fake) as p:
            return await p.send("t", b"v", partition=1)

    assert run(main()).partition == 1
    metadata_calls = [r for r in fake.requests if r.path == "/sluice/v1/metadata"]
    assert len(metadata_calls) >= 2


def test_a_refused_batch_fails_its_records_and_later_batches_still_go_through():
    fake = FakeTransport({"t": 1})
    refuse = [True]

    def corrupt(request):
        if request.path.endswith("/batches") and refuse[0]:
            refuse[0] = False
            raise BrokerError("CORRUPT_MESSAGE", "bad crc (injected)", status=400)

    fake.hooks.append(corrupt)

    async def main():
        async with producer(fake) as p:
            first = p.send("t", b"a")
            with pytest.raises(BrokerError) as info:
                await first
            assert info.value.error_code == "CORRUPT_MESSAGE"
            return await p.send("t", b"b")

    meta = run(main())
    assert meta.offset == 0  # the sequence was given back: no gap, no OUT_OF_ORDER
    assert [r.value for r in fake.records("t", 0)] == [b"b"]


def test_delivery_timeout_fails_records_that_never_get_through():
    fake = FakeTransport({"t": 1})

    def always(request):
        if request.path.endswith("/batches"):
            raise BrokerConnectionError("refused (injected)")

    fake.hooks.append(always)

    async def main():
        async with producer(fake, delivery_timeout_ms=200, retry_backoff_ms=20) as p:
            with pytest.raises(ClientTimeoutError, match="timed out"):
                await p.send("t", b"v")

    run(main())


def test_keyed_records_use_murmur2_and_keep_per_key_order():
    fake = FakeTransport({"t": 5})
    keys = [f"user-{i}".encode() for i in range(20)]

    async def main():
        async with producer(fake) as p:
            futures = [(k, i, p.send("t", str(i).encode(), key=k)) for i in range(5) for k in keys]
            return [(k, i, await f) for k, i, f in futures]

    for key, _, meta in run(main()):
        assert meta.partition == partition_for_key(key, 5)
    for p in range(5):
        by_key: dict[bytes, list[int]] = {}
        for r in fake.records("t", p):
            by_key.setdefault(r.key, []).append(int(r.value))
        assert all(v == sorted(v) for v in by_key.values())


def test_keyless_records_stick_to_one_partition_per_batch():
    fake = FakeTransport({"t": 4})

    async def main():
        async with producer(fake, batch_size=2000, linger_ms=10_000) as p:
            for _ in range(200):
                p.send("t", b"z" * 100)
            await p.flush()

    run(main())
    batches = [(r.path, h.records_count) for r in fake.produce_requests() for h in batch_headers(r)]
    assert sum(n for _, n in batches) == 200
    assert all(n >= 10 for _, n in batches[:-4])  # full batches, not one record each
    assert len({path for path, _ in batches}) > 1  # moved on after full batches


def test_ready_batches_of_one_partition_share_a_request():
    fake = FakeTransport({"t": 1}, latency_s=0.05)

    async def main():
        async with producer(fake, batch_size=300, linger_ms=0) as p:
            for _ in range(40):
                p.send("t", b"q" * 100)
            await p.flush()

    run(main())
    counts = [len(batch_headers(r)) for r in fake.produce_requests()]
    assert max(counts) > 1
    assert max(counts) <= 5  # never more than the broker's dedup window
    assert sum(len(decode_batches(r.body)) for r in fake.produce_requests()) == sum(counts)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_round_trip(codec):
    fake = FakeTransport({"t": 1})

    async def main():
        async with producer(fake, compression=codec) as p:
            futures = [
                p.send("t", b"value-%d" % i, key=b"k", headers={"h": b"x"}) for i in range(20)
            ]
            for f in futures:
                await f

    run(main())
    headers = [h for r in fake.produce_requests() for h in batch_headers(r)]
    assert all(h.compression != 0 for h in headers)
    records = fake.records("t", 0)
    assert [r.value for r in records] == [b"value-%d" % i for i in range(20)]
    assert records[0].headers == [("h", b"x")]


def test_acks_0_gives_no_offsets_and_disables_idempotence():
    fake = FakeTransport({"t": 1})

    async def main():
        async with producer(fake, acks=0) as p:
            assert not p.idempotent
            return await p.send("t", b"v")

    assert run(main()).offset == -1
    assert fake.produce_requests()[0].params["acks"] == "0"
    assert not [r for r in fake.requests if r.path == "/sluice/v1/producer-ids"]
    with pytest.raises(ValueError):
        AsyncProducer(URL, acks=0, enable_idempotence=True)


def test_callbacks_get_metadata_or_error():
    fake = FakeTransport({"t": 1})
    seen = []

    async def main():
        async with producer(fake) as p:
            p.send("t", b"v", on_delivery=lambda err, meta: seen.append((err, meta)))
            f = p.send("t", b"w")
            f.add_done_callback(lambda fut: seen.append(("fut", fut.done())))
            await p.flush()

    run(main())
    assert seen[0][0] is None and seen[0][1].offset == 0
    assert seen[1] == ("fut", True)


def test_full_buffer_raises_in_send_and_waits_in_produce():
    fake = FakeTransport({"t": 1}, latency_s=0.02)

    async def main():
        async with producer(fake, buffer_memory=2000, linger_ms=0) as p:
            with pytest.raises(BufferFullError):
                for _ in range(100):
                    p.send("t", b"b" * 100)
            futures = [await p.produce("t", b"c" * 100) for _ in range(50)]
            for f in futures:
                await f

    run(main())


def test_unknown_topic_fails_clearly():
    fake = FakeTransport({"t": 1})

    async def main():
        async with producer(fake) as p:
            with pytest.raises(UnknownTopicError, match="nope"):
                await p.send("nope", b"v")
            with pytest.raises(UnknownTopicError, match="partition 7"):
                p.send("t", b"v", partition=7)

    run(main())


def test_topic_created_after_start_is_found_by_a_metadata_refresh():
    fake = FakeTransport({"t": 1})

    async def main():
        async with producer(fake) as p:
            fake.topics["late"] = 1
            fake.logs[("late", 0)] = type(fake.logs[("t", 0)])()
            return await p.send("late", b"v")

    assert run(main()).topic == "late"


def test_sync_producer_sends_from_threads():
    fake = FakeTransport({"t": 3})
    p = Producer(URL, "k.s", transport=fake, linger_ms=1)
    try:
        futures = []
        lock = threading.Lock()

        def work(n):
            for i in range(200):
                f = p.send("t", b"%d-%d" % (n, i), key=b"%d" % n)
                with lock:
                    futures.append(f)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        p.flush(timeout=10)
        metas = [f.result(timeout=5) for f in futures]
    finally:
        p.close()
    assert len(metas) == 800
    assert len({(m.partition, m.offset) for m in metas}) == 800
    assert sum(len(fake.records("t", i)) for i in range(3)) == 800


def test_sync_send_blocks_on_a_full_buffer_then_goes_on():
    fake = FakeTransport({"t": 1}, latency_s=0.01)
    p = Producer(URL, transport=fake, buffer_memory=1000, linger_ms=0, max_block_ms=5000)
    try:
        futures = [p.send("t", b"m" * 100) for _ in range(60)]  # ~7x the buffer
        assert [f.result(timeout=5).offset for f in futures] == list(range(60))
    finally:
        p.close()
    with pytest.raises(BufferFullError, match="max_block_ms"):
        blocked = Producer(
            URL,
            transport=FakeTransport({"t": 1}, latency_s=0.5),
            buffer_memory=200,
            linger_ms=0,
            max_block_ms=100,
        )
        try:
            for _ in range(20):
                blocked.send("t", b"m" * 100)
        finally:
            blocked.close(timeout=0.1)


def test_close_fails_what_cannot_be_delivered():
    fake = FakeTransport({"t": 1})

    def down(request):
        if request.path.endswith("/batches"):
            raise BrokerConnectionError("refused (injected)")

    fake.hooks.append(down)

    async def main():
        p = producer(fake, retry_backoff_ms=50)
        await p.start()
        future = p.send("t", b"v")
        await p.close(timeout=0.2)
        return await asyncio.gather(future, return_exceptions=True)

    (result,) = run(main())
    assert isinstance(result, ClientClosedError | ClientTimeoutError)


def test_not_leader_with_a_leader_url_goes_there_next():
    fake = FakeTransport({"t": 1})

    def redirect(request):
        if request.path.endswith("/batches") and request.host == "fake:9092":
            raise BrokerError(
                "NOT_LEADER_OR_FOLLOWER",
                "broker 2 leads t-0",
                status=421,
                details={"leader_id": 2, "leader_url": "http://fake2:9092/"},
            )

    fake.hooks.append(redirect)

    async def main():
        async with producer(fake) as p:
            return await p.send("t", b"v")

    assert run(main()).offset == 0
    assert [r.host for r in fake.produce_requests()] == ["fake:9092", "fake2:9092"]


def test_record_futures_are_distinct_pairs_compared_by_identity():
    fake = FakeTransport({"t": 2})

    async def main():
        async with producer(fake, linger_ms=1) as p:
            first = p.send("t", b"same", key=b"k")
            second = p.send("t", b"same", key=b"k")
            assert first != second and first == first
            assert len({first, second}) == 2
            assert not first.done()
            return first, second, await first, await second

    first, _second, m1, m2 = run(main())
    assert first.done() and first.result() == m1 and first.exception() is None
    assert (m1.partition, m2.offset) == (m2.partition, m1.offset + 1)
    assert "RecordFuture t-" in repr(first)


def test_key_partition_cache_survives_batches_and_matches_murmur2():
    fake = FakeTransport({"t": 6})

    async def main():
        # A tiny batch_size cuts a batch every few records: the cached queue's fast path and
        # the full-batch path must pick the same partition and keep per-key order.
        async with producer(fake, linger_ms=1, batch_size=300) as p:
            futures = [p.send("t", b"%04d" % i, key=b"key-%d" % (i % 50)) for i in range(2000)]
            return [await f for f in futures]

    metas = run(main())
    for i, meta in enumerate(metas):
        assert meta.partition == partition_for_key(b"key-%d" % (i % 50), 6)
    for p in range(6):
        values = [int(r.value) for r in fake.records("t", p)]
        assert values == sorted(values)
    assert sum(len(fake.records("t", p)) for p in range(6)) == 2000


def test_async_producer_buffer_full_on_the_fast_path_keeps_accounting():
    fake = FakeTransport({"t": 1})

    async def main():
        async with producer(fake, linger_ms=1000, buffer_memory=1000) as p:
            sent = 0
            with pytest.raises(BufferFullError):
                while True:
                    p.send("t", b"x" * 100, key=b"k")
                    sent += 1
            buffered = p.buffered_bytes
            await p.flush()
            return sent, buffered, p.buffered_bytes

    sent, buffered, after = run(main())
    assert 0 < sent < 10 and buffered <= 1000 + 130
    assert after == 0
    assert len(fake.records("t", 0)) == sent


def test_encoder_takes_the_producers_plain_tuples_and_mixed_lengths():
    from brokernodes.records.batch import Record, decode_batch, encode_batch

    full = [(1000 + i, b"k%d" % i, b"v%d" % i, (), None) for i in range(3)]
    as_records = [Record(*r) for r in full]
    assert encode_batch(full, base_sequence=7) == encode_batch(as_records, base_sequence=7)
    mixed = [*full, (1003, b"k3", b"v3")]  # a shorter tuple after full ones
    decoded = decode_batch(encode_batch(mixed))
    assert [(r.offset, r.key, r.value) for r in decoded.records] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(4)
    ]


def _batches(*sizes: int):
    from brokernodes.client.accumulator import ProducerBatch

    out = []
    for n in sizes:
        b = ProducerBatch("t", 0, 0.0, False, threading.Lock())
        b.records = [object()] * n
        out.append(b)
    return out


def test_each_batch_is_acknowledged_from_its_own_outcome():
    """A retried [b1, b2] whose b1 the broker found in the log: b1 from its original
    offsets, b2 from where it was appended; before, both were acknowledged from the
    answer's base offset although b2 was never stored."""
    from brokernodes.client.sender import _batch_starts

    two = _batches(2, 1)
    per_batch = {
        "base_offset": 0,
        "last_offset": 7,
        "duplicate": False,
        "batches": [
            {"base_offset": 0, "last_offset": 1, "duplicate": True},
            {"base_offset": 7, "last_offset": 7, "duplicate": False},
        ],
    }
    assert _batch_starts(two, per_batch) == [0, 7]
    # an answer without per-batch entries: only one covering exactly their records counts
    assert _batch_starts(two, {"base_offset": 4, "last_offset": 6}) == [4, 6]
    assert _batch_starts(two, {"base_offset": 0, "last_offset": 1, "duplicate": True}) == [
        None,
        None,
    ]
    assert _batch_starts(two, {"base_offset": 0, "last_offset": 9}) == [None, None]
    # an entry whose range does not match its batch is not an acknowledgement
    wrong = {
        "batches": [{"base_offset": 0, "last_offset": 0}, {"base_offset": 1, "last_offset": 1}]
    }
    assert _batch_starts(two, wrong) == [None, 1]
    assert _batch_starts(_batches(3), {"base_offset": 5, "last_offset": 7}) == [5]


def test_a_batch_the_answer_does_not_place_fails_instead_of_being_acknowledged():
    from brokernodes.client.producer import AsyncProducer

    fake = FakeTransport({"t": 1})
    p = producer(fake)
    two = _batches(2, 1)
    AsyncProducer._complete_ok(p, two, {"base_offset": 0, "last_offset": 1, "duplicate": True})
    assert all(b.done and b.error is not None for b in two)
    assert all(b.error.error_code == "UNKNOWN_SERVER_ERROR" for b in two)
