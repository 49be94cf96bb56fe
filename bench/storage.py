"""Storage benchmarks: the partition log beside raw sequential writes of the same bytes.

``storage.append_mb_per_s``: append 1 GiB (128 MiB with --quick) of 16 KiB RecordBatch v2
batches of 100-byte records to one ``PartitionLog``, one batch per append call as a broker
receives them. Peer: ``os.write`` of the same 16 KiB buffers to one file, same fsync policy.
Two policies: the default (no fsync by policy; one fsync at the end, inside the timing, for
both) and fsync every 64 MiB (``flush.messages`` set to the records in 64 MiB).

``storage.recovery_s_per_gib``: after an unclean shutdown with the whole active segment past
the recovery point (nothing flushed), the time to open the log, which validates every batch
(CRC included) and rebuilds the indexes, scaled to one GiB. The segment is in the page cache,
as after a process crash; a power loss would add the disk's read time.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time

from bench.report import Metric
from brokernodes.records.batch import Record, encode_batch
from brokernodes.storage.config import LogConfig
from brokernodes.storage.log import PartitionLog

BATCH_BYTES = 16 * 1024
VALUE_BYTES = 100
FSYNC_EVERY = 64 * 1024 * 1024
MIB = 1024 * 1024


def make_batch() -> tuple[bytes, int]:
    """One batch of 100-byte keyed records as close to 16 KiB as fits; (bytes, record count)."""
    records = []
    now = int(time.time() * 1000)
    size = 61
    i = 0
    while True:
        record = Record(now, b"key-%06d" % i, os.urandom(VALUE_BYTES // 2).hex().encode())
        size += 1 + 1 + 1 + 2 + 1 + len(record.key) + 1 + VALUE_BYTES + 1 + 2
        if size > BATCH_BYTES:
            break
        records.append(record)
        i += 1
    return encode_batch(records), len(records)


def raw_write(path: str, batch: bytes, count: int, fsync_every: int | None) -> float:
    """Seconds to write ``count`` copies of ``batch`` with os.write, fsyncing as told."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        since_sync = 0
        start = time.perf_counter()
        for _ in range(count):
            os.write(fd, batch)
            since_sync += len(batch)
            if fsync_every and since_sync >= fsync_every:
                os.fsync(fd)
                since_sync = 0
        os.fsync(fd)
        return time.perf_counter() - start
    finally:
        os.close(fd)


def log_append(directory: str, batch: bytes, count: int, config: LogConfig) -> float:
    """Seconds to append ``count`` copies of ``batch`` to a fresh PartitionLog, then flush."""
    log = PartitionLog(directory, config)
    try:
        append = log.append
        start = time.perf_counter()
        for _ in range(count):
            append(batch, leader_epoch=0)
        log.flush()
        return time.perf_counter() - start
    finally:
        log.close()


def _median_pair(runs: int, peer, ours) -> tuple[float, float]:
    """Alternate peer and ours ``runs`` times; medians of both (noise hits both alike)."""
    peer_times, our_times = [], []
    for _ in range(runs):
        peer_times.append(peer())
        our_times.append(ours())
    return statistics.median(peer_times), statistics.median(our_times)


def run(quick: bool = False) -> list[Metric]:
    total = (128 if quick else 1024) * MIB
    runs = 1 if quick else 3
    batch, records_per_batch = make_batch()
    count = total // len(batch)
    mib = count * len(batch) / MIB
    base = tempfile.mkdtemp(prefix="sluice-bench-storage-", dir=os.environ.get("BENCH_TMP"))
    metrics = []
    try:
        raw_path = os.path.join(base, "raw.bin")
        log_dir = os.path.join(base, "bench-0")

        def fresh_log(config: LogConfig):
            def go() -> float:
                shutil.rmtree(log_dir, ignore_errors=True)
                return log_append(log_dir, batch, count, config)

            return go

        policies = [
            ("storage.append_mb_per_s", None, LogConfig(), "no fsync by policy, one at the end"),
            (
                "storage.append_fsync64_mb_per_s",
                FSYNC_EVERY,
                LogConfig(flush_messages=(FSYNC_EVERY // len(batch)) * records_per_batch),
                "fsync every 64 MiB (flush.messages = records in 64 MiB)",
            ),
        ]
        for name, every, config, policy in policies:
            peer_s, ours_s = _median_pair(
                runs,
                lambda every=every: raw_write(raw_path, batch, count, every),
                fresh_log(config),
            )
            metrics.append(
                Metric(
                    name=name,
                    value=round(mib / ours_s, 1),
                    unit="MiB/s",
                    better="higher",
                    workload=(
                        f"append {mib:.0f} MiB as {count} batches of {len(batch)} bytes "
                        f"({records_per_batch} x 100-byte records), one batch per append, "
                        f"{policy}; median of {runs}"
                    ),
                    peer="os.write of the same buffers to one file, same fsync policy",
                    peer_value=round(mib / peer_s, 1),
                    target_ratio=0.8,
                )
            )
            print(f"  {name}: log {mib / ours_s:,.0f} MiB/s, raw {mib / peer_s:,.0f} MiB/s")
        os.unlink(raw_path)

        # Recovery: write without any flush, crash, reopen.
        shutil.rmtree(log_dir, ignore_errors=True)
        log = PartitionLog(log_dir, LogConfig())
        for _ in range(count):
            log.append(batch, leader_epoch=0)
        log.close_without_flush()
        start = time.perf_counter()
        recovered = PartitionLog(log_dir, LogConfig())
        elapsed = time.perf_counter() - start
        assert recovered.log_end_offset == count * records_per_batch, "recovery lost records"
        recovered.close()
        metrics.append(
            Metric(
                name="storage.recovery_s_per_gib",
                value=round(elapsed * 1024 / mib, 3),
                unit="s/GiB",
                better="lower",
                workload=(
                    f"open after an unclean shutdown with a {mib:.0f} MiB unflushed active "
                    f"segment (page-cached): every batch validated with its CRC, indexes rebuilt"
                ),
                target_value=2.0,
            )
        )
        print(f"  storage.recovery_s_per_gib: {elapsed * 1024 / mib:.3f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return metrics
