"""The topic config registry the console's typed editors are built from, and the one default
replication factor the console and the CLI share."""

from __future__ import annotations

import pytest
from django.conf import settings

from backend.tenancy import roles
from backend.topics.config_registry import DEFINITIONS, config_definitions
from backend.topics.configs import KNOWN_CONFIGS, effective_configs, normalise_configs
from brokernodes.cli import build_parser
from brokernodes.client.control import ControlPlane

from .conftest import key_client, make_tenant

URL = "/api/v1/topic-config-definitions"


def test_every_accepted_config_is_defined_with_its_default():
    defs = {d["name"]: d for d in config_definitions()}
    assert set(defs) == KNOWN_CONFIGS == set(DEFINITIONS)
    assert {n: d["default"] for n, d in defs.items()} == effective_configs({})
    assert defs["retention.ms"]["kind"] == "duration" and defs["retention.ms"]["unit"] == "ms"
    assert defs["retention.ms"]["special"] == {"-1": "no limit"}
    assert defs["segment.bytes"]["kind"] == "size" and defs["segment.bytes"]["unit"] == "bytes"
    assert defs["unclean.leader.election.enable"]["kind"] == "boolean"
    assert defs["compression.type"]["choices"][0] == "producer"
    assert all(d["description"] for d in defs.values())


@pytest.mark.parametrize("name", sorted(n for n, d in DEFINITIONS.items() if d.choices))
def test_every_choice_is_accepted_and_nothing_else(name):
    for choice in DEFINITIONS[name].choices:
        out, errors = normalise_configs({name: choice}, replication_factor=3)
        assert errors == {} and out == {name: choice}
    _, errors = normalise_configs({name: "not-a-choice"}, replication_factor=3)
    assert name in errors


@pytest.mark.parametrize("name", sorted(n for n, d in DEFINITIONS.items() if d.minimum))
def test_the_bounds_are_the_ones_enforced(name):
    d = DEFINITIONS[name]
    for value in (d.minimum, d.maximum, *d.special):
        _, errors = normalise_configs({name: value}, replication_factor=2**31 - 1)
        assert name not in errors, (value, errors)
    if d.kind != "ratio":
        below = int(d.minimum) - 1
        below -= str(below) in d.special  # -1 means "no limit" where it is special
        _, errors = normalise_configs({name: str(below)}, replication_factor=3)
        assert name in errors


def test_max_message_bytes_is_capped_by_the_service():
    defs = config_definitions(max_message_bytes=1000)
    (mmb,) = [d for d in defs if d["name"] == "max.message.bytes"]
    assert mmb["maximum"] == "1000"


def test_the_api_serves_the_registry_and_the_create_defaults(world):
    client = key_client(world.a.token(roles.READ_ONLY))
    answer = client.get(URL)
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["replication_factor"]["default"] == min(
        settings.SLUICE_DEFAULT_REPLICATION_FACTOR, body["replication_factor"]["maximum"]
    )
    assert body["partitions"]["default"] == settings.SLUICE_DEFAULT_PARTITIONS
    assert [d["name"] for d in body["configs"]] == sorted(KNOWN_CONFIGS)
    (mmb,) = [d for d in body["configs"] if d["name"] == "max.message.bytes"]
    assert int(mmb["maximum"]) == min(2**31 - 1, settings.SLUICE_MAX_MESSAGE_BYTES)
    assert key_client("nope").get(URL).status_code == 401


def test_the_cli_sends_no_replication_factor_so_it_gets_the_consoles_default(
    transactional_db, live_server
):
    args = build_parser().parse_args(["topics", "create", "cli-default"])
    assert args.replication_factor is None and args.partitions is None
    tenant = make_tenant("cli")
    token = tenant.token(roles.MEMBER)
    served = key_client(token).get(URL).json()
    topic = ControlPlane(live_server.url, token).create_topic("cli-default")
    assert topic["replication_factor"] == served["replication_factor"]["default"]
    assert topic["partitions"] == served["partitions"]["default"]
