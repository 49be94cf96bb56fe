"""The Spark source's calls to the brokers: metadata, list offsets and binary fetch, over
``brokernodes.blocking_client`` (executors have no event loop and read one offset range each,
so blocking keep-alive connections, one pool per ``BrokerClient``).

Every failure becomes ``BrokerReadError`` with the broker's ``error_code`` when it answered
one, ``BROKER_UNREACHABLE`` when it did not answer at all. Credentials:
``Authorization: Bearer <api key>`` (docs/data-plane-api.md), or the operators'
``Cluster <secret>`` (read-only, every tenant; see ``brokernodes.server.operator``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

from brokernodes import blocking_client
from brokernodes.errors import BrokerError, SluiceError
from brokernodes.records.batch import DecodedBatch, DecodedRecord, decode_batch
from brokernodes.records.header import HEADER_SIZE, read_header
from spark.datasource.validity import (
    CORRUPT_MESSAGE,
    INVALID_TIMESTAMP,
    UnreadableBatch,
    reason,
    timestamp_ok,
)

DEFAULT_FETCH_BYTES = 4 * 1024 * 1024
USER_AGENT = "sluice-spark/0.1"
TIMEOUT_S = blocking_client.REQUEST_TIMEOUT_S


class BrokerReadError(Exception):
    """The broker refused or failed a request; ``error_code`` is its stable code."""

    def __init__(self, message: str, error_code: str = "UNKNOWN", body: dict | None = None):
        super().__init__(message)
        self.error_code = error_code
        self.body = body or {}


@dataclass(frozen=True)
class PartitionMeta:
    topic: str
    partition: int
    leader: int
    leader_url: str | None


def _read_error(error: SluiceError, url: str, path: str) -> BrokerReadError:
    """The source's error for a blocking-client error on ``GET url+path``."""
    where = f"GET {path.split('?')[0]}"
    if isinstance(error, BrokerError):
        body = {"error_code": error.error_code, "message": error.message, **error.details}
        return BrokerReadError(
            f"{url} {where}: {error.error_code}: {error.message}", error.error_code, body
        )
    return BrokerReadError(
        f"broker {url} did not answer {where}: {error.message}; "
        "check that it runs and is reachable from the Spark executors",
        "BROKER_UNREACHABLE",
    )


class BrokerConnection:
    """Requests to one broker (``url``), on its client's keep-alive connections."""

    def __init__(
        self,
        url: str,
        authorization: str,
        *,
        timeout_s: float = TIMEOUT_S,
        http: blocking_client.BlockingClient | None = None,
    ) -> None:
        self.url = blocking_client.split_url(url)[0]
        self._own = http is None
        self._http = http or blocking_client.BlockingClient(
            authorization, timeout_s=timeout_s, user_agent=USER_AGENT
        )

    def close(self) -> None:
        if self._own:
            self._http.close()

    def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        """GET: a 2xx answer's status, headers (lower-case names) and body, or
        ``BrokerReadError``. A kept-alive connection the broker closed is reopened once."""
        try:
            resp = self._http.request("GET", self.url + path)
        except SluiceError as e:
            raise _read_error(e, self.url, path) from None
        return resp.status, resp.headers, resp.body

    def get_json(self, path: str) -> dict:
        return _json(self.get(path)[2])


def _json(body: bytes) -> dict:
    try:
        doc = json.loads(body) if body else {}
    except ValueError:
        return {"message": body[:200].decode(errors="replace")}
    return doc if isinstance(doc, dict) else {"value": doc}


def _unreachable(error: Exception) -> bool:
    return isinstance(error, BrokerReadError) and error.error_code == "BROKER_UNREACHABLE"


def _path(topic: str, partition: int, tail: str) -> str:
    return f"/sluice/v1/topics/{quote(topic, safe='')}/partitions/{partition}/{tail}"


