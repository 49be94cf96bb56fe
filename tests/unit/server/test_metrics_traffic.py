"""The byte and record counters (plain tallies turned into counters at scrape time) read as
prometheus ``Counter``s labelled by tenant and topic would: ``*_total`` and ``*_created``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from brokernodes.server.metadata.cluster import current_tenant
from brokernodes.server.metrics import BrokerMetrics


def samples(text: bytes) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }


def test_traffic_reads_as_labelled_counters():
    metrics = BrokerMetrics()
    token = current_tenant.set("org-1")
    try:
        metrics.record_in("orders", 1000, 10)
        metrics.record_in("orders", 500, 5)
        metrics.record_out("orders", 300)
        metrics.record_out("orders", 200, 2)
    finally:
        current_tenant.reset(token)
    metrics.record_in("orders", 7, 1)  # no tenant: a static-file key

    ours = samples(metrics.render())
    labels = (("tenant", "org-1"), ("topic", "orders"))
    assert ours[("sluice_bytes_in_total", labels)] == 1500
    assert ours[("sluice_records_in_total", labels)] == 15
    assert ours[("sluice_bytes_out_total", labels)] == 500
    assert ours[("sluice_records_out_total", labels)] == 2
    assert ours[("sluice_bytes_in_total", (("tenant", ""), ("topic", "orders")))] == 7

    # the same counts through prometheus Counters: the same sample names and labels
    registry = CollectorRegistry()
    names = ("sluice_bytes_in", "sluice_records_in", "sluice_bytes_out", "sluice_records_out")
    counters = {n: Counter(n, n, ["tenant", "topic"], registry=registry) for n in names}
    for tenant, n_in, r_in, n_out, r_out in (("org-1", 1500, 15, 500, 2), ("", 7, 1, None, None)):
        counters["sluice_bytes_in"].labels(tenant, "orders").inc(n_in)
        counters["sluice_records_in"].labels(tenant, "orders").inc(r_in)
        if n_out is not None:
            counters["sluice_bytes_out"].labels(tenant, "orders").inc(n_out)
            counters["sluice_records_out"].labels(tenant, "orders").inc(r_out)
    theirs = samples(generate_latest(registry))
    traffic = {k: v for k, v in ours.items() if k[0].startswith(names)}
    assert traffic.keys() == theirs.keys()
    assert {k: v for k, v in traffic.items() if not k[0].endswith("_created")} == {
        k: v for k, v in theirs.items() if not k[0].endswith("_created")
    }
