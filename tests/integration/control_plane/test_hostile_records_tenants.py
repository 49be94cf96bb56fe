"""One tenant's hostile batches against the real service (control plane + a broker pulling
its metadata log): decompression bombs to its compacted topic, garbage records behind a
valid CRC, timestamps at the int64 limits. Each is refused with its stable code and nothing
is stored, while another tenant's produce and fetch on the same broker stay prompt and the
broker's peak memory stays bounded."""

from __future__ import annotations

import contextlib
import json
import struct
import threading
import time
import urllib.error
import urllib.request

from brokernodes.records.batch import Record, encode_batch
from brokernodes.records.compression import Compression
from tests.integration.broker.test_hostile_records import (
    INT64_MAX,
    MIB,
    around,
    bomb,
    peak_rss,
    peak_rss_reset,
    recrc,
    rss,
)

from .conftest import ControlPlane, http, wait_for

BINARY = "application/vnd.kafka.recordbatch.v2"


def produce(url: str, topic: str, key: str, body: bytes) -> tuple[int, dict]:
    req = urllib.request.Request(
        f"{url}/sluice/v1/topics/{topic}/partitions/0/batches",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": BINARY},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        with contextlib.closing(e):
            return e.code, json.loads(e.read())


def create_topic(cp: ControlPlane, broker, name: str, key: str, configs=None) -> None:
    body = {"name": name, "partitions": 1, "replication_factor": 1, "configs": configs or {}}
    status, answer = cp.api("POST", "topics/", body, key=key)
    assert status == 201, answer

    def known():
        status, meta = http("GET", f"{broker.url}/sluice/v1/metadata", key=key)
        return status == 200 and any(t["name"] == name for t in meta["topics"])

    wait_for(f"the broker to learn topic {name}", known)


def now_batch(value: bytes) -> bytes:
    return encode_batch([Record(int(time.time() * 1000), b"k", value)])


def test_one_tenants_hostile_batches_leave_another_served(control_plane: ControlPlane):
    cp = control_plane
    hostile, victim = cp.tenant("bomber"), cp.tenant("victim")
    broker = cp.start_broker(1)
    create_topic(cp, broker, "ledger", hostile["api_key"], {"cleanup.policy": "compact"})
    create_topic(cp, broker, "orders", victim["api_key"])
    hkey, vkey = hostile["api_key"], victim["api_key"]
    assert produce(broker.url, "orders", vkey, now_batch(b"warm"))[0] == 200

    latencies: list[float] = []
    failures: list[object] = []
    stop = threading.Event()

    def victim_traffic() -> None:
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline:
            started = time.monotonic()
            status, ans = produce(broker.url, "orders", vkey, now_batch(b"victim"))
            if status != 200:
                failures.append(ans)
            else:
                status, _ = http(
                    "GET",
                    f"{broker.url}/sluice/v1/topics/orders/partitions/0/records"
                    f"?offset={ans['base_offset']}",
                    key=vkey,
                )
                if status != 200:
                    failures.append(status)
            latencies.append(time.monotonic() - started)
            time.sleep(0.02)

    pid = broker.proc.pid
    peak_rss_reset(pid)
    before = rss(pid)
    victim_thread = threading.Thread(target=victim_traffic, daemon=True)
    victim_thread.start()
    time.sleep(0.3)

    bombs = [bomb(Compression.ZSTD, 256 * MIB), bomb(Compression.GZIP, 64 * MIB)]
    for _ in range(3):
        for body in bombs:
            status, err = produce(broker.url, "ledger", hkey, body)
            assert (status, err.get("error_code")) == (413, "MESSAGE_TOO_LARGE"), err
    garbage = around(bytes(range(3, 90)))
    status, err = produce(broker.url, "ledger", hkey, garbage)
    assert (status, err.get("error_code")) == (400, "CORRUPT_MESSAGE"), err
    far = bytearray(now_batch(b"v"))
    struct.pack_into(">qq", far, 27, INT64_MAX, INT64_MAX)
    status, err = produce(broker.url, "ledger", hkey, recrc(far))
    assert (status, err.get("error_code")) == (400, "INVALID_TIMESTAMP"), err
    time.sleep(0.3)
    stop.set()
    victim_thread.join(10)

    assert not failures
    assert len(latencies) >= 5
    assert max(latencies) < 1.5, sorted(latencies)[-5:]
    grown = peak_rss(pid) - before
    assert grown < 120 * MIB, f"peak RSS rose {grown / MIB:.0f} MiB"
    # nothing of the hostile tenant's was stored; its fair batches still go in
    status, ans = http(
        "GET", f"{broker.url}/sluice/v1/topics/ledger/partitions/0/records?offset=0", key=hkey
    )
    assert status == 200 and ans["records"] == [] and ans["high_watermark"] == 0, ans
    assert produce(broker.url, "ledger", hkey, now_batch(b"fair"))[0] == 200
