"""The accepted topic configs, docs/topic-configs.md and Kafka's DescribeConfigs list agree,
and the configs the broker does not honour are refused with a message saying so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from backend.topics.configs import KNOWN_CONFIGS, effective_configs, normalise_configs
from brokernodes.server.kafka import config_entries
from brokernodes.storage.config import COMPRESSION_TYPES, UNSUPPORTED_TOPIC_CONFIGS, LogConfig

DOC = Path(__file__).resolve().parents[3] / "docs" / "topic-configs.md"
ROW = re.compile(r"^\| `([a-z.]+)` \| (.+?) \|", re.MULTILINE)


def _tables() -> tuple[dict[str, str], set[str]]:
    """(accepted name -> documented default, refused names) from the page's two tables."""
    text = DOC.read_text()
    accepted_part, refused_part = text.split("## Refused until supported", 1)
    accepted = {name: rest.strip("` ") for name, rest in ROW.findall(accepted_part)}
    refused = {name for name, _ in ROW.findall(refused_part.split("\n## ", 1)[0])}
    return accepted, refused


def test_the_documented_table_is_known_configs_with_their_defaults():
    accepted, refused = _tables()
    assert set(accepted) == KNOWN_CONFIGS
    assert accepted == effective_configs({})
    assert refused == set(UNSUPPORTED_TOPIC_CONFIGS)


def test_describe_configs_lists_the_same_configs_and_defaults():
    assert config_entries.effective_configs({}) == effective_configs({})
    entries = config_entries.topic_entries(
        config_entries.effective_configs({}), {}, None, synonyms=False, documentation=True
    )
    assert {e["name"] for e in entries} == KNOWN_CONFIGS
    by_name = {e["name"]: e for e in entries}
    assert by_name["compression.type"]["config_type"] == config_entries.TYPE_STRING
    assert by_name["compression.type"]["value"] == "producer"


@pytest.mark.parametrize("name", sorted(UNSUPPORTED_TOPIC_CONFIGS))
def test_an_unsupported_config_is_refused_as_not_supported_yet(name):
    _, errors = normalise_configs({name: "1"}, replication_factor=1)
    (message,) = errors[name]
    assert message.startswith("not supported yet: ")
    assert UNSUPPORTED_TOPIC_CONFIGS[name] in message


@pytest.mark.parametrize("value", list(COMPRESSION_TYPES))
def test_compression_type_takes_kafkas_values(value):
    out, errors = normalise_configs({"compression.type": value}, replication_factor=1)
    assert errors == {} and out == {"compression.type": value}
    assert LogConfig.from_properties(out).compression_type == value


def test_bad_string_values_are_refused_with_the_choices():
    _, errors = normalise_configs(
        {"compression.type": "brotli", "message.timestamp.type": "Now"}, replication_factor=1
    )
    assert errors == {
        "compression.type": ["must be one of producer, uncompressed, gzip, snappy, lz4, zstd"],
        "message.timestamp.type": ["must be one of CreateTime, LogAppendTime"],
    }


def test_log_append_time_reaches_the_brokers_log_config():
    out, errors = normalise_configs(
        {"message.timestamp.type": "LogAppendTime", "compression.type": "zstd"},
        replication_factor=1,
    )
    assert errors == {}
    config = LogConfig.from_properties(out)
    assert config.log_append_time and config.compression_codec == 4 and config.rewrites_batches
    assert not LogConfig().rewrites_batches


def test_the_topics_api_refuses_an_unsupported_config_and_accepts_the_new_ones(world, a_owner):
    refused = a_owner.post(
        "/api/v1/topics/",
        {"name": "t1", "configs": {"file.delete.delay.ms": 1000, "preallocate": "true"}},
        format="json",
    )
    assert refused.status_code == 400, refused.content
    body = refused.json()
    assert body["error_code"] == "INVALID_CONFIG"
    assert body["fields"]["file.delete.delay.ms"][0].startswith("not supported yet: ")
    assert body["fields"]["preallocate"][0].startswith("not supported yet: ")
    created = a_owner.post(
        "/api/v1/topics/",
        {
            "name": "t1",
            "configs": {"compression.type": "lz4", "message.timestamp.type": "LogAppendTime"},
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    effective = created.json()["effective_configs"]
    assert set(effective) == KNOWN_CONFIGS
    assert effective["compression.type"] == "lz4"
    assert effective["message.timestamp.type"] == "LogAppendTime"
    altered = a_owner.patch(
        "/api/v1/topics/t1", {"configs": {"compression.type": "brotli"}}, format="json"
    )
    assert altered.status_code == 400 and "compression.type" in altered.json()["fields"]
