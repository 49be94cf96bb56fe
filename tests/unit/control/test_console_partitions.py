"""The console's partition flags are the controller's (``cluster.partitions``): offline means
no leader, under-replicated ignores replicas still being added, so the overview and the
operators' views agree."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from backend.cluster import partitions
from backend.cluster.models import Broker, PartitionAssignment
from backend.tenancy import roles

from .conftest import session_client


def test_console_flags_follow_the_controllers_definitions(world):
    lapsed = timezone.now() - timedelta(hours=1)
    Broker.objects.create(broker_id=1, url="http://127.0.0.1:1", last_heartbeat_at=lapsed)
    rows = PartitionAssignment.objects.filter(topic=world.a.topic).order_by("partition")
    shapes = {
        0: {"leader": -1, "replicas": [1], "isr": []},  # no leader: offline
        1: {"leader": 1, "replicas": [1, 2], "isr": [1], "adding_replicas": [2]},  # adding
        2: {"leader": 1, "replicas": [1, 2], "isr": [1], "adding_replicas": []},  # 2 fell out
    }
    for a in rows:
        for field, value in shapes[a.partition].items():
            setattr(a, field, value)
        a.save()
    client = session_client(world.a.users[roles.READ_ONLY], world.a.org)
    doc = client.get(f"/api/v1/console/partitions?topic={world.a.topic.name}").json()
    [topic] = doc["topics"]
    got = {p["partition"]: (p["offline"], p["under_replicated"]) for p in topic["partitions"]}
    # a leader whose heartbeat lapsed is online until the controller fences it and moves
    # leadership (as the controller counts it); a replica being added is not missing
    assert got == {0: (True, False), 1: (False, False), 2: (False, True)}
    for a in PartitionAssignment.objects.filter(topic=world.a.topic):
        assert got[a.partition] == (partitions.offline(a), partitions.under_replicated(a))
