"""A broker on an event loop thread of this process, with its Kafka listener and its HTTP
API on loopback ports, for tests that write transactional batches and COMMIT/ABORT markers
through the partition API (``Partition.write_txn_marker``, as the transaction coordinator
does) and read them with real clients: Kafka consumers, HTTP, WebSocket and the SDK."""

from __future__ import annotations

import asyncio
import json
import threading
import time

from aiohttp import web

from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.app import build_app
from brokernodes.server.broker import Broker
from brokernodes.server.config import BrokerConfig
from brokernodes.server.kafka.listener import KafkaListener
from brokernodes.server.metadata.cluster import StaticMetadataSource
from harness.broker import API_KEY, free_port, make_metadata

TOPIC = "txnlog-rc"
TIMEOUT_S = 20.0

__all__ = ["API_KEY", "TOPIC", "LoopBroker", "write_mixed_log"]


class LoopBroker:
    """A broker with its Kafka listener on an event loop in a thread of its own."""

    def __init__(self, tmp_path) -> None:
        self.kafka_port = free_port()
        self.http_port = free_port()
        meta = tmp_path / "metadata.json"
        doc = make_metadata(self.http_port, {TOPIC: (1, {})}, kafka_port=self.kafka_port)
        meta.write_text(json.dumps(doc))
        config = BrokerConfig(
            str(meta), str(tmp_path / "data"), 0, fsync=False, kafka_port=self.kafka_port
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start() -> tuple[Broker, KafkaListener, web.AppRunner]:
            broker = Broker(config, StaticMetadataSource(str(meta)))
            await broker.start()
            listener = KafkaListener(broker)
            await listener.start()
            runner = web.AppRunner(build_app(broker))
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.http_port).start()
            return broker, listener, runner

        self.broker, self.listener, self.runner = self.call(start())
        self.bootstrap = f"127.0.0.1:{self.kafka_port}"
        self.url = f"http://127.0.0.1:{self.http_port}"

    def call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(TIMEOUT_S)

    @property
    def partition(self):
        return self.broker.replicas.get_partition(TOPIC, 0)

    def append(self, values: list[str], pid: int = -1, seq: int = -1) -> int:
        buf = bytearray(
            encode_batch(
                [Record(int(time.time() * 1000), None, v.encode()) for v in values],
                producer_id=pid,
                producer_epoch=0 if pid >= 0 else -1,
                base_sequence=seq,
                is_transactional=pid >= 0,
            )
        )
        return self.call(self.partition.append_as_leader(buf, acks=-1)).base_offset

    def end_txn(self, pid: int, commit: bool) -> int:
        return self.call(self.partition.write_txn_marker(pid, 0, commit, 0))

    def close(self) -> None:
        async def stop() -> None:
            await self.runner.cleanup()
            await self.listener.close(1.0)
            await self.broker.close()

        try:
            self.call(stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
            self.loop.close()


def write_mixed_log(node: LoopBroker) -> None:
    """0-1 producer 11 (committed), 2-4 producer 12 (aborted), 5 plain, 6 commit 11,
    7 abort 12, 8 producer 13 (left open), 9 plain: LSO 8, HW 10."""
    node.append(["c0", "c1"], pid=11, seq=0)
    node.append(["a0", "a1", "a2"], pid=12, seq=0)
    node.append(["p0"])
    assert node.end_txn(11, commit=True) == 6
    assert node.end_txn(12, commit=False) == 7
    node.append(["o0"], pid=13, seq=0)
    node.append(["p1"])
