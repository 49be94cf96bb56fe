"""The usage accumulator (pure) and the meter's flush decisions."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from brokernodes.records.batch import decode_batches
from brokernodes.server.usage import UsageAccumulator, UsageMeter, UsageRecord, decode_usage


def test_drain_returns_the_window_and_starts_the_next():
    acc = UsageAccumulator(1000)
    acc.add(("t", "User:a", "x"), bytes_in=10, records_in=2, requests=1)
    acc.add(("t", "User:a", "x"), bytes_in=5, records_in=1, requests=1)
    acc.add(("t", "User:b", ""), requests=1, throttle_ms=7)
    acc.add(("t", "User:c", "y"))  # nothing counted: no record
    out = acc.drain(61_000, broker_id=2)
    assert out == [
        UsageRecord("t", "User:a", "x", 1000, 61_000, 2, bytes_in=15, records_in=3, requests=2),
        UsageRecord("t", "User:b", "", 1000, 61_000, 2, requests=1, throttle_ms=7),
    ]
    assert acc.window_start_ms == 61_000 and acc.drain(62_000, 2) == []


def _image(with_usage: bool, broker_id: int = 1):
    part = SimpleNamespace(partition=0, leader=broker_id)
    topics = {"__usage": SimpleNamespace(name="__usage", partitions=(part,))} if with_usage else {}
    return SimpleNamespace(root=None, topics=topics, tenants={}, broker_id=broker_id)


def test_a_broker_without_the_topic_keeps_its_windows_until_it_exists():
    appended = []
    image = {"now": _image(False)}

    async def append(topic, partition, batch):
        appended.append((topic, partition, bytes(batch)))

    clock = iter(range(0, 10_000, 1000))
    meter = UsageMeter(lambda: image["now"], append, interval_s=60, clock=lambda: next(clock))
    meter.acc.add(("t", "User:a", "x"), bytes_in=3)
    assert asyncio.run(meter.flush()) == 0 and len(meter.pending) == 1
    meter.acc.add(("t", "User:a", "x"), bytes_in=4)
    image["now"] = _image(True)
    assert asyncio.run(meter.flush()) == 2 and meter.pending == []
    ((topic, partition, raw),) = appended
    records = [decode_usage(r.value) for b in decode_batches(raw) for r in b.records]
    assert (topic, partition) == ("__usage", 0)
    assert [r.bytes_in for r in records] == [3, 4]
