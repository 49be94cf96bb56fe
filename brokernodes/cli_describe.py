"""``sluice topics describe TOPIC``: each partition's leader, replicas and ISR from the
metadata, and its offsets (log start, high watermark) asked of the partition's leader.

Why ask the leaders: a broker's metadata answer carries the offsets of the replicas *it*
hosts, so a follower's high watermark may lag and a broker without a replica has none. The
leader's ListOffsets (``earliest``, ``latest``) is what a consumer would get. The leaders are
asked concurrently; a partition whose leader does not answer shows its error instead of
failing the whole description.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from brokernodes.client.http import HttpTransport
from brokernodes.client.metadata import METADATA_PATH, ClusterMetadata, bootstrap_urls
from brokernodes.errors import BrokerConnectionError, ClientTimeoutError, SluiceError


async def _metadata_doc(transport: HttpTransport, urls: str) -> tuple[dict, str]:
    error: Exception | None = None
    for url in bootstrap_urls(urls):
        try:
            return await transport.get_json(url + METADATA_PATH), url
        except (BrokerConnectionError, ClientTimeoutError) as exc:
            error = exc
    assert error is not None
    raise error


async def describe_topic(urls: str, api_key: str | None, topic: str) -> dict[str, Any]:
    """The topic's id, overridden configs and, per partition, leader, replicas, ISR and the
    leader's log start offset and high watermark."""
    transport = HttpTransport(api_key, request_timeout_s=15.0)
    try:
        doc, url = await _metadata_doc(transport, urls)
        metadata = ClusterMetadata.parse(doc, url)
        info = metadata.topic(topic)  # UNKNOWN_TOPIC_OR_PARTITION names the known topics
        raw = next(t for t in doc.get("topics") or () if t.get("name") == topic)
        raw_parts = {int(p["partition"]): p for p in raw.get("partitions") or ()}

        async def offsets(partition: int, leader_url: str | None) -> dict[str, Any]:
            if leader_url is None:
                return {"error": "LEADER_NOT_AVAILABLE: the partition has no leader"}
            path = f"{leader_url}/sluice/v1/topics/{quote(topic, safe='')}/partitions/{partition}"
            try:
                start, end = await asyncio.gather(
                    transport.get_json(path + "/offsets", {"timestamp": "earliest"}),
                    transport.get_json(path + "/offsets", {"timestamp": "latest"}),
                )
            except SluiceError as exc:
                code = getattr(exc, "error_code", type(exc).__name__)
                return {"error": f"{code}: {getattr(exc, 'message', exc)}"}
            return {"log_start_offset": start["offset"], "high_watermark": end["offset"]}

        leaders = [
            metadata.brokers.get(p.leader) if p.leader is not None else None
            for p in info.partitions
        ]
        found = await asyncio.gather(
            *(offsets(p.partition, u) for p, u in zip(info.partitions, leaders, strict=True))
        )
        partitions = []
        for p, leader_url, got in zip(info.partitions, leaders, found, strict=True):
            raw_p = raw_parts.get(p.partition, {})
            isr = list(raw_p.get("isr") or ())
            row: dict[str, Any] = {
                "partition": p.partition,
                "leader": p.leader,
                "leader_url": leader_url,
                "leader_epoch": raw_p.get("leader_epoch"),
                "replicas": list(p.replicas),
                "isr": isr,
                "under_replicated": bool(p.replicas) and len(isr) < len(p.replicas),
                "log_start_offset": None,
                "high_watermark": None,
                **got,
            }
            partitions.append(row)
        return {
            "name": info.name,
            "topic_id": info.topic_id,
            "cluster_id": metadata.cluster_id,
            "configs": dict(sorted((raw.get("configs") or {}).items())),
            "partitions": partitions,
        }
    finally:
        await transport.close()


def render(described: dict[str, Any]) -> None:
    """A table per partition; below it the partitions whose leader did not answer, what the
    ``*`` marks, and the overridden configs (or that there are none)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"topic {described['name']} ({described['topic_id']})")
    for column in ("partition", "leader", "replicas", "isr", "log start", "high watermark"):
        table.add_column(column, justify="left" if column == "leader" else "right")
    notes = []
    for p in described["partitions"]:
        leader = "none"
        if p["leader"] is not None:
            where = (p["leader_url"] or "").removeprefix("http://").removeprefix("https://")
            leader = f"{p['leader']} {where}".strip()
        isr = ",".join(map(str, p["isr"])) + (" *" if p["under_replicated"] else "")
        if "error" in p:
            notes.append(f"partition {p['partition']}: {p['error']}")
        table.add_row(
            str(p["partition"]),
            leader,
            ",".join(map(str, p["replicas"])),
            isr,
            "?" if p["log_start_offset"] is None else str(p["log_start_offset"]),
            "?" if p["high_watermark"] is None else str(p["high_watermark"]),
        )
    console = Console()
    console.print(table)
    for note in notes:
        console.print(note, markup=False, highlight=False)
    if any(p["under_replicated"] for p in described["partitions"]):
        console.print("* under-replicated: the ISR is smaller than the replicas")
    configs = described["configs"]
    if configs:
        console.print(
            "configs overridden: " + ", ".join(f"{k}={v}" for k, v in configs.items()),
            markup=False,
            highlight=False,
        )
    else:
        console.print("configs overridden: none (every config is the default)")
