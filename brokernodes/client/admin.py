"""Cluster inspection: ``AsyncAdmin`` and the blocking ``Admin``.

Reads metadata (topics, partitions, leaders, offsets) from the brokers and lists offsets.
Creating and deleting topics goes to the control plane's REST API (``client.control``, at
``control_plane_url`` or ``$SLUICE_CONTROL_PLANE_URL``), which places the partitions; the
brokers learn the topic from the metadata log within milliseconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from brokernodes.client._loop import LoopThread
from brokernodes.client.consumer import OffsetAndTimestamp
from brokernodes.client.control import ControlPlane
from brokernodes.client.http import HttpTransport
from brokernodes.client.metadata import (
    ClusterMetadata,
    TopicInfo,
    TopicPartition,
    bootstrap_urls,
    fetch_metadata,
)
from brokernodes.errors import BrokerError

__all__ = ["Admin", "AsyncAdmin"]


class AsyncAdmin:
    def __init__(
        self,
        url: str | list[str],
        api_key: str | None = None,
        *,
        request_timeout_ms: float = 30_000,
        transport: HttpTransport | None = None,
        control_plane_url: str | None = None,
    ) -> None:
        self._urls = bootstrap_urls(url)
        self.control_plane = ControlPlane(
            control_plane_url, api_key, timeout=request_timeout_ms / 1000
        )
        self._transport = transport or HttpTransport(
            api_key, request_timeout_s=request_timeout_ms / 1000
        )
        self._owns_transport = transport is None

    async def __aenter__(self) -> AsyncAdmin:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_transport:
            await self._transport.close()

    async def describe_cluster(self) -> ClusterMetadata:
        """Fresh metadata: cluster id, brokers, topics with partitions, leaders, offsets."""
        return await fetch_metadata(self._transport, self._urls)

    async def list_topics(self) -> list[TopicInfo]:
        metadata = await self.describe_cluster()
        return sorted(metadata.topics.values(), key=lambda t: t.name)

    async def describe_topic(self, name: str) -> TopicInfo:
        return (await self.describe_cluster()).topic(name)

    async def list_offsets(
        self, specs: Mapping[TopicPartition | tuple[str, int], str | int]
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """``{tp: "earliest" | "latest" | epoch_ms}`` -> the offset each names (ListOffsets)."""
        metadata = await self.describe_cluster()

        async def one(tp: TopicPartition, spec: str | int) -> OffsetAndTimestamp:
            url = metadata.leader_url(tp.topic, tp.partition)
            if url is None:
                metadata.topic(tp.topic)
                raise BrokerError(
                    "UNKNOWN_TOPIC_OR_PARTITION",
                    f"partition {tp.partition} of topic {tp.topic!r} does not exist or has no "
                    f"leader",
                )
            path = f"/sluice/v1/topics/{quote(tp.topic, safe='')}/partitions/{tp.partition}"
            doc = await self._transport.get_json(url + path + "/offsets", {"timestamp": str(spec)})
            return OffsetAndTimestamp(int(doc["offset"]), int(doc.get("timestamp", -1)))

        tps = [TopicPartition(*tp) for tp in specs]
        pairs = zip(tps, specs.values(), strict=True)
        found = await asyncio.gather(*(one(tp, spec) for tp, spec in pairs))
        return dict(zip(tps, found, strict=True))

    async def create_topic(
        self, name: str, partitions: int, replication_factor: int = 1, **configs: Any
    ) -> dict[str, Any]:
        """Create a topic through the control plane (configs by Kafka name, e.g.
        ``**{"retention.ms": "3600000"}``); its description as the control plane answers."""
        return await asyncio.to_thread(
            self.control_plane.create_topic, name, partitions, replication_factor, configs
        )

    async def delete_topic(self, name: str) -> None:
        await asyncio.to_thread(self.control_plane.delete_topic, name)


class Admin:
    """Blocking ``AsyncAdmin`` on a private event loop thread."""

    def __init__(self, url: str | list[str], api_key: str | None = None, **config: Any) -> None:
        self._thread = LoopThread("sluice-admin")
        self._admin = AsyncAdmin(url, api_key, **config)

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def describe_cluster(self) -> ClusterMetadata:
        return self._thread.run(self._admin.describe_cluster())

    def list_topics(self) -> list[TopicInfo]:
        return self._thread.run(self._admin.list_topics())

    def describe_topic(self, name: str) -> TopicInfo:
        return self._thread.run(self._admin.describe_topic(name))

    def list_offsets(self, specs: Mapping) -> dict[TopicPartition, OffsetAndTimestamp]:
        return self._thread.run(self._admin.list_offsets(specs))

    def create_topic(
        self, name: str, partitions: int, replication_factor: int = 1, **configs: Any
    ) -> dict[str, Any]:
        return self._thread.run(
            self._admin.create_topic(name, partitions, replication_factor, **configs)
        )

    def delete_topic(self, name: str) -> None:
        self._thread.run(self._admin.delete_topic(name))

    def close(self) -> None:
        try:
            self._thread.run(self._admin.close(), 10)
        finally:
            self._thread.stop()
