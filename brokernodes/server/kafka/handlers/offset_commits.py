"""Which partitions of an OffsetCommit or TxnOffsetCommit may be committed: the checks the
two requests share, before the group coordinator sees the offsets."""

from __future__ import annotations

from brokernodes.errors import SluiceError, UnauthenticatedError
from brokernodes.groups import OffsetAndMetadata, TopicPartition
from brokernodes.server.coordinator.group_coordinator import now_ms
from brokernodes.server.kafka.context import KafkaContext
from brokernodes.server.protocol.kafka import errors as kerr

OFFSET_METADATA_TOO_LARGE = 12
MAX_OFFSET_METADATA = 4096  # offset.metadata.max.bytes


def offsets_to_commit(
    ctx: KafkaContext,
    tenant: str | None,
    topics: list[dict],
    answers: dict[tuple[str, int], int],
) -> dict[TopicPartition, OffsetAndMetadata]:
    """The valid partitions of an OffsetCommit or TxnOffsetCommit's ``topics``; each invalid
    one gets its error in ``answers``: TOPIC_AUTHORIZATION_FAILED (READ on the topic),
    UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE, INVALID_COMMIT_OFFSET_SIZE."""
    root = ctx.broker.metadata.global_image()
    view = root if tenant is None else root.for_tenant(tenant)
    allowed: dict[str, bool] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    ts = now_ms()
    for t in topics:
        name = t["name"] or ""
        if name not in allowed:
            try:
                ctx.authorize("READ", "topic", name)
                allowed[name] = True
            except UnauthenticatedError:
                raise
            except SluiceError:
                allowed[name] = False
        topic = view.topics.get(name)
        for p in t["partitions"]:
            key = (name, p["partition_index"])
            metadata = p["committed_metadata"] or ""
            if not allowed[name]:
                answers[key] = kerr.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or not 0 <= key[1] < len(topic.partitions):
                answers[key] = kerr.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata.encode()) > MAX_OFFSET_METADATA:
                answers[key] = OFFSET_METADATA_TOO_LARGE
            elif p["committed_offset"] < 0:
                answers[key] = kerr.INVALID_COMMIT_OFFSET_SIZE
            else:
                epoch = p["committed_leader_epoch"]
                offsets[TopicPartition(*key)] = OffsetAndMetadata(
                    p["committed_offset"], epoch if epoch >= 0 else None, metadata, ts
                )
    return offsets
