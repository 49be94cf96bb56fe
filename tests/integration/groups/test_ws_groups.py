"""Group consumption over one WebSocket: two sockets share a topic's partitions, a revocation
is acknowledged after the client commits on the same socket, credit bounds what is sent, and
every record is processed at least once."""

from __future__ import annotations

import asyncio
import base64
import json

import aiohttp

from tests.integration.groups.conftest import http_json


class GroupSocket:
    def __init__(self, url: str, key: str, group: str) -> None:
        self.url = url.replace("http://", "ws://") + f"/sluice/v1/ws/groups/{group}"
        self.key = key
        self.owned: set = set()
        self.seen: list[str] = []
        self.positions: dict = {}
        self.events: list[str] = []

    async def run(self, session: aiohttp.ClientSession, stop: asyncio.Event, credit: int) -> None:
        async with session.ws_connect(
            self.url, headers={"Authorization": f"Bearer {self.key}"}
        ) as ws:
            await ws.send_str(
                json.dumps(
                    {
                        "subscribe": ["orders"],
                        "from": "earliest",
                        "session_timeout_ms": 3000,
                        "heartbeat_interval_ms": 100,
                    }
                )
            )
            await ws.send_str(json.dumps({"credit": credit}))
            while not stop.is_set():
                try:
                    msg = await ws.receive(timeout=0.2)
                except TimeoutError:
                    continue
                if msg.type is not aiohttp.WSMsgType.TEXT:
                    break
                doc = json.loads(msg.data)
                kind = doc.get("type")
                self.events.append(kind)
                if kind == "assigned":
                    self.owned |= {(p["topic"], p["partition"]) for p in doc["partitions"]}
                elif kind == "records":
                    for r in doc["records"]:
                        self.seen.append(base64.b64decode(r["value"]).decode())
                        self.positions[(r["topic"], r["partition"])] = r["offset"] + 1
                    await ws.send_str(json.dumps({"credit": credit}))
                elif kind == "revoke":
                    gone = {(p["topic"], p["partition"]) for p in doc["partitions"]}
                    commit = [
                        {"topic": t, "partition": p, "offset": o}
                        for (t, p), o in self.positions.items()
                        if (t, p) in gone
                    ]
                    if commit:
                        await ws.send_str(json.dumps({"commit": commit}))
                    self.owned -= gone
                    await ws.send_str(json.dumps({"revoked": True}))
                elif kind == "error":
                    raise AssertionError(doc)
            commit = [
                {"topic": t, "partition": p, "offset": o}
                for (t, p), o in self.positions.items()
                if (t, p) in self.owned
            ]
            if commit:
                await ws.send_str(json.dumps({"commit": commit}))
                for _ in range(50):
                    msg = await ws.receive(timeout=5)
                    if json.loads(msg.data).get("type") == "committed":
                        break


def test_two_sockets_share_partitions_and_commit_through_a_revocation(gbroker):
    b, key = gbroker, gbroker.api_key
    for i in range(30):
        http_json(
            "POST",
            f"{b.url}/v3/clusters/test-cluster/topics/orders/records",
            {"partition_id": i % 3, "value": {"type": "STRING", "data": f"w{i}"}},
            key=key,
        )

    async def main():
        async with aiohttp.ClientSession() as session:
            first, second = GroupSocket(b.url, key, "ws-g"), GroupSocket(b.url, key, "ws-g")
            stop1, stop2 = asyncio.Event(), asyncio.Event()
            t1 = asyncio.create_task(first.run(session, stop1, 40))
            for _ in range(100):
                await asyncio.sleep(0.05)
                if len(first.owned) == 3 and len(first.seen) >= 6:
                    break
            t2 = asyncio.create_task(second.run(session, stop2, 40))
            for _ in range(200):
                await asyncio.sleep(0.05)
                both = first.owned and second.owned
                if both and len(first.owned | second.owned) == 3 and not first.owned & second.owned:
                    break
            assert first.owned and second.owned and not first.owned & second.owned, (
                first.events[-20:],
                second.events[-20:],
            )
            assert "revoke" in first.events
            for _ in range(200):
                await asyncio.sleep(0.05)
                if set(first.seen + second.seen) >= {f"w{i}" for i in range(30)}:
                    break
            stop1.set()
            stop2.set()
            await asyncio.gather(t1, t2)
            return first, second

    first, second = asyncio.run(asyncio.wait_for(main(), 60))
    assert set(first.seen + second.seen) == {f"w{i}" for i in range(30)}
    s, d = http_json("GET", f"{b.url}/sluice/v1/groups/ws-g", key=key)
    assert s == 200 and d["total_lag"] == 0, d
