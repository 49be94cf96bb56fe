"""Why ``--url`` / ``SLUICE_URL`` did not answer as a broker: a short look at what is there.

A broker answers ``GET /sluice/v1/metadata`` with JSON; the control plane answers it with the
web console's HTML page (the console owns every path it does not know), which the SDK reports
as a bare JSON parse error. After such a failure the CLI asks the URL two questions (is
``/sluice/v1/metadata`` JSON with brokers? does ``/api/v1/`` answer like the control plane?)
and says what it found, so the person learns which variable to fix and how.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from brokernodes.client.http import normalize_url

BROKER_EXAMPLE = "http://127.0.0.1:9092"
PROBE_TIMEOUT_S = 3.0


def _get(url: str) -> tuple[int, str, bytes] | None:
    """(status, content type, first bytes of the body), or None when nothing answers."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read(4096)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read(4096)
    except (OSError, ValueError):
        return None


def _is_json(body: bytes) -> object | None:
    try:
        return json.loads(body)
    except ValueError:
        return None


def classify(metadata: tuple[int, str, bytes] | None, api: tuple[int, str, bytes] | None) -> str:
    """``broker``, ``control-plane``, ``other`` or ``unreachable`` from the two answers."""
    if metadata is None:
        return "unreachable"
    doc = _is_json(metadata[2]) if metadata[0] == 200 else None
    if isinstance(doc, dict) and "brokers" in doc and "topics" in doc:
        return "broker"
    if api is not None and "json" in api[1] and api[0] in (200, 401, 403):
        return "control-plane"
    return "other"


def diagnose(url_list: str) -> str | None:
    """A sentence saying what the first of the ``--url`` URLs is, when it is not a broker."""
    first = normalize_url(url_list.split(",")[0]) if url_list.strip() else ""
    if not first:
        return None
    kind = classify(_get(first + "/sluice/v1/metadata"), _get(first + "/api/v1/topics"))
    if kind == "control-plane":
        return (
            f"{first} looks like the control plane (it serves the web console and /api/v1/), "
            f"not a broker; SLUICE_URL / --url should be a broker URL such as {BROKER_EXAMPLE}, "
            f"and SLUICE_CONTROL_PLANE_URL / --control-plane the control plane's ({first})"
        )
    if kind == "other":
        return (
            f"{first} answers HTTP but is not a Sluice broker (no metadata at "
            f"/sluice/v1/metadata); SLUICE_URL / --url should be a broker URL such as "
            f"{BROKER_EXAMPLE}"
        )
    return None
