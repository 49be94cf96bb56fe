"""The Kafka listener's defences, in process (a real ``Broker`` and ``KafkaListener`` on a
loopback port, with control-plane-style tenant metadata so quotas and revocation apply),
driven over raw sockets: deadlines (SASL, idle, body), the request size limit, clients that
never read, the unauthenticated-connection caps shared with the HTTP fronts, tenant
connection quotas, revoked keys, SaslHandshake v0's bare-token flow, unsupported APIs and
versions, KIP-219 muting, metrics, and shutdown with open connections."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import socket
import struct
import time

import pytest

from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.broker import Broker
from brokernodes.server.config import BrokerConfig
from brokernodes.server.http.connection_limits import UnauthenticatedConnections
from brokernodes.server.kafka import connection as kconn
from brokernodes.server.kafka.handlers import HANDLERS
from brokernodes.server.kafka.listener import KafkaListener
from brokernodes.server.main import revocation_listener
from brokernodes.server.metadata.cluster import ClusterMetadata, MetadataSource, current_tenant
from brokernodes.server.metadata.image import build_image
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr

ORG = "3f1c0b52-0000-4000-8000-000000000001"
KEY, SECRET = "k1", "s1"
TIMEOUT = 10.0


class TenantMetadata(MetadataSource):
    """A fixed control-plane image, scoped to the request's tenant as the real client is."""

    def __init__(self, image: ClusterMetadata) -> None:
        self._image = image

    def current(self) -> ClusterMetadata:
        tenant = current_tenant.get()
        return self._image if tenant is None else self._image.for_tenant(tenant)

    def global_image(self) -> ClusterMetadata:
        return self._image


def _state(limits: dict | None = None, keys: tuple[str, ...] = (KEY, "k2")) -> dict:
    state: dict = {("broker", "1"): {"id": 1, "url": "http://127.0.0.1:1"}}
    for key in keys:
        state["api_key", f"slk_{key}"] = {
            "key_id": key,
            "secret_sha256": hashlib.sha256(SECRET.encode()).hexdigest(),
            "principal": f"User:{key}",
            "organisation": ORG,
            "role": "member",
        }
    state["topic", "tid"] = {
        "topic_id": "5c2f1e0a-0000-4000-8000-000000000001",
        "organisation": ORG,
        "name": "t",
        "configs": {},
        "partitions": [
            {"partition": 0, "leader": 1, "leader_epoch": 0, "replicas": [1], "isr": [1]}
        ],
    }
    if limits:
        state["quota", "q1"] = {"organisation": ORG, "principal": None, "limits": limits}
    return state


def _image(state: dict) -> ClusterMetadata:
    return build_image(state, cluster_id="c", broker_id=1, version=1)


class Node:
    """A broker and its Kafka listener in this event loop."""

    def __init__(self, tmp_path, limits=None, pool=None, **config) -> None:
        self.state = _state(limits)
        self.image = _image(self.state)
        cfg = BrokerConfig("", str(tmp_path / "data"), 0, fsync=False, kafka_port=0)
        self.broker = Broker(dataclasses.replace(cfg, **config), TenantMetadata(self.image))
        self.listener = KafkaListener(self.broker, pool)

    async def __aenter__(self) -> Node:
        await self.broker.start()
        await self.listener.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.listener.close(1.0)
        await self.broker.close()

    async def connect(self, **kw) -> Client:
        return await Client.open(self.listener.port, **kw)


