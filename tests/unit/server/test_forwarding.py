"""The pure parts of forwarding to a partition's leader (``protocol/forwarding.py``): which
answer headers pass back, how parsed records are written for the leader, and how the
leader's answers become per-record outcomes."""

from __future__ import annotations

import base64

from brokernodes.server.protocol.forwarding import (
    ForwardOutcomeUnknownError,
    batch_outcomes,
    binary_produce_frame,
    entry_json,
    error_from,
    passed_back,
    stream_outcomes,
)
from brokernodes.server.protocol.json_records import ProduceEntry, parse_entry
from brokernodes.server.protocol.ws_frames import parse_binary_produce


def test_answer_headers_passed_back():
    got = passed_back(
        [
            ("Content-Type", "application/json"),
            ("Sluice-High-Watermark", "7"),
            ("Sluice-Forwarded", "2"),
            ("Server", "Sluice"),
            ("Retry-After", "1"),
            ("Date", "x"),
        ]
    )
    assert got == {
        "Content-Type": "application/json",
        "Sluice-High-Watermark": "7",
        "Retry-After": "1",
    }


def test_entry_json_round_trips_the_exact_bytes():
    entry = ProduceEntry(
        id="a",
        partition=None,
        key=b"\x00k",
        value=b'{"x": 1}',
        headers=(("h", b"\xff"), ("n", None)),
        timestamp=1234,
        key_type="BINARY",
        value_type="JSON",
    )
    obj = entry_json(entry, 5, "7")
    assert obj["partition_id"] == 5 and obj["id"] == "7"
    again = parse_entry(obj)
    assert (again.key, again.value, again.headers, again.timestamp, again.partition) == (
        b"\x00k",
        b'{"x": 1}',
        (("h", b"\xff"), ("n", None)),
        1234,
        5,
    )
    tombstone = entry_json(ProduceEntry(None, None, None, None, (), None, None, None), 0)
    assert tombstone == {"partition_id": 0, "value": None}
    assert base64.b64decode(obj["key"]["data"]) == b"\x00k"


def test_batch_outcomes_by_id_and_missing_ids_unknown():
    doc = {
        "successes": [
            {"id": "0", "partition_id": 3, "offset": 9, "timestamp": "2026-11-23T12:00:00.000Z"}
        ],
        "failures": [
            {
                "id": "1",
                "error_code": 40403,
                "sluice_code": "UNKNOWN_TOPIC_OR_PARTITION",
                "message": "m",
            }
        ],
    }
    out = batch_outcomes(doc, ["0", "1", "2"], 207, "leader")
    assert (out["0"].partition, out["0"].offset, out["0"].error) == (3, 9, None)
    assert out["0"].timestamp == 1795435200000
    assert out["1"].error.error_code == "UNKNOWN_TOPIC_OR_PARTITION"
    assert isinstance(out["2"].error, ForwardOutcomeUnknownError)


def test_a_refused_sub_batch_fails_every_entry_with_the_leaders_error():
    out = batch_outcomes(
        {"error_code": "NOT_LEADER_OR_FOLLOWER", "message": "moved", "leader_id": 3},
        ["a", "b"],
        421,
        "x",
    )
    assert {o.error.error_code for o in out.values()} == {"NOT_LEADER_OR_FOLLOWER"}
    assert out["a"].error.details == {"leader_id": 3}


def test_error_without_a_body_is_named_by_its_status():
    assert error_from(None, 502, "leader").error_code == "NETWORK_EXCEPTION"
    assert error_from(b"junk", 400, "leader").error_code == "UNKNOWN_SERVER_ERROR"


def test_stream_outcomes_in_record_order():
    ok = stream_outcomes(
        {"id": 1, "offsets": [{"partition_id": 0, "offset": 4}, {"partition_id": 1, "offset": 2}]},
        2,
        "l",
    )
    assert [(o.partition, o.offset, o.error) for o in ok] == [(0, 4, None), (1, 2, None)]
    half = stream_outcomes(
        {
            "id": 1,
            "error_code": "NOT_ENOUGH_REPLICAS",
            "message": "m",
            "offsets": [
                {"partition_id": 0, "offset": 4},
                {
                    "partition_id": 1,
                    "offset": None,
                    "error_code": "NOT_ENOUGH_REPLICAS",
                    "message": "m",
                },
            ],
        },
        2,
        "l",
    )
    assert half[0].offset == 4 and half[1].error.error_code == "NOT_ENOUGH_REPLICAS"
    bad = stream_outcomes(
        {"id": 1, "error_code": "TOPIC_AUTHORIZATION_FAILED", "message": "no"}, 3, "l"
    )
    assert [o.error.error_code for o in bad] == ["TOPIC_AUTHORIZATION_FAILED"] * 3


def test_binary_frame_rebuilt_as_sent():
    frame = (
        b"\x01"
        + (7).to_bytes(8, "big")
        + (2).to_bytes(4, "big")
        + (3).to_bytes(2, "big")
        + b"top"
        + b"BATCHES"
    )
    request = parse_binary_produce(frame)
    assert binary_produce_frame(request) == frame


def test_made_up_instance_names_carry_their_broker():
    from brokernodes.proxy.instance_routing import instance_name, owner_of

    name = instance_name(12)
    assert name.startswith("rest-b12-") and owner_of(name) == 12
    assert owner_of("mine") is None and owner_of("rest-0123456789abcdef") is None
    assert owner_of("rest-bx-00") is None
