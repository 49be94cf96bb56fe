"""The lean front's sans-IO HTTP/1.1 core (``protocol.http1``) on its own: events from bytes
however they are split, pipelining and keep-alive state, every hand-off rule with the status
it carries, and the answer serializer."""

from __future__ import annotations

import re

import pytest

from brokernodes.server.protocol import http1
from brokernodes.server.protocol.http1 import (
    END_OF_MESSAGE,
    MAX_HEAD,
    NEED_DATA,
    PAUSED,
    Data,
    HandOff,
    Request,
    RequestParser,
)

ROUTES = {
    ("POST", re.compile(r"/topics/(?P<topic>[^/]+)/batches")): "produce",
    ("GET", re.compile(r"/topics/(?P<topic>[^/]+)/records")): "fetch",
}
MAX_BODY = 64


def route(method: str, path: str):
    for (m, pattern), name in ROUTES.items():
        if m == method and (match := pattern.fullmatch(path)):
            return name, match.groupdict()
    return None


def parser() -> RequestParser:
    return RequestParser(route, MAX_BODY)


def post(body: bytes, path: str = "/topics/t/batches", extra: str = "") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: b\r\n{extra}Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def get(target: str = "/topics/t/records?offset=3&x=", extra: str = "") -> bytes:
    return f"GET {target} HTTP/1.1\r\nHost: b\r\n{extra}\r\n".encode()


def drain(p: RequestParser, answered: bool = True) -> list:
    """Every event the parser has now; answering each request at once (``answered``)."""
    events = []
    while True:
        event = p.next_event()
        if event is NEED_DATA or isinstance(event, HandOff):
            events.append(event)
            return events
        if event is PAUSED:
            if not answered or not p.keep_alive:
                events.append(event)
                return events
            p.start_next_cycle()
            continue
        events.append(event)


def summary(events: list) -> list:
    """Events as comparable values (a body's pieces are not split: it is given whole)."""
    out = []
    for e in events:
        if isinstance(e, Request):
            out.append(
                ("request", e.method, e.path, e.query_string, e.route, e.content_length,
                 e.keep_alive, tuple(e.headers.items()))
            )  # fmt: skip
        elif isinstance(e, Data):
            out.append(("data", bytes(e.data)))
        elif e is END_OF_MESSAGE:
            out.append("end")
        elif isinstance(e, HandOff):
            out.append(("handoff", e.status))
    return out


PIPELINE = (
    post(b"first")
    + get()
    + post(b"", extra="X-Trace: a:b\r\n")
    + post(b"x" * MAX_BODY, path="/topics/other/batches")
    + get("/topics/t/records", extra="Connection: keep-alive\r\n")
)


def test_pipelined_requests_give_the_same_events_split_at_every_byte_boundary():
    whole = parser()
    whole.receive_data(PIPELINE)
    expected = summary(drain(whole))
    assert expected[-1] == "end"  # then NEED_DATA, not in the summary
    assert [e for e in expected if e == "end"] == ["end"] * 5
    assert ("data", b"first") in expected and ("data", b"x" * MAX_BODY) in expected
    first = expected[0]
    assert first[:6] == ("request", "POST", "/topics/t/batches", "", ("produce", {"topic": "t"}), 5)
    fetch = expected[3]
    assert fetch[1:4] == ("GET", "/topics/t/records", "offset=3&x=")
    for cut in range(1, len(PIPELINE)):
        p = parser()
        p.receive_data(PIPELINE[:cut])
        events = drain(p)
        assert events[-1] is NEED_DATA, cut
        p.receive_data(PIPELINE[cut:])
        events += drain(p)
        assert summary(events) == expected, cut


def test_byte_at_a_time():
    p = parser()
    events = []
    for i in range(len(PIPELINE)):
        p.receive_data(PIPELINE[i : i + 1])
        events += drain(p)
    whole = parser()
    whole.receive_data(PIPELINE)
    assert summary(events) == summary(drain(whole))


