from __future__ import annotations

from django.db.models import QuerySet, Sum

from backend.core.exceptions import NotFound
from backend.topics.models import Topic


def topic_list(*, organisation, prefix: str | None = None) -> QuerySet[Topic]:
    qs = Topic.objects.filter(organisation=organisation)
    if prefix:
        qs = qs.filter(name__startswith=prefix)
    return qs


def topic_get(*, organisation, name: str) -> Topic:
    topic = Topic.objects.filter(organisation=organisation, name=name).first()
    if topic is None:
        raise NotFound("no such topic in this organisation")
    return topic


def topic_usage(*, organisation) -> tuple[int, int]:
    """(number of topics, total partitions) of an organisation."""
    agg = Topic.objects.filter(organisation=organisation).aggregate(n=Sum("partitions"))
    return Topic.objects.filter(organisation=organisation).count(), agg["n"] or 0


def topic_partition_states(topic: Topic) -> list[dict]:
    """Each partition's leader, replicas, ISR and health flags (docs/controller.md)."""
    from backend.cluster.partitions import state_of

    return [state_of(a) for a in topic.assignments.order_by("partition")]
