"""The pure parts of the Metadata answer: brokers, controller, partitions."""

from __future__ import annotations

import uuid

from brokernodes.server.kafka.handlers.metadata import (
    ZERO_ID,
    brokers_of,
    controller_of,
    leader_hint,
    live_ids,
    named_topic,
    partition_entry,
    requested_names,
    split_address,
    topics_by_id,
    up_ids,
)
from brokernodes.server.metadata.cluster import BrokerInfo, PartitionInfo, parse_metadata
from brokernodes.server.protocol.kafka import errors as kerr

BROKERS = {
    1: BrokerInfo(1, "http://a", kafka="a.example:9092"),
    2: BrokerInfo(2, "http://b", kafka="[::1]:9093", fenced=True),
    3: BrokerInfo(3, "http://c"),  # no Kafka listener
    4: BrokerInfo(4, "http://d", kafka="d:9094"),
}


def test_split_address():
    assert split_address("h:1") == ("h", 1)
    assert split_address("[::1]:9093") == ("::1", 9093)
    assert split_address("nohost") is None
    assert split_address("h:x") is None


def test_brokers_are_those_with_a_kafka_listener():
    assert [b["node_id"] for b in brokers_of(BROKERS)] == [1, 2, 4]
    assert brokers_of(BROKERS)[1]["host"] == "::1"


def test_controller_is_the_lowest_live_broker():
    assert live_ids(BROKERS) == {1, 4}
    assert controller_of(BROKERS) == 1
    assert controller_of({k: v for k, v in BROKERS.items() if k != 1}) == 4
    assert controller_of({3: BROKERS[3]}) == -1


def info(leader: int, replicas=(1, 2, 4), isr=(1, 4)) -> PartitionInfo:
    return PartitionInfo("t", 0, leader, 7, replicas, isr)


def test_partition_with_a_live_leader():
    e = partition_entry(info(1), live_ids(BROKERS), up_ids(BROKERS))
    assert e["error_code"] == kerr.NONE
    assert (e["leader_id"], e["leader_epoch"]) == (1, 7)
    assert e["replica_nodes"] == [1, 2, 4] and e["isr_nodes"] == [1, 4]
    assert e["offline_replicas"] == [2]  # fenced


def test_partition_without_a_reachable_leader():
    for leader in (-1, 2, 3, 9):
        e = partition_entry(info(leader, (1, 9)), live_ids(BROKERS), up_ids(BROKERS))
        assert (e["error_code"], e["leader_id"]) == (kerr.LEADER_NOT_AVAILABLE, -1)
        assert e["offline_replicas"] == [9]  # not in the image


def test_the_leaders_own_isr_wins():
    e = partition_entry(info(1), live_ids(BROKERS), up_ids(BROKERS), isr=(1,))
    assert e["isr_nodes"] == [1]


def test_which_topics_a_request_names():
    assert requested_names(0, []) is None
    assert requested_names(1, None) is None
    assert requested_names(1, []) == []
    assert requested_names(4, [{"name": "a"}]) == [{"name": "a"}]


def image():
    return parse_metadata(
        {
            "cluster_id": "c",
            "broker_id": 1,
            "brokers": [
                {"id": 1, "url": "http://a", "kafka": "a:9092"},
                {"id": 2, "url": "http://b"},
            ],
            "topics": [
                {
                    "name": "t",
                    "topic_id": "6f1c8d52-4d0e-4f0b-9b7c-2f8e3c1d0a11",
                    "partitions": 2,
                    "leaders": [1, 2],
                    "leader_epochs": [3, 4],
                }
            ],
        }
    )


def test_leader_hints_name_reachable_leaders_only():
    img = image()
    leader, endpoint = leader_hint(img, "t", 0)
    assert leader == {"leader_id": 1, "leader_epoch": 3}
    assert endpoint == {"node_id": 1, "host": "a", "port": 9092, "rack": None}
    leader, endpoint = leader_hint(img, "t", 1)  # broker 2 has no Kafka listener
    assert (leader, endpoint) == ({"leader_id": -1, "leader_epoch": 4}, None)
    assert leader_hint(img, "nope", 0) == ({"leader_id": -1, "leader_epoch": -1}, None)


def test_topics_by_id():
    img = image()
    tid = uuid.UUID("6f1c8d52-4d0e-4f0b-9b7c-2f8e3c1d0a11").bytes
    assert topics_by_id(img)[tid].name == "t"
    assert topics_by_id(img) is topics_by_id(img)  # computed once per image
    assert bytes(16) not in topics_by_id(img)


def test_named_topics_by_name_or_id_with_their_errors():
    img = image()
    tid = uuid.UUID("6f1c8d52-4d0e-4f0b-9b7c-2f8e3c1d0a11").bytes
    allow = lambda name: kerr.NONE  # noqa: E731
    assert named_topic(img, "t", ZERO_ID, allow)[0].name == "t"
    assert named_topic(img, None, tid, allow)[0].name == "t"
    _, e = named_topic(img, None, b"\1" * 16, allow)
    assert (e["error_code"], e["name"]) == (kerr.UNKNOWN_TOPIC_ID, None)
    assert named_topic(img, "nope", ZERO_ID, allow)[1]["error_code"] == (
        kerr.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert named_topic(img, None, ZERO_ID, allow)[1]["error_code"] == kerr.INVALID_TOPIC_EXCEPTION
    deny = lambda name: kerr.TOPIC_AUTHORIZATION_FAILED  # noqa: E731
    # refused before existence is checked: a refused caller learns nothing about the name
    for name in ("t", "nope"):
        assert named_topic(img, name, ZERO_ID, deny)[1]["error_code"] == (
            kerr.TOPIC_AUTHORIZATION_FAILED
        )


class CountingContext:
    """A stand-in handler context recording which authorizations were metered."""

    def __init__(self, image) -> None:
        from types import SimpleNamespace

        self.broker = SimpleNamespace(image=image, replicas=SimpleNamespace(partitions={}))
        self.metered: list[tuple[str, str, str]] = []
        self.probed = 0

    def authorize(self, op, rtype="cluster", name="", count=True):
        if count:
            self.metered.append((op, rtype, name))
        else:
            self.probed += 1


def test_a_metadata_listing_meters_one_request_however_many_topics_it_shows():
    """Usage metering counts requests: the per-topic checks that filter a listing (and the
    authorized-operations probes) are not requests of their own."""
    import asyncio

    from brokernodes.server.kafka.handlers.metadata import metadata
    from brokernodes.server.protocol.kafka.frames import RequestHeader

    doc = {
        "cluster_id": "c",
        "broker_id": 1,
        "brokers": [{"id": 1, "url": "http://a", "kafka": "a:9092"}],
        "topics": [
            {"name": f"t{i}", "topic_id": str(uuid.uuid4()), "partitions": 1, "leaders": [1]}
            for i in range(5)
        ],
    }
    ctx = CountingContext(parse_metadata(doc))
    header = RequestHeader(3, 10, 1, "c", True, True, 0)
    request = {
        "topics": None,
        "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": True,
    }
    answer = asyncio.run(metadata(ctx, header, request))
    assert sorted(t["name"] for t in answer["topics"]) == [f"t{i}" for i in range(5)]
    assert ctx.metered == [("DESCRIBE", "cluster", "")]
    assert ctx.probed > 5
