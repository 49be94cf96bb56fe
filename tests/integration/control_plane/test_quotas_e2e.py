"""Quotas set through the control plane's platform (staff) API are enforced by a real broker:
a tenant producing at twice its byte-rate quota is held at the quota by delayed responses
(``throttle_time_ms``), without errors, while another tenant is never throttled nor held
behind it; a tenant at its storage quota is refused with QUOTA_EXCEEDED and nothing is
appended. How much the loaded tenant changes the other one's p99 is a benchmark, not a timed
test: ``make bench BENCH=quotas`` (bench/quotas.py, docs/acls-and-quotas.md)."""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from harness.control_plane import ControlPlane, StaffSession, create_topic, http, wait_for
from harness.control_plane import RestProducer as Producer

QUOTA = 100_000  # bytes/s
VALUE_BYTES = 4_000
LOAD_SECONDS = 11.0  # one quota window (11 samples of 1 s), as Kafka measures the rate


def probe(producer: Producer, seconds: float, interval: float = 0.02) -> list[float]:
    """Small produce requests at a steady pace; their latencies (all must succeed, none
    throttled: this tenant has no quota)."""
    latencies = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status, body, _, latency = producer.send("p" * 100)
        assert status == 200 and body["throttle_time_ms"] == 0, body
        latencies.append(latency)
        time.sleep(interval)
    return latencies


def p99(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=100)[98]


def test_byte_rate_quota_holds_a_tenant_at_its_quota_without_hurting_another(
    control_plane: ControlPlane,
):
    cp = control_plane
    alpha, bravo = cp.tenant("alpha"), cp.tenant("bravo")
    broker = cp.start_broker(1)
    create_topic(cp, broker, "load", alpha["api_key"])
    create_topic(cp, broker, "probe", bravo["api_key"])
    StaffSession(cp).set_quota("alpha", produce_bytes_per_sec=QUOTA)
    time.sleep(1.0)  # the broker's long poll delivers the quota within milliseconds

    prober = Producer(broker.url, "probe", bravo["api_key"])
    probe(prober, 1.0)  # warm up
    loaded: list[float] = []
    load: dict = {"bytes": 0, "requests": 0, "errors": [], "throttles": []}

    def offer_twice_the_quota():
        producer = Producer(broker.url, "load", alpha["api_key"])
        interval = (VALUE_BYTES + 60) / (2 * QUOTA)  # one request's share of 2x the quota
        start = time.monotonic()
        deadline = start + LOAD_SECONDS
        next_send = start
        while time.monotonic() < deadline:
            status, body, nbytes, _ = producer.send("x" * VALUE_BYTES)
            if status != 200:
                load["errors"].append((status, body))
            else:
                load["bytes"] += nbytes
                load["requests"] += 1
                load["throttles"].append(body["throttle_time_ms"])
            next_send += interval
            time.sleep(max(0.0, next_send - time.monotonic()))
        load["elapsed"] = time.monotonic() - start
        producer.close()

    loader = threading.Thread(target=offer_twice_the_quota)
    loader.start()
    time.sleep(0.5)
    loaded = probe(prober, LOAD_SECONDS - 1.0)
    loader.join(30)
    assert not loader.is_alive()
    prober.close()

    rate = load["bytes"] / load["elapsed"]
    report = (
        f"quota {QUOTA} B/s, achieved {rate:.0f} B/s ({rate / QUOTA:.3f}x) over "
        f"{load['elapsed']:.2f} s, {load['requests']} requests, max throttle "
        f"{max(load['throttles'], default=0)} ms; bravo (never throttled) while alpha is "
        f"loaded: p50 {statistics.median(loaded) * 1000:.2f} ms p99 {p99(loaded) * 1000:.2f} "
        f"ms (n={len(loaded)})"
    )
    print(report)
    assert load["errors"] == [], report
    assert max(load["throttles"]) > 0, report
    assert abs(rate - QUOTA) <= 0.10 * QUOTA, report
    # The other tenant is not held behind the throttled one: alpha's answers wait ~1 s, and a
    # throttled response holds nothing another connection needs (asyncio.sleep in its own
    # task), so bravo's p99 stays two orders of magnitude below that. Whether it stays within
    # 20% of its unloaded value is measured by bench/quotas.py (interleaved loaded/unloaded
    # slots, thousands of samples each): one run's ~3rd worst of ~280 samples on a shared
    # 2-core machine is scheduling noise (0.4x-1.6x run to run), not a test that can pass.
    assert p99(loaded) < 0.1, report


