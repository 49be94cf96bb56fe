"""Our codecs against an implementation we did not write: kafka-python 3.0.12 builds its
protocol classes from Kafka's own JSON message definitions.

- The schema: every field of every message we speak has Kafka's name, type, versions,
  nullable versions, tag and tagged versions (defaults equal up to the zero value).
- The bytes: for every API and version both sides know, a value we encode decodes with
  kafka-python to the same fields, and kafka-python re-encodes it to the very same bytes
  (so kafka-python's encoding of that value is what we decode).
- Requests as kafka-python's client builds them decode with ours.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import uuid
from pathlib import Path

import kafka.protocol
import kafka.protocol.schemas
import pytest
from hypothesis import HealthCheck, given, settings
from kafka.protocol.api_message import ApiMessage

from brokernodes.server.protocol.kafka import apis, codec
from brokernodes.server.protocol.kafka.schema import Field, parse_versions
from tests.unit.kafka.codec_values import every_message_version, message_value, plain

RESOURCES = Path(kafka.protocol.schemas.__file__).parent / "resources"
# kafka-python turns these int32 bit fields into sets of operations under another name
RENAMED = {"authorized_operations", "cluster_authorized_operations", "topic_authorized_operations"}


def _kafka_python_messages() -> dict[str, type]:
    for m in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        if ".old" not in m.name and "generate_stubs" not in m.name:
            importlib.import_module(m.name)
    found: dict[str, type] = {}
    todo = list(ApiMessage.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None and cls.__dict__.get("_json"):
            found[cls.__name__] = cls
    return found


KP = _kafka_python_messages()
SHARED = [
    (spec, version)
    for spec, version in every_message_version()
    if spec.api + spec.kind.capitalize() in KP
    and version <= KP[spec.api + spec.kind.capitalize()].max_version
]


def test_kafka_python_knows_most_of_what_we_speak():
    ours = {spec.api for spec, _ in every_message_version()}
    theirs = {spec.api for spec, _ in SHARED}
    # KIP-848's ConsumerGroupHeartbeat/Describe are newer than kafka-python's set
    assert ours - theirs <= {"ConsumerGroupHeartbeat", "ConsumerGroupDescribe"}
    assert len(SHARED) > 300


# --- the schema against Kafka's JSON definitions -------------------------------------------


def _load_json(name: str) -> dict:
    text = re.sub(r"^\s*//.*$", "", (RESOURCES / f"{name}.json").read_text(), flags=re.M)
    doc = json.loads(text)
    commons = {c["name"]: c for c in doc.get("commonStructs", [])}

    def resolve(fields: list[dict]) -> None:
        for f in fields:
            base = f["type"].removeprefix("[]")
            if "fields" not in f and base in commons:
                f["fields"] = commons[base]["fields"]
            resolve(f.get("fields", []))

    resolve(doc["fields"])
    return doc


def _clip(text: str | None, low: int, high: int) -> tuple[int, int] | None:
    if text is None or text == "none":
        return None
    a, b = parse_versions(text)
    a, b = max(a, low), min(b, high)
    return (a, b) if a <= b else None


def _zero(default) -> object:
    """A default as a comparable value: no default = the type's zero."""
    if default in (None, "", "0", "false", 0, False):
        return 0
    try:
        return int(str(default), 0)
    except ValueError:
        return str(default).lower()


