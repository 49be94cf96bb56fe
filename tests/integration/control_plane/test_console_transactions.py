"""The console's partitions API shows each partition's last stable offset beside its high
watermark and the transactions open on it (producer id, epoch, first offset, how long open),
read from the leader: a real control plane, a real broker with a Kafka listener, and
librdkafka's transactional producer leaving a transaction open, then aborting it."""

from __future__ import annotations

import json
import time
import urllib.request
from http.cookiejar import CookieJar

from confluent_kafka import Producer

from tests.integration.kafka.cp_kafka import sasl

from .conftest import start_control_plane, wait_for

TOPIC = "ctxn-open"


class Console:
    """A signed-in console session (cookie and CSRF token)."""

    def __init__(self, url: str, username: str, password: str) -> None:
        self.url = url
        jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        self.opener.open(f"{url}/api/v1/auth/csrf", timeout=10).read()
        csrf = next(c.value for c in jar if c.name == "csrftoken")
        req = urllib.request.Request(
            f"{url}/api/v1/auth/login",
            data=json.dumps({"username": username, "password": password}).encode(),
            headers={"Content-Type": "application/json", "X-CSRFToken": csrf},
            method="POST",
        )
        with self.opener.open(req, timeout=10) as r:
            assert r.status == 200

    def partitions(self) -> dict[int, dict]:
        with self.opener.open(
            f"{self.url}/api/v1/console/partitions?topic={TOPIC}", timeout=30
        ) as r:
            [topic] = json.loads(r.read())["topics"]
        return {p["partition"]: p for p in topic["partitions"]}


def test_open_transactions_and_the_lso_beside_the_high_watermark(tmp_path):
    with start_control_plane(tmp_path) as cp:
        b = cp.start_broker(1, kafka=True)
        t = cp.tenant("ctxn")
        status, body = cp.api(
            "POST",
            "topics/",
            {"name": TOPIC, "partitions": 2, "replication_factor": 1},
            key=t["api_key"],
        )
        assert status == 201, body
        console = Console(cp.url, t["username"], t["password"])
        wait_for(
            "the leader's offsets",
            lambda: all(p["high_watermark"] == 0 for p in console.partitions().values()),
            timeout=30,
        )
        user, secret = sasl(t["api_key"])
        producer = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": user,
                "sasl.password": secret,
                "transactional.id": "ctxn-open-tx",
            }
        )
        producer.init_transactions(60)
        producer.begin_transaction()  # committed: partition 1 two records and a marker
        for i in range(2):
            producer.produce(TOPIC, f"c{i}".encode(), partition=1)
        producer.commit_transaction(60)
        before = int(time.time() * 1000)
        producer.begin_transaction()  # left open on partition 0
        for i in range(3):
            producer.produce(TOPIC, f"o{i}".encode(), partition=0)
        assert producer.flush(30) == 0

        parts = wait_for(
            "the open transaction",
            lambda: (ps := console.partitions())[0]["open_transactions"] and ps,
            timeout=30,
        )
        p0, p1 = parts[0], parts[1]
        assert p0["high_watermark"] == 3 and p0["last_stable_offset"] == 0
        [open_txn] = p0["open_transactions"]
        assert open_txn["first_offset"] == 0 and open_txn["producer_epoch"] == 0
        assert open_txn["producer_id"] >= 0
        assert open_txn["started_ms"] >= before - 5_000
        assert 0 <= open_txn["open_ms"] < 60_000
        assert p1["high_watermark"] == p1["last_stable_offset"] == 3  # 2 records, 1 marker
        assert p1["open_transactions"] == []

        time.sleep(1.2)  # how long open grows while it stays open
        later = console.partitions()[0]["open_transactions"][0]
        assert later["open_ms"] >= open_txn["open_ms"] + 1000

        producer.abort_transaction(60)
        p0 = wait_for(
            "the abort to end it",
            lambda: (p := console.partitions()[0])["open_transactions"] == [] and p,
            timeout=30,
        )
        assert p0["last_stable_offset"] == p0["high_watermark"] == 4  # 3 records, 1 marker
