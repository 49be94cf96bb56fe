"""Every log setting the broker knows has a range check on the control plane (a name without
one would answer 500), the KIP-937 timestamp bounds included."""

from __future__ import annotations

from backend.topics.configs import (
    KNOWN_CONFIGS,
    LOG_CONFIG_NAMES,
    STRING_CONFIGS,
    normalise_configs,
)


def test_every_integer_log_config_is_checked_not_a_500():
    not_integers = {"cleanup.policy", "min.cleanable.dirty.ratio", *STRING_CONFIGS}
    for name in sorted((LOG_CONFIG_NAMES & KNOWN_CONFIGS) - not_integers):
        _, errors = normalise_configs({name: "not a number"}, replication_factor=1)
        assert errors == {name: ["must be an integer"]}, name


def test_timestamp_bounds_are_accepted_and_range_checked():
    out, errors = normalise_configs(
        {"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": 0},
        replication_factor=1,
    )
    assert errors == {}
    assert out == {
        "message.timestamp.before.max.ms": "60000",
        "message.timestamp.after.max.ms": "0",
    }
    _, errors = normalise_configs({"message.timestamp.after.max.ms": -5}, replication_factor=1)
    assert list(errors) == ["message.timestamp.after.max.ms"]
