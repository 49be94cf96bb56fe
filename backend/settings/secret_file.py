"""The embedded default's Django secret: generated once into ``var/secret_key`` (mode 0600)
and read back by every process after, so sessions and CSRF tokens survive restarts and no
fixed fallback secret ships in the code. Pure (no Django import): settings modules call it."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

MIN_LENGTH = 50


def load_or_create(path: Path) -> str:
    """The secret stored at ``path``; on first use, a new random one written there.

    Several processes start at once under ``make up``: the file is written under a temporary
    name and hard-linked into place, so a reader sees either no file or the whole secret, and
    only the first writer's secret wins.
    """
    with contextlib.suppress(FileNotFoundError):
        return _read(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(64) + "\n")
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return _read(path)


def _read(path: Path) -> str:
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)  # a copied or hand-made file: others may not read the secret
    secret = path.read_text().strip()
    if len(secret) < MIN_LENGTH:
        raise RuntimeError(
            f"{path} holds a secret shorter than {MIN_LENGTH} characters: delete the file "
            "(a new one is generated) or set DJANGO_SECRET_KEY"
        )
    return secret