class Client:
    """A raw Kafka connection: frames encoded with our codecs (the listener is under test
    here; the real clients' tests are in the process-level files)."""

    def __init__(self, reader, writer) -> None:
        self.reader, self.writer = reader, writer
        self.correlation = 0

    @classmethod
    async def open(cls, port: int, rcvbuf: int | None = None) -> Client:
        sock = socket.socket()
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        return cls(*await asyncio.open_connection(sock=sock))

    def frame(self, api_key: int, version: int, body: dict) -> bytes:
        self.correlation += 1
        header = struct.pack(">hhi", api_key, version, self.correlation) + b"\x00\x04test"
        if apis.apis()[api_key].flexible(version):
            header += b"\x00"
        payload = header + bytes(apis.request_codec(api_key, version).encode_new(body))
        return struct.pack(">i", len(payload)) + payload

    def send(self, api_key: int, version: int, body: dict) -> None:
        self.writer.write(self.frame(api_key, version, body))

    async def read_frame(self) -> bytes:
        async with asyncio.timeout(TIMEOUT):
            (size,) = struct.unpack(">i", await self.reader.readexactly(4))
            return await self.reader.readexactly(size)

    async def answer(self, api_key: int, version: int) -> dict:
        frame = await self.read_frame()
        flexible = apis.apis()[api_key].flexible(version) and api_key != apis.API_VERSIONS
        body = frame[5:] if flexible else frame[4:]
        return apis.response_codec(api_key, version).decode_all(body)

    async def call(self, api_key: int, version: int, body: dict) -> dict:
        self.send(api_key, version, body)
        return await self.answer(api_key, version)

    async def authenticate(self, key: str = KEY, secret: str = SECRET) -> dict:
        shake = await self.call(apis.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert shake["error_code"] == kerr.NONE
        token = f"\x00{key}\x00{secret}".encode()
        return await self.call(apis.SASL_AUTHENTICATE, 2, {"auth_bytes": token})

    async def closed(self, within: float = TIMEOUT) -> bool:
        """The broker closed the connection within ``within`` seconds."""
        try:
            async with asyncio.timeout(within):
                while await self.reader.read(65536):
                    pass
            return True
        except TimeoutError:
            return False
        except ConnectionError:
            return True

    def close(self) -> None:
        self.writer.transport.abort()


def in_loop(test):
    """Run an async test in a fresh event loop (the suite has no asyncio plugin)."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        asyncio.run(asyncio.wait_for(test(*args, **kwargs), 60))

    return run


async def _until(predicate, within: float = TIMEOUT) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


# --- authentication and its deadline -------------------------------------------------------


@in_loop
async def test_sasl_then_requests_and_metrics(tmp_path):
    async with Node(tmp_path) as node:
        c = await node.connect()
        versions = await c.call(apis.API_VERSIONS, 3, {"client_software_name": "t"})
        assert versions["error_code"] == kerr.NONE
        assert {a["api_key"] for a in versions["api_keys"]} == set(apis.apis())
        assert (await c.authenticate())["error_code"] == kerr.NONE
        (conn,) = node.listener.connections
        assert conn.key_id == KEY and conn.ctx.principal.tenant == ORG
        assert node.listener.by_key() == {KEY: 1}
        text = node.broker.metrics.render().decode()
        assert 'sluice_request_seconds_count{endpoint="kafka_api_versions"} 1.0' in text
        assert 'sluice_request_seconds_count{endpoint="kafka_sasl_authenticate"} 1.0' in text
        assert 'sluice_kafka_connections{authenticated="true"} 1.0' in text
        c.close()


@in_loop
async def test_wrong_secret_answers_a_clear_failure_then_closes(tmp_path, monkeypatch):
    # the close waits after the answer (Kafka's connection.failed.authentication.delay.ms),
    # lengthened here so that the wait is seen on a loaded machine
    monkeypatch.setattr(kconn, "FAILED_AUTHENTICATION_CLOSE_DELAY_S", 1.5)
    async with Node(tmp_path) as node:
        c = await node.connect()
        answer = await c.authenticate(secret="wrong")
        assert answer["error_code"] == kerr.SASL_AUTHENTICATION_FAILED
        assert answer["error_message"]
        assert not await c.closed(within=0.5), "closed with the answer, not after the delay"
        assert await c.closed()
        c = await node.connect()
        answer = await c.authenticate(key="nokey")
        assert answer["error_code"] == kerr.SASL_AUTHENTICATION_FAILED
        assert await c.closed()


@in_loop
async def test_requests_before_sasl_close_the_connection(tmp_path):
    async with Node(tmp_path) as node:
        c = await node.connect()
        c.send(apis.METADATA, 12, {"topics": None})
        assert await c.closed()


@in_loop
async def test_sasl_must_finish_within_the_head_timeout(tmp_path):
    async with Node(tmp_path, request_head_timeout_s=0.5) as node:
        silent = await node.connect()
        chatty = await node.connect()
        started = time.monotonic()
        for _ in range(3):  # ApiVersions does not extend the deadline
            await chatty.call(apis.API_VERSIONS, 0, {})
            await asyncio.sleep(0.1)
        assert await silent.closed(5) and await chatty.closed(5)
        assert time.monotonic() - started < 3
        authenticated = await node.connect()
        await authenticated.authenticate()
        await asyncio.sleep(0.8)  # past the SASL deadline: no longer applies
        assert (await authenticated.call(apis.API_VERSIONS, 0, {}))["error_code"] == 0


@in_loop
async def test_idle_connections_close(tmp_path):
    async with Node(tmp_path, connections_max_idle_s=0.5) as node:
        c = await node.connect()
        await c.authenticate()
        started = time.monotonic()
        assert await c.closed(5)
        assert 0.4 < time.monotonic() - started < 3


# --- request size and body deadline --------------------------------------------------------


@pytest.mark.parametrize("size", [1024 + 1, 0x7FFFFFFF, -1, -0x80000000])
@in_loop
async def test_a_size_over_the_limit_closes_before_the_body_is_read(tmp_path, size):
    async with Node(tmp_path, max_request_bytes=1024) as node:
        c = await node.connect()
        await c.authenticate()
        c.writer.write(struct.pack(">i", size))  # and no body at all
        started = time.monotonic()
        assert await c.closed(5)
        assert time.monotonic() - started < 1


@in_loop
async def test_requests_before_sasl_are_capped_at_512_kib(tmp_path):
    async with Node(tmp_path) as node:
        small = await node.connect()
        frame = small.frame(apis.API_VERSIONS, 3, {"client_software_name": "x" * 1000})
        small.writer.write(frame)
        assert (await small.answer(apis.API_VERSIONS, 3))["error_code"] == 0
        big = await node.connect()
        big.writer.write(struct.pack(">i", kconn.MAX_UNAUTHENTICATED_REQUEST_BYTES + 1))
        assert await big.closed(5)
        authenticated = await node.connect()
        await authenticated.authenticate()  # then the broker's limit (16 MiB) applies
        frame = authenticated.frame(apis.API_VERSIONS, 3, {"client_software_name": "x" * 600_000})
        authenticated.writer.write(frame)
        assert (await authenticated.answer(apis.API_VERSIONS, 3))["error_code"] == 0


@in_loop
async def test_a_body_that_never_arrives_closes(tmp_path):
    async with Node(tmp_path, body_timeout_s=0.5) as node:
        c = await node.connect()
        await c.authenticate()
        c.writer.write(struct.pack(">i", 100) + b"\x00" * 10)
        started = time.monotonic()
        assert await c.closed(5)
        assert time.monotonic() - started < 3


@in_loop
async def test_malformed_requests_close_the_connection(tmp_path):
    async with Node(tmp_path) as node:
        c = await node.connect()
        await c.authenticate()
        c.writer.write(struct.pack(">i", 3) + b"\x00\x12\x00")  # shorter than a header
        assert await c.closed()
        c = await node.connect()
        frame = c.frame(apis.API_VERSIONS, 0, {})
        c.writer.write(frame[:4] + frame[4:] + b"")  # fine
        await c.answer(apis.API_VERSIONS, 0)
        bad = bytearray(c.frame(apis.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}))
        bad[-5:] = b"\xff\xfe\xfd\xfc\xfb"  # the mechanism is not UTF-8
        c.writer.write(bytes(bad))
        assert await c.closed()


# --- a client that never reads -------------------------------------------------------------


@in_loop
async def test_a_client_that_never_reads_is_cut_off(tmp_path, monkeypatch):
    monkeypatch.setattr(kconn.KafkaConnection, "send_stall_timeout_s", 0.5)
    async with Node(tmp_path) as node:
        c = await node.connect(rcvbuf=4096)
        await c.authenticate()
        frame = c.frame(apis.API_VERSIONS, 3, {})
        # ~300 bytes per answer: far more than the socket buffers hold, never read
        c.writer.write(frame * 40_000)
        await _until(lambda: not node.listener.connections, within=15)
        c.close()


# --- unauthenticated-connection caps -------------------------------------------------------


class _HttpConnection:
    """Stands in for an HTTP front's transport in the shared pool."""

    def __init__(self) -> None:
        self.evicted = False

    def is_closing(self) -> bool:
        return self.evicted

    def evict(self) -> None:
        self.evicted = True


@in_loop
async def test_unauthenticated_caps_evict_the_oldest_and_share_the_http_pool(tmp_path):
    pool = UnauthenticatedConnections(max_total=4, max_per_ip=3)
    http = _HttpConnection()
    pool.track(http, "127.0.0.1", http.evict)  # the HTTP front's oldest connection
    async with Node(tmp_path, pool=pool) as node:
        authenticated = [await node.connect() for _ in range(2)]
        for c in authenticated:
            await c.authenticate()
        assert len(pool) == 1  # only the HTTP connection: authenticated ones left the pool
        idle = [await node.connect() for _ in range(3)]
        await _until(lambda: len(node.listener.connections) == 5)
        assert http.evicted  # one budget: the fourth unauthenticated one pushed it out
        newest = await node.connect()
        assert await idle[0].closed(5)  # over three per address: the oldest goes
        for c in [*idle[1:], newest]:
            assert (await c.call(apis.API_VERSIONS, 0, {}))["error_code"] == 0
        for c in authenticated:  # never evicted
            assert (await c.call(apis.API_VERSIONS, 0, {}))["error_code"] == 0
        assert len(pool) == 3
        for c in [*idle[1:], newest]:
            c.close()
        await _until(lambda: len(pool) == 0)


# --- tenant connection quotas and revocation -----------------------------------------------


@in_loop
async def test_tenant_connection_quota_refuses_sasl_over_it(tmp_path):
    async with Node(tmp_path, limits={"connections": 1}) as node:
        first = await node.connect()
        assert (await first.authenticate())["error_code"] == kerr.NONE
        second = await node.connect()
        answer = await second.authenticate(key="k2")  # same organisation, another key
        assert answer["error_code"] == kerr.SASL_AUTHENTICATION_FAILED
        assert "connection quota" in answer["error_message"]
        assert await second.closed()
        first.close()
        await _until(lambda: not node.listener.connections)
        third = await node.connect()
        assert (await third.authenticate())["error_code"] == kerr.NONE


@in_loop
async def test_a_revoked_key_is_disconnected(tmp_path):
    async with Node(tmp_path) as node:
        revoked, other = await node.connect(), await node.connect()
        await revoked.authenticate(KEY)
        await other.authenticate("k2")
        on_metadata = revocation_listener(node.broker, node.image, node.listener)
        on_metadata(_image(_state(keys=("k2",))))
        assert await revoked.closed(5)
        assert (await other.call(apis.API_VERSIONS, 0, {}))["error_code"] == 0


# --- SaslHandshake v0 ----------------------------------------------------------------------


@in_loop
async def test_sasl_handshake_v0_then_a_bare_plain_token(tmp_path):
    async with Node(tmp_path) as node:
        c = await node.connect()
        shake = await c.call(apis.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        assert shake == {"error_code": 0, "mechanisms": ["PLAIN"]}
        token = f"\x00{KEY}\x00{SECRET}".encode()
        c.writer.write(struct.pack(">i", len(token)) + token)
        assert await c.read_frame() == b""  # an empty bare frame: success
        assert (await c.call(apis.API_VERSIONS, 0, {}))["error_code"] == 0
        assert node.listener.by_key() == {KEY: 1}
        bad = await node.connect()
        await bad.call(apis.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        token = f"\x00{KEY}\x00wrong".encode()
        bad.writer.write(struct.pack(">i", len(token)) + token)
        assert await bad.closed()


@in_loop
async def test_sasl_handshake_refuses_other_mechanisms(tmp_path):
    async with Node(tmp_path) as node:
        c = await node.connect()
        shake = await c.call(apis.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})
        assert shake == {"error_code": kerr.UNSUPPORTED_SASL_MECHANISM, "mechanisms": ["PLAIN"]}


# --- unsupported APIs and versions ---------------------------------------------------------


@in_loop
async def test_api_versions_of_an_unknown_version_answers_v0_with_the_ranges(tmp_path):
    async with Node(tmp_path) as node:
        c = await node.connect()
        frame = struct.pack(">hhi", apis.API_VERSIONS, 99, 5) + b"\xff\xff" + b"\x00junk"
        c.writer.write(struct.pack(">i", len(frame)) + frame)
        raw = await c.read_frame()
        assert raw[:4] == struct.pack(">i", 5)
        body = apis.response_codec(apis.API_VERSIONS, 0).decode_all(raw[4:])
        assert body["error_code"] == kerr.UNSUPPORTED_VERSION
        assert any(a["api_key"] == apis.API_VERSIONS for a in body["api_keys"])
        # the connection stays open: the client retries with a version it now knows
        assert (await c.call(apis.API_VERSIONS, 3, {}))["error_code"] == 0


@pytest.mark.parametrize(("api_key", "version"), [(apis.METADATA, 99), (999, 0), (-1, 0)])
@in_loop
async def test_other_unsupported_requests_close_the_connection(tmp_path, api_key, version):
    async with Node(tmp_path) as node:
        c = await node.connect()
        await c.authenticate()
        frame = struct.pack(">hhi", api_key, version, 5) + b"\xff\xff"
        c.writer.write(struct.pack(">i", len(frame)) + frame)
        assert await c.closed()


# --- KIP-219 muting ------------------------------------------------------------------------


@in_loop
async def test_a_throttled_answer_mutes_the_connection(tmp_path, monkeypatch):
    async def throttled(ctx, header, request):
        return {"throttle_time_ms": 400, "cluster_id": "c"}

    monkeypatch.setitem(HANDLERS, apis.DESCRIBE_CLUSTER, throttled)
    async with Node(tmp_path) as node:
        c = await node.connect()
        await c.authenticate()
        c.send(apis.DESCRIBE_CLUSTER, 0, {})
        c.send(apis.API_VERSIONS, 0, {})  # sent at once, read only after the mute
        first = await c.answer(apis.DESCRIBE_CLUSTER, 0)
        answered = time.monotonic()
        assert first["throttle_time_ms"] == 400
        await c.answer(apis.API_VERSIONS, 0)
        assert time.monotonic() - answered >= 0.35
        # others are not muted
        other = await node.connect()
        started = time.monotonic()
        await other.call(apis.API_VERSIONS, 0, {})
        assert time.monotonic() - started < 0.3


@in_loop
async def test_a_produce_over_the_byte_rate_quota_mutes_the_connection(tmp_path):
    async with Node(tmp_path, limits={"produce_bytes_per_sec": 100}) as node:
        c = await node.connect()
        await c.authenticate()
        batch = encode_batch([Record(int(time.time() * 1000), None, b"x" * 1000)])
        partition = {"index": 0, "records": batch}
        request = {
            "acks": 1,
            "timeout_ms": 5000,
            "topic_data": [{"name": "t", "partition_data": [partition]}],
        }
        c.send(apis.PRODUCE, 9, request)
        c.send(apis.API_VERSIONS, 0, {})  # pipelined: read only once the mute ends
        started = time.monotonic()
        answer = await c.answer(apis.PRODUCE, 9)
        answered = time.monotonic()
        (p,) = answer["responses"][0]["partition_responses"]
        assert (p["error_code"], p["base_offset"]) == (kerr.NONE, 0)
        throttle = answer["throttle_time_ms"]
        # ~1,070 bytes against 100 B/s over the 10 s minimum window: ~570 ms
        assert 400 <= throttle <= 800, throttle
        assert answered - started < throttle / 1000  # answered at once, not held back
        await c.answer(apis.API_VERSIONS, 0)
        assert time.monotonic() - answered >= throttle / 1000 - 0.05


@in_loop
async def test_an_unanswered_request_mutes_for_the_throttle_its_handler_set(tmp_path, monkeypatch):
    async def unanswered(ctx, header, request):  # as acks=0 produce over its quota
        ctx.mute_ms = 400
        return None

    monkeypatch.setitem(HANDLERS, apis.DESCRIBE_CLUSTER, unanswered)
    async with Node(tmp_path) as node:
        c = await node.connect()
        await c.authenticate()
        started = time.monotonic()
        c.send(apis.DESCRIBE_CLUSTER, 0, {})
        await c.call(apis.API_VERSIONS, 0, {})
        assert time.monotonic() - started >= 0.35
        started = time.monotonic()  # the mute is used up
        await c.call(apis.API_VERSIONS, 0, {})
        assert time.monotonic() - started < 0.3


# --- shutdown ------------------------------------------------------------------------------


@in_loop
async def test_close_finishes_answers_in_progress_and_cuts_the_rest(tmp_path, monkeypatch):
    async def slow(ctx, header, request):
        await asyncio.sleep(0.3)
        return {"cluster_id": "slow"}

    async def throttled(ctx, header, request):
        return {"throttle_time_ms": 60_000}

    monkeypatch.setitem(HANDLERS, apis.DESCRIBE_CLUSTER, slow)
    monkeypatch.setitem(HANDLERS, apis.DESCRIBE_ACLS, throttled)
    node = Node(tmp_path)
    await node.broker.start()
    await node.listener.start()
    try:
        idle, busy, muted = [await node.connect() for _ in range(3)]
        for c in (idle, busy, muted):
            await c.authenticate()
        await muted.call(apis.DESCRIBE_ACLS, 1, {})  # now muted for a minute
        busy.send(apis.DESCRIBE_CLUSTER, 0, {})
        await _until(lambda: any(c.busy for c in node.listener.connections))
        port = node.listener.port
        node.broker.stopping = True
        started = time.monotonic()
        await node.listener.close(5.0)
        assert time.monotonic() - started < 2
        assert (await busy.answer(apis.DESCRIBE_CLUSTER, 0))["cluster_id"] == "slow"
        for c in (idle, busy, muted):
            assert await c.closed(2)
        assert not node.listener.connections
        with pytest.raises(OSError):  # no longer accepting
            await Client.open(port)
    finally:
        await node.broker.close()
