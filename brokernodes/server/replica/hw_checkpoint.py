"""The high watermark checkpoint of one partition (Kafka's replication-offset-checkpoint,
kept per partition directory here): ``<dir>/high-watermark-checkpoint``.

``PartitionLog`` does not persist the HW, so a restarted broker would otherwise start every
HW at the log start offset: consumers of a partition it leads would see nothing until the
followers' first fetches moved it again. Written every few seconds when it changed and on
a clean close; read when the log opens (clamped to the log's bounds, which also covers a
tail lost in a crash). Only committed offsets are ever written, so restoring one exposes
nothing uncommitted. Blocking file I/O: call from a worker thread.
"""

from __future__ import annotations

import logging
import os

from brokernodes.errors import KafkaStorageError
from brokernodes.storage.checkpoint import (
    CheckpointFile,
    TopicPartitionOffset,
    TopicPartitionOffsetFormatter,
)

logger = logging.getLogger("sluice.broker.partition")

FILENAME = "high-watermark-checkpoint"
VERSION = 0


def _file(directory: str) -> CheckpointFile:
    return CheckpointFile(
        os.path.join(directory, FILENAME), VERSION, TopicPartitionOffsetFormatter()
    )


def read_high_watermark(directory: str) -> int | None:
    """The checkpointed HW, or None (no file, or an unreadable one: start from scratch)."""
    try:
        entries = _file(directory).read()
    except KafkaStorageError as e:
        logger.warning("ignoring %s: %s", FILENAME, e)
        return None
    return entries[0].offset if entries else None


def write_high_watermark(directory: str, topic: str, partition: int, offset: int) -> None:
    _file(directory).write([TopicPartitionOffset(topic, partition, offset)])
