"""The ``sluice`` argument parser: argparse with "did you mean" on a mistyped command, action
or flag, and durations in human units as an argument type.

argparse (3.11) reports an unknown subcommand as ``invalid choice: 'x' (choose from ...)`` on
the subparser where it happened, and unknown flags as ``unrecognized arguments: ...`` on the
top-level parser only; so the top level remembers the command line, follows it down the
subcommands that were given, and suggests among the flags of those parsers.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import NoReturn

from brokernodes.cli_text import did_you_mean, parse_duration

_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def duration(text: str) -> float:
    """argparse type: seconds from ``30s``, ``5m``, ``250ms``, ``1h`` or a bare number."""
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be longer than zero")
    return seconds


class SluiceParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors suggest the nearest command or flag."""

    argv: Sequence[str] = ()

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        import sys

        self.argv = list(sys.argv[1:] if args is None else args)
        return super().parse_args(self.argv, namespace)

    def error(self, message: str) -> NoReturn:
        self.print_usage(__import__("sys").stderr)
        self.exit(2, f"{self.prog}: error: {message}{self._hint(message)}\n")

    def _hint(self, message: str) -> str:
        match = _INVALID_CHOICE.search(message)
        if match:
            choices = re.findall(r"'([^']*)'", match.group(2))
            guess = did_you_mean(match.group(1), choices)
            return f" (did you mean {guess!r}?)" if guess else ""
        if message.startswith("unrecognized arguments:"):
            known = _flags_along(self, self.argv)
            hints = []
            for token in message.split(":", 1)[1].split():
                if token.startswith("-"):
                    typed = token.split("=", 1)[0]
                    guess = did_you_mean(typed, known)
                    if guess:
                        hints.append((typed, guess))
            if len(hints) == 1:
                return f" (did you mean {hints[0][1]}?)"
            named = ", ".join(f"{guess} for {typed}" for typed, guess in hints)
            return f" (did you mean {named}?)" if hints else ""
        return ""


def _flags_along(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """The long flags of ``parser`` and of the subcommands ``argv`` names, in order."""
    flags: list[str] = []
    current: argparse.ArgumentParser | None = parser
    tokens = list(argv)
    while current is not None:
        subparsers = None
        for action in current._actions:
            flags.extend(s for s in action.option_strings if s.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                subparsers = action
        current = None
        if subparsers is not None:
            for i, token in enumerate(tokens):
                if token in subparsers.choices:
                    current = subparsers.choices[token]
                    tokens = tokens[i + 1 :]
                    break
    return flags
