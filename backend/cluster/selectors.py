from __future__ import annotations

from django.db.models import QuerySet

from backend.cluster import partitions
from backend.cluster.models import Broker, PartitionAssignment
from brokernodes.replication.controller import offline_reason


def broker_get(*, broker_id: int) -> Broker | None:
    return Broker.objects.filter(broker_id=broker_id).first()


def broker_list() -> list[Broker]:
    return list(Broker.objects.all())


def live_broker_ids() -> list[int]:
    """Registered, unfenced brokers whose session has not expired."""
    return list(
        Broker.objects.filter(
            last_heartbeat_at__gte=partitions.session_horizon(), fenced=False
        ).values_list("broker_id", flat=True)
    )


def live_broker_urls() -> dict[int, str]:
    """``{broker_id: base URL}`` of the live brokers (recent heartbeats), by broker id."""
    live = set(live_broker_ids())
    return {
        b.broker_id: b.url.rstrip("/")
        for b in Broker.objects.order_by("broker_id")
        if b.broker_id in live
    }


def broker_states() -> list[dict]:
    horizon = partitions.session_horizon()
    return [
        {
            "broker_id": b.broker_id,
            "url": b.url,
            "epoch": b.epoch,
            "fenced": b.fenced,
            "shutting_down": b.shutting_down,
            "live": not b.fenced and b.last_heartbeat_at >= horizon,
            "last_heartbeat_at": b.last_heartbeat_at.isoformat(),
        }
        for b in Broker.objects.all()
    ]


def partition_state(a: PartitionAssignment) -> dict:
    return {
        "topic_id": str(a.topic.topic_id),
        "topic": a.topic.name,
        "partition_epoch": a.partition_epoch,
        **partitions.state_of(a),
    }


def _matches(a: PartitionAssignment, state: str) -> bool:
    if state == "offline":
        return partitions.offline(a)
    if state == "under_replicated":
        return partitions.under_replicated(a)
    return True


def assignments(*, organisation=None) -> QuerySet[PartitionAssignment]:
    qs = PartitionAssignment.objects.select_related("topic").order_by("topic__name", "partition")
    if organisation is not None:
        qs = qs.filter(topic__organisation=organisation)
    return qs


def partition_states(*, state: str = "all", organisation=None) -> list[dict]:
    """Partitions (all, or one organisation's) in ``state``: all, under_replicated or
    offline (docs/controller.md defines them). An offline one says why and what brings it
    back (``offline_reason``)."""
    rows = [a for a in assignments(organisation=organisation) if _matches(a, state)]
    out = [partition_state(a) for a in rows]
    offline = [(a, s) for a, s in zip(rows, out, strict=True) if partitions.offline(a)]
    if offline:
        view = partitions.broker_view()
        logs = partitions.replica_logs([a.pk for a, _ in offline], view)
        for a, s in offline:
            s["offline_reason"] = offline_reason(
                partitions.registration(a),
                view,
                logs.get(a.pk, {}),
                unclean_enabled=partitions.unclean_enabled(a.topic),
            )
    return out
