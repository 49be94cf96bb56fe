"""Console writes: a test message produced on the user's behalf, and the console policy."""

from __future__ import annotations

import base64

from django.db import transaction

from backend.audit.services import audit_record
from backend.console import brokers
from backend.console.credentials import console_token
from backend.console.models import ConsolePolicy
from backend.core.context import RequestContext
from backend.core.exceptions import ApplicationError
from backend.topics.models import Topic
from brokernodes.client.partitioner import partition_for_key


def produce_test_message(
    *,
    ctx: RequestContext,
    topic: Topic,
    key: str | None,
    value: str | None,
    value_type: str,
    headers: list[dict],
    partition: int | None,
) -> dict:
    """One record through the partition leader's JSON produce. Without a partition, a keyed
    record goes where Kafka's default partitioner would send it (murmur2), a keyless one to
    partition 0 (the console sends one record at a time; stickiness buys nothing here)."""
    if partition is None:
        partition = partition_for_key(key.encode("utf-8"), topic.partitions) if key else 0
    if not 0 <= partition < topic.partitions:
        raise ApplicationError(
            f"{topic.name!r} has partitions 0 to {topic.partitions - 1}",
            {"partition": ["no such partition"]},
        )
    record: dict = {"partition_id": partition}
    if key is not None:
        record["key"] = {"type": "STRING", "data": key}
    if value is not None:
        record["value"] = {"type": value_type, "data": value}
    if headers:
        record["headers"] = [
            {"name": h["name"], "value": base64.b64encode(h["value"].encode()).decode()}
            for h in headers
        ]
    token = console_token(ctx.organisation)
    answer = brokers.produce(brokers.leader_url(topic, partition), token, topic.name, record)
    audit_record(
        ctx=ctx,
        action="console.produce",
        object_type="topic",
        object_id=topic.name,
        after={"partition": answer.get("partition_id"), "offset": answer.get("offset")},
    )
    return {
        "topic": topic.name,
        "partition": answer.get("partition_id"),
        "offset": answer.get("offset"),
        "timestamp": answer.get("timestamp"),
    }


def policy_get(*, organisation) -> ConsolePolicy:
    return ConsolePolicy.objects.filter(organisation=organisation).first() or ConsolePolicy(
        organisation=organisation
    )


@transaction.atomic
def policy_update(*, ctx: RequestContext, allow_export: bool) -> ConsolePolicy:
    policy, _ = ConsolePolicy.objects.get_or_create(organisation=ctx.organisation)
    before = {"allow_export": policy.allow_export}
    policy.allow_export = allow_export
    policy.save()
    audit_record(
        ctx=ctx,
        action="console_policy.update",
        object_type="console_policy",
        object_id=str(ctx.organisation.id),
        before=before,
        after={"allow_export": allow_export},
    )
    return policy
