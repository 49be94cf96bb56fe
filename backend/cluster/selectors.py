from __future__ import annotations

from backend.cluster.models import Broker


def broker_get(*, broker_id: int) -> Broker | None:
    return Broker.objects.filter(broker_id=broker_id).first()


def broker_list() -> list[Broker]:
    return list(Broker.objects.all())
