"""Writes: offset resets (dry run or applied; applied ones are kept and audited so they can
be undone), undo, and group deletion. The brokers refuse both while the group has members
(GROUP_NOT_EMPTY, 409)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from backend.audit.services import audit_record
from backend.core.context import RequestContext
from backend.core.exceptions import Conflict, NotFound
from backend.groups import broker_client, selectors
from backend.groups.models import OffsetReset

PLAN_FIELDS = ("topic", "partition", "current", "target", "delta")


def _plan(rows: list[dict]) -> list[dict]:
    return [{k: r.get(k) for k in PLAN_FIELDS} for r in rows]


@transaction.atomic
def offsets_reset(
    *,
    ctx: RequestContext,
    group_id: str,
    topic: str,
    partitions: list[int] | None,
    strategy: str,
    value,
    dry_run: bool,
) -> dict:
    body = {
        "topic": topic,
        "partitions": partitions,
        "strategy": strategy,
        "value": value,
        "dry_run": dry_run,
    }
    doc = broker_client.group_request(ctx.organisation.id, group_id, "POST", "/reset-offsets", body)
    plan = _plan(doc["plan"])
    if dry_run:
        return {"plan": plan, "applied": False, "reset_id": None}
    reset = OffsetReset.objects.create(
        organisation=ctx.organisation,
        group_id=group_id,
        topic=topic,
        strategy=strategy,
        value=value,
        plan=plan,
    )
    audit_record(
        ctx=ctx,
        action="group.reset_offsets",
        object_type="group",
        object_id=group_id,
        before={"offsets": [{**r, "offset": r["current"]} for r in plan]},
        after={"reset_id": str(reset.id), "strategy": strategy, "value": value, "plan": plan},
    )
    return {"plan": plan, "applied": True, "reset_id": str(reset.id)}


@transaction.atomic
def offsets_reset_undo(*, ctx: RequestContext, group_id: str, reset_id) -> dict:
    reset = selectors.reset_get(organisation=ctx.organisation, group_id=group_id, reset_id=reset_id)
    if reset is None:
        raise NotFound("no such offset reset for this group")
    if reset.undone_at is not None:
        raise Conflict("this reset was already undone")
    body = {
        "strategy": "offsets",
        "offsets": [
            {"topic": r["topic"], "partition": r["partition"], "offset": r["current"]}
            for r in reset.plan
        ],
        "dry_run": False,
    }
    doc = broker_client.group_request(ctx.organisation.id, group_id, "POST", "/reset-offsets", body)
    reset.undone_at = timezone.now()
    reset.save(update_fields=["undone_at"])
    plan = _plan(doc["plan"])
    audit_record(
        ctx=ctx,
        action="group.reset_offsets_undo",
        object_type="group",
        object_id=group_id,
        before={"reset_id": str(reset.id), "plan": reset.plan},
        after={"plan": plan},
    )
    return {"plan": plan, "applied": True, "reset_id": str(reset.id)}


@transaction.atomic
def group_delete(*, ctx: RequestContext, group_id: str) -> None:
    """Kafka's DeleteGroups: the coordinator refuses a group with members. The audit event
    keeps the committed offsets the deletion removed (read just before it)."""
    org_id = ctx.organisation.id
    detail = broker_client.group_request(org_id, group_id, "GET")
    broker_client.group_request(org_id, group_id, "DELETE")
    committed = {
        f"{r['topic']}/{r['partition']}": r["committed_offset"]
        for r in detail.get("offsets", [])
        if r.get("committed_offset") is not None
    }
    audit_record(
        ctx=ctx,
        action="group.delete",
        object_type="group",
        object_id=group_id,
        before={"state": detail.get("state"), "committed_offsets": committed},
    )
