"""The compiled hot modules (docs/native-build.md) in a real broker: build them (the build is
cached by source hash: free when ``make native`` or an earlier run built the same sources),
start a broker with SLUICE_NATIVE=1, produce and fetch over the Kafka listener and over HTTP,
check every built module ran compiled; and run the hot modules' own unit tests against the
compiled build in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from brokernodes import native
from brokernodes.records.batch import decode_batches
from harness.broker import BrokerLauncher
from tests.integration.broker.util import batch, fetch_binary, produce_binary
from tests.integration.kafka.conftest import confluent_config

pytest.importorskip("Cython", reason="the native build needs Cython (make native)")

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "infra"))
import build_native  # noqa: E402

TIMEOUT_S = 20.0

# The unit tests of the compiled modules (run against the build in a subprocess).
UNIT_TESTS = [
    "tests/unit/kafka/test_framing.py",
    "tests/unit/kafka/test_frames.py",
    "tests/unit/kafka/test_produce_request.py",
    "tests/unit/kafka/test_produce_answer.py",
    "tests/unit/kafka/test_fetch_answer.py",
    "tests/unit/kafka/test_data_produce.py",
    "tests/unit/kafka/test_data_fetch.py",
    "tests/unit/server/test_partition.py",
    "tests/unit/server/test_partition_replication.py",
    "tests/unit/server/test_fast_http_pipelining.py",
    "tests/unit/server/test_http1_core.py",
    "tests/unit/server/test_params_auth_metadata.py",
    "tests/unit/storage/test_log.py",
    "tests/unit/storage/test_segment.py",
    "tests/unit/storage/test_indexes.py",
    "tests/unit/storage/test_producer_state.py",
    "tests/unit/records/test_batch.py",
    "tests/unit/records/test_validator.py",
]


@pytest.fixture(scope="module")
def build() -> dict:
    for _ in range(2):  # a second pass for a source edited while it was compiling
        doc = build_native.build(native.build_dir(), jobs=os.cpu_count() or 1)
        if not doc["failed"]:
            break
    assert doc["failed"] == [], doc["failed"]
    return doc


def _env() -> dict[str, str]:
    return {native.ENV_FLAG: "1", native.ENV_DIR: str(native.build_dir())}


def test_broker_runs_compiled_and_serves_kafka_and_http(build, tmp_path):
    launcher = BrokerLauncher(tmp_path)
    try:
        broker = launcher(kafka=True, topics={"k": (1, {}), "h": (1, {})}, env=_env())
        line = next(
            (x for x in broker.output().splitlines() if x.startswith("native:")), broker.output()
        )
        assert line.startswith(f"native: {len(build['modules'])} compiled modules from "), line
        assert "from source" not in line, line

        # Kafka: a librdkafka producer (acks=all, gzip) and consumer
        values = [b"native-%d" % i * 5 for i in range(50)]
        producer = Producer(
            confluent_config(broker.bootstrap, acks="all", **{"compression.type": "gzip"})
        )
        errors: list = []
        for v in values:
            producer.produce("k", v, key=v[:9], on_delivery=lambda e, _m: errors.append(e))
        assert producer.flush(TIMEOUT_S) == 0 and errors == [None] * len(values)

        # HTTP: a binary produce, then both read over the other protocol
        status, answer = produce_binary(broker, "h", 0, batch([b"h1", b"h2", b"h3"]))
        assert status == 200, answer
        status, _, body = fetch_binary(broker, "k", 0, 0)
        assert status == 200
        assert [r.value for b in decode_batches(body) for r in b.records] == values

        consumer = Consumer(
            confluent_config(
                broker.bootstrap, **{"group.id": "native", "enable.auto.commit": False}
            )
        )
        try:
            consumer.assign([TopicPartition("h", 0, 0), TopicPartition("k", 0, 40)])
            got: dict[str, list[bytes]] = {"h": [], "k": []}
            deadline = time.monotonic() + TIMEOUT_S
            while sum(map(len, got.values())) < 13 and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None:
                    assert m.error() is None, m.error()
                    got[m.topic()].append(m.value())
        finally:
            consumer.close()
        assert got == {"h": [b"h1", b"h2", b"h3"], "k": values[40:]}
        assert broker.stop() == 0
    finally:
        launcher.close()


def test_unit_tests_pass_against_the_compiled_build(build):
    code = (
        "import json, sys, pytest\n"
        "from brokernodes import native\n"
        "rc = pytest.main(['-q', '-p', 'no:cacheprovider', *sys.argv[1:]])\n"
        "print('NATIVE ' + json.dumps({'rc': int(rc), 'loaded': native.loaded()}))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, *UNIT_TESTS],
        cwd=REPO,
        env={**os.environ, **_env()},
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [x for x in run.stdout.splitlines() if x.startswith("NATIVE ")]
    assert lines, run.stdout[-4000:] + run.stderr[-4000:]
    result = json.loads(lines[-1][len("NATIVE ") :])
    assert result["rc"] == 0, run.stdout[-6000:]
    # every built module the tests import ran compiled (none fell back to its source)
    assert set(result["loaded"]) == set(build["modules"]), sorted(
        set(build["modules"]) ^ set(result["loaded"])
    )