def test_storage_quota_refuses_produce_and_appends_nothing(control_plane: ControlPlane):
    cp = control_plane
    charlie = cp.tenant("charlie")
    key = charlie["api_key"]
    broker = cp.start_broker(1)
    create_topic(cp, broker, "store", key)
    limit = 20_000
    StaffSession(cp).set_quota("charlie", storage_bytes=limit)
    producer = Producer(broker.url, "store", key)

    time.sleep(1.0)
    accepted = 0
    for _ in range(100):
        status, body, _, _ = producer.send("s" * 1000)
        if status != 200:
            break
        assert body["offset"] == accepted, body
        accepted += 1
    else:
        raise AssertionError("never refused at the storage quota")
    assert status == 403 and body["sluice_code"] == "QUOTA_EXCEEDED", body
    assert f"storage limit of {limit} bytes" in body["message"], body
    assert body["limit"] == limit and body["used"] >= limit, body
    assert 15 <= accepted <= 21, accepted  # ~1.07 KB per record on disk

    # nothing appended by the refused request (nor by another refused one)
    status, again, _, _ = producer.send("t")
    assert status == 403, again
    status, fetched = http(
        "GET",
        f"{broker.url}/sluice/v1/topics/store/partitions/0/records?offset=0&format=text"
        "&max_records=1000",
        key=key,
    )
    assert status == 200 and fetched["high_watermark"] == accepted, fetched
    assert fetched["throttle_time_ms"] == 0

    # raising the quota lets produce through again; a fetch quota delays fetch answers
    # the fetch sensor holds the full fetch above (the whole log, ``used`` bytes) and will
    # hold one more batch: a quota 15% under that rate over 10 s means 0.5-1.5 s of throttle
    # (a young sensor's window is 10 s plus the current sample's part: 10 to 11 s)
    fetch_quota = int((body["used"] + body["used"] / accepted) / 10 / 1.15)
    StaffSession(cp, "platform-staff-2").set_quota(
        "charlie", storage_bytes=10 * limit, fetch_bytes_per_sec=fetch_quota
    )
    wait_for("the larger quota", lambda: producer.send("u")[0] == 200)
    producer.close()
    url = f"{broker.url}/sluice/v1/topics/store/partitions/0/records?offset=0&max_bytes=1"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    start = time.monotonic()
    with urllib.request.urlopen(req, timeout=30) as r:
        header = int(r.headers["Sluice-Throttle-Time-Ms"])
        fetched = json.loads(r.read())
    elapsed = time.monotonic() - start
    assert len(fetched["records"]) >= 1
    assert 0 < fetched["throttle_time_ms"] == header <= 3000, fetched
    assert elapsed >= header / 1000 - 0.01, (elapsed, header)


def test_connection_quota_refuses_the_connection_over_the_limit(control_plane: ControlPlane):
    cp = control_plane
    delta = cp.tenant("delta")
    key = delta["api_key"]
    broker = cp.start_broker(1)
    create_topic(cp, broker, "conns", key)
    StaffSession(cp).set_quota("delta", max_connections=2)
    first, second = Producer(broker.url, "conns", key), Producer(broker.url, "conns", key)
    assert first.send("1")[0] == 200 and second.send("2")[0] == 200

    def third_refused(value: str):
        third = Producer(broker.url, "conns", key)
        status, body, _, _ = third.send(value)
        third.close()
        return status == 403 and body

    # (until the broker has the quota, these probes are accepted)
    wait_for("the connection quota to apply", lambda: third_refused("probe"))
    body = third_refused("3")
    assert body["sluice_code"] == "QUOTA_EXCEEDED" and body["quota"] == "connections", body
    assert body["used"] == 2 and body["limit"] == 2, body
    # the open connections keep working; closing one frees its place
    assert first.send("4")[0] == 200
    second.close()
    fourth = Producer(broker.url, "conns", key)
    assert wait_for("a freed place", lambda: fourth.send("5")[0] == 200)
    fourth.close()
    first.close()

    def records():
        status, body = http(
            "GET",
            f"{broker.url}/sluice/v1/topics/conns/partitions/0/records?offset=0&format=text",
            key=key,
        )
        return status == 200 and [r["value"] for r in body["records"] if r["value"] != "probe"]

    # the refused request appended nothing
    assert wait_for("a fetch once the connections closed", records) == ["1", "2", "4", "5"]
