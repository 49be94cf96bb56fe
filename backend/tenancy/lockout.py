"""Per-username sign-in lockout with back-off: the brake a per-address throttle cannot be
(an attacker with many addresses still guesses one account's password slowly).

After ``SLUICE_LOGIN_LOCKOUT_AFTER`` failures in a row, each further failure locks the name
for ``SLUICE_LOGIN_LOCKOUT_S`` doubled per failure past the threshold, up to
``SLUICE_LOGIN_LOCKOUT_MAX_S``. While locked every attempt is refused (429 with Retry-After),
the right password too, so guessing gains nothing; the cap bounds how long someone else can
keep a person out. Unknown names are counted the same way (no user enumeration). State lives
in the database, so every control-plane process shares it.
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from backend.tenancy.models import LoginFailure


def lock_seconds(failures: int) -> float:
    """How long the name is locked after ``failures`` failures in a row (0: not locked)."""
    over = failures - settings.SLUICE_LOGIN_LOCKOUT_AFTER
    if over < 0:
        return 0.0
    base = settings.SLUICE_LOGIN_LOCKOUT_S
    return float(min(base * 2 ** min(over, 32), settings.SLUICE_LOGIN_LOCKOUT_MAX_S))


def retry_after(username: str) -> int:
    """Whole seconds until ``username`` may try again (0: now)."""
    row = LoginFailure.objects.filter(username=username[:150]).first()
    if row is None or row.locked_until is None:
        return 0
    left = (row.locked_until - timezone.now()).total_seconds()
    return max(0, math.ceil(left))


@transaction.atomic
def record_failure(username: str) -> int:
    """Count one failed sign-in; returns the lock it starts in seconds (0: none yet)."""
    now = timezone.now()
    row, _ = LoginFailure.objects.select_for_update().get_or_create(
        username=username[:150], defaults={"last_failure_at": now}
    )
    window = timedelta(seconds=settings.SLUICE_LOGIN_FAILURE_WINDOW_S)
    if row.failures and now - row.last_failure_at > window:
        row.failures = 0
    row.failures += 1
    row.last_failure_at = now
    seconds = lock_seconds(row.failures)
    row.locked_until = now + timedelta(seconds=seconds) if seconds else None
    row.save()
    return math.ceil(seconds)


def record_success(username: str) -> None:
    LoginFailure.objects.filter(username=username[:150]).delete()