class BrokerClient:
    """Metadata, list offsets and binary fetch against a cluster (connections by URL)."""

    def __init__(
        self,
        bootstrap: str,
        api_key: str | None = None,
        *,
        cluster_secret: str | None = None,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        self.bootstrap = [u.strip() for u in bootstrap.split(",") if u.strip()]
        if not self.bootstrap:
            raise ValueError("option 'bootstrap' needs at least one broker URL")
        self._auth = blocking_client.authorization(api_key, cluster_secret)
        self._http = blocking_client.BlockingClient(
            self._auth, timeout_s=timeout_s, user_agent=USER_AGENT
        )
        self._conns: dict[str, BrokerConnection] = {}

    def conn(self, url: str) -> BrokerConnection:
        c = self._conns.get(url)
        if c is None:
            c = self._conns[url] = BrokerConnection(url, self._auth, http=self._http)
        return c

    def close(self) -> None:
        self._http.close()
        self._conns.clear()

    def metadata(self) -> dict:
        """``GET /sluice/v1/metadata`` from the first bootstrap broker that answers."""
        path = "/sluice/v1/metadata"
        try:
            return blocking_client.first_answer(
                self.bootstrap, lambda url: self.conn(url).get_json(path), move_on=_unreachable
            )
        except BrokerReadError as e:
            if not _unreachable(e):
                raise
            raise BrokerReadError(f"no bootstrap broker answered: {e}", e.error_code) from e

    def partitions(self, topic: str) -> list[PartitionMeta]:
        doc = self.metadata()
        urls = {int(b["id"]): b["url"] for b in doc.get("brokers", [])}
        for t in doc.get("topics", []):
            if t["name"] == topic:
                return [
                    PartitionMeta(
                        topic, int(p["partition"]), int(p["leader"]), urls.get(int(p["leader"]))
                    )
                    for p in sorted(t["partitions"], key=lambda p: int(p["partition"]))
                ]
        raise BrokerReadError(
            f"topic {topic!r} is not in the cluster metadata this key can see",
            "UNKNOWN_TOPIC_OR_PARTITION",
        )

    def _leader_url(self, meta: PartitionMeta) -> str:
        if not meta.leader_url:
            raise BrokerReadError(
                f"{meta.topic}-{meta.partition} has no leader right now", "LEADER_NOT_AVAILABLE"
            )
        return meta.leader_url

    def list_offset(self, meta: PartitionMeta, spec: str | int) -> int:
        """Kafka's ListOffsets: ``earliest``, ``latest`` or an epoch-ms timestamp."""
        path = _path(meta.topic, meta.partition, f"offsets?timestamp={spec}")
        return int(self.conn(self._leader_url(meta)).get_json(path)["offset"])

    def fetch(
        self, meta: PartitionMeta, offset: int, max_bytes: int = DEFAULT_FETCH_BYTES
    ) -> tuple[bytes, dict[str, str]]:
        """Raw batches from ``offset`` (whole batches) and the response headers."""
        path = _path(meta.topic, meta.partition, f"batches?offset={offset}&max_bytes={max_bytes}")
        _, headers, body = self.conn(self._leader_url(meta)).get(path)
        return body, headers


def _timestamp_problem(batch: DecodedBatch) -> str | None:
    """Why the batch's timestamps cannot be reported (outside years 1-9999), or None."""
    if not batch.records:
        return None
    lo = min(r.timestamp for r in batch.records)
    hi = max(r.timestamp for r in batch.records)
    if timestamp_ok(lo) and timestamp_ok(hi):
        return None
    return reason(INVALID_TIMESTAMP, f"records stamped {lo}..{hi} ms, outside years 1-9999")


def read_range(
    client: BrokerClient,
    meta: PartitionMeta,
    start: int,
    end: int,
    *,
    max_bytes: int = DEFAULT_FETCH_BYTES,
    fail_on_data_loss: bool = True,
    refresh_leader=None,
    max_empty_polls: int = 20,
) -> Iterator[tuple[DecodedRecord | UnreadableBatch, int]]:
    """Every record with ``start <= offset < end`` as ``(record, timestamp_type)``.

    Control batches are skipped (never user data); compacted gaps are crossed. A batch that
    cannot be decoded (garbage records under an intact frame, timestamps outside years
    1-9999) is skipped and yielded once as ``(UnreadableBatch, -1)`` instead of its records:
    one tenant's bad bytes must not fail a job over every tenant. When retention removed
    ``start`` the read fails (``fail_on_data_loss``) or resumes at the log start offset.
    ``NOT_LEADER_OR_FOLLOWER`` asks ``refresh_leader()`` for new metadata, a bounded number
    of times.
    """
    offset = start
    empty = 0
    leader_moves = 0
    while offset < end:
        try:
            body, headers = client.fetch(meta, offset, max_bytes)
        except BrokerReadError as e:
            if e.error_code == "OFFSET_OUT_OF_RANGE" and not fail_on_data_loss:
                log_start = int(e.body.get("log_start_offset", offset))
                if log_start > offset:
                    offset = log_start
                    continue
            if e.error_code in ("NOT_LEADER_OR_FOLLOWER", "BROKER_UNREACHABLE") and (
                refresh_leader is not None and leader_moves < 5
            ):
                leader_moves += 1
                time.sleep(0.2 * leader_moves)
                meta = refresh_leader(meta)
                continue
            if e.error_code == "OFFSET_OUT_OF_RANGE":
                raise BrokerReadError(
                    f"{meta.topic}-{meta.partition}: offset {offset} is no longer in the log "
                    "(retention deleted it); set failOnDataLoss=false to skip to the log start",
                    e.error_code,
                    e.body,
                ) from e
            raise
        if not body:
            # below the high watermark when planned, so the leader changed or truncated
            empty += 1
            hw = int(headers.get("sluice-high-watermark", "-1"))
            if hw >= 0 and hw <= offset and empty >= max_empty_polls:
                raise BrokerReadError(
                    f"{meta.topic}-{meta.partition}: the high watermark {hw} is below the "
                    f"planned end offset {end}; the log was truncated (unclean election?)",
                    "OFFSET_OUT_OF_RANGE",
                )
            time.sleep(0.05)
            continue
        empty = 0
        pos = 0
        while pos < len(body):
            h = read_header(body, pos)  # fewer than 61 bytes left: not a batch at all, fail
            try:
                batch = decode_batch(body, pos)
                problem = None if h.is_control else _timestamp_problem(batch)
            except SluiceError as e:
                batch, problem = None, reason(e.error_code, e.message)
            except Exception as e:  # whatever a codec raises, the batch is what is bad
                batch, problem = None, reason(CORRUPT_MESSAGE, f"{type(e).__name__}: {e}")
            if problem is not None:
                if h.last_offset >= offset or pos == 0:
                    yield UnreadableBatch(h.base_offset, h.last_offset, problem), -1
                    # past it: at least one offset on, even if its header lies about its extent
                    offset = max(offset + 1, h.next_offset)
                if offset >= end:
                    return
                if h.size < HEADER_SIZE or pos + h.size > len(body):
                    break  # its length cannot be trusted either: fetch from the next offset
                pos += h.size
                continue
            if not h.is_control:
                tstype = h.timestamp_type
                for r in batch.records:
                    if offset <= r.offset < end:
                        yield r, tstype
            offset = max(offset, h.next_offset)
            if offset >= end:
                return
            pos += h.size
