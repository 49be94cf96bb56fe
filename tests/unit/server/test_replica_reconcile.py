"""``ReplicaManager.reconcile``: following metadata images (open, update, delete), with logs
keyed by topic id, and tenant-relative names resolved through the request's tenant."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from brokernodes.errors import UnknownTopicOrPartitionError
from brokernodes.server.config import BrokerConfig
from brokernodes.server.metadata.cluster import MetadataSource, current_tenant
from brokernodes.server.metadata.image import apply_records, build_image
from brokernodes.server.replica.manager import ReplicaManager

from .test_metadata_log_client import topic


class Source(MetadataSource):
    def __init__(self, image):
        self.image = image

    def current(self):
        t = current_tenant.get()
        return self.image if t is None else self.image.for_tenant(t)

    def global_image(self):
        return self.image


def img(*records, version=1):
    state = apply_records(
        {}, [{"kind": k, "key": key, "value": v} for k, key, v in records], reset=True
    )
    return build_image(state, cluster_id="c", broker_id=1, version=version)


def test_reconcile_opens_updates_and_deletes(tmp_path):
    async def main():
        v1 = img(
            ("topic", "t-a", topic("t-a", "org-a", "orders", (1, 1))),
            ("topic", "t-b", topic("t-b", "org-b", "orders", (1,))),
            ("topic", "t-c", topic("t-c", "org-b", "elsewhere", (2,))),  # not hosted here
        )
        src = Source(v1)
        rm = ReplicaManager(
            BrokerConfig(metadata_path="", data_dir=str(tmp_path), port=0, fsync=False), src
        )
        await rm.start()
        try:
            assert sorted(rm.partitions) == [("t-a", 0), ("t-a", 1), ("t-b", 0)]
            assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
                "t-a-0",
                "t-a-1",
                "t-b-0",
            ]

            def resolve(tenant, name, p):
                current_tenant.set(tenant)
                return rm.get_partition(name, p)

            ctx = contextvars.copy_context
            assert ctx().run(resolve, "org-a", "orders", 1).log.directory.endswith("t-a-1")
            assert ctx().run(resolve, "org-b", "orders", 0).log.directory.endswith("t-b-0")
            with pytest.raises(UnknownTopicOrPartitionError):
                ctx().run(resolve, "org-b", "orders", 1)

            v2 = img(
                (
                    "topic",
                    "t-a",
                    topic("t-a", "org-a", "orders", (1, 1, 1), {"retention.ms": "5000"}),
                ),
                version=2,
            )
            src.image = v2
            await rm.reconcile(v2)
            assert sorted(rm.partitions) == [("t-a", 0), ("t-a", 1), ("t-a", 2)]
            assert rm.partitions[("t-a", 0)].log.config.retention_ms == 5000
            assert not (tmp_path / "t-b-0").exists()  # deleted topic: data removed
        finally:
            await rm.close()

    asyncio.run(asyncio.wait_for(main(), 20))
