"""The console's calls to the brokers' data-plane API, over ``brokernodes.blocking_client``.

Calls go to the partition's leader (from the control plane's own assignment table) with the
organisation's console key. Errors come back as ``BrokerError`` carrying the broker's
``error_code`` and message, so the console shows the broker's words. Every call has a timeout
(``INTERACTIVE_TIMEOUT_S``: a person waits on the page).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from django.conf import settings

from backend.cluster.models import Broker, PartitionAssignment
from backend.cluster.selectors import live_broker_ids, live_broker_urls
from backend.core.exceptions import ApplicationError
from brokernodes import blocking_client, errors

TIMEOUT_S = blocking_client.INTERACTIVE_TIMEOUT_S
NEW_KEY_GRACE_S = 3.0  # a console key made just now reaches the brokers within milliseconds
NEW_KEY_GRACE = blocking_client.Retry(frozenset({"UNAUTHENTICATED"}), NEW_KEY_GRACE_S)


class BrokerError(ApplicationError):
    status_code = 502
    error_code = "BROKER_UNAVAILABLE"

    def __init__(self, message: str, *, error_code: str | None = None, status: int = 502):
        super().__init__(message)
        if error_code:
            self.error_code = error_code
        self.status_code = status if 400 <= status < 600 else 502


def _request(
    method: str,
    url: str,
    *,
    authorization: str,
    body: Any = None,
    timeout_s: float = TIMEOUT_S,
    retry: blocking_client.Retry | None = None,
):
    """The answer (JSON when the broker says so, bytes otherwise) or a ``BrokerError``."""
    try:
        resp = blocking_client.request(
            method, url, authorization=authorization, json=body, timeout_s=timeout_s, retry=retry
        )
    except errors.BrokerError as e:
        # 401 from a broker is about the console's key, not the person: say so
        status = 502 if e.status == 401 else (e.status or 502)
        raise BrokerError(e.message, error_code=e.error_code, status=status) from None
    except (errors.BrokerConnectionError, errors.ClientTimeoutError) as e:
        raise BrokerError(e.message) from None
    ctype = resp.headers.get("content-type", "")
    return resp.json() if "json" in ctype and resp.body else resp.body


def call(method: str, url: str, *, token: str, body: Any = None):
    """One call, retried briefly while a just-created console key is not on the broker yet."""
    return _request(
        method,
        url,
        authorization=blocking_client.bearer(token),
        body=body,
        retry=NEW_KEY_GRACE,
    )


def broker_urls() -> dict[int, str]:
    return {b.broker_id: b.url.rstrip("/") for b in Broker.objects.all()}


def leader_url(topic, partition: int) -> str:
    a = PartitionAssignment.objects.filter(topic=topic, partition=partition).first()
    if a is None:
        raise ApplicationError(
            f"topic {topic.name!r} has no partition {partition}", {"partition": ["no such"]}
        )
    url = broker_urls().get(a.leader) if a.leader >= 0 else None
    if url is None or a.leader not in live_broker_ids():
        raise BrokerError(
            f"partition {partition} of {topic.name!r} has no live leader right now",
            error_code="LEADER_NOT_AVAILABLE",
            status=503,
        )
    return url


def any_live_url() -> str:
    for url in live_broker_urls().values():
        return url
    raise BrokerError("no broker is live", error_code="BROKER_NOT_AVAILABLE", status=503)


def q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def fetch_records(url, token, topic: str, partition: int, offset: int, max_records: int) -> dict:
    query = urllib.parse.urlencode(
        {"offset": offset, "max_records": max_records, "format": "json", "max_wait_ms": 0}
    )
    return call(
        "GET",
        f"{url}/sluice/v1/topics/{q(topic)}/partitions/{partition}/records?{query}",
        token=token,
    )


def list_offset(url, token, topic: str, partition: int, spec: str) -> int:
    doc = call(
        "GET",
        f"{url}/sluice/v1/topics/{q(topic)}/partitions/{partition}/offsets?timestamp={spec}",
        token=token,
    )
    return int(doc["offset"])


def produce(url, token, topic: str, record: dict) -> dict:
    return call(
        "POST",
        f"{url}/v3/clusters/{q(settings.SLUICE_CLUSTER_ID)}/topics/{q(topic)}/records",
        token=token,
        body=record,
    )


def metadata(url, token) -> dict:
    return call("GET", f"{url}/sluice/v1/metadata", token=token)


def operator_call(url: str, *, timeout_s: float = TIMEOUT_S):
    """A GET with the operators' credential (the cluster secret)."""
    secret = settings.SLUICE_CLUSTER_SECRET
    return _request("GET", url, authorization=blocking_client.cluster(secret), timeout_s=timeout_s)


def metrics_text(url: str, *, timeout_s: float = TIMEOUT_S) -> str:
    """The broker's Prometheus text (operators' credential: the cluster secret)."""
    raw = operator_call(f"{url}/metrics", timeout_s=timeout_s)
    return raw.decode() if isinstance(raw, bytes) else str(raw)
