"""Cluster metadata as the broker sees it: brokers, topics, partitions, leaders, API keys.

``parse_metadata`` turns the static metadata document (docs/data-plane-api.md) into an
immutable ``ClusterMetadata``. The broker reads it only through ``MetadataSource.current()``,
so the control plane's metadata log (``metadata.client``) replaces the static file without
touching handlers.

Tenants (control-plane metadata only): the global image keys topics by ``topic_id``; each
tenant has a *view* (``tenants[organisation]``), a ``ClusterMetadata`` whose topics are that
tenant's only, keyed by their tenant-relative names, with the tenant's ACL ``authorizer``.
``auth.authorize`` sets ``current_tenant`` for the request's task after authenticating the
API key, and ``MetadataSource.current()`` then answers that tenant's view, so every handler
resolves names within the caller's tenant without knowing tenants exist. Static metadata has
no tenants: keys carry none and the image is used as it is.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from brokernodes.errors import UnknownTopicOrPartitionError
from brokernodes.replication.leader import AlterPartitionRequest, AlterPartitionResponse
from brokernodes.storage.config import LogConfig

LEGAL_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
MIN_ISR = "min.insync.replicas"
# topic configs for replication, not for the log (LogConfig refuses names it does not hold)
REPLICATION_CONFIGS = frozenset({MIN_ISR, "unclean.leader.election.enable"})


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    id: int
    url: str
    epoch: int = -1  # the broker epoch of its current registration (control plane)
    fenced: bool = False  # missed heartbeats or shutting down: not eligible for the ISR
    kafka: str | None = None  # "host:port" of its Kafka listener (None: it has none)


@dataclass(frozen=True, slots=True)
class ApiKey:
    key_id: str
    secret_sha256: str  # lowercase hex
    principal: str
    tenant: str | None = None  # the organisation (control-plane keys); None: static file
    role: str = ""  # the service account's role (read-only, member, admin)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition's assignment: leader, leader epoch, replicas and in-sync replicas
    (plus the partition epoch every ISR change bumps, and KIP-966's eligible leaders)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    storage_key: str = ""  # the log directory's stem: topic_id (control plane) or the name
    partition_epoch: int = 0
    elr: tuple[int, ...] = ()

    @property
    def log_key(self) -> str:
        """Names this partition's log here: ``<log_key>-<partition>`` is its directory."""
        return self.storage_key or self.topic


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: str
    partitions: tuple[PartitionInfo, ...]
    configs: Mapping[str, str]
    log_config: LogConfig


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """One immutable metadata image; ``version`` grows with every change."""

    cluster_id: str
    broker_id: int
    brokers: Mapping[int, BrokerInfo]
    topics: Mapping[str, TopicInfo]
    api_keys: Mapping[str, ApiKey]
    version: int = 0
    tenants: Mapping[str, ClusterMetadata] = field(default_factory=dict)  # views, by tenant
    tenant: str | None = None  # set on a tenant's view
    authorizer: Any = None  # a view's ACL ``Authorizer`` (brokernodes.security.acl)
    root: ClusterMetadata | None = None  # a view's global image
    quotas: Any = None  # the tenant's quota records (enforced by server.throttle)

    def for_tenant(self, tenant: str) -> ClusterMetadata:
        """The tenant's view (an empty one when the tenant has nothing here yet)."""
        root = self.root or self
        view = root.tenants.get(tenant)
        if view is not None:
            return view
        return ClusterMetadata(
            cluster_id=root.cluster_id,
            broker_id=root.broker_id,
            brokers=root.brokers,
            topics=MappingProxyType({}),
            api_keys=root.api_keys,
            version=root.version,
            tenant=tenant,
            root=root,
        )

    def topic(self, name: str) -> TopicInfo:
        try:
            return self.topics[name]
        except KeyError:
            raise UnknownTopicOrPartitionError(
                f"topic {name!r} does not exist in cluster {self.cluster_id!r}"
            ) from None

    def partition(self, topic: str, partition: int) -> PartitionInfo:
        info = self.topic(topic)
        if not 0 <= partition < len(info.partitions):
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has partitions 0..{len(info.partitions) - 1}; "
                f"there is no partition {partition}"
            )
        return info.partitions[partition]

    def broker_url(self, broker_id: int) -> str | None:
        b = self.brokers.get(broker_id)
        return b.url if b else None

    def min_insync_replicas(self, topic: str) -> int:
        """The topic's ``min.insync.replicas`` (1 when unset or unreadable)."""
        info = self.topics.get(topic)
        try:
            return max(1, int(info.configs.get(MIN_ISR, "1"))) if info else 1
        except ValueError:
            return 1

    def led_partitions(self) -> list[PartitionInfo]:
        """Every partition this broker leads."""
        return [p for t in self.topics.values() for p in t.partitions if p.leader == self.broker_id]

    def hosted_partitions(self) -> list[PartitionInfo]:
        """Every partition with a replica on this broker (leader or follower)."""
        return [
            p
            for t in self.topics.values()
            for p in t.partitions
            if p.leader == self.broker_id or self.broker_id in p.replicas
        ]


