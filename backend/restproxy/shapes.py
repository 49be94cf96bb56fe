"""Confluent's v3 resource shapes, from the plain data the selectors return (pure).

Each function takes ``Links`` and plain values (a topic's fields, a partition's state, a
group's description as ``backend.groups.selectors`` gives it) and returns one resource as
Confluent's REST Proxy documents it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlparse

from backend.restproxy.links import Links


def cluster(links: Links, controller: int | None) -> dict:
    c = links.cluster_id
    return {
        "kind": "KafkaCluster",
        "metadata": {"self": links.url(), "resource_name": links.crn()},
        "cluster_id": c,
        "controller": links.related("brokers", controller) if controller is not None else None,
        "acls": links.related("acls"),
        "brokers": links.related("brokers"),
        "broker_configs": links.related("broker-configs"),
        "consumer_groups": links.related("consumer-groups"),
        "topics": links.related("topics"),
        "partition_reassignments": links.related("topics", "-", "partitions", "-", "reassignment"),
    }


def host_port(kafka_listener: str, url: str) -> tuple[str | None, int | None]:
    """A broker's Kafka listener (``host:port``), or its HTTP address when it has none."""
    if kafka_listener:
        host, _, port = kafka_listener.rpartition(":")
        return host.strip("[]") or None, int(port) if port.isdigit() else None
    parsed = urlparse(url)
    return parsed.hostname, parsed.port


def broker(links: Links, broker_id: int, host: str | None, port: int | None) -> dict:
    return {
        "kind": "KafkaBroker",
        "metadata": links.metadata(("brokers", broker_id), (("broker", broker_id),)),
        "cluster_id": links.cluster_id,
        "broker_id": broker_id,
        "host": host,
        "port": port,
        "rack": None,
    }


def topic(links: Links, name: str, partitions: int, replication_factor: int) -> dict:
    return {
        "kind": "KafkaTopic",
        "metadata": links.metadata(("topics", name), (("topic", name),)),
        "cluster_id": links.cluster_id,
        "topic_name": name,
        "is_internal": False,
        "replication_factor": replication_factor,
        "partitions_count": partitions,
        "partitions": links.related("topics", name, "partitions"),
        "configs": links.related("topics", name, "configs"),
        "partition_reassignments": links.related("topics", name, "partitions", "-", "reassignment"),
        "authorized_operations": [],
    }


def topic_config(
    links: Links, topic_name: str, name: str, value: str, default: str | None, overridden: bool
) -> dict:
    """One config of a topic: an override (``DYNAMIC_TOPIC_CONFIG``) or Kafka's default
    (``DEFAULT_CONFIG``); synonyms list both, the one in force first, as Kafka does."""
    synonyms = []
    if overridden:
        synonyms.append({"name": name, "value": value, "source": "DYNAMIC_TOPIC_CONFIG"})
    if default is not None:
        synonyms.append({"name": name, "value": default, "source": "DEFAULT_CONFIG"})
    return {
        "kind": "KafkaTopicConfig",
        "metadata": links.metadata(
            ("topics", topic_name, "configs", name), (("topic", topic_name), ("config", name))
        ),
        "cluster_id": links.cluster_id,
        "topic_name": topic_name,
        "name": name,
        "value": value,
        "is_default": not overridden,
        "is_read_only": False,
        "is_sensitive": False,
        "source": "DYNAMIC_TOPIC_CONFIG" if overridden else "DEFAULT_CONFIG",
        "synonyms": synonyms,
    }


def topic_configs(
    links: Links, topic_name: str, overrides: Mapping[str, str], defaults: Mapping[str, str]
) -> list[dict]:
    """Every config of a topic, by name."""
    names = sorted(set(defaults) | set(overrides))
    return [
        topic_config(
            links,
            topic_name,
            n,
            overrides.get(n, defaults.get(n, "")),
            defaults.get(n),
            n in overrides,
        )
        for n in names
    ]


def _partition_parts(topic_name: str, partition: int) -> tuple:
    return ("topics", topic_name, "partitions", partition)


def partition(links: Links, topic_name: str, state: Mapping[str, Any]) -> dict:
    """A partition from ``backend.cluster.partitions.state_of``: the leader is a link to its
    replica (null while the partition has none)."""
    p = state["partition"]
    parts = _partition_parts(topic_name, p)
    leader = state["leader"]
    return {
        "kind": "KafkaPartition",
        "metadata": links.metadata(parts, (("topic", topic_name), ("partition", p))),
        "cluster_id": links.cluster_id,
        "topic_name": topic_name,
        "partition_id": p,
        "leader": links.related(*parts, "replicas", leader) if leader >= 0 else None,
        "replicas": links.related(*parts, "replicas"),
        "reassignment": links.related(*parts, "reassignment"),
    }


def replicas(links: Links, topic_name: str, state: Mapping[str, Any]) -> list[dict]:
    """The replicas of a partition, each with whether it leads and is in sync."""
    p = state["partition"]
    parts = _partition_parts(topic_name, p)
    isr = set(state["isr"])
    return [
        {
            "kind": "KafkaReplica",
            "metadata": links.metadata(
                (*parts, "replicas", b),
                (("topic", topic_name), ("partition", p), ("replica", b)),
            ),
            "cluster_id": links.cluster_id,
            "topic_name": topic_name,
            "partition_id": p,
            "broker_id": b,
            "is_leader": b == state["leader"],
            "is_in_sync": b in isr,
            "broker": links.related("brokers", b),
        }
        for b in state["replicas"]
    ]


# Kafka's group states as Confluent names them (Sluice's are the same words)
GROUP_STATES = frozenset(
    {
        "UNKNOWN",
        "PREPARING_REBALANCE",
        "COMPLETING_REBALANCE",
        "STABLE",
        "DEAD",
        "EMPTY",
        "ASSIGNING",
        "RECONCILING",
    }
)


