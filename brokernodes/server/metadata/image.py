"""The control plane's metadata log, applied (pure: no I/O).

Records are ``{"version", "kind", "key", "value"}`` state records: ``value`` is the entity's
whole new state, ``None`` deletes it (docs/metadata-log.md). ``apply_records`` folds a delta
(or a full image, ``reset``) into the state map ``{(kind, key): value}``; ``build_image`` turns
the state into the immutable ``ClusterMetadata`` the broker serves from: the global image
(topics by ``topic_id``) and one view per tenant (topics by tenant-relative name, plus the
tenant's ``Authorizer``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import fields
from types import MappingProxyType
from typing import Any

from brokernodes.security.acl import AclBinding, Authorizer, InvalidAclError
from brokernodes.server.metadata.cluster import (
    ApiKey,
    BrokerInfo,
    ClusterMetadata,
    PartitionInfo,
    TopicInfo,
)
from brokernodes.storage.config import LogConfig

logger = logging.getLogger("sluice.broker.metadata")

State = dict[tuple[str, str], dict]
LOG_CONFIG_NAMES = frozenset(f.name.replace("_", ".") for f in fields(LogConfig))

# What a service account's role allows on the data plane before ACLs (deny ACLs still win;
# allow ACLs add): docs/metadata-log.md "Authorization".
ROLE_GRANTS: Mapping[str, tuple[tuple[str, str, str], ...]] = {
    "read-only": (
        ("TOPIC", "*", "READ"),
        ("TOPIC", "*", "DESCRIBE_CONFIGS"),
        ("GROUP", "*", "READ"),
        ("CLUSTER", "kafka-cluster", "DESCRIBE"),
    ),
    "member": (
        ("TOPIC", "*", "ALL"),
        ("GROUP", "*", "ALL"),
        ("TRANSACTIONAL_ID", "*", "ALL"),
        ("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE"),
        ("CLUSTER", "kafka-cluster", "DESCRIBE"),
    ),
}
ROLE_GRANTS = {**ROLE_GRANTS, "admin": ROLE_GRANTS["member"]}


def apply_records(state: State, records: Iterable[Mapping[str, Any]], *, reset: bool) -> State:
    """A new state: ``state`` (or nothing, when ``reset``) with ``records`` applied in order."""
    out: State = {} if reset else dict(state)
    for r in records:
        key = (str(r["kind"]), str(r["key"]))
        value = r.get("value")
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def role_bindings(principal: str, role: str) -> list[AclBinding]:
    return [
        AclBinding(
            principal=principal,
            resource_type=rtype,
            resource_name=name,
            operation=op,
            permission="ALLOW",
        )
        for rtype, name, op in ROLE_GRANTS.get(role, ())
    ]


def _topic(doc: Mapping[str, Any]) -> tuple[TopicInfo, TopicInfo, str]:
    """(global info keyed by topic_id, the tenant's view of it, the tenant)."""
    topic_id = str(doc["topic_id"])
    name = str(doc["name"])
    configs = {str(k): str(v) for k, v in (doc.get("configs") or {}).items()}
    log_config = LogConfig.from_properties(
        {k: v for k, v in configs.items() if k in LOG_CONFIG_NAMES}
    )

    def parts(topic_name: str) -> tuple[PartitionInfo, ...]:
        return tuple(
            PartitionInfo(
                topic=topic_name,
                partition=int(p["partition"]),
                leader=int(p.get("leader", -1)),
                leader_epoch=int(p.get("leader_epoch", 0)),
                replicas=tuple(int(x) for x in p.get("replicas") or ()),
                isr=tuple(int(x) for x in p.get("isr") or ()),
                storage_key=topic_id,
                partition_epoch=int(p.get("partition_epoch", 0)),
                elr=tuple(int(x) for x in p.get("elr") or ()),
            )
            for p in sorted(doc.get("partitions") or (), key=lambda p: int(p["partition"]))
        )

    cfg = MappingProxyType(configs)
    glob = TopicInfo(topic_id, topic_id, parts(topic_id), cfg, log_config)
    view = TopicInfo(name, topic_id, parts(name), cfg, log_config)
    return glob, view, str(doc["organisation"])


def build_image(state: State, *, cluster_id: str, broker_id: int, version: int) -> ClusterMetadata:
    brokers: dict[int, BrokerInfo] = {}
    topics: dict[str, TopicInfo] = {}
    tenant_topics: dict[str, dict[str, TopicInfo]] = defaultdict(dict)
    keys: dict[str, ApiKey] = {}
    acls: dict[str, list[AclBinding]] = defaultdict(list)
    quotas: dict[str, list[dict]] = defaultdict(list)
    for (kind, key), value in sorted(state.items()):
        try:
            if kind == "broker":
                bid = int(value["id"])
                brokers[bid] = BrokerInfo(
                    bid,
                    str(value["url"]).rstrip("/"),
                    int(value.get("epoch", -1)),
                    bool(value.get("fenced", False)),
                    value.get("kafka") or None,
                )
            elif kind == "topic":
                glob, view, tenant = _topic(value)
                topics[glob.name] = glob
                tenant_topics[tenant][view.name] = view
            elif kind == "api_key":
                tenant = str(value["organisation"])
                k = ApiKey(
                    str(value["key_id"]),
                    str(value["secret_sha256"]).lower(),
                    str(value["principal"]),
                    tenant,
                    str(value.get("role") or ""),
                )
                keys[k.key_id] = k
                acls[tenant].extend(role_bindings(k.principal, k.role))
            elif kind == "acl":
                acls[str(value["organisation"])].append(AclBinding.from_dict(value))
            elif kind == "quota":
                quotas[str(value["organisation"])].append(dict(value))
        except (KeyError, TypeError, ValueError, InvalidAclError) as e:
            # the control plane validated it; a record this broker cannot read is skipped
            logger.error("skipping unreadable metadata record %s/%s: %s", kind, key, e)
    root = ClusterMetadata(
        cluster_id=cluster_id,
        broker_id=broker_id,
        brokers=MappingProxyType(brokers),
        topics=MappingProxyType(topics),
        api_keys=MappingProxyType(keys),
        version=version,
    )
    views = {}
    for tenant in set(tenant_topics) | set(acls) | set(quotas):
        views[tenant] = ClusterMetadata(
            cluster_id=cluster_id,
            broker_id=broker_id,
            brokers=root.brokers,
            topics=MappingProxyType(tenant_topics.get(tenant, {})),
            api_keys=root.api_keys,
            version=version,
            tenant=tenant,
            authorizer=Authorizer(acls.get(tenant, ())),
            root=root,
            quotas=tuple(quotas.get(tenant, ())),
        )
    object.__setattr__(root, "tenants", MappingProxyType(views))
    return root
