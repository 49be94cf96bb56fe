"""Hostile tenants against the real control plane (runserver on the local settings) and a
real broker (a process pulling the metadata log): credentials sent in odd places never reach
either's logs; a DENY for an IPv4-mapped host applies to the IPv4 client; every operation of
the OpenAPI schema answers hostile inputs with a 4xx, never a 5xx; unknown API routes are
JSON 404s (DEBUG off) and the local secret lives in var/ (0600)."""

from __future__ import annotations

import asyncio
import json
import socket
import stat
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.client import HTTPConnection
from http.cookiejar import CookieJar

import aiohttp
import pytest

from tests.unit.control.bad_input_walk import cases, problem

from .conftest import ControlPlane, Proc, free_port, http, start_control_plane, wait_for

MAX_BODY = 64 * 1024
LOGIN_RATE = 20
ASGI_APP = "backend.asgi:application"


class Session:
    """A person in the console API: cookies, the CSRF token on writes."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        with self.opener.open(url + "/api/v1/auth/csrf", timeout=10):
            pass

    def call(self, method: str, path: str, body=None, headers=None) -> tuple[int, dict]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        token = next((c.value for c in self.jar if c.name == "csrftoken"), "")
        req.add_header("X-CSRFToken", token)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with self.opener.open(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            with e:
                return e.code, json.loads(e.read() or b"{}")


def create_user(cp: ControlPlane, username: str, password: str) -> None:
    cp.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.create_user({username!r}, password={password!r})",
    )


@pytest.fixture(scope="module")
def cp(tmp_path_factory) -> Iterator[ControlPlane]:
    env = {
        "SLUICE_MAX_REQUEST_BYTES": str(MAX_BODY),
        "SLUICE_LOG_LEVEL": "DEBUG",
        "SLUICE_LOGIN_RATE": f"{LOGIN_RATE}/min",
    }
    with start_control_plane(tmp_path_factory.mktemp("hostile"), env) as plane:
        yield plane


@pytest.fixture(scope="module")
def tenant(cp) -> dict:
    return cp.tenant("hostile")


@pytest.fixture(scope="module")
def broker(cp, tenant):
    b = cp.start_broker(1)
    status, _ = cp.api(
        "POST",
        "topics/",
        {"name": "t", "partitions": 1, "replication_factor": 1},
        key=tenant["api_key"],
    )
    assert status == 201
    return b


def raw(url: str, request: bytes, timeout: float = 5.0) -> bytes:
    """Send ``request`` as is on a new connection; what came back before the close."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(request)
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks):
                break
        return b"".join(chunks)


def odd_requests(key: str, path: str) -> list[bytes]:
    k = key.encode()
    host = b"Host: 127.0.0.1\r\n"
    sep = b"?" if b"?" not in path.encode() else b"&"
    upgrade = (
        b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    )
    p = path.encode()
    return [
        b"GET " + p + b" HTTP/1.1\r\n" + host + b"Authorization: Bearer " + k + b"\x00\r\n\r\n",
        b"GET " + p + sep + b"api_key=" + k + b" HTTP/1.1\r\n" + host + b"\r\n",
        b"GET " + p + b" HTTP/1.1\r\n" + host + k + b"\r\n\r\n",  # a header without a colon
        b"GET " + p + b" HTTP/1.1\r\n" + host + b"X-Api-Key: " + k + b"\x01\r\n\r\n",
        b"GET " + p + b" HTTP/1.1\r\n" + host + b"Cookie: sessionid=" + k + b"\r\n\r\n",
        b"GET "
        + p
        + b" HTTP/1.1\r\n"
        + host
        + upgrade
        + b"Sec-WebSocket-Protocol: "
        + k
        + b"\r\n\r\n",
        b"GET /" + k + b"\x00 HTTP/1.1\r\n" + host + b"\r\n",
    ]


