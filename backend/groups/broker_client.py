"""Asking the brokers about a tenant's consumer groups, over their internal routes
(``/internal/v1/tenants/{organisation}/groups/...``, ``Authorization: Cluster <secret>``).

A group's coordinator is the leader of its ``__consumer_offsets`` partition; any live broker
answers NOT_COORDINATOR with the coordinator's URL, which is followed once. Listing asks every
live broker for the groups it coordinates and merges the answers.
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from urllib.parse import quote

from django.conf import settings

from backend.core.exceptions import ApplicationError, Conflict, NotFound

TIMEOUT_S = 5.0


class BrokersUnavailable(ApplicationError):
    status_code = 503
    error_code = "BROKERS_UNAVAILABLE"


class GroupNotEmpty(Conflict):
    error_code = "GROUP_NOT_EMPTY"


def _live_urls() -> list[str]:
    from backend.cluster.selectors import live_broker_urls

    return list(live_broker_urls().values())


def _call(method: str, url: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Cluster {settings.SLUICE_CLUSTER_SECRET}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw else {})
    except urllib.error.HTTPError as e:
        with contextlib.closing(e):
            raw = e.read()
        try:
            return e.code, (json.loads(raw) if raw else {})
        except ValueError:
            return e.code, {"error_code": "UNKNOWN_SERVER_ERROR", "message": raw[:200].decode()}


def _raise_for(status: int, doc: dict) -> None:
    code = doc.get("error_code", "")
    message = doc.get("message") or code or f"broker answered {status}"
    if code in ("GROUP_ID_NOT_FOUND", "UNKNOWN_TOPIC_OR_PARTITION"):
        raise NotFound(message)
    if code == "NON_EMPTY_GROUP":
        raise GroupNotEmpty(message)
    if 400 <= status < 500:
        err = ApplicationError(message)
        err.error_code = code or "INVALID_REQUEST"
        raise err
    raise BrokersUnavailable(f"the group's coordinator could not answer: {message}")


def group_request(organisation_id, group_id: str, method: str, suffix: str = "", body=None):
    """One request to the group's coordinator; returns the JSON answer (or raises)."""
    path = (
        f"/internal/v1/tenants/{quote(str(organisation_id), safe='')}/groups/"
        f"{quote(group_id, safe='')}{suffix}"
    )
    urls = _live_urls()
    if not urls:
        raise BrokersUnavailable("no broker is live; consumer groups live on the brokers")
    last: tuple[int, dict] | None = None
    for url in urls:
        try:
            status, doc = _call(method, url + path, body)
            if status == 421 and doc.get("coordinator_url"):
                status, doc = _call(method, str(doc["coordinator_url"]).rstrip("/") + path, body)
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            last = (503, {"message": str(e)})
            continue
        if status < 300:
            return doc
        if status in (421, 503) or status >= 500:
            last = (status, doc)
            continue
        _raise_for(status, doc)
    _raise_for(*(last or (503, {})))
    return {}


def list_groups(organisation_id) -> tuple[list[dict], list[str]]:
    """Every broker's groups of the organisation, and the brokers that did not answer."""
    urls = _live_urls()
    if not urls:
        raise BrokersUnavailable("no broker is live; consumer groups live on the brokers")
    rows: dict[str, dict] = {}
    missing = []
    path = f"/internal/v1/tenants/{quote(str(organisation_id), safe='')}/groups"
    for url in urls:
        try:
            status, doc = _call("GET", url + path)
        except (urllib.error.URLError, OSError, TimeoutError):
            missing.append(url)
            continue
        if status != 200:
            missing.append(url)
            continue
        for g in doc.get("groups", []):
            rows[g["group_id"]] = g
    if len(missing) == len(urls):
        raise BrokersUnavailable("no broker answered; retry shortly")
    return sorted(rows.values(), key=lambda g: g["group_id"]), missing
