"""Live byte counters for one organisation, read from the brokers' Prometheus ``/metrics``.

The brokers count record-batch bytes appended (``sluice_bytes_in``) and served by fetch
(``sluice_bytes_out``) per ``tenant`` (the organisation id the request's key belongs to) and
topic (the tenant's own name for it). This module keeps the caller's tenant's series only and
answers raw counters per broker and topic; the page turns two readings into bytes per second
(``frontend/src/lib/rates.ts``). Counters rather than rates keep the control plane stateless:
any process answers, many tabs poll at their own pace, and a broker that restarts (its
counters start again from 0) or misses a reading is handled per series by the reader.

The brokers count leader appends and clients' fetches only (not replication), so bytes are
not multiplied by the replication factor; the console's own reads for this organisation
count (they are its traffic).

The overview polls every few seconds, so the brokers are read at once (one thread each, up
to ``MAX_READERS``) under one short deadline (``METRICS_TIMEOUT_S``): a slow or stalled
broker costs the answer at most that long and is named in ``errors``; the others' counters
are answered as usual.
"""

from __future__ import annotations

import functools

from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from backend.cluster.selectors import live_broker_urls
from backend.console import brokers
from brokernodes import blocking_client

FAMILIES = {"sluice_bytes_in": "bytes_in", "sluice_bytes_out": "bytes_out"}
METRICS_TIMEOUT_S = 2.0
MAX_READERS = 8


def tenant_byte_counters(text: str, tenant: str) -> dict[str, dict[str, int]]:
    """``{topic: {"bytes_in": n, "bytes_out": n}}`` for ``tenant``'s series in a Prometheus
    text exposition; every other tenant's series (and the unlabelled ones) are dropped."""
    out: dict[str, dict[str, int]] = {}
    for family in text_string_to_metric_families(text):
        field = FAMILIES.get(family.name)
        if field is None:
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total") or sample.labels.get("tenant") != tenant:
                continue
            topic = sample.labels.get("topic", "")
            row = out.setdefault(topic, {"bytes_in": 0, "bytes_out": 0})
            row[field] += int(sample.value)
    return out


def read_metrics(urls: dict[int, str], timeout_s: float) -> tuple[dict[int, str], list[str]]:
    """Every broker's /metrics text, read concurrently within ``timeout_s`` overall:
    ``({broker_id: text}, [error per broker not read])``."""
    texts, failures = blocking_client.ask_every(
        urls,
        functools.partial(brokers.metrics_text, timeout_s=timeout_s),
        deadline_s=timeout_s,
        max_askers=MAX_READERS,
    )
    errors = [
        f"broker {broker_id}: {getattr(e, 'message', None) or e}"
        for broker_id, e in sorted(failures.items())
    ]
    return dict(sorted(texts.items())), errors


def byte_counters(*, organisation) -> dict:
    """This organisation's byte counters on every live broker, one row per broker and topic,
    with the brokers that could not be read in time named in ``errors``."""
    tenant = str(organisation.id)
    texts, errors = read_metrics(live_broker_urls(), METRICS_TIMEOUT_S)
    rows: list[dict] = []
    read: list[int] = []
    for broker_id, text in sorted(texts.items()):
        try:
            counters = tenant_byte_counters(text, tenant)
        except ValueError as e:
            errors.append(f"broker {broker_id}: unreadable metrics ({e})")
            continue
        read.append(broker_id)
        for topic, c in sorted(counters.items()):
            rows.append({"broker_id": broker_id, "topic": topic, **c})
    return {"ts": timezone.now(), "brokers": read, "counters": rows, "errors": errors}
