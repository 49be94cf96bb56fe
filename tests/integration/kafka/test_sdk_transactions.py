"""The SDK's transactional producer over Sluice's own API (``/sluice/v1/transactions/...`` and
the binary produce with ``transactional_id``), on real broker processes with
``__transaction_state`` and ``__consumer_offsets``: a committed transaction is read once by
the SDK's and by confluent-kafka's read_committed consumers, an aborted one never (HTTP and
WebSocket produce); offsets sent with a transaction become the group's only when it commits;
a second producer with the same transactional id fences the first, and so does a
transaction's timeout; the binary produce
refuses a transactional batch for a partition the transaction did not add
(INVALID_TXN_STATE), one without a transactional id and a control batch; the routes
validate their input; on three brokers every call is forwarded to the coordinator."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from brokernodes.client.consumer import Consumer
from brokernodes.client.transactional import (
    AsyncTransactionalProducer,
    ProducerFencedError,
    TransactionalProducer,
    TransactionStateError,
)
from brokernodes.records.batch import Record, encode_batch
from brokernodes.records.control import encode_txn_marker
from brokernodes.server.coordinator.offsets_topic import partition_for
from harness.broker import BrokerLauncher, BrokerProcess
from harness.cluster import start_static_cluster
from tests.integration.kafka.conftest import confluent_config

TOPICS = {
    "sdk-txn": (2, {}),
    "sdk-txn-ws": (2, {}),
    "sdk-txn-in": (2, {}),
    "sdk-txn-raw": (2, {}),
    "__consumer_offsets": (4, {"cleanup.policy": "compact"}),
    "__transaction_state": (4, {"cleanup.policy": "compact"}),
}
T = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    launcher = BrokerLauncher(tmp_path_factory.mktemp("sdk-txn"))
    try:
        yield launcher(TOPICS, kafka=True)
    finally:
        launcher.close()


def sdk_read_committed(url: str, key: str, topic: str, tag: bytes, expect: int) -> list[bytes]:
    c = Consumer(
        url,
        key,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        fetch_max_wait_ms=200,
    )
    out: list[bytes] = []
    try:
        c.assign([(topic, 0), (topic, 1)])
        deadline = time.monotonic() + T
        quiet = 0
        while time.monotonic() < deadline and (len(out) < expect or quiet < 3):
            got = [r.value for r in c.poll(0.5) if r.value.startswith(tag)]
            quiet = 0 if got else quiet + 1
            out += got
    finally:
        c.close()
    return out


def kafka_read_committed(
    bootstrap: str, topic: str, tag: bytes, expect: int, partitions: int = 2
) -> list[bytes]:
    c = KafkaConsumer(
        confluent_config(
            bootstrap,
            **{
                "group.id": f"sdk-txn-reader-{uuid.uuid4().hex[:6]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            },
        )
    )
    c.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    deadline = time.monotonic() + T
    quiet = 0
    try:
        while time.monotonic() < deadline and (len(out) < expect or quiet < 6):
            m = c.poll(0.25)
            if m is None or m.error() is not None:
                quiet += 1
                continue
            quiet = 0
            if m.value().startswith(tag):
                out.append(m.value())
    finally:
        c.close()
    return out


def call(b: BrokerProcess | str, path: str, body, key: str | None = None) -> tuple[int, dict]:
    url = b if isinstance(b, str) else b.url
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    ctype = (
        "application/vnd.kafka.recordbatch.v2" if isinstance(body, bytes) else "application/json"
    )
    headers = {"Content-Type": ctype}
    if key is not None or not isinstance(b, str):
        headers["Authorization"] = f"Bearer {key or b.api_key}"
    req = urllib.request.Request(url + path, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=T) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_commit_is_read_committed_by_the_sdk_and_confluent_and_an_abort_never(broker):
    tag = uuid.uuid4().hex[:6].encode()
    with TransactionalProducer(
        broker.url, broker.api_key, transactional_id=f"sdk-basic-{tag.decode()}"
    ) as p:
        p.init_transactions(T)
        p.begin_transaction()
        for i in range(6):
            p.send("sdk-txn", tag + b"-c1-%d" % i, partition=i % 2)
        p.commit_transaction(T)
        p.begin_transaction()
        for i in range(4):
            p.send("sdk-txn", tag + b"-a-%d" % i, partition=i % 2)
        p.flush(T)  # the aborted records are in the log
        p.abort_transaction(T)
        p.begin_transaction()
        for i in range(3):
            p.send("sdk-txn", tag + b"-c2-%d" % i, partition=i % 2)
        p.commit_transaction(T)
        with pytest.raises(TransactionStateError, match="begin_transaction"):
            p.send("sdk-txn", b"outside a transaction")
    want = sorted([tag + b"-c1-%d" % i for i in range(6)] + [tag + b"-c2-%d" % i for i in range(3)])
    assert sorted(sdk_read_committed(broker.url, broker.api_key, "sdk-txn", tag, 9)) == want
    assert sorted(kafka_read_committed(broker.bootstrap, "sdk-txn", tag, 9)) == want


def test_async_producer_over_the_websocket_produce(broker):
    tag = uuid.uuid4().hex[:6].encode()

    async def main() -> None:
        p = AsyncTransactionalProducer(
            broker.url,
            broker.api_key,
            transactional_id=f"sdk-ws-{tag.decode()}",
            produce_mode="websocket",
        )
        try:
            await p.init_transactions()
            p.begin_transaction()
            for i in range(4):
                p.send("sdk-txn-ws", tag + b"-a-%d" % i, partition=i % 2)
            await p.flush(T)
            await p.abort_transaction()
            p.begin_transaction()
            for i in range(5):
                p.send("sdk-txn-ws", tag + b"-c-%d" % i, partition=i % 2)
            await p.commit_transaction()
        finally:
            await p.close()

    import asyncio

    asyncio.run(main())
    got = kafka_read_committed(broker.bootstrap, "sdk-txn-ws", tag, 5)
    assert sorted(got) == sorted(tag + b"-c-%d" % i for i in range(5))


def group_offsets(b: BrokerProcess, group: str) -> dict:
    req = urllib.request.Request(
        f"{b.url}/sluice/v1/groups/{group}/offsets",
        headers={"Authorization": f"Bearer {b.api_key}"},
    )
    with urllib.request.urlopen(req, timeout=T) as r:
        doc = json.loads(r.read())
    return {(o["topic"], o["partition"]): o["offset"] for o in doc["offsets"]}


def test_send_offsets_commit_with_the_transaction_only(broker):
    tag = uuid.uuid4().hex[:6]
    group = f"sdk-txn-group-{tag}"
    with TransactionalProducer(broker.url, broker.api_key, transactional_id=f"sdk-off-{tag}") as p:
        p.init_transactions(T)
        p.begin_transaction()
        p.send("sdk-txn", b"aborted-out", partition=0)
        p.send_offsets_to_transaction({("sdk-txn-in", 0): 5, ("sdk-txn-in", 1): 7}, group)
        p.abort_transaction(T)
        assert group_offsets(broker, group) == {}
        p.begin_transaction()
        p.send("sdk-txn", b"committed-out", partition=0)
        p.send_offsets_to_transaction({("sdk-txn-in", 0): 11, ("sdk-txn-in", 1): 13}, group)
        assert group_offsets(broker, group) == {}  # pending until the commit
        p.commit_transaction(T)
    assert group_offsets(broker, group) == {("sdk-txn-in", 0): 11, ("sdk-txn-in", 1): 13}


def test_a_second_producer_with_the_same_id_fences_the_first(broker):
    tag = uuid.uuid4().hex[:6].encode()
    tid = f"sdk-fence-{tag.decode()}"
    first = TransactionalProducer(broker.url, broker.api_key, transactional_id=tid)
    second = TransactionalProducer(broker.url, broker.api_key, transactional_id=tid)
    try:
        first.init_transactions(T)
        first.begin_transaction()
        first.send("sdk-txn", tag + b"-zombie", partition=1)
        first.flush(T)
        second.init_transactions(T)  # bumps the epoch: the open transaction is aborted
        with pytest.raises(ProducerFencedError, match="fenced"):
            first.commit_transaction(T)
        with pytest.raises(ProducerFencedError):
            first.begin_transaction()  # unusable from now on
        second.begin_transaction()
        second.send("sdk-txn", tag + b"-live", partition=1)
        second.commit_transaction(T)
    finally:
        first.close()
        second.close()
    assert kafka_read_committed(broker.bootstrap, "sdk-txn", tag, 1) == [tag + b"-live"]


def test_a_transaction_older_than_its_timeout_is_aborted_and_its_producer_fenced(broker):
    tag = uuid.uuid4().hex[:6].encode()
    with TransactionalProducer(
        broker.url,
        broker.api_key,
        transactional_id=f"sdk-timeout-{tag.decode()}",
        transaction_timeout_ms=1000,
    ) as p:
        p.init_transactions(T)
        p.begin_transaction()
        p.send("sdk-txn", tag + b"-late", partition=0)
        p.flush(T)
        time.sleep(2.5)  # the coordinator's timer aborts it, bumping the epoch
        with pytest.raises(ProducerFencedError, match="timed out"):
            p.commit_transaction(T)
    assert kafka_read_committed(broker.bootstrap, "sdk-txn", tag, 0) == []


def txn_batch(pid: int, epoch: int, seq: int = 0) -> bytes:
    return encode_batch(
        [Record(1, None, b"raw")],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


def test_the_binary_produce_verifies_transactional_batches(broker):
    tid = f"sdk-raw-{uuid.uuid4().hex[:6]}"
    base = f"/sluice/v1/transactions/{tid}"
    status, ids = call(broker, base + "/init", {"transaction_timeout_ms": 20_000})
    assert status == 200, ids
    pid, epoch = ids["producer_id"], ids["producer_epoch"]
    producer = {"producer_id": pid, "producer_epoch": epoch}
    part = "/sluice/v1/topics/sdk-txn-raw/partitions/{}/batches?acks=all"
    status, doc = call(
        broker,
        base + "/partitions",
        {**producer, "partitions": [{"topic": "sdk-txn-raw", "partition": 0}]},
    )
    assert status == 200, doc
    # partition 1 was never added: refused, nothing appended
    status, doc = call(broker, part.format(1) + f"&transactional_id={tid}", txn_batch(pid, epoch))
    assert (status, doc["error_code"]) == (409, "INVALID_TXN_STATE"), doc
    assert "add the partition" in doc["message"]
    # no transactional id: nothing can verify it
    status, doc = call(broker, part.format(0), txn_batch(pid, epoch))
    assert (status, doc["error_code"]) == (403, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"), doc
    # a control batch is the coordinator's
    marker = encode_txn_marker(pid, epoch, True, 0, 1)
    status, doc = call(broker, part.format(0) + f"&transactional_id={tid}", marker)
    assert (status, doc["error_code"]) == (400, "INVALID_RECORD"), doc
    # the added partition takes it; an older epoch is fenced
    status, doc = call(broker, part.format(0) + f"&transactional_id={tid}", txn_batch(pid, epoch))
    assert status == 200, doc
    status, doc = call(
        broker,
        base + "/end",
        {"producer_id": pid, "producer_epoch": epoch - 1 if epoch else 99, "commit": True},
    )
    assert (status, doc["error_code"]) == (409, "PRODUCER_FENCED"), doc
    status, doc = call(broker, base + "/end", {**producer, "commit": True})
    assert status == 200 and doc == {"committed": True}, doc


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/init", {"transaction_timeout_ms": "soon"}, "body.transaction_timeout_ms"),
        ("/partitions", {"producer_id": 1, "producer_epoch": 0}, "body.partitions"),
        (
            "/partitions",
            {"producer_id": 1, "producer_epoch": 0, "partitions": [{"topic": "x"}]},
            "partitions[0]",
        ),
        ("/end", {"producer_id": 1, "producer_epoch": 0}, "body.commit"),
        ("/offsets", {"producer_id": 1, "producer_epoch": 0, "group_id": "g"}, "body.offsets"),
        ("/groups", {"producer_id": 1, "producer_epoch": 0}, "body.group_id"),
    ],
)
def test_the_routes_validate_their_input(broker, path, body, message):
    status, doc = call(broker, "/sluice/v1/transactions/sdk-bad" + path, body)
    assert (status, doc["error_code"]) == (400, "INVALID_REQUEST"), doc
    assert message in doc["message"]


def test_refusals_carry_kafka_names(broker):
    status, doc = call(
        broker, "/sluice/v1/transactions/sdk-x/init", {"transaction_timeout_ms": 10**9}
    )
    assert (status, doc["error_code"]) == (400, "INVALID_TRANSACTION_TIMEOUT"), doc
    status, doc = call(
        broker,
        "/sluice/v1/transactions/sdk-never-initialised/end",
        {"producer_id": 4242, "producer_epoch": 0, "commit": True},
    )
    assert status == 409 and doc["error_code"] == "INVALID_PRODUCER_ID_MAPPING", doc
    status, doc = call(
        broker,
        "/sluice/v1/transactions/sdk-x/partitions",
        {
            "producer_id": 1,
            "producer_epoch": 0,
            "partitions": [{"topic": "__consumer_offsets", "partition": 0}],
        },
    )
    assert (status, doc["error_code"]) == (400, "INVALID_TOPIC_EXCEPTION"), doc
    status, doc = call(broker.url, "/sluice/v1/transactions/sdk-x/init", {}, key="not-a-key")
    assert status == 401, doc


CLUSTER_TOPICS = {
    "sdk-xo": (3, {}),
    "__consumer_offsets": (3, {"cleanup.policy": "compact"}),
    "__transaction_state": (3, {"cleanup.policy": "compact"}),
}


def test_on_three_brokers_every_call_reaches_the_coordinator(kafka_launcher):
    cluster = start_static_cluster(kafka_launcher, CLUSTER_TOPICS, kafka=True)
    first = cluster.broker(1)
    tag = uuid.uuid4().hex[:6].encode()
    group = f"sdk-xg-{tag.decode()}"
    # bootstrap on one broker only: the coordinator of most ids and groups is another one
    for n in range(3):
        with TransactionalProducer(
            first.url, first.api_key, transactional_id=f"sdk-x-{tag.decode()}-{n}"
        ) as p:
            p.init_transactions(T)
            p.begin_transaction()
            for i in range(3):
                p.send("sdk-xo", tag + b"-%d-%d" % (n, i), partition=i)
            p.send_offsets_to_transaction({("sdk-xo", n): 100 + n}, group)
            p.commit_transaction(T)
    got = kafka_read_committed(cluster.kafka_bootstrap, "sdk-xo", tag, 9, partitions=3)
    assert sorted(got) == sorted(tag + b"-%d-%d" % (n, i) for n in range(3) for i in range(3))
    # the groups API answers on the group's coordinator (leaders are round-robin)
    coordinator = cluster.broker(partition_for(group, 3) + 1)
    assert group_offsets(coordinator, group) == {("sdk-xo", n): 100 + n for n in range(3)}
