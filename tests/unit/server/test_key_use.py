"""The broker's key-use log: each used key is sent with a heartbeat at most once a minute,
and a failed heartbeat's keys go with the next one."""

from __future__ import annotations

from brokernodes.server.key_use import KeyUseLog


def test_keys_are_sent_once_per_resolution():
    log = KeyUseLog(resolution_s=60)
    log.note("a")
    log.note("b")
    log.note("a")
    log.note("")  # the operator's credential has no key
    assert log.drain(now=0) == ["a", "b"]
    assert log.drain(now=2) == []  # nothing used since
    log.note("a")
    log.note("c")
    assert log.drain(now=30) == ["c"]  # a was sent 30 s ago: it waits
    assert log.drain(now=59) == []
    assert log.drain(now=61) == ["a"]  # its use at 30 is sent once its minute is over
    assert log.drain(now=130) == []  # and only once
    log.note("b")
    assert log.drain(now=131) == ["b"]


def test_a_failed_heartbeat_puts_its_keys_back():
    log = KeyUseLog(resolution_s=60)
    log.note("a")
    sent = log.drain(now=0)
    log.restore(sent)
    assert log.drain(now=2) == ["a"]