def test_credentials_in_odd_places_never_reach_the_logs(cp, tenant, broker):
    key = tenant["api_key"]
    key_id, secret = key.split(".", 1)
    ws_path = "/sluice/v1/ws/consume?topic=t&partition=0&from=earliest"
    for request in odd_requests(key, ws_path) + odd_requests(key, "/sluice/v1/metadata"):
        raw(broker.url, request)
    for request in odd_requests(key, "/api/v1/topics/"):
        raw(cp.url, request)

    async def websockets() -> None:
        async with aiohttp.ClientSession() as session:
            # the key as a subprotocol (no auth message follows), then NUL-suffixed in the
            # first message's auth
            for protocols, first in (((key,), None), ((), {"auth": key + "\x00"})):
                try:
                    async with session.ws_connect(broker.url + ws_path, protocols=protocols) as ws:
                        if first is not None:
                            await ws.send_str(json.dumps(first))
                        await ws.receive(timeout=2)
                except (aiohttp.ClientError, TimeoutError):
                    pass

    asyncio.run(websockets())
    # a wrong secret, a NUL-suffixed key and a password that is a key, through the APIs
    http("GET", f"{broker.url}/sluice/v1/metadata", key=key[:-2] + "zz")
    http("GET", f"{cp.url}/api/v1/topics/?token={key}", key=key[:-2] + "zz")
    http("POST", f"{cp.url}/api/v1/auth/login", {"username": "x", "password": key})
    time.sleep(1.0)  # let both processes write their lines

    logs = {
        "broker": broker.log.read_text(errors="replace"),
        "control plane": cp.server.log.read_text(errors="replace"),
    }
    for name, text in logs.items():
        assert text.strip(), f"the {name} logged nothing"
        for leaked in (secret, secret[:16], secret[-16:]):
            assert leaked not in text, f"the {name} log holds the key's secret"
    assert key_id in logs["broker"] + logs["control plane"], "no request was logged at all"


def test_a_deny_for_an_ipv4_mapped_host_applies_to_the_ipv4_client(cp, tenant, broker):
    key = tenant["api_key"]

    def produce():
        return http(
            "POST",
            f"{broker.url}/v3/clusters/sluice-local/topics/t/records",
            {"partition_id": 0, "value": {"type": "STRING", "data": "v"}},
            key=key,
        )

    wait_for("the partition", lambda: produce()[0] == 200, timeout=20)
    status, binding = cp.api(
        "POST",
        "acls/",
        {
            "principal": "User:*",
            "host": "::ffff:127.0.0.1",
            "resource_type": "TOPIC",
            "resource_name": "t",
            "operation": "WRITE",
            "permission": "DENY",
        },
        key=key,
    )
    assert status == 201 and binding["host"] == "127.0.0.1", binding
    status, body = wait_for("the DENY to apply", lambda: (r := produce())[0] == 403 and r)
    assert (body["error_code"], body["sluice_code"]) == (40301, "TOPIC_AUTHORIZATION_FAILED")
    status, body = cp.api(
        "POST",
        "acls/",
        {
            "principal": "User:*x",
            "resource_type": "TOPIC",
            "resource_name": "t",
            "operation": "READ",
        },
        key=key,
    )
    assert status == 400 and "principal" in body["fields"], body
    assert cp.api("DELETE", f"acls/{binding['id']}", key=key)[0] == 204
    wait_for("the DENY to go", lambda: produce()[0] == 200, timeout=20)


def test_every_operation_answers_hostile_inputs_with_a_4xx(cp, tenant):
    key = tenant["api_key"]
    status, accounts = cp.api("GET", "service-accounts/", key=key)
    assert status == 200, accounts
    own = next(a for a in accounts if a["name"] == "hostile-app")
    status, topic = cp.api("POST", "topics/", {"name": "walked", "replication_factor": 1}, key=key)
    assert status == 201, topic
    values = {"name": "walked", "service_account_id": own["id"], "organisation": "hostile"}
    problems, seen = [], 0
    for case in cases(values, MAX_BODY):
        if case.method == "DELETE":
            continue  # the deletes would remove what the other cases need (unit walk has them)
        data = case.body.encode() if isinstance(case.body, str) else case.body
        conn = HTTPConnection("127.0.0.1", cp.port, timeout=30)
        try:
            conn.request(
                case.method,
                case.url,
                body=data,
                headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            )
            response = conn.getresponse()
            status, content = response.status, response.read()
        except (ConnectionError, OSError) as exc:  # the server closed on an oversized body
            status, content = 0, str(exc).encode()
        finally:
            conn.close()
        seen += 1
        if status == 0:
            problems.append(f"{case.method} {case.url} ({case.what}): connection failed")
            continue
        why = problem(case, status, content)
        if why:
            problems.append(why)
    assert seen > 150
    assert not problems, "\n".join(problems)
    # a key deleting its own service account: refused, the account stays
    status, body = cp.api("DELETE", f"service-accounts/{own['id']}", key=key)
    assert status == 409 and body["error_code"] == "CONFLICT", body
    assert cp.api("GET", "topics/", key=key)[0] == 200


