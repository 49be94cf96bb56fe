"""The live series (/api/v1/reports/live/...): per-minute lag and throughput the live job
keeps current, for charts that have history when they open.

Each answer says how far it is measured: ``as_of`` (the last lag sample; the time the
usage stream had read everything there was) and ``measured_from`` (earlier minutes are not
measured), both null when the live job never measured that series. Nothing unmeasured reads
as 0: a lag that could not be sampled is null, and so is a topic's total when nothing was
measured. A throughput minute between ``measured_from`` and ``as_of`` without a row had no
traffic."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from backend.analytics import live_selectors as selectors
from backend.analytics.live_services import retention
from backend.core.schema import errors
from backend.core.serializers import StrictSerializer, validate_input
from backend.tenancy.permissions import TenantAPIView

TAGS = ["reports"]
SUMS = selectors.THROUGHPUT_SUMS


def _window(q: dict) -> datetime:
    """``since`` (default and earliest: the retention window's start)."""
    earliest = timezone.now() - retention()
    since = q.get("since")
    return earliest if since is None or since < earliest else since


def _measured(name: str) -> dict:
    s = selectors.stream(name)
    return {
        "as_of": None if s is None else s.as_of,
        "measured_from": None if s is None else s.measured_from,
    }


def _status_fields() -> dict:
    return {
        "as_of": serializers.DateTimeField(
            allow_null=True, help_text="when last measured; null: never"
        ),
        "measured_from": serializers.DateTimeField(
            allow_null=True, help_text="minutes before this are not measured"
        ),
    }


def _list(name: str, fields: dict) -> serializers.ListField:
    return serializers.ListField(child=inline_serializer(name=name, fields=fields))


class LiveQuery(StrictSerializer):
    since = serializers.DateTimeField(
        required=False, help_text="ISO 8601; default and earliest: 24 h ago (the retention)"
    )
    topic = serializers.CharField(required=False, max_length=249)


class LiveLagApi(TenantAPIView):
    class QuerySerializer(LiveQuery):
        group = serializers.CharField(required=False, max_length=255)
        partitions = serializers.BooleanField(
            default=False, help_text="also each partition's minutes"
        )

    @extend_schema(
        operation_id="reports_live_lag",
        tags=TAGS,
        parameters=[QuerySerializer],
        description="Consumer lag per minute from the live job: per group and topic, the "
        "partitions' lags summed (each partition's last commit carried forward against the "
        "log end sampled then); `current`: the last sample. `offset_lag` is null where no "
        "partition's log end could be measured; with `group` and `topic` both given, "
        "`current` names them with a null lag until they are sampled.",
        responses={
            200: inline_serializer(
                name="LiveLagReport",
                fields={
                    **_status_fields(),
                    "rows": _list(
                        "LiveLagRow",
                        {
                            "ts": serializers.DateTimeField(),
                            "group_id": serializers.CharField(),
                            "topic": serializers.CharField(),
                            "offset_lag": serializers.IntegerField(allow_null=True),
                            "partitions": serializers.IntegerField(),
                            "measured": serializers.IntegerField(),
                        },
                    ),
                    "current": _list(
                        "LiveLagCurrent",
                        {
                            "group_id": serializers.CharField(),
                            "topic": serializers.CharField(),
                            "offset_lag": serializers.IntegerField(allow_null=True),
                            "ts": serializers.DateTimeField(allow_null=True),
                        },
                    ),
                    "partitions": _list(
                        "LiveLagPartitionRow",
                        {
                            "ts": serializers.DateTimeField(),
                            "group_id": serializers.CharField(),
                            "topic": serializers.CharField(),
                            "partition": serializers.IntegerField(),
                            "committed_offset": serializers.IntegerField(),
                            "log_end_offset": serializers.IntegerField(allow_null=True),
                            "offset_lag": serializers.IntegerField(allow_null=True),
                        },
                    ),
                },
            ),
            **errors(400),
        },
    )
    def get(self, request):
        q = validate_input(self.QuerySerializer, request.query_params.dict())
        org, since = self.organisation, _window(q)
        group, topic = q.get("group"), q.get("topic")
        status = _measured("lag")
        rows = selectors.lag_minutes(organisation=org, since=since, group=group, topic=topic)
        current = []
        if status["as_of"] is not None:
            current = [
                {
                    "group_id": r.group_id,
                    "topic": r.topic,
                    "offset_lag": r.offset_lag,
                    "ts": r.minute,
                }
                for r in selectors.lag_current(
                    organisation=org, as_of=status["as_of"], group=group, topic=topic
                )
            ]
        if group and topic and not current:
            current = [{"group_id": group, "topic": topic, "offset_lag": None, "ts": None}]
        parts = []
        if q["partitions"]:
            parts = [
                {
                    "ts": r.minute,
                    "group_id": r.group_id,
                    "topic": r.topic,
                    "partition": r.partition,
                    "committed_offset": r.committed_offset,
                    "log_end_offset": r.log_end_offset,
                    "offset_lag": r.offset_lag,
                }
                for r in selectors.lag_partition_minutes(
                    organisation=org, since=since, group=group, topic=topic
                )
            ]
        return Response(
            {
                **status,
                "rows": [
                    {
                        "ts": r.minute,
                        "group_id": r.group_id,
                        "topic": r.topic,
                        "offset_lag": r.offset_lag,
                        "partitions": r.partitions,
                        "measured": r.measured,
                    }
                    for r in rows
                ],
                "current": current,
                "partitions": parts,
            }
        )


class LiveThroughputApi(TenantAPIView):
    class QuerySerializer(LiveQuery):
        pass

    @extend_schema(
        operation_id="reports_live_throughput",
        tags=TAGS,
        parameters=[QuerySerializer],
        description="Records and bytes in (produced) and out (fetched) per topic and minute "
        "from the live job (the brokers' usage windows). A minute between `measured_from` "
        "and `as_of` without a row had no traffic; the newest minute may still grow. "
        "`totals`: per topic over the window, null when nothing was measured.",
        responses={
            200: inline_serializer(
                name="LiveThroughputReport",
                fields={
                    **_status_fields(),
                    "rows": _list(
                        "LiveThroughputRow",
                        {
                            "ts": serializers.DateTimeField(),
                            "topic": serializers.CharField(),
                            **{c: serializers.IntegerField() for c in SUMS},
                        },
                    ),
                    "totals": _list(
                        "LiveThroughputTotal",
                        {
                            "topic": serializers.CharField(),
                            **{c: serializers.IntegerField(allow_null=True) for c in SUMS},
                        },
                    ),
                },
            ),
            **errors(400),
        },
    )
    def get(self, request):
        q = validate_input(self.QuerySerializer, request.query_params.dict())
        org, since, topic = self.organisation, _window(q), q.get("topic")
        status = _measured("throughput")
        rows = selectors.throughput_minutes(organisation=org, since=since, topic=topic)
        totals = selectors.throughput_totals(organisation=org, since=since, topic=topic)
        if topic and topic not in totals:
            measured = status["as_of"] is not None and status["as_of"] >= since
            totals[topic] = {c: 0 if measured else None for c in SUMS}
        return Response(
            {
                **status,
                "rows": [
                    {"ts": r.minute, "topic": r.topic, **{c: getattr(r, c) for c in SUMS}}
                    for r in rows
                ],
                "totals": [{"topic": t, **v} for t, v in sorted(totals.items())],
            }
        )
