"""The live job as ``make up`` runs it: long-running queries on a processing-time trigger and
the lag sampler, against a real broker (no control plane: the job's sink here is a dict
upserted by key, as the tables are). Records and commits made while it runs show up within a
few triggers; stopped and started again on the same checkpoint it resumes, and more traffic
adds to the minutes without counting the earlier records twice."""

from __future__ import annotations

import threading
import time

import pytest

from spark.jobs.common import Source, TopicRef
from spark.jobs.live import LiveConfig, LiveJob
from tests.integration.conftest import BrokerLauncher

pytestmark = pytest.mark.slow
SECRET = "live-job-secret"
TOPICS = {"orders": (2, {}), "__consumer_offsets": (1, {}), "__usage": (1, {})}
CLUSTER = "test-cluster"  # the harness broker's


class DictSink:
    """Rows upserted by key, like the control plane's tables; the calls counted."""

    def __init__(self) -> None:
        self.lag_groups: dict = {}
        self.minutes: dict = {}
        self.as_of: list[int] = []

    def lag(self, partitions, groups, *, sampled_ms) -> None:
        for g in groups:
            self.lag_groups[(g["group"], g["topic"], g["minute_ms"])] = g

    def throughput(self, rows, *, measured_from_ms, as_of_ms) -> None:
        assert measured_from_ms <= as_of_ms
        for r in rows:
            self.minutes[(r["tenant"], r["topic"], r["minute_ms"])] = r
        self.as_of.append(as_of_ms)

    def records_in(self, topic: str) -> int:
        return sum(r["records_in"] for (_, t, _), r in self.minutes.items() if t == topic)

    def last_lag(self, group: str, topic: str):
        rows = [g for (gr, t, _), g in sorted(self.lag_groups.items()) if (gr, t) == (group, topic)]
        return rows[-1] if rows else None


@pytest.fixture
def broker(tmp_path):
    launcher = BrokerLauncher(tmp_path / "broker")
    try:
        yield launcher(
            TOPICS, env={"SLUICE_USAGE_INTERVAL_S": "0.3", "SLUICE_CLUSTER_SECRET": SECRET}
        )
    finally:
        launcher.close()


def live_job(spark, broker, sink: DictSink, tmp_path) -> LiveJob:
    """The job over the harness broker's orders topic, checkpointing under ``tmp_path``."""
    return LiveJob(
        spark,
        Source(broker.url, cluster_secret=SECRET),
        offsets_topic=TopicRef("__consumer_offsets"),
        usage_topic=TopicRef("__usage"),
        topics=lambda: [TopicRef("orders")],
        sink=sink,
        config=LiveConfig(str(tmp_path / "checkpoint"), interval_s=1.0),
    )


def wait_until(what: str, check, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_long_running_job_keeps_minutes_current_and_resumes(spark, broker, tmp_path):
    def produce(partition: int, n: int) -> None:
        status, _, body = broker.request(
            "POST",
            f"/v3/clusters/{CLUSTER}/topics/orders/records:batch",
            body={
                "entries": [
                    {
                        "id": str(i),
                        "partition_id": partition,
                        "value": {"type": "STRING", "data": "v"},
                    }
                    for i in range(n)
                ]
            },
        )
        assert status == 207, body

    def commit(offsets: dict[int, int]) -> None:
        status, _, body = broker.request(
            "POST",
            "/sluice/v1/groups/billing/offsets",
            body={
                "offsets": [
                    {"topic": "orders", "partition": p, "offset": o} for p, o in offsets.items()
                ]
            },
        )
        assert status == 200, body

    sink = DictSink()

    def running(j: LiveJob) -> tuple[threading.Event, threading.Thread]:
        stop = threading.Event()
        t = threading.Thread(target=j.run, args=(stop,), daemon=True)
        t.start()
        return stop, t

    produce(0, 10)
    produce(1, 5)
    commit({0: 3})
    stop, thread = running(live_job(spark, broker, sink, tmp_path))
    try:
        lag = wait_until(
            "the lag of billing's committed partition",
            lambda: (g := sink.last_lag("billing", "orders")) and g["offset_lag"] == 7 and g,
        )
        assert (lag["partitions"], lag["measured"], lag["topic_partitions"]) == (1, 1, 2)
        wait_until("15 records in", lambda: sink.records_in("orders") == 15)
        # a commit while it runs: the partition's lag falls at the next sample
        commit({0: 10, 1: 5})
        wait_until(
            "billing caught up",
            lambda: (g := sink.last_lag("billing", "orders")) and g["offset_lag"] == 0,
        )
        # idle: the usage stream is still current (heartbeats move as_of)
        seen = len(sink.as_of)
        wait_until("a heartbeat", lambda: len(sink.as_of) > seen + 1, timeout=60)
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive()

    # started again on the same checkpoint: more records add to the minutes, once
    produce(1, 4)
    stop, thread = running(live_job(spark, broker, sink, tmp_path))
    try:
        wait_until("19 records in", lambda: sink.records_in("orders") == 19)
        time.sleep(3)  # a few more triggers: nothing is added again
        assert sink.records_in("orders") == 19
        lag = wait_until(
            "billing's lag on partition 1",
            lambda: (g := sink.last_lag("billing", "orders")) and g["offset_lag"] == 4 and g,
        )
        assert lag["partitions"] == 2
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive()


def test_each_query_starts_once_the_one_before_has_its_source(spark, broker, tmp_path, monkeypatch):
    """The usage query starts only after the commits query has left ``Initializing sources``
    (the first Python source a JVM starts adds keys to a map every read task carries; see
    docs/analytics.md), and a stop set meanwhile starts no further query."""
    from spark.jobs import live

    seen: list[tuple[str, str, int]] = []
    wait = live.wait_sources_initialized

    def recording(query, timeout_s: float, stop=None) -> None:
        wait(query, timeout_s, stop)
        seen.append((query.name, query.status["message"], len(job.queries)))

    monkeypatch.setattr(live, "wait_sources_initialized", recording)

    job = live_job(spark, broker, DictSink(), tmp_path)
    try:
        started = [q.name for q in job.start()]
    finally:
        job.stop()
    assert started == ["sluice-live-commits", "sluice-live-usage"]
    ((name, message, running),) = seen  # one wait: before the second query
    assert (name, running) == ("sluice-live-commits", 1)  # the usage query not started yet
    assert message not in live._STARTING, message

    stop = threading.Event()
    stop.set()
    job = live_job(spark, broker, DictSink(), tmp_path)
    try:
        assert [q.name for q in job.start(stop=stop)] == []
    finally:
        job.stop()
