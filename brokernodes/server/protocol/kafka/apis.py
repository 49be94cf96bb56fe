"""The Kafka APIs Sluice speaks: keys, names, supported versions, and their codecs (compiled
from ``messages/`` on first use and kept).

The supported range of every API is the range of its schema file; ApiVersions advertises
exactly these, and a request for any other API or version is answered UNSUPPORTED_VERSION
(docs/kafka-protocol.md has the table).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from brokernodes.server.protocol.kafka.codec import MessageCodec, compile_message
from brokernodes.server.protocol.kafka.schema import MessageSpec, load_all


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None

    def flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


@functools.cache
def _specs() -> dict[tuple[int, str], MessageSpec]:
    return load_all()


@functools.cache
def apis() -> dict[int, Api]:
    """Every supported API by key (the request schema decides the range)."""
    result = {}
    for (key, kind), spec in _specs().items():
        if kind == "request":
            low, high = spec.versions
            result[key] = Api(key, spec.api, low, high, spec.flexible_from)
    return dict(sorted(result.items()))


@functools.cache
def request_codec(api_key: int, version: int) -> MessageCodec:
    return compile_message(_specs()[api_key, "request"], version)


@functools.cache
def response_codec(api_key: int, version: int) -> MessageCodec:
    return compile_message(_specs()[api_key, "response"], version)


# API keys by name, for handlers' tables
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
SASL_HANDSHAKE = 17
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
TXN_OFFSET_COMMIT = 28
DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
SASL_AUTHENTICATE = 36
CREATE_PARTITIONS = 37
DELETE_GROUPS = 42
INCREMENTAL_ALTER_CONFIGS = 44
OFFSET_DELETE = 47
DESCRIBE_CLUSTER = 60
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66
CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
