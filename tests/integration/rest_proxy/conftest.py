"""A broker with the REST proxy (v2 consumer instances) and ``__consumer_offsets``, and a
small HTTP client that keeps what Confluent's examples show: status, headers, body."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator

import pytest

from tests.integration.conftest import DEFAULT_TOPICS, BrokerLauncher, BrokerProcess

TOPICS = {
    **DEFAULT_TOPICS,
    "__consumer_offsets": (4, {"cleanup.policy": "compact"}),
    "v2-json": (1, {}),
    "v2-binary": (1, {}),
    "v2-consume": (1, {}),
}
JSON = "application/json"
V2 = "application/vnd.kafka.v2+json"
V2_JSON = "application/vnd.kafka.json.v2+json"
V2_BINARY = "application/vnd.kafka.binary.v2+json"


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    launcher = BrokerLauncher(tmp_path_factory.mktemp("rest-proxy"))
    try:
        yield launcher(TOPICS)
    finally:
        launcher.close()


class Answer:
    def __init__(self, status: int, headers: dict[str, str], raw: bytes) -> None:
        self.status = status
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.raw = raw

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").partition(";")[0].strip()

    def json(self):
        return json.loads(self.raw) if self.raw else None

    def __repr__(self) -> str:
        return f"<{self.status} {self.content_type} {self.raw[:300]!r}>"


def call(
    broker: BrokerProcess,
    method: str,
    path: str,
    body: object = None,
    *,
    content_type: str | None = JSON,
    accept: str | None = None,
    auth: bool = True,
) -> Answer:
    """One request as curl sends Confluent's examples (``body`` JSON, or bytes as they are)."""
    conn = http.client.HTTPConnection("127.0.0.1", broker.port, timeout=15)
    try:
        headers = dict(broker.headers) if auth else {}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            if content_type is not None:
                headers["Content-Type"] = content_type
        if accept is not None:
            headers["Accept"] = accept
        conn.request(method, path, data, headers)
        resp = conn.getresponse()
        return Answer(resp.status, dict(resp.getheaders()), resp.read())
    finally:
        conn.close()


class ChunkedStream:
    """A produce request whose body is sent in chunks while its answer is read: what
    ``curl -H 'Transfer-Encoding: chunked' -T-`` does with records typed one by one."""

    def __init__(self, broker: BrokerProcess, path: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
        head = [
            f"POST {path} HTTP/1.1",
            f"Host: 127.0.0.1:{broker.port}",
            f"Authorization: {broker.headers['Authorization']}",
            "Content-Type: application/json",
            "Transfer-Encoding: chunked",
        ]
        self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        self.buf = b""
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = b""  # the decoded answer so far

    def send(self, data: bytes) -> None:
        self.sock.sendall(b"%x\r\n%s\r\n" % (len(data), data))

    def end(self) -> None:
        self.sock.sendall(b"0\r\n\r\n")

    def _read(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buf += chunk
        return bool(chunk)

    def _decode(self) -> bool:
        """Move whole chunks from ``buf`` to ``body``; True once the last chunk came."""
        if self.status is None:
            if b"\r\n\r\n" not in self.buf:
                return False
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            self.status = int(lines[0].split()[1])
            for line in lines[1:]:
                k, _, v = line.partition(":")
                self.headers[k.strip().lower()] = v.strip()
        if "content-length" in self.headers:  # an ordinary answer (an error before the body)
            length = int(self.headers["content-length"])
            if len(self.buf) < length:
                return False
            self.body, self.buf = self.buf[:length], self.buf[length:]
            return True
        while b"\r\n" in self.buf:
            size_line, rest = self.buf.split(b"\r\n", 1)
            size = int(size_line, 16)
            if len(rest) < size + 2:
                return False
            self.body += rest[:size]
            self.buf = rest[size + 2 :]
            if size == 0:
                return True
        return False

    def lines(self, n: int, timeout: float = 10.0) -> list[dict]:
        """Wait (bounded) until the answer holds ``n`` JSON lines; return them."""
        deadline = time.monotonic() + timeout
        while self.body.count(b"\n") < n:
            self._decode()
            if self.body.count(b"\n") >= n:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{n} answers did not arrive: {self.body!r}")
            if not self._read():
                raise AssertionError(f"connection closed after {self.body!r}")
        return [json.loads(x) for x in self.body.splitlines()[:n]]

    def finish(self, timeout: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while not self._decode():
            if time.monotonic() > deadline or not self._read():
                raise AssertionError(f"the answer did not end: {self.body!r}")
        return [json.loads(x) for x in self.body.splitlines()]

    def close(self) -> None:
        self.sock.close()