def test_unknown_api_routes_are_json_and_the_secret_is_private(cp):
    for path in ("/api/v1/no-such-route", "/api/nothing", "/internal/v1/nothing"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(cp.url + path, timeout=10)
        assert err.value.code == 404
        assert err.value.headers["Content-Type"] == "application/json"
        assert json.loads(err.value.read())["error_code"] == "NOT_FOUND"
    secret_file = cp.workdir / "var" / "secret_key"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert len(secret_file.read_text().strip()) >= 50


def test_joining_takes_an_invitation_the_person_accepts(cp, tenant):
    key = tenant["api_key"]
    create_user(cp, "invitee", "invitee-password-1")
    known = cp.api("POST", "members/", {"username": "invitee", "role": "read-only"}, key=key)
    ghost = cp.api("POST", "members/", {"username": "no-such-user", "role": "read-only"}, key=key)
    assert known[0] == ghost[0] == 202, (known, ghost)
    assert set(known[1]) == set(ghost[1])

    person = Session(cp.url)
    status, me = person.call(
        "POST", "/api/v1/auth/login", {"username": "invitee", "password": "invitee-password-1"}
    )
    assert status == 200 and me["memberships"] == [], me
    status, mine = person.call("GET", "/api/v1/auth/invitations")
    assert status == 200 and [i["id"] for i in mine] == [known[1]["id"]], mine
    status, me = person.call("POST", f"/api/v1/auth/invitations/{known[1]['id']}/accept")
    assert status == 200, me
    assert [(m["organisation"]["slug"], m["role"]) for m in me["memberships"]] == [
        ("hostile", "read-only")
    ]
    assert person.call("GET", "/api/v1/topics/")[0] == 200


def test_sign_in_brakes_ignore_forged_addresses_and_lock_a_name(cp):
    create_user(cp, "victim", "victim-password-1")
    person = Session(cp.url)

    def login(username: str, password: str, i: int) -> tuple[int, dict]:
        forged = {"X-Forwarded-For": f"203.0.113.{i}"}
        body = {"username": username, "password": password}
        return person.call("POST", "/api/v1/auth/login", body, forged)

    # five wrong guesses lock the name: the right password is refused too
    assert [login("victim", f"guess-{i}", i)[0] for i in range(5)] == [400] * 5
    status, body = login("victim", "victim-password-1", 5)
    assert status == 429 and "username" in body["message"], body
    # the address budget counts every attempt whatever X-Forwarded-For says (the other
    # tests' sign-ins count too): within LOGIN_RATE more attempts the address is throttled
    codes = []
    for i in range(6, 6 + LOGIN_RATE):
        codes.append(login(f"stranger-{i}", "guess", i)[0])
        if codes[-1] != 400:
            break
    assert codes[-1] == 429, codes


def test_daphne_refuses_large_bodies_before_reading_them(cp, tenant):
    """``make up`` serves the control plane with Daphne (ASGI): a body announced or streamed
    past the limit is a 413 without Django spooling it, unknown API routes are JSON 404s."""
    port = free_port()
    daphne = Proc(
        "daphne",
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), ASGI_APP],
        cp.env,
        cp.workdir / "daphne.log",
        f"http://127.0.0.1:{port}",
    )
    daphne.start()
    try:
        daphne.wait_ready()
        auth = f"Authorization: Bearer {tenant['api_key']}\r\n".encode()
        head = b"POST /api/v1/topics/ HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth
        head += b"Content-Type: application/json\r\n"
        answer = raw(daphne.url, head + b"Content-Length: 10737418240\r\n\r\n{}")
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert b"PAYLOAD_TOO_LARGE" in answer
        chunk = b"%x\r\n%s\r\n" % (MAX_BODY, b" " * MAX_BODY)
        answer = raw(daphne.url, head + b"Transfer-Encoding: chunked\r\n\r\n" + chunk * 3)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        answer = raw(daphne.url, b"GET /api/v1/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 404") and b'"NOT_FOUND"' in answer, answer[:300]
        answer = raw(daphne.url, b"GET /api/v1/topics/ HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 400") and b"Host" in answer, answer[:300]
        head = answer.split(b"\r\n\r\n", 1)[0].lower()
        assert b"\r\nserver:" not in head or b"/" not in head.split(b"\r\nserver:")[1][:40]
    finally:
        daphne.stop()


def test_bad_host_headers_log_no_tracebacks(cp):
    before = len(cp.server.log.read_text(errors="replace"))
    for i in range(30):
        answer = raw(cp.url, b"GET /api/v1/topics/ HTTP/1.1\r\nHost: evil-%d.example\r\n\r\n" % i)
        assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    time.sleep(0.5)
    text = cp.server.log.read_text(errors="replace")[before:]
    assert "Traceback" not in text
    assert len([ln for ln in text.splitlines() if "Invalid HTTP_HOST" in ln]) <= 10, text[-2000:]
