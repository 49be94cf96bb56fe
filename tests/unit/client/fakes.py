"""An in-memory stand-in for the broker at the transport boundary, for the SDK's unit tests.

It answers the calls the SDK makes (metadata, producer ids, binary produce and fetch, list
offsets) the way docs/data-plane-api.md says, deduplicates idempotent batches with the real
``ProducerStateManager``, and lets a test inject failures: refuse a request, or apply it and
then lose the answer (the case idempotence exists for). The real HTTP path is tested against
a real broker in tests/integration/client.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import orjson

from brokernodes.client.http import HttpResponse
from brokernodes.errors import BrokerConnectionError, BrokerError, SluiceError
from brokernodes.records.batch import decode_batches
from brokernodes.records.header import iter_batches, set_base_offset
from brokernodes.storage.producer_state import ProducerStateManager

URL = "http://fake:9092"
_PARTITION = re.compile(r"^/sluice/v1/topics/([^/]+)/partitions/(\d+)/(batches|offsets)$")


@dataclass
class FakePartition:
    batches: list[bytes] = field(default_factory=list)
    next_offset: int = 0
    state: ProducerStateManager = field(default_factory=ProducerStateManager)


@dataclass
class Request:
    method: str
    path: str
    params: dict
    body: bytes | None
    host: str = "fake:9092"


class FakeTransport:
    """``HttpTransport``'s interface over in-memory partition logs."""

    def __init__(self, topics: dict[str, int], *, latency_s: float = 0.0) -> None:
        self.topics = dict(topics)
        self.logs = {(t, p): FakePartition() for t, n in topics.items() for p in range(n)}
        self.latency_s = latency_s
        self.requests: list[Request] = []
        # Each hook gets the request and returns None (go on), or raises to fail it. A hook
        # may also set ``lose_answer`` (apply the request, then raise a connection error).
        self.hooks: list[Callable[[Request], Any]] = []
        self.lose_answers = 0  # apply the next N produce requests, then drop their answers
        self.next_producer_id = 1000
        self.closed = False

    async def close(self) -> None:
        self.closed = True

    async def get_json(self, url: str, params: Any = None) -> Any:
        return (await self.request("GET", url, params=params)).json()

    async def request(
        self,
        method: str,
        url: str,
        *,
        params: Any = None,
        body: bytes | None = None,
        json: Any = None,
        content_type: str | None = None,
        timeout_s: float | None = None,
    ) -> HttpResponse:
        assert url.startswith("http://fake"), url
        host, _, rest = url[len("http://") :].partition("/")
        path = "/" + rest
        request = Request(method, path, dict(params or {}), body, host)
        self.requests.append(request)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        else:
            await asyncio.sleep(0)
        for hook in list(self.hooks):
            hook(request)
        try:
            status, doc, headers = self._handle(request)
        except SluiceError as exc:
            status = _STATUS.get(exc.error_code, 400)
            raise BrokerError(exc.error_code, exc.message, status=status, url=url) from None
        if path.endswith("/batches") and method == "POST" and self.lose_answers:
            self.lose_answers -= 1
            raise BrokerConnectionError(f"connection to {URL} lost (injected)", url=url)
        raw = doc if isinstance(doc, bytes) else orjson.dumps(doc)
        return HttpResponse(status, headers, raw)

    # --- the API -----------------------------------------------------------------------

    def _handle(self, request: Request) -> tuple[int, Any, dict]:
        if request.path == "/sluice/v1/metadata":
            return 200, self._metadata(), {}
        if request.path == "/sluice/v1/producer-ids" and request.method == "POST":
            self.next_producer_id += 1
            return 200, {"producer_id": self.next_producer_id, "producer_epoch": 0}, {}
        match = _PARTITION.match(request.path)
        if not match:
            raise _error("NOT_FOUND", f"no route for {request.path}")
        topic, partition, what = unquote(match[1]), int(match[2]), match[3]
        log = self.logs.get((topic, partition))
        if log is None:
            raise _error("UNKNOWN_TOPIC_OR_PARTITION", f"no partition {topic}-{partition}")
        if what == "offsets":
            spec = request.params["timestamp"]
            if spec == "earliest":
                return 200, {"offset": 0, "timestamp": -1}, {}
            if spec == "latest":
                return 200, {"offset": log.next_offset, "timestamp": -1}, {}
            for batch in log.batches:
                for decoded in decode_batches(batch):
                    if decoded.header.max_timestamp >= int(spec):
                        return 200, {"offset": decoded.header.base_offset, "timestamp": 0}, {}
            return 200, {"offset": log.next_offset, "timestamp": -1}, {}
        if request.method == "POST":
            return self._produce(log, request)
        return self._fetch(log, request)

    def _metadata(self) -> dict:
        return {
            "cluster_id": "fake",
            "brokers": [{"id": 1, "url": URL}],
            "topics": [
                {
                    "name": t,
                    "topic_id": t,
                    "partitions": [
                        {"partition": p, "leader": 1, "replicas": [1]} for p in range(n)
                    ],
                }
                for t, n in self.topics.items()
            ],
        }

    def _produce(self, log: FakePartition, request: Request) -> tuple[int, Any, dict]:
        buf = bytearray(request.body or b"")
        headers = list(iter_batches(buf))
        dup = log.state.check_batches(headers)
        if dup is not None:
            doc = {"base_offset": dup.first_offset, "last_offset": dup.last_offset}
            return 200, {**doc, "log_append_time": -1, "duplicate": True}, {}
        base = log.next_offset
        for h in headers:
            set_base_offset(buf, h.position, log.next_offset)
            log.state.update(h, base_offset=log.next_offset)
            log.batches.append(bytes(buf[h.position : h.position + h.size]))
            log.next_offset += h.last_offset_delta + 1
        if request.params.get("acks") == "0":
            return 202, {}, {}
        doc = {"base_offset": base, "last_offset": log.next_offset - 1, "log_append_time": -1}
        return 200, {**doc, "duplicate": False, "log_start_offset": 0}, {}

    def _fetch(self, log: FakePartition, request: Request) -> tuple[int, Any, dict]:
        offset = int(request.params["offset"])
        if offset > log.next_offset:
            raise _error("OFFSET_OUT_OF_RANGE", f"offset {offset} is above {log.next_offset}")
        out = []
        size = 0
        max_bytes = int(request.params.get("max_bytes", 1 << 20))
        for batch in log.batches:
            header = next(iter_batches(batch))
            if header.next_offset <= offset:
                continue
            if out and size + len(batch) > max_bytes:
                break
            out.append(batch)
            size += len(batch)
        headers = {
            "Sluice-High-Watermark": str(log.next_offset),
            "Sluice-Log-Start-Offset": "0",
        }
        return 200, b"".join(out), headers

    # --- test helpers --------------------------------------------------------------------

    def records(self, topic: str, partition: int) -> list:
        out = []
        for batch in self.logs[(topic, partition)].batches:
            for decoded in decode_batches(batch):
                out.extend(decoded.records)
        return out

    def produce_requests(self) -> list[Request]:
        return [r for r in self.requests if r.method == "POST" and r.path.endswith("/batches")]


def _error(code: str, message: str) -> SluiceError:
    err = SluiceError(message)
    err.error_code = code
    return err


_STATUS = {
    "NOT_FOUND": 404,
    "UNKNOWN_TOPIC_OR_PARTITION": 404,
    "OFFSET_OUT_OF_RANGE": 416,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": 409,
    "INVALID_PRODUCER_EPOCH": 409,
    "NOT_LEADER_OR_FOLLOWER": 421,
}
