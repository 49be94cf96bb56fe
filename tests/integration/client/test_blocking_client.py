"""``brokernodes.blocking_client`` against a real broker process on loopback: both
credentials, the error mapping (the broker's codes and fields, an unreachable broker, a silent
one), keep-alive connections across a broker restart, ``Retry``, and asking several brokers
(``first_answer``, ``ask_every``) with dead and silent ones among them."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from brokernodes import blocking_client as bc
from brokernodes.errors import BrokerConnectionError, BrokerError, ClientTimeoutError
from tests.integration.conftest import API_KEY, CLUSTER_ID, free_port

SECRET = "blocking-client-test-secret"
TOPICS = {"bc-orders": (2, {}), "bc-events": (1, {})}


@pytest.fixture
def secured(broker_factory):
    """A broker that also knows the cluster secret (operators' reads, /metrics)."""
    return broker_factory(TOPICS, env={"SLUICE_CLUSTER_SECRET": SECRET})


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def test_both_credentials_and_json_bodies(secured):
    with bc.BlockingClient(bc.bearer(API_KEY), timeout_s=5) as client:
        meta = client.get_json(f"{secured.url}/sluice/v1/metadata")
        assert {t["name"] for t in meta["topics"]} == set(TOPICS)
        answer = client.request(
            "POST",
            f"{secured.url}/v3/clusters/{CLUSTER_ID}/topics/bc-orders/records",
            json={"partition_id": 1, "value": {"type": "STRING", "data": "hello"}},
        ).json()
        assert answer["partition_id"] == 1 and answer["offset"] == 0
    metrics = bc.request("GET", f"{secured.url}/metrics", authorization=bc.cluster(SECRET))
    assert metrics.status == 200 and b"sluice_bytes_in" in metrics.body
    assert metrics.headers["content-type"].startswith("text/plain")


def test_authorization_takes_exactly_one_credential():
    assert bc.authorization(api_key="k.s") == "Bearer k.s"
    assert bc.authorization(cluster_secret="x") == "Cluster x"
    for bad in ({}, {"api_key": "k.s", "cluster_secret": "x"}, {"api_key": ""}):
        with pytest.raises(ValueError, match="exactly one"):
            bc.authorization(**bad)
    with pytest.raises(ValueError, match="must be http:// or https://"):
        bc.split_url("ftp://127.0.0.1:1/x")


def test_error_answers_carry_the_brokers_code_status_and_fields(secured):
    with bc.BlockingClient(bc.bearer(API_KEY), timeout_s=5) as client:
        with pytest.raises(BrokerError) as unknown:
            client.get_json(f"{secured.url}/sluice/v1/topics/nope/partitions/0/offsets")
        assert unknown.value.error_code == "UNKNOWN_TOPIC_OR_PARTITION"
        assert unknown.value.status == 404 and "nope" in unknown.value.message
        with pytest.raises(BrokerError) as out_of_range:
            client.request(
                "GET", f"{secured.url}/sluice/v1/topics/bc-orders/partitions/0/batches?offset=99"
            )
        assert out_of_range.value.error_code == "OFFSET_OUT_OF_RANGE"
        assert out_of_range.value.details["log_start_offset"] == 0
    with pytest.raises(BrokerError) as refused:
        bc.request("GET", f"{secured.url}/metrics", authorization=bc.cluster("wrong"))
    assert refused.value.error_code == "UNAUTHENTICATED" and refused.value.status == 401


def test_an_answer_without_a_code_gets_the_code_its_status_stands_for():
    err = bc.answer_error(503, b"<html>busy</html>", "http://127.0.0.1:1/x")
    assert (err.error_code, err.status) == ("UNKNOWN_SERVER_ERROR", 503)
    assert err.message == "the broker answered 503: <html>busy</html>"
    err = bc.answer_error(401, b'{"error_code": "UNAUTHENTICATED"}', "http://127.0.0.1:1/x")
    assert (err.error_code, err.message) == ("UNAUTHENTICATED", "the broker answered 401")
    assert bc.answer_error(413, b"", "http://h:1/x").error_code == "REQUEST_TOO_LARGE"


def test_unreachable_and_silent_brokers(silent_url):
    url = dead_url()
    with pytest.raises(BrokerConnectionError, match=f"cannot reach the broker at {url}"):
        bc.request("GET", f"{url}/sluice/v1/metadata", authorization=bc.bearer(API_KEY))
    started = time.monotonic()
    with pytest.raises(ClientTimeoutError, match=r"within 0.5 s \(timed out\)"):
        bc.request("GET", f"{silent_url}/sluice/v1/metadata", timeout_s=0.5)
    assert time.monotonic() - started < 3


def test_a_kept_alive_connection_the_broker_closed_is_reopened_for_a_get(secured):
    path = "/sluice/v1/topics/bc-orders/partitions/0/offsets?timestamp=latest"
    with bc.BlockingClient(bc.bearer(API_KEY), timeout_s=5) as client:
        assert client.get_json(secured.url + path)["offset"] == 0
        secured.restart()  # the kept connection now leads nowhere
        assert client.get_json(secured.url + path)["offset"] == 0
        # a POST is never sent twice: the broker may have acted on the first one
        secured.restart()
        records = f"{secured.url}/v3/clusters/{CLUSTER_ID}/topics/bc-orders/records"
        body = {"partition_id": 0, "value": {"type": "STRING", "data": "once"}}
        with pytest.raises(BrokerConnectionError, match="lost the connection"):
            client.request("POST", records, json=body)
        assert client.request("POST", records, json=body).json()["offset"] == 0


def test_retry_asks_again_for_the_listed_codes_only(secured):
    client = bc.BlockingClient(bc.bearer("sk_test.not-yet-known"), timeout_s=5)
    url = f"{secured.url}/sluice/v1/metadata"
    started = time.monotonic()
    with pytest.raises(BrokerError, match="UNAUTHENTICATED"):
        client.get_json(url, retry=bc.Retry(frozenset({"UNAUTHENTICATED"}), 0.6, 0.1))
    assert 0.45 <= time.monotonic() - started < 4
    started = time.monotonic()
    with pytest.raises(BrokerError, match="UNAUTHENTICATED"):
        client.get_json(url, retry=bc.Retry(frozenset({"NOT_COORDINATOR"}), 5.0))
    assert time.monotonic() - started < 2


def test_first_answer_walks_past_brokers_that_do_not_answer(secured, silent_url):
    client = bc.BlockingClient(bc.bearer(API_KEY), timeout_s=0.5)
    asked: list[str] = []

    def ask(url: str) -> dict:
        asked.append(url)
        return client.get_json(f"{url}/sluice/v1/metadata")

    doc = bc.first_answer([dead_url(), silent_url, secured.url], ask)
    assert doc["cluster_id"] == CLUSTER_ID and len(asked) == 3
    with pytest.raises(ClientTimeoutError):
        bc.first_answer([dead_url(), silent_url], ask)
    with pytest.raises(BrokerConnectionError, match="no broker to ask"):
        bc.first_answer([], ask)
    # an error answer is not "unreachable": it stops the walk
    asked.clear()

    def ask_unknown_topic(url: str) -> dict:
        asked.append(url)
        return client.get_json(f"{url}/sluice/v1/topics/nope/partitions/0/offsets")

    with pytest.raises(BrokerError, match="UNKNOWN_TOPIC_OR_PARTITION"):
        bc.first_answer([secured.url, secured.url], ask_unknown_topic)
    assert len(asked) == 1


def test_ask_every_answers_per_broker_within_one_deadline(secured, silent_url):
    client = bc.BlockingClient(bc.bearer(API_KEY), timeout_s=5)
    targets = {1: secured.url, 2: dead_url(), 3: silent_url, 4: secured.url}
    started = time.monotonic()
    answers, failures = bc.ask_every(
        targets, lambda url: client.get_json(f"{url}/sluice/v1/metadata"), deadline_s=1.0
    )
    took = time.monotonic() - started
    assert took < 2.5, f"took {took:.2f} s"
    assert sorted(answers) == [1, 4] and answers[1]["cluster_id"] == CLUSTER_ID
    assert isinstance(failures[2], BrokerConnectionError)
    assert isinstance(failures[3], ClientTimeoutError) and "no answer within 1 s" in str(
        failures[3]
    )
    assert bc.ask_every({}, lambda url: url, deadline_s=1) == ({}, {})
