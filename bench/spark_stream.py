"""Structured Streaming through the ``sluice`` source and sink (``spark.stream.records_per_s``
and ``spark.stream.latency_s``), run by ``bench/spark.py`` in its session (``local[2]``).

One broker process (``harness.broker``) with topics ``stream-in`` and ``stream-out``, 6
partitions each. The query is what a Kafka user writes: ``readStream.format("sluice")``
subscribed to ``stream-in``, its ``key`` and ``value`` written with
``writeStream.format("sluice")`` to ``stream-out`` (the sink's defaults: idempotent producer,
acks=all). The peer is the same pipe without Spark: the SDK's ``Consumer`` assigned every
partition of ``stream-in`` handing each record to the SDK's ``Producer`` (acks=all, idempotent)
for ``stream-out``, in one Python process.

- ``spark.stream.records_per_s``: 1M records (100,000 with --quick; 1,000 keys, 100-byte
  values) are in ``stream-in`` before the clock starts; a query from the earliest offsets
  with ``Trigger.AvailableNow`` (a fresh checkpoint each run) is timed from ``start()`` to its
  end, the peer until its last record is flushed. After every run ``stream-out``'s log end
  offsets must have grown by exactly the records read. Each side once untimed, then ``RUNS``
  runs, alternating; the medians.
- ``spark.stream.latency_s``: the pipe runs (the query with the default trigger: the next
  micro-batch as soon as the last ends, from the latest offsets); a producer sends ``RATE``
  records/s for ``SECONDS`` s (half with --quick) after a warm-up, each value carrying its
  send time, and a consumer of ``stream-out`` in the same process takes receipt - send per
  record (one clock). The p99 over every measured record, each side in its own pass.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.report import Metric, run_times

IN, OUT, PARTITIONS = "stream-in", "stream-out", 6
RUNS = 3
VALUE = 100
RATE, SECONDS, WARMUP_S = 1_000, 10, 3
MEASURED, WARMUP = b"m", b"w"  # first byte of a latency record's value


def _end_offsets(client, topic: str) -> int:
    return sum(client.list_offset(meta, "latest") for meta in client.partitions(topic))


def _fill(broker, n: int) -> None:
    from brokernodes.client import Producer

    with Producer(broker.url, broker.api_key, acks="all", batch_size=256 * 1024) as p:
        for i in range(n):
            p.send(IN, str(i).ljust(VALUE, "x"), key=f"key-{i % 1000}")
        p.flush()


def _query(spark, broker, checkpoint: Path, starting: str, **trigger):
    df = (
        spark.readStream.format("sluice")
        .option("bootstrap", broker.url)
        .option("apiKey", broker.api_key)
        .option("subscribe", IN)
        .option("startingOffsets", starting)
        .load()
        .select("key", "value")  # not ``topic``: the sink would write back to it
    )
    w = (
        df.writeStream.format("sluice")
        .option("bootstrap", broker.url)
        .option("apiKey", broker.api_key)
        .option("topic", OUT)
        .option("checkpointLocation", str(checkpoint))
    )
    return (w.trigger(**trigger) if trigger else w).start()


class _SdkPipe:
    """The peer: consumer of ``stream-in`` to producer of ``stream-out`` on a thread, from
    the beginning or the end, until stopped or ``limit`` records are forwarded and flushed."""

    def __init__(self, broker, *, from_start: bool, limit: int | None = None) -> None:
        from brokernodes.client import Consumer, Producer

        self.consumer = Consumer(broker.url, broker.api_key)
        # a bounded pipe batches as the sink does; an open-ended one sends at once (latency)
        linger = {} if limit is not None else {"linger_ms": 0}
        self.producer = Producer(
            broker.url, broker.api_key, acks="all", batch_size=256 * 1024, **linger
        )
        parts = self.consumer.partitions_for(IN)
        self.consumer.assign(parts)
        if from_start:
            self.consumer.seek_to_beginning()
        else:
            self.consumer.seek_to_end()
            for tp in parts:
                self.consumer.position(tp)  # resolved now, not at the first poll
        self.limit, self.moved = limit, 0
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="sdk-pipe", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stopping.is_set() and (self.limit is None or self.moved < self.limit):
                for r in self.consumer.poll(0.2):
                    self.producer.send(OUT, r.value, key=r.key)
                    self.moved += 1
            self.producer.flush()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self, timeout: float = 120) -> None:
        if self.limit is None:
            self.stopping.set()
        self.thread.join(timeout)
        self.consumer.close()
        self.producer.close()
        if self.thread.is_alive() or self.error is not None:
            raise RuntimeError(f"the SDK pipe failed: {self.error or 'did not finish'}")


def _throughput(spark, broker, client, work: Path, n: int) -> tuple[list[float], list[float]]:
    runs: dict[str, list[float]] = {"spark": [], "sdk": []}

    def spark_run(i: int) -> float:
        started = time.perf_counter()
        q = _query(spark, broker, work / f"throughput-{i}", "earliest", availableNow=True)
        if not q.awaitTermination(600):
            q.stop()
            raise RuntimeError("the streaming query did not finish within 600 s")
        return time.perf_counter() - started

    def sdk_run(_: int) -> float:
        started = time.perf_counter()
        _SdkPipe(broker, from_start=True, limit=n).stop(600)
        return time.perf_counter() - started

    for i in range(RUNS + 1):  # the first of each side untimed
        for name, run in (("spark", spark_run), ("sdk", sdk_run)):
            before = _end_offsets(client, OUT)
            took = run(i)
            grown = _end_offsets(client, OUT) - before
            if grown != n:
                raise RuntimeError(f"{name}: read {n:,} records but {OUT} grew by {grown:,}")
            if i:
                runs[name].append(took)
    return runs["spark"], runs["sdk"]


def _latencies(broker, wait_ready, seconds: int) -> list[float]:
    """Send ``RATE`` records/s (warm-up, then ``seconds`` measured) and return each measured
    record's seconds from send to receipt in ``stream-out``; ``wait_ready`` blocks until the
    pipe forwards."""
    from brokernodes.client import Consumer, Producer

    out: list[float] = []
    with (
        Consumer(broker.url, broker.api_key) as consumer,
        Producer(broker.url, broker.api_key, acks="all", linger_ms=0) as producer,
    ):
        parts = consumer.partitions_for(OUT)
        consumer.assign(parts)
        consumer.seek_to_end()
        for tp in parts:
            consumer.position(tp)
        wait_ready(producer, consumer)
        total = RATE * seconds

        def send() -> None:
            start = time.perf_counter()
            for i in range(RATE * (WARMUP_S + seconds)):
                due = start + i / RATE
                while (now := time.perf_counter()) < due:
                    time.sleep(min(due - now, 0.001))
                kind = WARMUP if i < RATE * WARMUP_S else MEASURED
                producer.send(IN, kind + b"%d" % time.perf_counter_ns(), key=b"%d" % (i % 1000))

        sender = threading.Thread(target=send, name="latency-sender", daemon=True)
        sender.start()
        deadline = time.monotonic() + WARMUP_S + seconds + 60
        while len(out) < total and time.monotonic() < deadline:
            for r in consumer.poll(0.2):
                if r.value and r.value[:1] == MEASURED:
                    out.append((time.perf_counter_ns() - int(r.value[1:])) / 1e9)
        sender.join(5)
    if len(out) < total:
        raise RuntimeError(f"only {len(out):,} of {total:,} measured records came through")
    return out


def _ready(producer, consumer) -> None:
    """Send probe records until one comes out of the pipe (a query from the latest offsets
    resolves them at its first micro-batch)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        producer.send(IN, WARMUP + b"0", key=b"probe")
        producer.flush()
        if consumer.poll(1.0):
            return
    raise RuntimeError("the pipe forwarded nothing within 120 s")


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def measure(spark, quick: bool, records: int | None = None) -> list[Metric]:
    """Both figures; ``records`` overrides the throughput run's size (tests)."""
    from harness.broker import BrokerLauncher
    from spark.datasource.broker import BrokerClient

    n = records or (100_000 if quick else 1_000_000)
    seconds = max(1, SECONDS // 2) if quick else SECONDS
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-stream-"))
    launcher = BrokerLauncher(work / "brokers")
    try:
        broker = launcher({IN: (PARTITIONS, {}), OUT: (PARTITIONS, {})})
        client = BrokerClient(broker.url, broker.api_key)
        _fill(broker, n)
        spark_runs, sdk_runs = _throughput(spark, broker, client, work, n)

        q = _query(spark, broker, work / "latency", "latest")
        try:
            spark_lat = _latencies(broker, _ready, seconds)
        finally:
            q.stop()
        pipe = _SdkPipe(broker, from_start=False)
        try:
            sdk_lat = _latencies(broker, _ready, seconds)
        finally:
            pipe.stop()
        client.close()
    finally:
        launcher.close()
        shutil.rmtree(work, ignore_errors=True)
    fmt, peer_fmt = run_times(spark_runs), run_times(sdk_runs)
    p99, peer_p99 = _p99(spark_lat), _p99(sdk_lat)
    p50, peer_p50 = statistics.median(spark_lat), statistics.median(sdk_lat)
    print(
        f"spark: stream {n:,} records: Spark {fmt}; SDK pipe {peer_fmt}; latency p50/p99 "
        f"Spark {p50:.3f}/{p99:.3f} s, SDK pipe {peer_p50:.3f}/{peer_p99:.3f} s",
        flush=True,
    )
    query = (
        f"readStream.format('sluice') of {IN} into writeStream.format('sluice') to {OUT} "
        f"(key and value; idempotent, acks=all), one broker, {PARTITIONS} partitions each, "
        f"local[2]"
    )
    pipe_text = "the SDK's Consumer of every partition feeding the SDK's Producer (acks=all, "
    return [
        Metric(
            name="spark.stream.records_per_s",
            value=round(n / statistics.median(spark_runs)),
            unit="records/s",
            better="higher",
            workload=f"{query}: {n:,} records (1,000 keys, {VALUE}-byte values) waiting, "
            f"Trigger.AvailableNow from the earliest offsets, a fresh checkpoint per run, "
            f"{OUT}'s log end checked after each; median of {RUNS} after a warm-up, "
            f"alternating with the peer",
            peer=f"{pipe_text}idempotent) in one process, same records",
            peer_value=round(n / statistics.median(sdk_runs)),
            rounds=f"Spark {fmt}, peer {peer_fmt}",
        ),
        Metric(
            name="spark.stream.latency_s",
            value=round(p99, 4),
            unit="s",
            better="lower",
            workload=f"{query}, default trigger (the next micro-batch when the last ends) from "
            f"the latest offsets: {RATE:,} records/s for {seconds} s after {WARMUP_S} s of "
            f"warm-up, send (SDK Producer, linger 0) to receipt (SDK Consumer of {OUT}) in "
            f"one process; p99 over {len(spark_lat):,} records (p50 {p50:.3f} s)",
            peer=f"{pipe_text}idempotent, linger 0) on a thread, the same load: p99 over "
            f"{len(sdk_lat):,} records (p50 {peer_p50:.3f} s)",
            peer_value=round(peer_p99, 4),
        ),
    ]