def _group_parts(group_id: str, *rest: object) -> tuple:
    return ("consumer-groups", group_id, *rest)


def consumer_group(
    links: Links, group_id: str, state: str, group_type: str, coordinator: int | None
) -> dict:
    state = state.upper() if state.upper() in GROUP_STATES else "UNKNOWN"
    return {
        "kind": "KafkaConsumerGroup",
        "metadata": links.metadata(_group_parts(group_id), (("consumer-group", group_id),)),
        "cluster_id": links.cluster_id,
        "consumer_group_id": group_id,
        "is_simple": False,
        "partition_assignor": "",
        "state": state,
        "type": "CONSUMER" if group_type == "consumer" else "CLASSIC",
        "coordinator": links.related("brokers", coordinator) if coordinator is not None else None,
        "consumers": links.related(*_group_parts(group_id, "consumers")),
        "lag_summary": links.related(*_group_parts(group_id, "lag-summary")),
    }


def consumer(links: Links, group_id: str, member: Mapping[str, Any]) -> dict:
    m = member["member_id"]
    return {
        "kind": "KafkaConsumer",
        "metadata": links.metadata(
            _group_parts(group_id, "consumers", m), (("consumer-group", group_id), ("consumer", m))
        ),
        "cluster_id": links.cluster_id,
        "consumer_group_id": group_id,
        "consumer_id": m,
        "instance_id": member.get("instance_id"),
        "client_id": member.get("client_id") or "",
        "assignments": links.related(*_group_parts(group_id, "consumers", m, "assignments")),
    }


def consumer_assignments(links: Links, group_id: str, member: Mapping[str, Any]) -> list[dict]:
    m = member["member_id"]
    out = []
    for a in member.get("assignments") or ():
        t, p = a["topic"], a["partition"]
        parts = _group_parts(group_id, "consumers", m, "assignments", t, "partitions", p)
        out.append(
            {
                "kind": "KafkaConsumerAssignment",
                "metadata": links.metadata(
                    parts,
                    (
                        ("consumer-group", group_id),
                        ("consumer", m),
                        ("assignment", t),
                        ("partition", p),
                    ),
                ),
                "cluster_id": links.cluster_id,
                "consumer_group_id": group_id,
                "consumer_id": m,
                "topic_name": t,
                "partition_id": p,
                "partition": links.related("topics", t, "partitions", p),
            }
        )
    return out


def owners(members: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], Mapping[str, Any]]:
    """(topic, partition) -> the member it is assigned to."""
    return {(a["topic"], a["partition"]): m for m in members for a in (m.get("assignments") or ())}


def consumer_lag(
    links: Links, group_id: str, row: Mapping[str, Any], owner: Mapping[str, Any] | None
) -> dict:
    """One partition's lag (of a partition with a committed offset; an end offset the
    coordinator could not learn counts as 0)."""
    t, p = row["topic"], row["partition"]
    current = row.get("committed_offset")
    end = row.get("log_end_offset")
    lag = row.get("lag")
    return {
        "kind": "KafkaConsumerLag",
        "metadata": links.metadata(
            _group_parts(group_id, "lags", t, "partitions", p),
            (("consumer-group", group_id), ("lag", t), ("partition", p)),
        ),
        "cluster_id": links.cluster_id,
        "consumer_group_id": group_id,
        "topic_name": t,
        "partition_id": p,
        "current_offset": current if current is not None else 0,
        "log_end_offset": end if end is not None else 0,
        "lag": lag if lag is not None else 0,
        "consumer_id": owner["member_id"] if owner else "",
        "instance_id": owner.get("instance_id") if owner else None,
        "client_id": (owner.get("client_id") or "") if owner else "",
    }


def lag_summary(links: Links, group_id: str, lags: list[dict]) -> dict:
    """The group's total lag and the partition with the largest (the first of equals)."""
    top = max(lags, key=lambda r: r["lag"], default=None)
    summary = {
        "kind": "KafkaConsumerGroupLagSummary",
        "metadata": {
            "self": links.url(*_group_parts(group_id, "lag-summary")),
            "resource_name": links.crn(("consumer-group", group_id)) + "/lag-summary",
        },
        "cluster_id": links.cluster_id,
        "consumer_group_id": group_id,
        "max_lag_consumer_id": top["consumer_id"] if top else "",
        "max_lag_instance_id": top["instance_id"] if top else None,
        "max_lag_client_id": top["client_id"] if top else "",
        "max_lag_topic_name": top["topic_name"] if top else "",
        "max_lag_partition_id": top["partition_id"] if top else 0,
        "max_lag": top["lag"] if top else 0,
        "total_lag": sum(r["lag"] for r in lags),
        "max_lag_consumer": None,
        "max_lag_partition": None,
    }
    if top:
        if top["consumer_id"]:
            summary["max_lag_consumer"] = links.related(
                *_group_parts(group_id, "consumers", top["consumer_id"])
            )
        summary["max_lag_partition"] = links.related(
            "topics", top["topic_name"], "partitions", top["partition_id"]
        )
    return summary


ACL_FIELDS = (
    "resource_type",
    "resource_name",
    "pattern_type",
    "principal",
    "host",
    "operation",
    "permission",
)


def acl(links: Links, binding: Mapping[str, str]) -> dict:
    """An ACL binding; its ``self`` is the search that finds exactly it."""
    fields = {f: binding[f] for f in ACL_FIELDS}
    return {
        "kind": "KafkaAcl",
        "metadata": {"self": links.url("acls", query=fields)},
        "cluster_id": links.cluster_id,
        **fields,
    }
