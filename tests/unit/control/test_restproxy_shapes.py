"""The pure parts of the Confluent REST Proxy resources (backend/restproxy): which integer
code a Sluice refusal becomes, links and CRNs, and a group's lag summary."""

from __future__ import annotations

import pytest
from rest_framework import exceptions as drf

from backend.core.exceptions import InvalidConfig, InvalidRequest, TopicAlreadyExists
from backend.restproxy import shapes
from backend.restproxy.errors import UnknownTopicOrPartition, confluent_body, confluent_error
from backend.restproxy.links import Links

LINKS = Links("http://broker:8082", "lkc-1")


@pytest.mark.parametrize(
    ("status", "code", "exc", "expected"),
    [
        (401, "NOT_AUTHENTICATED", drf.NotAuthenticated(), (401, 40101)),
        (403, "PERMISSION_DENIED", None, (403, 40301)),
        (404, "NOT_FOUND", UnknownTopicOrPartition("x"), (404, 40403)),
        (404, "NOT_FOUND", None, (404, 404)),
        (409, "TOPIC_ALREADY_EXISTS", TopicAlreadyExists("x"), (400, 40002)),
        (400, "INVALID_CONFIG", InvalidConfig("x"), (400, 40002)),
        (400, "QUOTA_EXCEEDED", None, (400, 40002)),
        (400, "INVALID_REQUEST", InvalidRequest("x"), (400, 40002)),
        (400, "INVALID_REQUEST", drf.ValidationError({"a": ["b"]}), (422, 422)),
        (400, "INVALID_REQUEST", drf.ParseError(), (400, 400)),
        (405, "METHOD_NOT_ALLOWED", None, (405, 405)),
        (406, "NOT_ACCEPTABLE", None, (406, 40601)),
        (415, "UNSUPPORTED_MEDIA_TYPE", None, (415, 415)),
        (503, "BROKERS_UNAVAILABLE", None, (503, 503)),
        (500, "INTERNAL_ERROR", None, (500, 500)),
    ],
)
def test_confluent_codes(status, code, exc, expected):
    assert confluent_error(status, code, exc) == expected


def test_the_body_keeps_sluices_code_and_folds_fields_into_the_message():
    sluice = {
        "error_code": "INVALID_CONFIG",
        "message": "the topic's settings are invalid",
        "fields": {"partitions": ["must be between 1 and 1000"]},
    }
    assert confluent_body(400, sluice, InvalidConfig("x")) == (
        400,
        {
            "error_code": 40002,
            "message": "the topic's settings are invalid (partitions: must be between 1 and 1000)",
            "sluice_code": "INVALID_CONFIG",
            "fields": {"partitions": ["must be between 1 and 1000"]},
        },
    )


def test_links_quote_names_and_build_crns():
    assert LINKS.url("topics", "a.b_c-d", "configs") == (
        "http://broker:8082/v3/clusters/lkc-1/topics/a.b_c-d/configs"
    )
    assert LINKS.url("consumer-groups", "g 1/x") == (
        "http://broker:8082/v3/clusters/lkc-1/consumer-groups/g%201%2Fx"
    )
    assert LINKS.crn(("topic", "t"), ("partition", 0)) == "crn:///kafka=lkc-1/topic=t/partition=0"
    assert LINKS.listing("KafkaTopicList", [], "topics")["metadata"] == {
        "self": "http://broker:8082/v3/clusters/lkc-1/topics",
        "next": None,
    }


def _lag(topic: str, partition: int, lag: int, consumer: str = "") -> dict:
    row = {"topic": topic, "partition": partition, "committed_offset": 1, "log_end_offset": 1 + lag}
    row["lag"] = lag
    owner = {"member_id": consumer, "client_id": "c", "instance_id": None} if consumer else None
    return shapes.consumer_lag(LINKS, "g", row, owner)


def test_lag_summary_names_the_largest_lag_and_sums_them():
    lags = [_lag("a", 0, 3, "m1"), _lag("b", 1, 7, "m2"), _lag("b", 2, 7)]
    s = shapes.lag_summary(LINKS, "g", lags)
    assert (s["total_lag"], s["max_lag"]) == (17, 7)
    assert (s["max_lag_topic_name"], s["max_lag_partition_id"]) == ("b", 1)
    assert (s["max_lag_consumer_id"], s["max_lag_client_id"]) == ("m2", "c")
    assert s["max_lag_consumer"] == {
        "related": "http://broker:8082/v3/clusters/lkc-1/consumer-groups/g/consumers/m2"
    }
    assert s["metadata"]["resource_name"] == "crn:///kafka=lkc-1/consumer-group=g/lag-summary"


def test_lag_summary_of_a_group_without_commits():
    s = shapes.lag_summary(LINKS, "g", [])
    assert (s["total_lag"], s["max_lag"], s["max_lag_consumer"], s["max_lag_partition"]) == (
        0,
        0,
        None,
        None,
    )


def test_an_unassigned_partition_has_no_consumer():
    lag = _lag("a", 0, 3)
    assert (lag["consumer_id"], lag["client_id"], lag["instance_id"]) == ("", "", None)


def test_host_and_port_of_a_broker():
    assert shapes.host_port("[::1]:9093", "http://x:1") == ("::1", 9093)
    assert shapes.host_port("", "http://127.0.0.1:9092") == ("127.0.0.1", 9092)
