"""The embedded default's settings: DEBUG off, and a secret generated once into var/ (0600),
never a fixed fallback."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from backend.settings.secret_file import load_or_create

ROOT = Path(__file__).resolve().parents[3]


def test_the_secret_is_generated_once_with_mode_0600(tmp_path):
    path = tmp_path / "var" / "secret_key"
    first = load_or_create(path)
    assert len(first) >= 50
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create(path) == first
    assert [p.name for p in path.parent.iterdir()] == ["secret_key"]  # no temp files left


def test_a_readable_secret_file_is_made_private_and_a_short_one_refused(tmp_path):
    path = tmp_path / "secret_key"
    path.write_text("x" * 60)
    os.chmod(path, 0o644)
    assert load_or_create(path) == "x" * 60
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text("short")
    with pytest.raises(RuntimeError, match="DJANGO_SECRET_KEY"):
        load_or_create(path)


def _local_settings(tmp_path: Path, **env: str) -> list[str]:
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.DEBUG); print(s.SECRET_KEY)"
    )
    run_env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    run_env.update(
        DJANGO_SETTINGS_MODULE="backend.settings.local", SLUICE_VAR_DIR=str(tmp_path), **env
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.split()


def test_local_settings_run_without_debug_on_the_generated_secret(tmp_path):
    debug, secret = _local_settings(tmp_path)
    assert debug == "False"
    assert secret == (tmp_path / "secret_key").read_text().strip()
    assert "sluice-local-development" not in secret
    assert _local_settings(tmp_path) == [debug, secret]  # the next process reads it back
    assert _local_settings(tmp_path, DJANGO_SECRET_KEY="s" * 60)[1] == "s" * 60
