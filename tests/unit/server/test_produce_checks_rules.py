"""The produce checks' rules are built once per topic config, and a changed config (a new
object) gets its own rules at once."""

from __future__ import annotations

from brokernodes.server.replica.produce_checks import record_rules, rules_of
from brokernodes.storage.config import LogConfig


def test_rules_are_reused_for_the_same_config_and_rebuilt_for_a_changed_one():
    config = LogConfig()
    first = rules_of(config, 4)
    assert rules_of(config, 4) is first
    assert first == record_rules(config, 4)
    compacted = config.with_changes(cleanup_policy="compact")
    rules = rules_of(compacted, 4)
    assert rules.require_keys and not first.require_keys
    assert rules_of(config, 8) == record_rules(config, 8) != first  # the broker's ratio too
