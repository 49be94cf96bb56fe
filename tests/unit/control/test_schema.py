"""The OpenAPI schema generates without warnings and matches the committed backend/openapi.yaml.

When this fails after an API change, regenerate the file and commit it:
    .venv/bin/python manage.py spectacular --validate --fail-on-warn --file backend/openapi.yaml
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

COMMITTED = Path(settings.BASE_DIR) / "backend" / "openapi.yaml"


def test_schema_is_valid_and_matches_the_committed_file(tmp_path):
    out = tmp_path / "openapi.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert out.read_text() == COMMITTED.read_text(), (
        "backend/openapi.yaml is stale; regenerate it with: .venv/bin/python manage.py "
        "spectacular --validate --fail-on-warn --file backend/openapi.yaml"
    )


@pytest.mark.django_db
def test_schema_and_docs_are_served(client):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/topics/" in schema.content
    assert client.get("/api/docs/").status_code == 200