def test_the_next_request_waits_until_the_answer_and_its_bytes_stay_buffered():
    p = parser()
    p.receive_data(get() + get())
    assert summary(drain(p, answered=False))[1:] == ["end"]
    assert p.next_event() is PAUSED
    assert p.trailing_data == get()  # the pipelined request, untouched
    p.start_next_cycle()
    assert summary(drain(p, answered=False))[1:] == ["end"]
    p.start_next_cycle()
    assert p.next_event() is NEED_DATA and p.state == http1.IDLE


def test_states_tell_the_shell_which_deadline_runs():
    p = parser()
    assert p.state == http1.IDLE and p.next_event() is NEED_DATA
    p.receive_data(b"PO")
    assert p.next_event() is NEED_DATA and p.state == http1.HEAD
    p.receive_data(post(b"body")[2:-2])
    assert isinstance(p.next_event(), Request)
    assert p.next_event() is NEED_DATA and p.state == http1.BODY
    p.receive_data(b"dy")
    assert bytes(p.next_event().data) == b"body"
    assert p.next_event() is END_OF_MESSAGE and p.state == http1.DONE


def test_connection_close_ends_the_cycle_for_good():
    p = parser()
    p.receive_data(get(extra="Connection: Keep-Alive, close\r\n") + get())
    events = drain(p)
    assert summary(events)[1:] == ["end"] and events[-1] is PAUSED
    assert events[0].keep_alive is False and p.keep_alive is False
    with pytest.raises(RuntimeError):
        p.start_next_cycle()


def test_start_next_cycle_before_the_request_is_read_is_a_bug():
    p = parser()
    p.receive_data(b"GET /topics")
    with pytest.raises(RuntimeError, match="HEAD"):
        p.start_next_cycle()


# what the core hands off, with the status the request warrants (0: only not served here)
HAND_OFFS = {
    "tls": (b"\x16\x03\x01\x02\x00", 400),
    "lower-case method": (b"get /topics/t/records HTTP/1.1\r\nHost: b\r\n\r\n", 400),
    "nul in head": (get(extra="X-A: a\0b\r\n"), 400),
    "bare cr in head": (get(extra="X-A: a\rb\r\n"), 400),
    "no host": (b"GET /topics/t/records HTTP/1.1\r\nX: y\r\n\r\n", 400),
    "header without colon": (get(extra="Broken\r\n"), 400),
    "space before colon": (get(extra="X-A : b\r\n"), 400),
    "duplicate length": (post(b"ab", extra="Content-Length: 2\r\n"), 400),
    "signed length": (post(b"ab").replace(b"Length: 2", b"Length: +2"), 400),
    "non-ascii header name": (get(extra="X-\xe9: b\r\n".encode("latin-1").decode("latin-1")), 400),
    "non-ascii target": (
        "GET /topics/\xe9/records HTTP/1.1\r\nHost: b\r\n\r\n".encode("latin-1"),
        400,
    ),
    "oversize body": (post(b"x" * (MAX_BODY + 1)), 413),
    "oversize head": (get(extra=f"X-Pad: {'p' * MAX_HEAD}\r\n"), 431),
    "http/1.0": (get().replace(b"HTTP/1.1", b"HTTP/1.0"), 0),
    "put": (get().replace(b"GET", b"PUT", 1), 0),
    "absolute target": (get("http://b/topics/t/records"), 0),
    "percent-escape": (get("/topics/%74/records"), 0),
    "fragment": (get("/topics/t/records#x"), 0),
    "other route": (get("/metrics"), 0),
    "wrong method for the route": (post(b"", path="/topics/t/records"), 0),
    "chunked": (post(b"").replace(b"Content-Length: 0", b"Transfer-Encoding: chunked"), 0),
    "expect": (post(b"ab", extra="Expect: 100-continue\r\n"), 0),
    "upgrade header": (get(extra="Upgrade: websocket\r\n"), 0),
    "connection upgrade": (get(extra="Connection: Upgrade\r\n"), 0),
    "post without length": (b"POST /topics/t/batches HTTP/1.1\r\nHost: b\r\n\r\n", 0),
    "get with a body": (get(extra="Content-Length: 1\r\n") + b"x", 0),
}


