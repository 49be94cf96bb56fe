"""The streaming benchmark (bench/spark_stream.py) on a tiny load: the query from the
``sluice`` source to the ``sluice`` sink and the SDK pipe each move every record exactly once
per run (the module raises otherwise), and every latency record comes through both."""

from __future__ import annotations

from bench import spark_stream


def test_stream_bench_moves_every_record(spark, monkeypatch):
    for name, value in (("RUNS", 1), ("RATE", 100), ("SECONDS", 4), ("WARMUP_S", 1)):
        monkeypatch.setattr(spark_stream, name, value)
    throughput, latency = spark_stream.measure(spark, quick=True, records=3_000)
    assert throughput.name == "spark.stream.records_per_s"
    assert throughput.value > 0 and throughput.peer_value > 0
    assert latency.name == "spark.stream.latency_s"
    assert 0 < latency.value < 60 and 0 < latency.peer_value < 60
    assert "p99 over 200 records" in latency.workload
