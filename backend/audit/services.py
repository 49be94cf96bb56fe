"""Writing audit events. Every service-layer write calls ``audit_record`` in its transaction."""

from __future__ import annotations

from typing import Any

from backend.audit.models import AuditEvent
from backend.core.context import RequestContext

# Never stored in before/after, whatever a caller passes.
_SECRET_KEYS = {"secret", "secret_sha256", "key", "password", "token"}


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k not in _SECRET_KEYS}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def audit_record(
    *,
    ctx: RequestContext,
    action: str,
    object_type: str,
    object_id: Any = "",
    before: dict | None = None,
    after: dict | None = None,
    organisation: Any = None,
) -> AuditEvent:
    return AuditEvent.objects.create(
        organisation=organisation if organisation is not None else ctx.organisation,
        actor_user=ctx.user if ctx.user is not None and ctx.user.pk else None,
        actor_service_account=ctx.service_account,
        actor=ctx.actor_label,
        api_key_id=ctx.api_key_id,
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        ip=ctx.ip,
        user_agent=ctx.user_agent,
        before=_scrub(before),
        after=_scrub(after),
    )