def _compare(ours: list[Field], theirs: list[dict], low: int, high: int, path: str) -> list:
    problems = []
    kafka = {}
    for t in theirs:
        versions = _clip(t.get("versions"), low, high)
        if versions:
            kafka[t["name"]] = (t, versions)
    mine = {f.name: f for f in ours}
    problems += [f"{path}.{n}: only in Kafka's" for n in kafka.keys() - mine.keys()]
    problems += [f"{path}.{n}: only in ours" for n in mine.keys() - kafka.keys()]
    for name in mine.keys() & kafka.keys():
        f, (t, versions) = mine[name], kafka[name]
        where = f"{path}.{name}"
        ours_versions = (max(f.versions[0], low), min(f.versions[1], high))
        if ours_versions != versions:
            problems.append(f"{where}: versions {ours_versions} != {versions}")
        if f.is_array != t["type"].startswith("[]"):
            problems.append(f"{where}: array or not")
        kafka_type = t["type"].removeprefix("[]")
        if not f.is_struct and f.element != kafka_type:
            problems.append(f"{where}: type {f.element} != {kafka_type}")
        nullable = None
        if f.nullable is not None:
            a, b = max(f.nullable[0], versions[0]), min(f.nullable[1], versions[1])
            nullable = (a, b) if a <= b else None
        if nullable != _clip(t.get("nullableVersions"), *versions):
            problems.append(f"{where}: nullable {nullable} != {t.get('nullableVersions')}")
        if f.tag != t.get("tag"):
            problems.append(f"{where}: tag {f.tag} != {t.get('tag')}")
        elif f.tag is not None:
            tagged = f.tag_versions or f.versions
            tagged = (max(tagged[0], low), min(tagged[1], high))
            if tagged != _clip(t.get("taggedVersions"), low, high):
                problems.append(f"{where}: tagged versions {tagged}")
        if _zero(f.default) != _zero(t.get("default")):
            problems.append(f"{where}: default {f.default!r} != {t.get('default')!r}")
        if f.is_struct:
            problems += _compare(f.fields, t.get("fields", []), *ours_versions, where)
    return problems


@pytest.mark.parametrize(
    "spec",
    sorted({id(s): s for s, _ in SHARED}.values(), key=lambda s: (s.api_key, s.kind)),
    ids=lambda s: f"{s.api}{s.kind.capitalize()}",
)
def test_schema_matches_kafkas_message_definition(spec):
    doc = _load_json(spec.api + spec.kind.capitalize())
    assert doc["apiKey"] == spec.api_key
    valid = parse_versions(doc["validVersions"])
    assert valid[0] <= spec.versions[0] and spec.versions[1] <= valid[1]
    flexible = doc.get("flexibleVersions")
    assert (None if flexible in (None, "none") else parse_versions(flexible)[0]) == (
        spec.flexible_from
    )
    assert _compare(spec.fields, doc["fields"], *spec.versions, spec.api) == []


# --- the bytes -----------------------------------------------------------------------------


def _their_fields(obj, struct, version: int) -> dict:
    out = {}
    for f in struct._fields:
        if f.for_version_q(version) and f.name not in RENAMED:
            out[f.name] = _their_value(getattr(obj, f.name), f, version)
    return out


def _their_value(value, f, version: int):
    if value is None:
        return None
    if f.is_struct():
        return _their_fields(value, f, version)
    if f.is_struct_array():
        return [_their_fields(x, f, version) for x in value]
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, list):
        return [x.bytes if isinstance(x, uuid.UUID) else x for x in value]
    return value


def _our_fields(m: dict, fields: list[Field], version: int) -> dict:
    out = {}
    for f in fields:
        if not f.present(version) or f.key in RENAMED:
            continue
        value = m[f.key]
        if f.type == "uuid" and value == bytes(16):
            value = None  # kafka-python reads the zero UUID as None
        elif f.is_struct and value is not None:
            value = (
                [_our_fields(x, f.fields, version) for x in value]
                if f.is_array
                else _our_fields(value, f.fields, version)
            )
        out[f.key] = value
    return out


