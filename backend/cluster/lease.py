"""The controller lease: one row (pk=1) saying which controller process is active.

``acquire`` takes or renews it: the holder renews its own unexpired lease; anyone takes a
lapsed (or released) one and bumps the controller epoch, appending a ``controller`` record
to the metadata log. ``check`` runs first in every transaction the controller writes in: it
locks the row and raises ``LeaseLost`` unless this process still holds it at this epoch and
it has not expired, so a deposed controller (paused past its lease, or cut off from the
database) writes nothing. Expiry is judged by each process's clock against the stored
``expires_at``: the processes must share a clock within a fraction of the lease (one
machine, or NTP), as any lease does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from backend.cluster import metadata_log
from backend.cluster.models import ControllerLease

CONTROLLER = "controller"


class LeaseLost(Exception):
    """This process is not (or no longer) the active controller."""


@dataclass(frozen=True)
class Lease:
    holder: str
    epoch: int
    expires_at: datetime


def _row() -> ControllerLease:
    row = ControllerLease.objects.select_for_update().filter(pk=1).first()
    if row is None:  # the migration creates it; tests that flush tables may not
        ControllerLease.objects.get_or_create(pk=1)
        row = ControllerLease.objects.select_for_update().get(pk=1)
    return row


@transaction.atomic
def acquire(holder: str, *, duration_s: float, current: Lease | None = None) -> Lease | None:
    """Renew ``current`` (ours) or take a lapsed lease with a new epoch; None when another
    controller holds it (or ours was taken meanwhile)."""
    row = _row()
    now = timezone.now()
    expires = now + timedelta(seconds=duration_s)
    mine = (
        current is not None
        and row.holder == holder
        and row.epoch == current.epoch
        and row.expires_at is not None
        and row.expires_at > now
    )
    if mine:
        row.expires_at = expires
        row.save(update_fields=["expires_at"])
        return Lease(holder, row.epoch, expires)
    if row.expires_at is not None and row.expires_at > now:
        return None  # someone else's, still valid (or ours lapsed and was retaken)
    row.holder = holder
    row.epoch += 1
    row.expires_at = expires
    row.acquired_at = now
    row.save()
    metadata_log.append(CONTROLLER, "active", {"controller_id": holder, "epoch": row.epoch})
    return Lease(holder, row.epoch, expires)


def check(lease: Lease) -> None:
    """In the caller's transaction: lock the lease row and make sure it is still ours."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("lease.check() needs a transaction")
    row = _row()
    if (
        row.holder != lease.holder
        or row.epoch != lease.epoch
        or row.expires_at is None
        or row.expires_at <= timezone.now()
    ):
        raise LeaseLost(
            f"controller {lease.holder} epoch {lease.epoch} no longer holds the lease "
            f"(holder {row.holder or '-'} epoch {row.epoch})"
        )


@transaction.atomic
def release(lease: Lease) -> bool:
    """Give the lease up now (a clean stop), so a standby takes over at once."""
    row = _row()
    if row.holder != lease.holder or row.epoch != lease.epoch:
        return False
    row.expires_at = timezone.now()
    row.save(update_fields=["expires_at"])
    return True


def current() -> dict:
    """The active controller as stored (``active`` false once the lease lapsed)."""
    row = ControllerLease.objects.filter(pk=1).first()
    if row is None:
        return {"controller_id": None, "epoch": 0, "active": False, "expires_at": None}
    active = bool(row.holder) and row.expires_at is not None and row.expires_at > timezone.now()
    return {
        "controller_id": row.holder or None,
        "epoch": row.epoch,
        "active": active,
        "expires_at": row.expires_at,
    }
