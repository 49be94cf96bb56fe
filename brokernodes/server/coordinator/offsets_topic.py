"""The ``__consumer_offsets`` topic as the broker sees it: where it is, which partition holds
a group, and reading/appending its records (the I/O shell around ``brokernodes.groups.records``).

- Static metadata names it ``__consumer_offsets`` in the topic list. With the control plane it
  is an internal topic owned by the cluster's internal organisation (``backend/cluster/
  internal_topics.py``): tenants cannot name topics starting with ``__``, so the one view
  holding a topic of that name is the internal one, and no tenant key ever sees it.
- A group lives in partition ``abs(java_hash(qualified group id)) % partitions`` (Kafka's
  ``Utils.abs(groupId.hashCode()) % numPartitions``); the qualified id is ``<tenant>/<group>``
  with the control plane, so two tenants' groups of the same name are different groups.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from brokernodes.records.batch import Record, decode_batches, encode_batch
from brokernodes.server.metadata.cluster import ClusterMetadata, TopicInfo
from brokernodes.server.replica.partition import Partition

OFFSETS_TOPIC = "__consumer_offsets"
READ_CHUNK = 4 * 1024 * 1024


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit wrap-around), as Kafka hashes
    group ids."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def qualify(tenant: str | None, group_id: str) -> str:
    """The coordinator's group key: tenant-scoped with the control plane."""
    return group_id if tenant is None else f"{tenant}/{group_id}"


def unqualify(qualified: str) -> tuple[str | None, str]:
    """(tenant, group id) of a qualified id; static metadata has no tenants."""
    tenant, sep, group = qualified.partition("/")
    return (tenant, group) if sep else (None, qualified)


def offsets_topic(image: ClusterMetadata) -> TopicInfo | None:
    """The ``__consumer_offsets`` topic of the global image, or None when it does not exist."""
    root = image.root or image
    topic = root.topics.get(OFFSETS_TOPIC)
    if topic is not None:
        return topic
    for view in root.tenants.values():
        topic = view.topics.get(OFFSETS_TOPIC)
        if topic is not None:
            return topic
    return None


def partition_for(qualified_group: str, partitions: int) -> int:
    return (java_string_hash(qualified_group) & 0x7FFFFFFF) % partitions


def read_records(partition: Partition) -> list[tuple[bytes, bytes | None]]:
    """Every (key, value) of a hosted ``__consumer_offsets`` partition in log order, up to its
    log end offset. Blocking: call in a worker thread."""
    log = partition.log
    out: list[tuple[bytes, bytes | None]] = []
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        data = log.read(offset, READ_CHUNK)
        raw = data.read_bytes()
        if not raw:
            break
        for batch in decode_batches(raw, verify_crc=False):
            h = batch.header
            if not h.is_control:
                out.extend((r.key, r.value) for r in batch.records if r.offset >= offset)
            offset = max(offset, h.next_offset)
    return [(k, v) for k, v in out if k is not None]


async def append_records(
    partition: Partition, records: Iterable[tuple[bytes, bytes | None]], *, timeout: float = 30
) -> None:
    """Append records as one batch and wait until the in-sync replicas have them (acks=all),
    so an answer the coordinator gives survives a failover."""
    now = int(time.time() * 1000)
    batch = [Record(now, k, v) for k, v in records]
    if not batch:
        return
    buf = bytearray(encode_batch(batch))
    await asyncio.wait_for(partition.append_as_leader(buf, acks=-1), timeout)
