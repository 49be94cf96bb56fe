"""A minimal blocking Kafka client for edge cases no real client sends on purpose (wrong
epochs, topic ids, transactional batches): SASL/PLAIN, then one request at a time encoded
and decoded with Sluice's own schema codecs (what real clients check is tested with them)."""

from __future__ import annotations

import socket
import struct

from brokernodes.server.protocol.kafka import apis
from harness.broker import KEY_ID, SECRET

_SIZE = struct.Struct(">i")


class KafkaWire:
    def __init__(self, bootstrap: str, user: str = KEY_ID, password: str = SECRET) -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation = 0
        assert self.request(apis.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        token = b"\0" + user.encode() + b"\0" + password.encode()
        answer = self.request(apis.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        assert answer["error_code"] == 0, answer

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KafkaWire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, body: dict) -> int:
        self.correlation += 1
        flexible = apis.apis()[api_key].flexible(version)
        client = b"wire-test"
        head = struct.pack(">hhih", api_key, version, self.correlation, len(client)) + client
        if flexible:
            head += b"\0"
        payload = b"".join(
            bytes(c) for c in apis.request_codec(api_key, version).encode_new(body).chunks()
        )
        self.sock.sendall(_SIZE.pack(len(head) + len(payload)) + head + payload)
        return self.correlation

    def receive(self, api_key: int, version: int) -> dict:
        (size,) = _SIZE.unpack(self._exactly(4))
        frame = self._exactly(size)
        (correlation,) = _SIZE.unpack_from(frame, 0)
        assert correlation == self.correlation
        flexible = apis.apis()[api_key].flexible(version) and api_key != apis.API_VERSIONS
        body = frame[5:] if flexible else frame[4:]
        return apis.response_codec(api_key, version).decode_all(body)

    def request(self, api_key: int, version: int, body: dict) -> dict:
        self.send(api_key, version, body)
        return self.receive(api_key, version)

    def _exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk
        return bytes(buf)