class MetadataError(ValueError):
    """A metadata document that does not describe a usable cluster."""


def _need(doc: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in doc:
        raise MetadataError(f"{where}: missing {key!r}")
    value = doc[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise MetadataError(f"{where}: {key!r} has the wrong type ({type(value).__name__})")
    return value


def _int_list(value: Any, n: int, where: str) -> list[int]:
    if not isinstance(value, list) or len(value) != n or not all(isinstance(x, int) for x in value):
        raise MetadataError(f"{where}: expected a list of {n} integers")
    return value


def _parse_topic(t: Mapping[str, Any], broker_id: int) -> TopicInfo:
    name = _need(t, "name", str, "topic")
    where = f"topic {name!r}"
    if not LEGAL_TOPIC.match(name) or name in (".", ".."):
        raise MetadataError(f"{where}: names use letters, digits, '.', '_' and '-' only")
    n = _need(t, "partitions", int, where)
    if n < 1:
        raise MetadataError(f"{where}: needs at least one partition")
    leaders = _int_list(t.get("leaders", [broker_id] * n), n, f"{where} leaders")
    epochs = _int_list(t.get("leader_epochs", [0] * n), n, f"{where} leader_epochs")
    replicas_doc = t.get("replicas") or [[leader] for leader in leaders]
    if not isinstance(replicas_doc, list) or len(replicas_doc) != n:
        raise MetadataError(f"{where}: replicas must list {n} replica lists")
    isr_doc = t.get("isr") or replicas_doc
    partition_epochs = _int_list(t.get("partition_epochs", [0] * n), n, f"{where} partition_epochs")
    configs = t.get("configs") or {}
    if not isinstance(configs, dict):
        raise MetadataError(f"{where}: configs must be an object")
    configs = {str(k): str(v) for k, v in configs.items()}
    try:
        log_config = LogConfig.from_properties(
            {k: v for k, v in configs.items() if k not in REPLICATION_CONFIGS}
        )
    except (ValueError, TypeError) as e:
        raise MetadataError(f"{where}: bad configs: {e}") from e
    partitions = tuple(
        PartitionInfo(
            topic=name,
            partition=i,
            leader=leaders[i],
            leader_epoch=epochs[i],
            replicas=tuple(_int_list(replicas_doc[i], len(replicas_doc[i]), f"{where} replicas")),
            isr=tuple(_int_list(isr_doc[i], len(isr_doc[i]), f"{where} isr")),
            partition_epoch=partition_epochs[i],
        )
        for i in range(n)
    )
    return TopicInfo(
        name=name,
        topic_id=str(t.get("topic_id") or ""),
        partitions=partitions,
        configs=MappingProxyType(configs),
        log_config=log_config,
    )


def parse_metadata(doc: Mapping[str, Any], *, version: int = 0) -> ClusterMetadata:
    """Validate a metadata document and build the immutable image; raises ``MetadataError``."""
    if not isinstance(doc, Mapping):
        raise MetadataError("metadata must be a JSON object")
    cluster_id = _need(doc, "cluster_id", str, "metadata")
    broker_id = _need(doc, "broker_id", int, "metadata")
    brokers = {}
    for b in _need(doc, "brokers", list, "metadata"):
        bid = _need(b, "id", int, "broker")
        kafka = b.get("kafka")
        if kafka is not None and not isinstance(kafka, str):
            raise MetadataError(f"broker {bid}: 'kafka' must be a 'host:port' string")
        brokers[bid] = BrokerInfo(
            bid, _need(b, "url", str, f"broker {bid}").rstrip("/"), kafka=kafka or None
        )
    topics = {}
    for t in doc.get("topics", []):
        info = _parse_topic(t, broker_id)
        if info.name in topics:
            raise MetadataError(f"topic {info.name!r} is listed twice")
        topics[info.name] = info
    keys = {}
    for k in doc.get("api_keys", []):
        key_id = _need(k, "key_id", str, "api key")
        digest = _need(k, "secret_sha256", str, f"api key {key_id!r}").lower()
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise MetadataError(f"api key {key_id!r}: secret_sha256 must be 64 hex digits")
        keys[key_id] = ApiKey(key_id, digest, str(k.get("principal") or f"User:{key_id}"))
    return ClusterMetadata(
        cluster_id=cluster_id,
        broker_id=broker_id,
        brokers=MappingProxyType(brokers),
        topics=MappingProxyType(topics),
        api_keys=MappingProxyType(keys),
        version=version,
    )


# The organisation of the API key that authenticated the running request (see the module
# docstring); aiohttp runs every request in its own task, so this never leaks across requests.
current_tenant: ContextVar[str | None] = ContextVar("sluice_current_tenant", default=None)


class MetadataSource:
    """Where the broker gets metadata; ``current()`` is cheap and always returns an image
    (the calling request's tenant view when a tenant key authenticated it)."""

    def current(self) -> ClusterMetadata:
        raise NotImplementedError("a MetadataSource subclass provides current()")

    def global_image(self) -> ClusterMetadata:
        """The whole cluster's image, whatever request is running."""
        return self.current()

    def add_listener(self, listener: Callable[[ClusterMetadata], Any]) -> None:
        """Call ``listener(image)`` (sync, or async and awaited) after every new image; e.g.
        to close WebSockets whose API key was revoked. A static source never changes."""

    async def start(self) -> None:
        """Have an image ready (a static source already has)."""

    @property
    def broker_epoch(self) -> int:
        """This broker's current registration epoch (-1: no control plane)."""
        return -1

    async def alter_partition(
        self, info: PartitionInfo, request: AlterPartitionRequest
    ) -> AlterPartitionResponse:
        """Send an ISR change (``replication.AlterPartitionRequest``) to whoever decides
        ISRs; returns a ``replication.AlterPartitionResponse``.

        Without a controller (static metadata) the leader is the authority for the
        partitions it leads (their leaders are fixed), so the change is committed at once
        with a new partition epoch; see docs/replication.md."""
        return AlterPartitionResponse(
            leader_epoch=request.leader_epoch,
            partition_epoch=request.partition_epoch + 1,
            isr=request.isr,
        )

    async def controlled_shutdown(self, timeout_s: float | None = None) -> None:
        """Hand leadership away before stopping (nothing to do without a controller)."""

    async def close(self) -> None:
        """Stop background work."""


class StaticMetadataSource(MetadataSource):
    """The static metadata file (tests and benchmarks); read once at start."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        try:
            with open(self.path, "rb") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise MetadataError(f"cannot read metadata file {self.path}: {e}") from e
        self._image = parse_metadata(doc)

    def current(self) -> ClusterMetadata:
        return self._image
