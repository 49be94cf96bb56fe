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

from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for

from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from backend.cluster.selectors import live_broker_urls
from backend.console import brokers
from backend.core.exceptions import ApplicationError

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
    if not urls:
        return {}, []
    pool = ThreadPoolExecutor(max_workers=min(MAX_READERS, len(urls)))
    try:
        futures = {
            pool.submit(brokers.metrics_text, url, timeout_s=timeout_s): broker_id
            for broker_id, url in urls.items()
        }
        wait_for(futures, timeout=timeout_s)
    finally:
        # a stalled read is left to its socket timeout; this answer does not wait for it
        pool.shutdown(wait=False, cancel_futures=True)
    texts: dict[int, str] = {}
    errors: list[str] = []
    for future, broker_id in sorted(futures.items(), key=lambda kv: kv[1]):
        if not future.done():
            errors.append(f"broker {broker_id}: no answer within {timeout_s:g} s")
        elif isinstance(future.exception(), ApplicationError):
            errors.append(f"broker {broker_id}: {future.exception().message}")
        elif future.exception() is not None:
            errors.append(f"broker {broker_id}: {future.exception()}")
        else:
            texts[broker_id] = future.result()
    return texts, errors


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
