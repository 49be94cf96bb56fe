"""The multi-machine deployment files (infra/deploy) stay true to the code: every command a
systemd unit runs is one the project accepts, with flags its parser takes, and every variable
the units and the production settings need is in the example environment files."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from brokernodes.server.config import parse_args as broker_args

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "infra" / "deploy"
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
VENV_PYTHON = "/opt/sluice/.venv/bin/python"


def env_file(name: str) -> dict[str, str]:
    env = {}
    for line in (DEPLOY / name).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    return env


ENV = {**env_file("sluice.env.example"), **env_file("broker.env.example")}


def directives(unit: Path) -> list[tuple[str, str]]:
    """(key, value) pairs of a unit's directives; keys may repeat (EnvironmentFile)."""
    out = []
    for line in unit.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out.append((key.strip(), value.strip()))
    return out


def commands(unit: Path) -> list[list[str]]:
    """Each Exec* line as argv, with systemd's specifiers and ${VAR}s expanded."""
    argvs = []
    for key, value in directives(unit):
        if key in ("ExecStart", "ExecStartPre"):
            value = value.replace("%i", "1").replace("%H", "cp-1")
            missing = [v for v in re.findall(r"\$\{(\w+)\}", value) if v not in ENV]
            assert not missing, f"{unit.name} uses {missing}, which no example env file sets"
            value = re.sub(r"\$\{(\w+)\}", lambda m: ENV[m.group(1)], value)
            argvs.append(shlex.split(value))
    return argvs


def test_every_unit_has_the_shape_systemd_needs():
    assert {u.name for u in UNITS} == {
        "sluice-control-plane.service",
        "sluice-controller.service",
        "sluice-analytics-worker.service",
        "sluice-analytics-beat.service",
        "sluice-analytics-live.service",
        "sluice-broker@.service",
    }
    for unit in UNITS:
        text = unit.read_text()
        for section in ("[Unit]", "[Service]", "[Install]"):
            assert section in text, f"{unit.name} lacks {section}"
        keys = [k for k, _ in directives(unit)]
        assert "ExecStart" in keys and "User" in keys, unit.name
        assert ("EnvironmentFile", "/etc/sluice/sluice.env") in directives(unit), unit.name
        for argv in commands(unit):
            assert argv[0] == VENV_PYTHON, f"{unit.name} runs {argv[0]}, not the venv's python"


def _run_ok(argv: list[str]) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "backend.settings.test"}
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, f"{argv}: {done.stderr[-1500:]}"


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_unit_commands_are_accepted(unit: Path, monkeypatch):
    monkeypatch.setenv("SLUICE_CLUSTER_SECRET", ENV["SLUICE_CLUSTER_SECRET"])
    for argv in commands(unit):
        args = argv[1:]
        if args[:2] == ["-m", "brokernodes"]:
            config = broker_args(args[2:])
            assert config.broker_id == 1 and config.port == int(ENV["BROKER_PORT"])
        elif args[0] == "manage.py":
            from django.core.management import get_commands

            assert args[1] in get_commands(), f"{unit.name}: no manage.py {args[1]}"
            _run_ok([*args, "--help"])
        elif args[:2] == ["-m", "daphne"]:
            from daphne.cli import CommandLineInterface

            parsed = CommandLineInterface().parser.parse_args(args[2:])
            module, _, attr = parsed.application.partition(":")
            assert module == "backend.asgi" and attr == "application"
            assert (ROOT / "backend" / "asgi.py").exists()
        elif args[:2] == ["-m", "celery"]:
            # click parses every option before --help acts: an unknown flag fails here
            _run_ok([*args, "--help"])
        else:
            raise AssertionError(f"{unit.name}: unknown command {argv}")


def test_required_settings_are_in_the_example_environment():
    production = (ROOT / "backend" / "settings" / "production.py").read_text()
    required = set(re.findall(r'os\.environ\["(\w+)"\]', production))
    assert required and required <= set(ENV), required - set(ENV)
    assert ENV["DJANGO_SETTINGS_MODULE"] == "backend.settings.production"
