"""Lag metrics for the groups this broker coordinates: ``sluice_group_lag`` (offset lag),
``sluice_group_time_lag_ms`` per group and partition, and ``sluice_group_members``.

Lag needs other brokers' log ends, so a background task recomputes it every
``REFRESH_S`` seconds through the ``describe`` it is given (``GroupService.describe``) and
the collector serves the last values at scrape time. Group labels carry the tenant id
(``<tenant>/<group>``) with the control plane: ``/metrics`` is for operators there
(cluster secret).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from brokernodes.errors import SluiceError
from brokernodes.server.coordinator.offsets_topic import unqualify

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from brokernodes.server.coordinator.group_coordinator import GroupCoordinator

# (tenant, group id) -> the group's description (members, offsets with lag)
Describe = Callable[[str | None, str], Awaitable[dict]]

logger = logging.getLogger("sluice.broker.groups")

REFRESH_S = 2.0


class GroupLagCollector(Collector):
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, int, int | None, int | None]] = []
        self.members: dict[str, int] = {}

    def collect(self) -> Iterable[GaugeMetricFamily]:
        lag = GaugeMetricFamily(
            "sluice_group_lag",
            "Consumer group offset lag (high watermark - committed offset)",
            labels=["group", "topic", "partition"],
        )
        tlag = GaugeMetricFamily(
            "sluice_group_time_lag_ms",
            "Consumer group time lag: age of the next record to consume",
            labels=["group", "topic", "partition"],
        )
        members = GaugeMetricFamily(
            "sluice_group_members", "Members of the consumer group", labels=["group"]
        )
        for group, topic, partition, offset_lag, time_lag in self.rows:
            labels = [group, topic, str(partition)]
            if offset_lag is not None:
                lag.add_metric(labels, offset_lag)
            if time_lag is not None:
                tlag.add_metric(labels, time_lag)
        for group, n in self.members.items():
            members.add_metric([group], n)
        yield lag
        yield tlag
        yield members


async def refresh_loop(
    groups: GroupCoordinator, collector: GroupLagCollector, describe: Describe
) -> None:
    while True:
        await asyncio.sleep(REFRESH_S)
        rows = []
        members = {}
        for qualified in groups.local_groups(None, all_tenants=True):
            tenant, gid = unqualify(qualified)
            try:
                d = await describe(tenant, gid)
            except SluiceError:
                continue
            except Exception:
                logger.exception("lag of group %s failed", qualified)
                continue
            members[qualified] = len(d["members"])
            rows.extend(
                (qualified, r["topic"], r["partition"], r["lag"], r["time_lag_ms"])
                for r in d["offsets"]
            )
        collector.rows, collector.members = rows, members


def install(app, registry: CollectorRegistry, groups: GroupCoordinator, describe: Describe) -> None:
    """Register the collector and run the refresh task for the app's lifetime."""
    collector = GroupLagCollector()
    registry.register(collector)
    tasks: list[asyncio.Task] = []

    async def on_startup(_app) -> None:
        tasks.append(asyncio.create_task(refresh_loop(groups, collector, describe)))

    async def on_cleanup(_app) -> None:
        for t in tasks:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
