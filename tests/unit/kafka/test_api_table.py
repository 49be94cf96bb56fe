"""What ApiVersions advertises is exactly what is answered and what docs/kafka-protocol.md
lists: every API in the schema has a handler, no handler is unreachable, and the docs' table
has every API with its versions."""

from __future__ import annotations

import re
from pathlib import Path

from brokernodes.server.kafka.handlers import HANDLERS
from brokernodes.server.protocol.kafka import apis

DOC = Path(__file__).resolve().parents[3] / "docs" / "kafka-protocol.md"
ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*(\w+)\s*\|\s*(\d+)\s*-\s*(\d+)\s*\|", re.MULTILINE)


def test_every_advertised_api_has_a_handler():
    assert set(HANDLERS) == set(apis.apis())


def test_every_advertised_version_compiles():
    for key, api in apis.apis().items():
        for version in range(api.min_version, api.max_version + 1):
            assert apis.request_codec(key, version).version == version
            assert apis.response_codec(key, version).version == version


def test_docs_table_matches_what_apiversions_advertises():
    rows = {int(k): (name, int(lo), int(hi)) for k, name, lo, hi in ROW.findall(DOC.read_text())}
    expected = {a.key: (a.name, a.min_version, a.max_version) for a in apis.apis().values()}
    assert rows == expected
