"""A logging filter that redacts API-key secrets (``slk_<key_id>.<secret>``) from every record.

Sluice never logs a secret on purpose; this is the belt to those braces, so a stray
``logger.info("%s", headers)`` or an exception message cannot leak a key into log storage.
The key id stays visible (it is not secret and helps to trace which key was used).
"""

from __future__ import annotations

import logging
import re

API_KEY_PATTERN = re.compile(r"\b(slk_[A-Za-z0-9_-]{16})\.[A-Za-z0-9_-]+")
REDACTED = r"\1.[REDACTED]"


def redact(text: str) -> str:
    return API_KEY_PATTERN.sub(REDACTED, text)


class RedactSecretsFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is not ours to fix here
            return True
        if "slk_" in message:
            record.msg = redact(message)
            record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            if "slk_" in text:
                record.exc_text = redact(text)
                record.exc_info = None
        return True
