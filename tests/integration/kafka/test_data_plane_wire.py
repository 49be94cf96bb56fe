"""The data-plane APIs' edge cases over the wire (Sluice's schema codecs as the client):
error codes per partition, topic ids, leader-epoch fencing, long polls, special offsets."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokernodes.records.batch import Record, decode_batches, encode_batch
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from harness.broker import BrokerLauncher, BrokerProcess
from tests.integration.broker.util import produce_binary
from tests.integration.kafka.data_plane_wire import KafkaWire


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    launcher = BrokerLauncher(tmp_path_factory.mktemp("kafka-wire"))
    try:
        yield launcher(
            kafka=True,
            topics={
                "w": (2, {}),
                "ts": (1, {}),
                "poll": (2, {}),
                "p": (1, {}),
                "__consumer_offsets": (1, {}),
            },
        )
    finally:
        launcher.close()


@pytest.fixture
def wire(kbroker) -> Iterator[KafkaWire]:
    with KafkaWire(kbroker.bootstrap) as w:
        yield w


def batch(values, ts=1000, **kw) -> bytes:
    return encode_batch([Record(ts + i, b"k", v) for i, v in enumerate(values)], **kw)


def produce(wire, topic, partition, records, *, version=9, acks=-1, **extra) -> dict:
    answer = wire.request(
        apis.PRODUCE,
        version,
        {
            "acks": acks,
            "timeout_ms": 5000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}
            ],
            **extra,
        },
    )
    ((t,),) = [answer["responses"]]
    ((p,),) = [t["partition_responses"]]
    return p


def fetch(wire, topic, partition, offset, *, version=12, topic_id=None, **extra) -> dict:
    part = {
        "partition": partition,
        "fetch_offset": offset,
        "partition_max_bytes": 1 << 20,
        "current_leader_epoch": extra.pop("current_leader_epoch", -1),
    }
    t = {"topic_id": topic_id} if version >= 13 else {"topic": topic}
    body = {
        "replica_id": -1,
        "max_wait_ms": extra.pop("max_wait_ms", 0),
        "min_bytes": extra.pop("min_bytes", 1),
        "max_bytes": 1 << 24,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{**t, "partitions": [part]}],
        **extra,
    }
    return wire.request(apis.FETCH, version, body)


def only_partition(answer: dict) -> dict:
    ((t,),) = [answer["responses"]]
    ((p,),) = [t["partitions"]]
    return p


def test_produce_answers_offsets_and_errors_per_partition(wire):
    first = produce(wire, "w", 0, batch([b"a", b"b"]))
    assert (first["error_code"], first["base_offset"], first["log_start_offset"]) == (0, 0, 0)
    assert produce(wire, "w", 0, batch([b"c"]), version=3)["base_offset"] == 2
    missing = produce(wire, "w", 7, batch([b"x"]))
    assert missing["error_code"] == kerr.UNKNOWN_TOPIC_OR_PARTITION
    assert "no partition 7" in missing["error_message"]
    assert produce(wire, "nope", 0, batch([b"x"]))["error_code"] == kerr.UNKNOWN_TOPIC_OR_PARTITION
    corrupt = bytearray(batch([b"x"]))
    corrupt[-1] ^= 0xFF
    assert produce(wire, "w", 0, bytes(corrupt))["error_code"] == kerr.CORRUPT_MESSAGE
    assert produce(wire, "w", 0, batch([b"x"]), acks=2)["error_code"] == kerr.INVALID_REQUIRED_ACKS
    txn = produce(
        wire,
        "w",
        0,
        batch([b"t"], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True),
    )
    # a transactional batch needs the request's transactional id (tests/integration/kafka/
    # test_transactions.py has the rest)
    assert txn["error_code"] == kerr.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert "transactional_id" in txn["error_message"]
    internal = produce(wire, "__consumer_offsets", 0, batch([b"x"]))
    assert internal["error_code"] == kerr.INVALID_TOPIC_EXCEPTION
    # nothing of the refused requests was appended
    assert produce(wire, "w", 0, batch([b"d"]))["base_offset"] == 3


def test_acks_zero_gets_no_answer(wire):
    wire.send(
        apis.PRODUCE,
        9,
        {
            "acks": 0,
            "timeout_ms": 1000,
            "topic_data": [
                {"name": "w", "partition_data": [{"index": 1, "records": batch([b"z"])}]}
            ],
        },
    )
    # the next answer on the connection is the next request's
    got = fetch(wire, "w", 1, 0, max_wait_ms=2000)
    (b,) = decode_batches(bytes(only_partition(got)["records"]))
    assert [r.value for r in b.records] == [b"z"]


def test_init_producer_id(wire):
    a = wire.request(
        apis.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": -1}
    )
    assert (a["error_code"], a["producer_epoch"]) == (0, 0) and a["producer_id"] >= 0
    b = wire.request(
        apis.INIT_PRODUCER_ID,
        4,
        {
            "transactional_id": None,
            "transaction_timeout_ms": -1,
            "producer_id": a["producer_id"],
            "producer_epoch": 0,
        },
    )
    assert b["error_code"] == 0 and b["producer_id"] != a["producer_id"]
    c = wire.request(
        apis.INIT_PRODUCER_ID, 0, {"transactional_id": "tx", "transaction_timeout_ms": 60000}
    )
    # this cluster has no __transaction_state topic: no coordinator for any transactional id
    assert c["error_code"] == kerr.COORDINATOR_NOT_AVAILABLE
    # an idempotent produce with the id: sequence checks apply
    pid = a["producer_id"]
    ok = produce(wire, "p", 0, batch([b"i"], producer_id=pid, producer_epoch=0, base_sequence=0))
    dup = produce(wire, "p", 0, batch([b"i"], producer_id=pid, producer_epoch=0, base_sequence=0))
    assert ok["error_code"] == dup["error_code"] == 0 and ok["base_offset"] == dup["base_offset"]
    gap = produce(wire, "p", 0, batch([b"j"], producer_id=pid, producer_epoch=0, base_sequence=5))
    assert gap["error_code"] == kerr.OUT_OF_ORDER_SEQUENCE_NUMBER


def topic_id_of(wire, name) -> bytes:
    md = wire.request(apis.METADATA, 12, {"topics": [{"name": name}]})
    ((t,),) = [md["topics"]]
    assert t["error_code"] == 0
    return t["topic_id"]


def test_metadata_versions_and_topic_ids(wire):
    every = wire.request(apis.METADATA, 0, {"topics": []})
    assert {t["name"] for t in every["topics"]} == {"w", "ts", "poll", "p"}
    assert wire.request(apis.METADATA, 4, {"topics": []})["topics"] == []
    assert len(wire.request(apis.METADATA, 9, {"topics": None})["topics"]) == 4
    tid = topic_id_of(wire, "w")
    by_id = wire.request(apis.METADATA, 12, {"topics": [{"topic_id": tid, "name": None}]})
    ((t,),) = [by_id["topics"]]
    assert (t["name"], t["error_code"], len(t["partitions"])) == ("w", 0, 2)
    unknown = wire.request(apis.METADATA, 12, {"topics": [{"topic_id": b"\1" * 16, "name": None}]})
    assert unknown["topics"][0]["error_code"] == kerr.UNKNOWN_TOPIC_ID
    missing = wire.request(apis.METADATA, 12, {"topics": [{"name": "nope"}]})
    assert missing["topics"][0]["error_code"] == kerr.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_by_topic_id_and_old_versions(wire):
    produce(wire, "p", 0, batch([b"v1", b"v2"]))
    tid = topic_id_of(wire, "p")
    for version in (4, 11, 12, 13, 16, 17):
        answer = fetch(wire, "p", 0, 0, version=version, topic_id=tid)
        p = only_partition(answer)
        assert p["error_code"] == 0, version
        assert p["high_watermark"] == p["last_stable_offset"] > 0
        values = [r.value for b in decode_batches(bytes(p["records"])) for r in b.records]
        assert values[:1] in ([b"i"], [b"v1"])
        if version >= 7:
            assert answer["session_id"] == 0
    unknown = fetch(wire, "p", 0, 0, version=16, topic_id=b"\2" * 16)
    assert only_partition(unknown)["error_code"] == kerr.UNKNOWN_TOPIC_ID


def test_fetch_errors(wire):
    produce(wire, "w", 1, batch([b"e"]))
    end = only_partition(fetch(wire, "w", 1, 0))["high_watermark"]
    out = only_partition(fetch(wire, "w", 1, end + 5))
    assert (out["error_code"], out["high_watermark"], out["log_start_offset"]) == (
        kerr.OFFSET_OUT_OF_RANGE,
        end,
        0,
    )
    assert only_partition(fetch(wire, "w", 1, 0, current_leader_epoch=0))["error_code"] == 0
    fenced = fetch(wire, "w", 1, 0, current_leader_epoch=3)
    assert only_partition(fenced)["error_code"] == kerr.UNKNOWN_LEADER_EPOCH
    assert only_partition(fetch(wire, "w", 9, 0))["error_code"] == kerr.UNKNOWN_TOPIC_OR_PARTITION
    started = time.monotonic()
    unknown = fetch(wire, "nope", 0, 0, max_wait_ms=5000)  # nothing to wait for: at once
    assert only_partition(unknown)["error_code"] == kerr.UNKNOWN_TOPIC_OR_PARTITION
    assert time.monotonic() - started < 2
    session = fetch(wire, "w", 1, 0, session_id=77, session_epoch=3)
    assert session["error_code"] == kerr.FETCH_SESSION_ID_NOT_FOUND
    # diverging epoch (KIP-320): a fetcher claiming epoch 5, which this log never had
    diverged = only_partition(fetch(wire, "w", 1, 1, last_fetched_epoch=5))
    assert diverged["diverging_epoch"] == {"epoch": -1, "end_offset": -1}


def test_long_poll_waits_for_min_bytes_across_partitions(kbroker, wire):
    started = time.monotonic()
    empty = fetch(wire, "poll", 0, 0, max_wait_ms=600)
    waited = time.monotonic() - started
    assert 0.5 <= waited < 3 and only_partition(empty)["records"] in (b"", None)

    def later():
        time.sleep(0.5)
        produce_binary(kbroker, "poll", 1, batch([b"late"]))

    threading.Thread(target=later, daemon=True).start()
    started = time.monotonic()
    body = {
        "replica_id": -1,
        "max_wait_ms": 10_000,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 1,
        "topics": [
            {
                "topic": "poll",
                "partitions": [
                    {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                    for p in (0, 1)
                ],
            }
        ],
    }
    answer = wire.request(apis.FETCH, 11, body)
    waited = time.monotonic() - started
    assert 0.3 < waited < 5  # answered when the data came, not after max_wait
    p0, p1 = answer["responses"][0]["partitions"]
    assert p0["records"] in (b"", None) and p1["high_watermark"] == 1
    assert p1["aborted_transactions"] == []  # read_committed: none, ever
    assert [r.value for b in decode_batches(bytes(p1["records"])) for r in b.records] == [b"late"]


def test_list_offsets(wire):
    produce(wire, "ts", 0, batch([b"a", b"b", b"c"], ts=1000))  # offsets 0-2, ts 1000-1002
    produce(wire, "ts", 0, batch([b"d", b"e"], ts=5000))  # 3-4, ts 5000-5001
    produce(wire, "ts", 0, batch([b"f"], ts=2000))  # 5, ts 2000

    def lookup(timestamp, version=7, **kw):
        answer = wire.request(
            apis.LIST_OFFSETS,
            version,
            {
                "replica_id": -1,
                "isolation_level": kw.pop("isolation_level", 0),
                "topics": [
                    {
                        "name": "ts",
                        "partitions": [{"partition_index": 0, "timestamp": timestamp, **kw}],
                    }
                ],
            },
        )
        p = answer["topics"][0]["partitions"][0]
        return p["error_code"], p["offset"], p["timestamp"], p.get("leader_epoch")

    assert lookup(-2) == (0, 0, -1, 0)
    assert lookup(-4, version=8) == (0, 0, -1, 0)
    assert lookup(-1) == (0, 6, -1, 0)
    assert lookup(-1, isolation_level=1) == (0, 6, -1, 0)
    assert lookup(-3) == (0, 4, 5001, 0)
    assert lookup(-5, version=9)[:2] == (0, -1)
    assert lookup(1001) == (0, 1, 1001, 0)  # inside the first batch: the record itself
    assert lookup(1003) == (0, 3, 5000, 0)
    assert lookup(1500)[1] == 3
    assert lookup(5001)[1] == 4
    assert lookup(9000) == (0, -1, -1, -1)
    assert lookup(-1, version=1)[:2] == (0, 6)
    assert lookup(-1, current_leader_epoch=2)[0] == kerr.UNKNOWN_LEADER_EPOCH


def test_offset_for_leader_epoch(wire):
    produce(wire, "w", 0, batch([b"o"]))

    def ask(epoch, current=-1, version=4):
        answer = wire.request(
            apis.OFFSET_FOR_LEADER_EPOCH,
            version,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "topic": "w",
                        "partitions": [
                            {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}
                        ],
                    }
                ],
            },
        )
        p = answer["topics"][0]["partitions"][0]
        return p["error_code"], p["leader_epoch"], p["end_offset"]

    end = only_partition(fetch(wire, "w", 0, 0))["high_watermark"]
    assert ask(0) == (0, 0, end)
    assert ask(0, current=0, version=2) == (0, 0, end)
    assert ask(4) == (0, -1, -1)
    assert ask(0, current=1)[0] == kerr.UNKNOWN_LEADER_EPOCH


def test_fetches_leave_no_file_open(kbroker, wire):
    produce(wire, "p", 0, batch([b"fd1"]))
    produce(wire, "p", 0, batch([b"fd2"]))

    def open_fds() -> int:
        return len(list(Path(f"/proc/{kbroker.pid}/fd").iterdir()))

    for _ in range(5):  # warm up (lazily opened files, sockets)
        fetch(wire, "p", 0, 0)
    before = open_fds()
    for _ in range(100):  # from the segment files: sent with sendfile, then closed
        assert only_partition(fetch(wire, "p", 0, 0))["records"]
    for _ in range(20):  # errors after the files of other partitions were opened
        wire.request(
            apis.FETCH,
            11,
            {
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "topics": [
                    {
                        "topic": "p",
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20},
                            {"partition": 5, "fetch_offset": 0, "partition_max_bytes": 1 << 20},
                        ],
                    }
                ],
            },
        )
    assert open_fds() <= before + 2
