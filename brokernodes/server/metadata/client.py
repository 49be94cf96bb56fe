"""``ControlPlaneMetadataSource``: the broker's metadata from the control plane's log.

- ``start()``: load the cached image from ``<data_dir>/metadata-cache.json`` if there is one
  (so a broker restarts while the control plane is down), register, and pull; without a cache
  it retries (bounded backoff) until the control plane answers once.
- Background tasks: heartbeats every ``heartbeat_interval`` (re-registering when the control
  plane forgot this broker), and a long-poll loop ``GET /internal/v1/metadata?since=V&wait_ms=W``
  that applies each delta (or full image) to a new immutable image, writes the cache
  atomically (temp file, fsync, rename), calls the listeners (``ReplicaManager.reconcile``,
  WebSocket revocation...) and only then serves the new image to requests.
- ``current()`` is one attribute read (plus the tenant view when a tenant key authenticated
  the running request; see ``metadata.cluster``).

Every internal request carries ``Authorization: Cluster <secret>`` (``SLUICE_CLUSTER_SECRET``).

Replication (docs/replication.md, the wire contract with the controller): registration
sends ``clean_shutdown`` (every log had its clean-shutdown marker at start) and gets a new
``broker_epoch`` (KIP-903) that heartbeats carry; a heartbeat answered 409
STALE_BROKER_EPOCH registers again. ``alter_partition`` sends the leader's ISR proposals,
``controlled_shutdown`` asks the controller to move leadership away before the broker stops.
Heartbeats carry ``replica_logs`` (``offline_replica_logs``): this broker's logs of the
partitions it sees offline, for the controller's unclean recovery (docs/controller.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import random
from collections.abc import Callable, Iterable
from typing import Any

import aiohttp

from brokernodes.replication import errors as codes
from brokernodes.replication.leader import AlterPartitionRequest, AlterPartitionResponse
from brokernodes.server.metadata.cluster import (
    ClusterMetadata,
    MetadataSource,
    PartitionInfo,
    current_tenant,
)
from brokernodes.server.metadata.image import State, apply_records, build_image

logger = logging.getLogger("sluice.broker.metadata")

CACHE_FILE = "metadata-cache.json"
CACHE_FORMAT = 1
# a controlled shutdown gives up once the control plane has refused connections this long
CONTROL_PLANE_GONE_S = 2.0


def offline_replica_logs(partitions: Iterable[Any]) -> list[dict]:
    """``{"topic_id", "partition", "last_leader_epoch", "log_end_offset"}`` of each hosted
    partition whose metadata names no leader (KIP-966's GetReplicaLogInfo answer): the
    controller elects the longest log among the last known eligible replicas with them.
    Steady state: none offline, an empty list."""
    out = []
    for p in partitions:
        info = p.info
        if info.leader >= 0 or getattr(p, "closed", False):
            continue
        log = p.log
        epoch = log.leader_epoch_cache.latest_epoch
        out.append(
            {
                "topic_id": info.log_key,
                "partition": info.partition,
                "last_leader_epoch": -1 if epoch is None else int(epoch),
                "log_end_offset": int(log.log_end_offset),
            }
        )
    return out


class ControlPlaneError(RuntimeError):
    def __init__(self, message: str, status: int = 0, body: bytes = b"") -> None:
        super().__init__(message)
        self.status = status
        self.body = body

    @property
    def error_code(self) -> str:
        try:
            doc = json.loads(self.body)
        except ValueError:
            return ""
        return str(doc.get("error_code", "")) if isinstance(doc, dict) else ""


class ControlPlaneMetadataSource(MetadataSource):
    def __init__(
        self,
        control_plane_url: str,
        *,
        broker_id: int,
        advertised_url: str,
        secret: str,
        data_dir: str,
        wait_ms: int = 20_000,
        heartbeat_interval_s: float = 2.0,
        request_timeout_s: float = 10.0,
        max_backoff_s: float = 5.0,
        clean_shutdown: bool = True,
        controlled_shutdown_timeout_s: float = 30.0,
        kafka_advertised: str | None = None,
    ) -> None:
        self.base = control_plane_url.rstrip("/")
        self.kafka_advertised = kafka_advertised
        self.broker_id = broker_id
        self.advertised_url = advertised_url.rstrip("/")
        self.secret = secret
        self.cache_path = os.path.join(data_dir, CACHE_FILE)
        self.wait_ms = wait_ms
        self.heartbeat_interval_s = heartbeat_interval_s
        self.request_timeout_s = request_timeout_s
        self.max_backoff_s = max_backoff_s
        self.cluster_id = ""
        self._state: State = {}
        self._image: ClusterMetadata | None = None
        self._listeners: list[Callable[[ClusterMetadata], Any]] = []
        self._session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task] = []
        self.registered = False
        self.clean_shutdown = clean_shutdown
        self.controlled_shutdown_timeout_s = controlled_shutdown_timeout_s
        self._broker_epoch = -1
        self._legacy_registration = False  # a control plane without broker epochs
        self._legacy_kafka = False  # a control plane that stores no Kafka listener
        # what heartbeats report of offline partitions' logs (set by the broker's main)
        self.replica_logs: Callable[[], list[dict]] = list
        # API key ids used since the last heartbeat, and where to put them back on failure
        self.keys_used: Callable[[], list[str]] = list
        self.keys_unsent: Callable[[list[str]], None] = lambda keys: None

    @property
    def broker_epoch(self) -> int:
        return self._broker_epoch

    # --- MetadataSource ----------------------------------------------------------------

    def current(self) -> ClusterMetadata:
        image = self._image
        if image is None:
            raise RuntimeError("no metadata yet: await start() first")
        tenant = current_tenant.get()
        return image if tenant is None else image.for_tenant(tenant)

    def global_image(self) -> ClusterMetadata:
        assert self._image is not None
        return self._image

    @property
    def version(self) -> int:
        return self._image.version if self._image is not None else 0

    def add_listener(self, listener: Callable[[ClusterMetadata], Any]) -> None:
        self._listeners.append(listener)

    async def start(self) -> None:
        os.makedirs(os.path.dirname(self.cache_path) or ".", exist_ok=True)
        self._session = aiohttp.ClientSession(
            headers={"Authorization": f"Cluster {self.secret}"},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.request_timeout_s),
        )
        cached = await asyncio.to_thread(self._load_cache)
        if cached:
            logger.info("metadata from the cache: version %d", self.version)
        delay = 0.2
        while True:
            try:
                await self._register()
                await self._pull(wait_ms=0)
                break
            except (aiohttp.ClientError, ControlPlaneError, TimeoutError, ValueError) as e:
                if cached:
                    logger.warning("control plane unreachable (%s); serving the cached image", e)
                    break
                logger.warning("control plane unreachable (%s); retrying in %.1f s", e, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_backoff_s)
        self._tasks = [
            asyncio.create_task(self._poll_loop(), name="metadata-poll"),
            asyncio.create_task(self._heartbeat_loop(), name="metadata-heartbeat"),
        ]

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._session is not None:
            await self._session.close()

    # --- the control plane -------------------------------------------------------------

    async def _request(self, method: str, path: str, *, timeout_s: float, **kw) -> dict:
        assert self._session is not None
        async with self._session.request(
            method,
            self.base + path,
            timeout=aiohttp.ClientTimeout(total=timeout_s, sock_connect=self.request_timeout_s),
            **kw,
        ) as resp:
            body = await resp.read()
            if resp.status != 200:
                text = body[:200].decode(errors="replace")
                raise ControlPlaneError(
                    f"{method} {path} answered {resp.status}: {text}",
                    resp.status,
                    body,
                )
            return json.loads(body)

    async def tenant_request(
        self,
        method: str,
        path: str,
        *,
        authorization: str,
        timeout_s: float | None = None,
        json_body: Any = None,
        params: dict[str, str] | None = None,
    ) -> tuple[int, Any, dict[str, str]]:
        """A call to the control plane's tenant API (``/api/v1/<path>``) with a caller's own
        credentials (``Bearer <key>``, never the cluster secret), so its validation, roles,
        quotas, tenancy and audit log apply as they do for the CLI and the console.
        Returns (status, parsed JSON body or None, response headers); raises
        ``aiohttp.ClientError`` / ``TimeoutError`` when the control plane cannot be reached."""
        if self._session is None:
            raise aiohttp.ClientConnectionError("the metadata client is not started")
        timeout_s = self.request_timeout_s if timeout_s is None else timeout_s
        async with self._session.request(
            method,
            f"{self.base}/api/v1/{path}",
            headers={"Authorization": authorization},
            json=json_body,
            params=params,
            timeout=aiohttp.ClientTimeout(total=timeout_s, sock_connect=self.request_timeout_s),
        ) as resp:
            raw = await resp.read()
            try:
                doc = json.loads(raw) if raw else None
            except ValueError:
                doc = None
            return resp.status, doc, dict(resp.headers)

    async def _register(self) -> None:
        body: dict[str, Any] = {"broker_id": self.broker_id, "url": self.advertised_url}
        if not self._legacy_registration:
            body["clean_shutdown"] = self.clean_shutdown
        if self.kafka_advertised and not self._legacy_kafka:
            body["kafka"] = self.kafka_advertised
        try:
            doc = await self._request(
                "POST",
                "/internal/v1/brokers/register",
                json=body,
                timeout_s=self.request_timeout_s,
            )
        except ControlPlaneError as e:
            if e.status == 400 and b'"kafka"' in e.body and not self._legacy_kafka:
                logger.warning(
                    "the control plane does not store Kafka listeners; registering without "
                    "(Kafka clients will not learn this broker's address)"
                )
                self._legacy_kafka = True
                return await self._register()
            if e.status != 400 or b"clean_shutdown" not in e.body:
                raise
            logger.warning("the control plane knows no broker epochs; registering without")
            self._legacy_registration = True
            return await self._register()
        self._broker_epoch = int(doc.get("broker_epoch", -1))
        # a later registration of this same process lost nothing: its logs are intact
        self.clean_shutdown = True
        self.cluster_id = str(doc["cluster_id"])
        if "heartbeat_interval_ms" in doc:
            self.heartbeat_interval_s = max(0.1, doc["heartbeat_interval_ms"] / 1000)
        self.registered = True
        logger.info(
            "registered as broker %d (broker epoch %d) with %s",
            self.broker_id,
            self._broker_epoch,
            self.base,
        )

    async def _pull(self, *, wait_ms: int) -> None:
        doc = await self._request(
            "GET",
            "/internal/v1/metadata",
            params={"since": str(self.version), "wait_ms": str(wait_ms)},
            timeout_s=wait_ms / 1000 + self.request_timeout_s,
        )
        await self.apply(doc)

    async def apply(self, doc: dict) -> None:
        """Apply one answer of the metadata route (a delta, or a full image with ``reset``)."""
        records = doc.get("records") or []
        version = int(doc["version"])
        reset = bool(doc.get("reset"))
        if not reset and not records and version == self.version and self._image is not None:
            return
        self.cluster_id = str(doc.get("cluster_id") or self.cluster_id)
        self._state = apply_records(self._state, records, reset=reset)
        image = build_image(
            self._state, cluster_id=self.cluster_id, broker_id=self.broker_id, version=version
        )
        logger.info(
            "metadata version %d (%s, %d records)",
            version,
            "image" if reset else "delta",
            len(records),
        )
        await asyncio.to_thread(self._write_cache, image.version, dict(self._state))
        # The listeners (the replica manager opening new partitions, becoming leader or
        # follower...) run before requests see the image: a client that learns of a topic
        # or a leader from this broker finds its partition ready here.
        for listener in list(self._listeners):
            try:
                result = listener(image)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("metadata listener %r failed", listener)
        self._image = image

    async def _poll_loop(self) -> None:
        delay = 0.2
        while True:
            try:
                await self._pull(wait_ms=self.wait_ms)
                delay = 0.2
            except asyncio.CancelledError:
                raise
            except Exception as e:
                logger.warning("metadata pull failed (%s); retrying in %.1f s", e, delay)
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, self.max_backoff_s)

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_s)
            try:
                if not self.registered:
                    await self._register()
                body: dict[str, Any] = {
                    "broker_id": self.broker_id,
                    "metadata_version": self.version,
                }
                if self._broker_epoch >= 0:
                    body["broker_epoch"] = self._broker_epoch
                    logs = self.replica_logs()
                    if logs:
                        body["replica_logs"] = logs
                used = self.keys_used()
                if used:  # the control plane's "last used" (brokernodes.server.key_use)
                    body["keys_used"] = used
                try:
                    await self._request(
                        "POST",
                        "/internal/v1/brokers/heartbeat",
                        json=body,
                        timeout_s=self.request_timeout_s,
                    )
                except BaseException:
                    if used:
                        self.keys_unsent(used)
                    raise
            except asyncio.CancelledError:
                raise
            except ControlPlaneError as e:
                # 404: the control plane forgot us (a new database); 409 STALE_BROKER_EPOCH:
                # the controller fenced this registration (e.g. the process was paused)
                if e.status in (404, 409):
                    self.registered = False
                logger.warning("heartbeat failed: %s", e)
            except Exception as e:
                logger.warning("heartbeat failed: %s", e)

    # --- replication -------------------------------------------------------------------

    async def alter_partition(
        self, info: PartitionInfo, request: AlterPartitionRequest
    ) -> AlterPartitionResponse:
        """AlterPartition to the controller (contract item 4)."""
        body = {
            "broker_id": self.broker_id,
            "broker_epoch": self._broker_epoch,
            "topic_id": info.storage_key or info.topic,
            "partition": info.partition,
            "leader_epoch": request.leader_epoch,
            "partition_epoch": request.partition_epoch,
            "new_isr": [
                {"broker_id": b, "broker_epoch": self._broker_epoch if b == self.broker_id else e}
                for b, e in request.new_isr
            ],
        }
        if request.below_high_watermark:
            body["below_high_watermark"] = list(request.below_high_watermark)
        try:
            doc = await self._request(
                "POST",
                "/internal/v1/partitions/alter",
                json=body,
                timeout_s=self.request_timeout_s,
            )
        except ControlPlaneError as e:
            code = e.error_code or codes.INVALID_REQUEST
            return AlterPartitionResponse(error=code)
        return AlterPartitionResponse(
            error=str(doc.get("error_code", codes.NONE)),
            leader_epoch=int(doc.get("leader_epoch", -1)),
            partition_epoch=int(doc.get("partition_epoch", -1)),
            isr=tuple(int(b) for b in doc.get("isr") or ()),
        )

    async def controlled_shutdown(self, timeout_s: float | None = None) -> None:
        """Ask the controller to move leadership away (contract item 5), repeating every
        0.5 s until this broker leads nothing or the timeout passes, or the control plane
        has refused connections for ``CONTROL_PLANE_GONE_S`` (no one left to ask)."""
        if not self.registered:
            return
        loop = asyncio.get_running_loop()
        if timeout_s is None:
            timeout_s = self.controlled_shutdown_timeout_s
        deadline = loop.time() + timeout_s
        refused_since: float | None = None  # the control plane refuses connections since
        while loop.time() < deadline:
            try:
                doc = await self._request(
                    "POST",
                    "/internal/v1/brokers/controlled-shutdown",
                    json={"broker_id": self.broker_id, "broker_epoch": self._broker_epoch},
                    timeout_s=min(self.request_timeout_s, max(deadline - loop.time(), 0.1)),
                )
            except (aiohttp.ClientError, ControlPlaneError, TimeoutError, ValueError) as e:
                if isinstance(e, ControlPlaneError) and e.status == 404:
                    logger.info("the control plane has no controlled shutdown; stopping")
                    return
                logger.warning("controlled shutdown: %s", e)
                if isinstance(e, aiohttp.ClientConnectorError):
                    # nothing listens there: no one can move leadership (the controller
                    # fences this broker once its heartbeats stop); asking for 30 s more
                    # only delays the stop
                    refused_since = loop.time() if refused_since is None else refused_since
                    if loop.time() - refused_since >= CONTROL_PLANE_GONE_S:
                        logger.warning(
                            "controlled shutdown: the control plane cannot be reached; "
                            "stopping without moving leadership"
                        )
                        return
                else:
                    refused_since = None
            else:
                led = int(doc.get("partitions_led", 0))
                if led == 0:
                    logger.info("controlled shutdown: leadership moved away")
                    return
                logger.info("controlled shutdown: still leading %d partitions", led)
            await asyncio.sleep(0.5)
        logger.warning("controlled shutdown timed out; stopping anyway")

    # --- the on-disk cache -------------------------------------------------------------

    def _write_cache(self, version: int, state: State) -> None:
        doc = {
            "format": CACHE_FORMAT,
            "cluster_id": self.cluster_id,
            "broker_id": self.broker_id,
            "version": version,
            "records": [{"kind": k, "key": key, "value": v} for (k, key), v in state.items()],
        }
        tmp = f"{self.cache_path}.tmp"
        with open(tmp, "wb") as f:
            f.write(json.dumps(doc, separators=(",", ":")).encode())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.cache_path)
        with contextlib.suppress(OSError):
            dir_fd = os.open(os.path.dirname(self.cache_path) or ".", os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def _load_cache(self) -> bool:
        try:
            with open(self.cache_path, "rb") as f:
                doc = json.loads(f.read())
            if doc.get("format") != CACHE_FORMAT or doc.get("broker_id") != self.broker_id:
                logger.warning("ignoring a metadata cache of another format or broker")
                return False
            self.cluster_id = str(doc["cluster_id"])
            self._state = apply_records({}, doc["records"], reset=True)
            self._image = build_image(
                self._state,
                cluster_id=self.cluster_id,
                broker_id=self.broker_id,
                version=int(doc["version"]),
            )
            return True
        except FileNotFoundError:
            return False
        except (OSError, ValueError, KeyError, TypeError) as e:
            logger.warning("ignoring an unreadable metadata cache: %s", e)
            return False
