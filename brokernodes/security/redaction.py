"""One log filter that removes credentials from every record, for the brokers and the control
plane alike (pure: no Django import).

A secret reaches a log by accident: a header echoed in a parse error, a WebSocket subprotocol
in aiohttp's warning, a query string in an access line, a request repr in a traceback. This
filter runs on every handler (``install``) and rewrites the message, its arguments and any
traceback text. It redacts:

- Sluice API keys ``slk_<key_id>.<secret>`` (also with ``%2E`` for the dot): the secret goes,
  the key id stays (it is not secret and tells which key was used); a secret on its own (43
  base64url characters with both cases and a digit) goes too;
- the credential after ``Bearer`` or ``Basic`` (any key format, e.g. a static metadata key);
- the value of an ``Authorization``, ``Proxy-Authorization``, ``Cookie`` or ``Set-Cookie``
  header, as a header line, a dict item or a (name, value) pair;
- the value of fields and parameters named like a credential (``api_key``, ``token``,
  ``secret``, ``password``, ``sessionid``, ``csrftoken``...) in query strings, forms and JSON.

It redacts more than needed rather than less: a prose word after "token:" is lost too.
"""

from __future__ import annotations

import logging
import re

MASK = "[REDACTED]"

_API_KEY = re.compile(r"\b(slk_[A-Za-z0-9_-]{1,64})(?:\.|%2[eE])[A-Za-z0-9_-]+")
# a key's secret on its own (43 base64url characters, as backend.keys.tokens makes them),
# e.g. split from its id: upper and lower case letters and a digit, which random secrets have
# and ordinary 43-character names rarely do
_BARE_SECRET = re.compile(r"(?<![A-Za-z0-9_\-\[])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])")


def _mask_secret_like(match: re.Match) -> str:
    run = match.group(0)
    mixed = (
        any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
    )
    return MASK if mixed else run


_SCHEME = re.compile(
    r"(?i)\b(bearer|basic)(\s+|%20|\+)(?!slk_[A-Za-z0-9_-]{1,64}\.\[REDACTED\])[^\s\"'<>,;]+"
)
_HEADER = re.compile(
    r"(?i)\b(proxy-authorization|authorization|set-cookie|cookie)"
    r"(\"?'?\s*[:=]\s*(?:b?[\"'])?|[\"']\s*,\s*b?[\"'])"
    r"(?![\s\"'])(?!(?:bearer\s+)?slk_[A-Za-z0-9_-]{1,64}\.\[REDACTED\])"
    r"[^\r\n\"']+"
)
_FIELD = re.compile(
    r"(?i)\b(x-api-key|api[_-]?key|apikey|access[_-]?token|refresh[_-]?token|token|secret"
    r"|password|passwd|sessionid|csrftoken|csrfmiddlewaretoken|auth)"
    r"(=|\"?'?\s*:\s*(?:b?[\"'])?)"
    r"(?![\s\"'])(?!slk_[A-Za-z0-9_-]{1,64}\.\[REDACTED\])(?!\[REDACTED\])"
    r"[^\s&\"',;}]+"
)
_TRIGGERS = (
    "slk_",
    "bearer",
    "basic",
    "authoriz",
    "cookie",
    "key",
    "token",
    "secret",
    "passw",
    "session",
    "csrf",
    "auth",
)


def redact(text: str) -> str:
    """``text`` with every credential it holds replaced by ``[REDACTED]``."""
    lowered = text.lower()
    if not any(t in lowered for t in _TRIGGERS):
        return _BARE_SECRET.sub(_mask_secret_like, text) if len(text) >= 43 else text
    text = _API_KEY.sub(rf"\1.{MASK}", text)
    text = _BARE_SECRET.sub(_mask_secret_like, text)
    text = _SCHEME.sub(rf"\1\2{MASK}", text)
    text = _HEADER.sub(rf"\1\2{MASK}", text)
    return _FIELD.sub(rf"\1\2{MASK}", text)


class RedactSecretsFilter(logging.Filter):
    """Rewrites a record's message (arguments merged in) and traceback text with ``redact``."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: redact the raw parts instead
            message = f"{record.msg} {record.args!r}"
        clean = redact(message)
        if clean != message or record.args:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text, record.exc_info = redact(text), None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


FILTER = RedactSecretsFilter()


def install(filter_: logging.Filter = FILTER) -> None:
    """Put the filter on every handler of the root logger and of every named logger now
    configured (a logger with its own handlers, e.g. Django's ``django.server``, does not
    pass its records to the root's). Idempotent; call it after configuring logging."""
    loggers: list[logging.Logger] = [logging.getLogger()]
    loggers += [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    for lg in loggers:
        for handler in lg.handlers:
            if not any(isinstance(f, RedactSecretsFilter) for f in handler.filters):
                handler.addFilter(filter_)
