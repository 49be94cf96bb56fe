"""What ``make up`` says when partitions it waits for have no leader: which partitions are
offline, why (leader -1, ISR and ELR, the replicas that are not live), and what brings them
back, from the control plane's internal routes (``/internal/v1/partitions?state=offline``
with the controller's ``offline_reason``, and ``/internal/v1/controller``).

``describe`` is pure (the two answers in, text out); ``fetch`` asks the control plane.
"""

from __future__ import annotations

import json
import urllib.request

MAX_LISTED = 6


def _ids(ids) -> str:
    return "[" + ", ".join(str(i) for i in ids) + "]"


def _missing(replicas: list[int], brokers: dict[int, dict]) -> list[str]:
    out = []
    for r in replicas:
        b = brokers.get(r)
        if b is None:
            out.append(f"broker {r} never registered")
        elif b.get("fenced"):
            out.append(f"broker {r} fenced (no heartbeat within its session)")
        elif not b.get("live"):
            out.append(f"broker {r} not live (heartbeats stopped)")
    return out


def describe(
    partitions: list[dict], controller: dict | None, logs_dir: str, topic: str | None = None
) -> str | None:
    """The report for the offline ``partitions`` (None when there are none): ``topic``'s
    first, grouped by what is missing and why, at most ``MAX_LISTED`` named per group."""
    offline = [p for p in partitions if p.get("offline", True)]
    if not offline:
        return None
    offline.sort(key=lambda p: (p["topic"] != topic, p["topic"], p["partition"]))
    ctl = (controller or {}).get("controller") or {}
    brokers = {b["broker_id"]: b for b in (controller or {}).get("brokers", [])}
    groups: dict[tuple[tuple[str, ...], str], list[dict]] = {}
    for p in offline:
        key = (tuple(_missing(p.get("replicas", []), brokers)), p.get("offline_reason") or "")
        groups.setdefault(key, []).append(p)
    lines = [f"{len(offline)} partition(s) offline (no leader):"]
    for (missing, why), members in groups.items():
        for p in members[:MAX_LISTED]:
            state = (
                f"leader {p.get('leader', -1)}, ISR {_ids(p.get('isr', []))}, "
                f"ELR {_ids(p.get('elr', []))}"
            )
            if p.get("last_known_elr"):
                state += f", last known ELR {_ids(p['last_known_elr'])}"
            lines.append(
                f"  {p['topic']}-{p['partition']}: {state}; replicas {_ids(p['replicas'])}"
            )
        if len(members) > MAX_LISTED:
            lines.append(f"  ... and {len(members) - MAX_LISTED} more like these")
        if missing:
            lines.append(f"    missing: {'; '.join(missing)}")
        if why:
            lines.append(f"    why: {why}")
    todo = []
    if controller is not None and not ctl.get("active"):
        todo.append(f"no controller is active: see {logs_dir}/controller.log")
    down = sorted({r for p in offline for r in p.get("replicas", []) if _missing([r], brokers)})
    if down:
        named = ", ".join(f"{logs_dir}/broker-{b}.log" for b in down)
        todo.append(f"bring back brokers {', '.join(map(str, down))} (their logs: {named})")
    todo.append(f"the controller's decisions are in {logs_dir}/controller.log")
    lines.append("What to do: " + "; ".join(todo) + ".")
    return "\n".join(lines)


def fetch(control_plane_url: str, secret: str, timeout_s: float = 5.0) -> tuple[list, dict]:
    """(offline partitions, controller status) from the control plane's internal routes."""

    def get(path: str) -> dict:
        req = urllib.request.Request(
            f"{control_plane_url}/internal/v1/{path}",
            headers={"Authorization": f"Cluster {secret}"},
        )
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return json.loads(r.read())

    return get("partitions?state=offline")["partitions"], get("controller")
