"""Segment facts for the retention and lag reports, read on the driver (they are small: a
few rows per partition) from the brokers' segments endpoint, as a DataFrame."""

from __future__ import annotations

from spark.datasource.broker import BrokerClient, _path
from spark.datasource.validity import clamp_timestamp

SEGMENTS_SCHEMA = (
    "tenant string, topic string, partition int, base_offset long, end_offset long, "
    "size_bytes long, largest_timestamp_ms long, is_active boolean, log_start_offset long, "
    "log_end_offset long, high_watermark long, retention_ms long, retention_bytes long, "
    "cleanup_policy string"
)


def segment_rows(client: BrokerClient, topic: str, tenant: str = "", label: str | None = None):
    """One tuple per segment of every partition of ``topic`` (``label``: the topic name to
    report, when ``topic`` is how the credential names it, e.g. a topic id). A largest
    timestamp past what a report can hold (a record stamped at the int64 limit) is clamped
    to year 9999."""
    rows = []
    for meta in client.partitions(topic):
        url = client._leader_url(meta)
        doc = client.conn(url).get_json(_path(topic, meta.partition, "segments"))
        segs = doc["segments"]
        cfg = doc["configs"]
        for i, s in enumerate(segs):
            rows.append(
                (
                    tenant,
                    label or topic,
                    meta.partition,
                    int(s["base_offset"]),
                    int(s["end_offset"]),
                    int(s["size_bytes"]),
                    clamp_timestamp(int(s["largest_timestamp"])),
                    i == len(segs) - 1,
                    int(doc["log_start_offset"]),
                    int(doc["log_end_offset"]),
                    int(doc["high_watermark"]),
                    int(cfg["retention.ms"]),
                    int(cfg["retention.bytes"]),
                    str(cfg["cleanup.policy"]),
                )
            )
    return rows


def read_segments(spark, client: BrokerClient, topics):
    """``topics``: ``(topic as the credential names it, tenant, report name)`` triples."""
    rows = []
    for topic, tenant, label in topics:
        rows += segment_rows(client, topic, tenant, label)
    return spark.createDataFrame(rows, SEGMENTS_SCHEMA)
