"""Cluster metadata as the SDK sees it: ``GET /sluice/v1/metadata``, parsed once.

Maps topic -> partitions -> leader broker id -> leader URL. Immutable; a refresh builds a
new ``ClusterMetadata``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from brokernodes.client.http import HttpTransport, normalize_url
from brokernodes.errors import BrokerConnectionError, ClientTimeoutError, UnknownTopicError

__all__ = [
    "METADATA_PATH",
    "ClusterMetadata",
    "PartitionInfo",
    "TopicInfo",
    "TopicPartition",
    "bootstrap_urls",
    "fetch_metadata",
]

METADATA_PATH = "/sluice/v1/metadata"


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int | None
    replicas: tuple[int, ...] = ()
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    high_watermark: int | None = None


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: str | None
    partitions: tuple[PartitionInfo, ...]

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str | None
    brokers: dict[int, str]  # id -> base URL
    topics: dict[str, TopicInfo]
    bootstrap_url: str
    _leaders: dict[tuple[str, int], str | None] = field(default_factory=dict, repr=False)

    @classmethod
    def parse(cls, doc: dict[str, Any], bootstrap_url: str) -> ClusterMetadata:
        brokers = {
            int(b["id"]): normalize_url(str(b["url"]))
            for b in doc.get("brokers") or ()
            if "id" in b
        }
        topics: dict[str, TopicInfo] = {}
        leaders: dict[tuple[str, int], str | None] = {}
        for t in doc.get("topics") or ():
            parts = []
            for p in sorted(t.get("partitions") or (), key=lambda p: p["partition"]):
                leader = p.get("leader")
                leader = int(leader) if leader is not None and int(leader) >= 0 else None
                parts.append(
                    PartitionInfo(
                        int(p["partition"]),
                        leader,
                        tuple(p.get("replicas") or ()),
                        p.get("log_start_offset"),
                        p.get("log_end_offset"),
                        p.get("high_watermark"),
                    )
                )
                leaders[(t["name"], int(p["partition"]))] = (
                    brokers.get(leader) if leader is not None else None
                )
            topics[t["name"]] = TopicInfo(t["name"], t.get("topic_id"), tuple(parts))
        return cls(doc.get("cluster_id"), brokers, topics, normalize_url(bootstrap_url), leaders)

    def topic(self, name: str) -> TopicInfo:
        try:
            return self.topics[name]
        except KeyError:
            known = ", ".join(sorted(self.topics)[:20]) or "none"
            raise UnknownTopicError(
                f"topic {name!r} does not exist in cluster {self.cluster_id!r} "
                f"(known topics: {known})"
            ) from None

    def num_partitions(self, topic: str) -> int | None:
        info = self.topics.get(topic)
        return info.num_partitions if info is not None else None

    def leader_url(self, topic: str, partition: int) -> str | None:
        """The leader's base URL; None when the partition has no known leader. A single
        broker cluster whose metadata lists no broker URLs falls back to the bootstrap URL."""
        key = (topic, partition)
        if key not in self._leaders:
            return None
        url = self._leaders[key]
        if url is None and not self.brokers:
            return self.bootstrap_url
        return url


def bootstrap_urls(urls: str | list[str] | tuple[str, ...]) -> list[str]:
    """``"a:1,b:2"`` or a list of URLs -> normalized base URLs."""
    if isinstance(urls, str):
        urls = urls.split(",")
    out = [normalize_url(u) for u in urls if u and u.strip()]
    if not out:
        raise ValueError("no broker URL given (e.g. http://127.0.0.1:9092)")
    return out


async def fetch_metadata(transport: HttpTransport, urls: str | list[str]) -> ClusterMetadata:
    """Metadata from the first bootstrap URL that answers; the last error if none does."""
    error: Exception | None = None
    for url in bootstrap_urls(urls):
        try:
            doc = await transport.get_json(url + METADATA_PATH)
        except (BrokerConnectionError, ClientTimeoutError) as exc:
            error = exc
            continue
        return ClusterMetadata.parse(doc, url)
    assert error is not None
    raise error
