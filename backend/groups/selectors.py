"""Reads: the organisation's groups and one group's members, offsets and lag (from the
brokers), and its applied resets (from the database)."""

from __future__ import annotations

from backend.groups import broker_client
from backend.groups.models import OffsetReset


def group_list(*, organisation) -> list[dict]:
    rows, _missing = broker_client.list_groups(organisation.id)
    return [
        {
            "group_id": g["group_id"],
            "type": g.get("type", "consumer"),  # brokers before classic groups had no type
            **{k: g[k] for k in ("state", "members", "total_lag", "health")},
        }
        for g in rows
    ]


def group_detail(*, organisation, group_id: str) -> dict:
    d = broker_client.group_request(organisation.id, group_id, "GET")
    return {
        "group_id": d["group_id"],
        "type": d.get("type", "consumer"),
        "state": d["state"],
        "coordinator": d["coordinator"],
        "members": [
            {
                "member_id": m["member_id"],
                "client_id": m.get("client_id"),
                "client_host": m.get("client_host"),
                "instance_id": m.get("instance_id"),
                "assignments": m["assignments"],
            }
            for m in d["members"]
        ],
        "offsets": [
            {
                k: r[k]
                for k in (
                    "topic",
                    "partition",
                    "committed_offset",
                    "log_end_offset",
                    "lag",
                    "time_lag_ms",
                )
            }
            for r in d["offsets"]
        ],
    }


def reset_get(*, organisation, group_id: str, reset_id) -> OffsetReset | None:
    return OffsetReset.objects.filter(
        organisation=organisation, group_id=group_id, id=reset_id
    ).first()
