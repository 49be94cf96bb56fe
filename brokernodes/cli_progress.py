"""A progress line for long ``sluice produce`` / ``consume`` runs, on stderr.

Shown only when stderr is a terminal and stdout is not the same terminal's record stream
(``sluice consume t > file`` shows it; ``sluice consume t`` on a terminal shows the records
themselves, and a bar redrawn between them would garble them). In pipes and under tests
nothing is drawn, so stdout and stderr stay parseable.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType

from brokernodes.cli_text import format_duration, plural


def wanted(records_on_stdout: bool) -> bool:
    if not sys.stderr.isatty():
        return False
    return not (records_on_stdout and sys.stdout.isatty())


class RecordProgress:
    """``with RecordProgress("consume orders", total=None) as bar: bar.advance(n)``."""

    def __init__(self, description: str, total: int | None, *, records_on_stdout: bool) -> None:
        self.enabled = wanted(records_on_stdout)
        self.started = time.monotonic()
        self.done = 0
        self._progress = None
        if not self.enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

        columns = [SpinnerColumn(), TextColumn("[bold]{task.description}")]
        if total is not None:
            columns.append(BarColumn())
        columns.append(TextColumn("{task.fields[status]}"))
        self._progress = Progress(*columns, console=Console(stderr=True), transient=True)
        self._task = self._progress.add_task(description, total=total, status="")

    def __enter__(self) -> RecordProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()

    def advance(self, count: int) -> None:
        self.done += count
        if self._progress is None or count == 0:
            return
        elapsed = time.monotonic() - self.started
        rate = f", {self.done / elapsed:,.0f}/s" if elapsed > 0 else ""
        status = f"{plural(self.done, 'record')} in {format_duration(elapsed)}{rate}"
        self._progress.update(self._task, completed=self.done, status=status)