@pytest.mark.parametrize(
    ("spec", "version"), SHARED, ids=[f"{s.api}-{s.kind}-v{v}" for s, v in SHARED]
)
def test_bytes_agree_with_kafka_python(spec, version):
    ours = codec.compile_message(spec, version)
    theirs = KP[spec.api + spec.kind.capitalize()]

    @settings(max_examples=5, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(message_value(spec, version))
    def agree(value):
        if spec.api == "ApiVersions" and spec.kind == "response":
            value["error_code"] = 0  # kafka-python reads an error answer as v0 (as Kafka does)
        data = bytes(ours.encode_new(value))
        obj = theirs.decode(data, version=version)
        obj._header = None  # decode leaves it unset; encode reads it
        assert _their_fields(obj, theirs._struct, version) == _our_fields(
            value, spec.fields, version
        )
        their_bytes = bytes(obj.encode(version=version))
        assert their_bytes == data
        assert plain(ours.decode_all(their_bytes)) == value

    agree()


# --- requests as kafka-python's client builds them -----------------------------------------


def _decode_request(message, version: int) -> dict:
    data = bytes(message.encode(version=version))
    return apis.request_codec(message.API_KEY, version).decode_all(memoryview(data))


def test_kafka_python_metadata_request_decodes():
    request_cls = KP["MetadataRequest"]
    message = request_cls(
        topics=[request_cls.MetadataRequestTopic(name="orders", topic_id=None)],
        allow_auto_topic_creation=False,
    )
    for version in (1, 4, 8, 9, 12):
        m = _decode_request(message, version)
        assert [t["name"] for t in m["topics"]] == ["orders"]
        assert m["allow_auto_topic_creation"] is (version < 4)  # absent before v4: true


def test_kafka_python_produce_request_decodes():
    request_cls = KP["ProduceRequest"]
    batch = b"\x00" * 61 + b"payload"
    topic = request_cls.TopicProduceData(
        name="orders",
        partition_data=[request_cls.TopicProduceData.PartitionProduceData(index=2, records=batch)],
    )
    message = request_cls(transactional_id=None, acks=-1, timeout_ms=1500, topic_data=[topic])
    for version in (3, 8, 9):
        m = _decode_request(message, version)
        assert (m["acks"], m["timeout_ms"], m["transactional_id"]) == (-1, 1500, None)
        partition = m["topic_data"][0]["partition_data"][0]
        assert (m["topic_data"][0]["name"], partition["index"]) == ("orders", 2)
        assert bytes(partition["records"]) == batch


def test_kafka_python_fetch_request_decodes():
    request_cls = KP["FetchRequest"]
    topic_id = uuid.uuid4()
    partition = request_cls.FetchTopic.FetchPartition(
        partition=1, fetch_offset=42, partition_max_bytes=1 << 20, current_leader_epoch=3
    )
    message = request_cls(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 24,
        isolation_level=1,
        topics=[request_cls.FetchTopic(topic="orders", topic_id=topic_id, partitions=[partition])],
    )
    for version, by_id in ((4, False), (11, False), (12, False), (13, True), (15, True)):
        m = _decode_request(message, version)
        t = m["topics"][0]
        assert (t["topic_id"] == topic_id.bytes) is by_id
        assert (t["topic"] == "orders") is not by_id
        p = t["partitions"][0]
        assert (p["partition"], p["fetch_offset"], p["partition_max_bytes"]) == (1, 42, 1 << 20)
        assert p["current_leader_epoch"] == (3 if version >= 9 else -1)
        assert (m["max_wait_ms"], m["min_bytes"], m["isolation_level"]) == (500, 1, 1)


def test_our_responses_decode_with_kafka_python():
    response_cls = KP["MetadataResponse"]
    body = {
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "c1",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "orders",
                "topic_id": uuid.UUID(int=5).bytes,
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_id": 1,
                        "leader_epoch": 4,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                    }
                ],
            }
        ],
    }
    for version in (1, 7, 9, 12):
        data = bytes(apis.response_codec(apis.METADATA, version).encode_new(body))
        decoded = response_cls.decode(data, version=version)
        assert decoded.brokers[0].host == "127.0.0.1"
        topic = decoded.topics[0]
        assert topic.name == "orders"
        assert topic.partitions[0].leader_id == 1
        if version >= 10:
            assert topic.topic_id == uuid.UUID(int=5)
        if version >= 7:
            assert topic.partitions[0].leader_epoch == 4