@pytest.mark.parametrize("case", sorted(HAND_OFFS))
def test_hand_offs_keep_every_byte_and_carry_the_status(case):
    data, status = HAND_OFFS[case]
    p = parser()
    p.receive_data(data)
    event = p.next_event()
    assert isinstance(event, HandOff), (case, event)
    assert event.status == status, (case, event)
    assert event.reason
    assert p.trailing_data == data  # the full server reads the request from its first byte
    assert p.state == http1.HANDED_OFF and isinstance(p.next_event(), HandOff)


def test_a_hand_off_after_served_requests_passes_on_only_the_unserved_bytes():
    p = parser()
    tail = get("/metrics") + get()
    p.receive_data(get() + tail)
    events = drain(p)
    assert summary(events)[1:] == ["end", ("handoff", 0)]
    assert p.trailing_data == tail


def test_an_oversize_head_is_handed_off_however_it_arrives():
    data = get(extra=f"X-Pad: {'p' * MAX_HEAD}\r\n")
    for cut in (100, MAX_HEAD, MAX_HEAD + 1, len(data) - 1):
        p = parser()
        p.receive_data(data[:cut])
        event = p.next_event()
        if event is NEED_DATA:
            p.receive_data(data[cut:])
            event = p.next_event()
        assert isinstance(event, HandOff) and event.status == 431, cut


def test_a_head_just_under_the_limit_is_served():
    pad = MAX_HEAD - len(get(extra="X-Pad: \r\n")) + 4  # the head without its blank line
    p = parser()
    p.receive_data(get(extra=f"X-Pad: {'p' * pad}\r\n"))
    assert isinstance(p.next_event(), Request)


def test_header_values_are_stripped_and_names_keep_their_case():
    p = parser()
    p.receive_data(get(extra="X-Key:   v a l  \r\nauthorization:Bearer k\r\n"))
    head = p.next_event()
    assert head.headers["x-key"] == "v a l"
    assert head.headers["Authorization"] == "Bearer k"
    assert list(head.headers) == ["Host", "X-Key", "authorization"]


def test_response_serializer_frames_the_answer_itself():
    raw = http1.response(
        207,
        "Multi-Status",
        [("Content-Type", "application/json"), ("Content-Length", "999"), ("Date", "x"),
         ("Connection", "keep-alive"), ("Sluice-Throttle-Time-Ms", "0")],
        b'{"ok":1}',
        keep_alive=True,
    )  # fmt: skip
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"HTTP/1.1 207 Multi-Status"
    assert b"Content-Type: application/json" in lines
    assert b"Sluice-Throttle-Time-Ms: 0" in lines
    assert b"Content-Length: 8" in lines and b"Content-Length: 999" not in lines
    assert [line for line in lines if line.startswith(b"Date: ")] == [b"Date: " + http1._Date.now()]
    assert not any(line.startswith(b"Connection") for line in lines)
    assert body == b'{"ok":1}'


def test_response_head_for_a_closing_answer_and_a_body_sent_apart():
    head = http1.response_head(200, "OK", [], 1 << 20, keep_alive=False)
    assert head.endswith(b"Content-Length: 1048576\r\nDate: " + http1._Date.now() + b"\r\n"
                         b"Connection: close\r\n\r\n")  # fmt: skip
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")


def test_discard_drops_unread_bytes_and_a_partial_head():
    p = parser()
    p.receive_data(b"GET /topics/t/rec")
    assert p.next_event() is NEED_DATA and p.state == http1.HEAD
    p.discard()
    assert p.trailing_data == b"" and p.state == http1.IDLE and p.next_event() is NEED_DATA


