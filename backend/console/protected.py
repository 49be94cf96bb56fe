"""The console's own service account (``sluice-console``) cannot be deleted or deactivated.

The console reads and produces through it (``credentials``); without it every data page of
the organisation fails. The tenancy services ask ``refuse_change`` before a delete or a
deactivation, so the API and the console refuse alike (409 ``PROTECTED_SERVICE_ACCOUNT``),
and the service-accounts list carries ``protected`` so the page disables the buttons with
the reason. Its key may still be revoked (the console makes a new one); its role and
description may change.
"""

from __future__ import annotations

from backend.console.credentials import CONSOLE_SERVICE_ACCOUNT
from backend.core.exceptions import Conflict

REASON = (
    "the web console reads and produces through this account; without it the console's "
    "message, produce and live-tail pages stop working"
)


class ProtectedServiceAccount(Conflict):
    error_code = "PROTECTED_SERVICE_ACCOUNT"


def protected_reason(service_account) -> str | None:
    """Why this account may not be deleted or deactivated, or None."""
    return REASON if service_account.name == CONSOLE_SERVICE_ACCOUNT else None


def refuse_change(service_account, *, delete: bool = False, deactivate: bool = False) -> None:
    reason = protected_reason(service_account)
    if reason is None or not (delete or deactivate):
        return
    what = "deleted" if delete else "deactivated"
    raise ProtectedServiceAccount(
        f"{service_account.name!r} cannot be {what}: {reason}",
        {"service_account_id": [f"the console's own account cannot be {what}"]},
    )
