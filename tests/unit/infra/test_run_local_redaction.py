"""``make up``'s runner prints a failed step's output (a child's stderr, which may hold a key
or a password) through the same redaction as the logs."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

INFRA = Path(__file__).resolve().parents[3] / "infra"
sys.path.insert(0, str(INFRA))

import run_local  # noqa: E402

KEY = "slk_AbCdEfGhIjKlMnOp.s3cr3t-Zz_0123456789abcdefghijklmnopqrstuvw"


class FailingRunner:
    def __init__(self, args) -> None:
        self.stopped = False

    def start(self) -> None:
        raise SystemExit(f"manage.py seed_demo failed:\nbad token {KEY} password=hunter2-long")

    def stop(self) -> None:
        self.stopped = True


def test_a_failed_steps_output_is_redacted(monkeypatch, capsys):
    monkeypatch.setattr(run_local, "Runner", FailingRunner)
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        assert run_local.main([]) == 1
    finally:
        signal.signal(signal.SIGINT, handlers[0])
        signal.signal(signal.SIGTERM, handlers[1])
    err = capsys.readouterr().err
    assert "seed_demo failed" in err and "slk_AbCdEfGhIjKlMnOp" in err
    assert "s3cr3t" not in err and "hunter2" not in err