def test_a_repeated_head_is_parsed_once_whatever_its_body_length():
    calls = []

    def counting(method, path):
        calls.append(path)
        return route(method, path)

    p = RequestParser(counting, MAX_BODY)
    extra = "Authorization: Bearer k\r\n"
    same = post(b"one", path="/topics/t/batches?acks=1", extra=extra)
    longer = post(b"four", path="/topics/t/batches?acks=1", extra=extra)
    p.receive_data(same + same.replace(b"one", b"two") + longer + same)
    events = drain(p)
    requests = [e for e in events if isinstance(e, Request)]
    bodies = [bytes(e.data) for e in events if isinstance(e, Data)]
    assert bodies == [b"one", b"two", b"four", b"one"]
    assert len(requests) == 4 and calls == ["/topics/t/batches"]  # parsed and routed once
    assert requests[0] is requests[1] is requests[3] and requests[2] is not requests[0]
    assert [r.content_length for r in requests] == [3, 3, 4, 3]
    assert requests[0].headers["Content-Length"] == "3"
    fresh = parser()
    fresh.receive_data(longer)
    assert summary([requests[2]]) == summary([fresh.next_event()])  # as if parsed afresh
    assert requests[0].query is requests[2].query  # the query, parsed once per head
    assert list(requests[0].query.items()) == [("acks", "1")]


def test_a_kept_head_with_a_length_the_parser_would_refuse_is_parsed_afresh():
    p = parser()
    p.receive_data(post(b"ab", extra="X-A: 1\r\n"))
    drain(p)
    over = post(b"x" * (MAX_BODY + 1), extra="X-A: 1\r\n")
    p.receive_data(over)
    event = p.next_event()
    assert isinstance(event, HandOff) and event.status == 413 and p.trailing_data == over
    for odd in (b"Length: +2", b"Length: 2 "):  # not all digits: the full parse's rules
        q = parser()
        q.receive_data(post(b"ab", extra="X-A: 1\r\n"))
        drain(q)
        data = post(b"ab", extra="X-A: 1\r\n").replace(b"Length: 2", odd)
        q.receive_data(data)
        expected = parser()
        expected.receive_data(data)
        assert summary(drain(q)) == summary(drain(expected))


def test_a_get_is_kept_only_without_a_length():
    p = parser()
    p.receive_data(get() + get(extra="Content-Length: 0\r\n"))
    drain(p)
    assert len(p._heads) == 1
    p.receive_data(get(extra="Content-Length: 1\r\n") + b"x")  # a GET with a body: aiohttp's
    event = p.next_event()
    assert isinstance(event, HandOff) and event.status == 0


def test_the_head_cache_is_bounded_and_never_keeps_a_hand_off():
    p = parser()
    for i in range(http1.HEAD_CACHE + 5):
        p.receive_data(post(b"x", extra=f"X-N: {i}\r\n"))
        drain(p)
    assert len(p._heads) == http1.HEAD_CACHE
    bad = post(b"x", extra="X-N: 0\r\nExpect: 100-continue\r\n")
    p.receive_data(bad)
    assert isinstance(p.next_event(), HandOff)
    assert len(p._heads) == http1.HEAD_CACHE and bad.split(b"\r\n\r\n")[0] not in p._heads


def test_an_answer_is_framed_as_the_generic_serializer_frames_it():
    headers = (("Content-Type", "application/json"), ("Sluice-Throttle-Time-Ms", "0"))
    answer = http1.Answer(200, headers, b'{"base_offset":0}')
    for keep_alive in (True, False):
        expected = http1.response(200, "OK", headers, answer.body, keep_alive)
        assert http1.answer(answer, keep_alive) == expected
        assert http1.answer(answer, keep_alive) == expected  # its head, kept encoded
    odd = http1.Answer(299, (), b"")
    assert http1.answer(odd, True).startswith(b"HTTP/1.1 299 \r\nContent-Length: 0\r\n")
