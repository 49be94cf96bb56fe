"""Asking the brokers about a tenant's consumer groups, over their internal routes
(``/internal/v1/tenants/{organisation}/groups/...``, ``Authorization: Cluster <secret>``),
through ``brokernodes.blocking_client``.

A group's coordinator is the leader of its ``__consumer_offsets`` partition; any live broker
answers NOT_COORDINATOR with the coordinator's URL, which is followed once. A broker that does
not answer, or answers 421 or 5xx, passes the request on to the next live broker. Listing asks
every live broker at once for the groups it coordinates and merges the answers. Each request
waits at most ``FAILOVER_TIMEOUT_S``, so a silent broker costs little before the next is asked.
"""

from __future__ import annotations

from urllib.parse import quote

from django.conf import settings

from backend.core.exceptions import ApplicationError, Conflict, NotFound
from brokernodes import blocking_client, errors

TIMEOUT_S = blocking_client.FAILOVER_TIMEOUT_S


class BrokersUnavailable(ApplicationError):
    status_code = 503
    error_code = "BROKERS_UNAVAILABLE"


class GroupNotEmpty(Conflict):
    error_code = "GROUP_NOT_EMPTY"


def _live_urls() -> list[str]:
    from backend.cluster.selectors import live_broker_urls

    return list(live_broker_urls().values())


def _call(method: str, url: str, body: dict | None = None) -> dict:
    """One request with the cluster secret: the JSON answer, or a ``brokernodes.errors``
    client error."""
    return blocking_client.request(
        method,
        url,
        authorization=blocking_client.cluster(settings.SLUICE_CLUSTER_SECRET),
        json=body,
        timeout_s=TIMEOUT_S,
    ).json()


def _passes_on(error: Exception) -> bool:
    """Whether the next live broker may answer instead: this one was silent, is not the
    coordinator, or failed."""
    if blocking_client.unreachable(error):
        return True
    status = getattr(error, "status", None) or 0
    return status in (421, 503) or status >= 500


def _raise_for(error: errors.SluiceError) -> None:
    """The control plane's error for the brokers' last answer."""
    code = error.error_code
    status = getattr(error, "status", None) or 503
    if code in ("GROUP_ID_NOT_FOUND", "UNKNOWN_TOPIC_OR_PARTITION"):
        raise NotFound(error.message)
    if code == "NON_EMPTY_GROUP":
        raise GroupNotEmpty(error.message)
    if isinstance(error, errors.BrokerError) and 400 <= status < 500:
        err = ApplicationError(error.message)
        err.error_code = code or "INVALID_REQUEST"
        raise err
    raise BrokersUnavailable(f"the group's coordinator could not answer: {error.message}")


def group_request(organisation_id, group_id: str, method: str, suffix: str = "", body=None):
    """One request to the group's coordinator; returns the JSON answer (or raises)."""
    path = (
        f"/internal/v1/tenants/{quote(str(organisation_id), safe='')}/groups/"
        f"{quote(group_id, safe='')}{suffix}"
    )
    urls = _live_urls()
    if not urls:
        raise BrokersUnavailable("no broker is live; consumer groups live on the brokers")

    def ask(url: str) -> dict:
        try:
            return _call(method, url + path, body)
        except errors.BrokerError as e:
            coordinator = e.details.get("coordinator_url") if e.status == 421 else None
            if not coordinator:
                raise
        return _call(method, str(coordinator).rstrip("/") + path, body)

    try:
        return blocking_client.first_answer(urls, ask, move_on=_passes_on)
    except errors.SluiceError as e:
        _raise_for(e)
    return {}


def list_groups(organisation_id) -> tuple[list[dict], list[str]]:
    """Every broker's groups of the organisation, and the brokers that did not answer."""
    urls = _live_urls()
    if not urls:
        raise BrokersUnavailable("no broker is live; consumer groups live on the brokers")
    path = f"/internal/v1/tenants/{quote(str(organisation_id), safe='')}/groups"
    targets = {url: url for url in urls}
    answers, failures = blocking_client.ask_every(
        targets, lambda url: _call("GET", url + path), deadline_s=TIMEOUT_S
    )
    if len(failures) == len(targets):
        raise BrokersUnavailable("no broker answered; retry shortly")
    rows: dict[str, dict] = {}
    for doc in answers.values():
        for g in doc.get("groups", []):
            rows[g["group_id"]] = g
    missing = list(failures)
    return sorted(rows.values(), key=lambda g: g["group_id"]), missing
