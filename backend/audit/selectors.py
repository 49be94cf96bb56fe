from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from backend.audit.models import AuditEvent


def audit_event_list(
    *,
    organisation,
    action: str | None = None,
    object_type: str | None = None,
    object_id: str | None = None,
    since: datetime | None = None,
) -> QuerySet[AuditEvent]:
    qs = AuditEvent.objects.filter(organisation=organisation)
    if action:
        qs = qs.filter(action=action)
    if object_type:
        qs = qs.filter(object_type=object_type)
    if object_id:
        qs = qs.filter(object_id=object_id)
    if since:
        qs = qs.filter(created_at__gte=since)
    return qs
