"""The reports API the console's Reports pages draw (/api/v1/reports/...).

Reads need any role in the organisation and answer that organisation's rows only; asking for
a run (POST runs) needs admin and is audited. A tenant admin's run reads its own
organisation's topics; a cluster-wide one (``"scope": "cluster"``) needs an operator
(platform staff), else 403 ``OPERATOR_REQUIRED``. Tenants see the cluster-wide runs and
their own, each with its status and timing, a safe error summary (never the operators'
error text, which can name other tenants' topics) and what the run skipped for them:
``unreadable_batches`` and the first ``problems``."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response

from backend.analytics import selectors, services
from backend.analytics.models import JOBS
from backend.core.schema import errors
from backend.core.serializers import StrictSerializer, validate_input
from backend.tenancy import roles
from backend.tenancy.permissions import TenantAPIView

TAGS = ["reports"]


def _rows(name: str, fields: dict) -> serializers.Serializer:
    return inline_serializer(
        name=name,
        fields={
            "rows": serializers.ListField(child=inline_serializer(name=f"{name}Row", fields=fields))
        },
    )


def _lag_fields() -> dict:
    """The schema of one lag sample as ``_lag`` answers it."""
    return {
        "ts": serializers.DateTimeField(),
        "group_id": serializers.CharField(),
        "topic": serializers.CharField(),
        "partition": serializers.IntegerField(),
        "offset_lag": serializers.IntegerField(),
        "time_lag_ms": serializers.IntegerField(allow_null=True),
        "status": serializers.CharField(),
    }


class RunProblemSerializer(serializers.Serializer):
    """What a run skipped for the caller's organisation."""

    kind = serializers.CharField()
    topic = serializers.CharField()
    partition = serializers.IntegerField(allow_null=True)
    offset = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()


class RunOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    job = serializers.ChoiceField(choices=JOBS)
    status = serializers.ChoiceField(choices=["queued", "running", "succeeded", "failed"])
    trigger = serializers.CharField()
    queued_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_s = serializers.FloatField(allow_null=True)
    rows_written = serializers.IntegerField()
    error = serializers.SerializerMethodField()
    scope = serializers.SerializerMethodField()
    unreadable_batches = serializers.SerializerMethodField()
    problems = serializers.SerializerMethodField()

    def get_error(self, run) -> str | None:
        return run.error_summary or None

    def get_scope(self, run) -> str:
        return "cluster" if run.organisation_id is None else "organisation"

    def _mine(self, run) -> tuple[int, list]:
        return self.context.get("problems", {}).get(run.id, (0, []))

    def get_unreadable_batches(self, run) -> int:
        return self._mine(run)[0]

    @extend_schema_field(RunProblemSerializer(many=True))
    def get_problems(self, run) -> list[dict]:
        return RunProblemSerializer(self._mine(run)[1], many=True).data


class RunListApi(TenantAPIView):
    read_role = roles.READ_ONLY
    write_role = roles.ADMIN

    class QuerySerializer(StrictSerializer):
        job = serializers.ChoiceField(choices=JOBS, required=False)
        limit = serializers.IntegerField(min_value=1, max_value=selectors.MAX_RUNS, default=50)

    class InputSerializer(StrictSerializer):
        job = serializers.ChoiceField(choices=JOBS)
        # a string, not a choice field: an enum named "scope" would rename the quotas' one
        scope = serializers.CharField(
            default="organisation",
            max_length=16,
            help_text="`organisation` (default: this organisation's topics) or `cluster` "
            "(every tenant's; operators only)",
        )

    @extend_schema(
        operation_id="reports_runs_list",
        tags=TAGS,
        parameters=[QuerySerializer],
        responses={
            200: inline_serializer(
                name="ReportRuns", fields={"results": RunOutputSerializer(many=True)}
            ),
            **errors(400),
        },
    )
    def get(self, request):
        q = validate_input(self.QuerySerializer, request.query_params.dict())
        runs = list(
            selectors.run_list(job=q.get("job"), limit=q["limit"], organisation=self.organisation)
        )
        problems = selectors.run_problems(organisation=self.organisation, runs=runs)
        return Response(
            {"results": RunOutputSerializer(runs, many=True, context={"problems": problems}).data}
        )

    @extend_schema(
        operation_id="reports_runs_create",
        tags=TAGS,
        request=InputSerializer,
        description="Queue a run of a job now (admins): over this organisation's topics, or "
        "with `scope` cluster over every tenant's (operators only: 403 OPERATOR_REQUIRED). "
        "A run of that job and scope already queued is answered instead of queueing another.",
        responses={202: RunOutputSerializer, **errors(400)},
    )
    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        run = services.run_request(job=data["job"], ctx=self.ctx, scope=data["scope"])
        return Response(RunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class LagReportApi(TenantAPIView):
    class QuerySerializer(StrictSerializer):
        group = serializers.CharField(required=False, max_length=255)
        hours = serializers.FloatField(min_value=0.01, max_value=24 * 31, default=24)

    @extend_schema(
        operation_id="reports_lag",
        tags=TAGS,
        parameters=[QuerySerializer],
        description="Lag samples (at commits and whenever the log end moved) with each "
        "sample's status over its window; `current` is each partition's evaluation at the "
        "last run, with the catch-up estimate and retention risk.",
        responses={
            200: inline_serializer(
                name="LagReport",
                fields={
                    "rows": serializers.ListField(
                        child=inline_serializer(name="LagReportRow", fields=_lag_fields())
                    ),
                    "current": serializers.ListField(
                        child=inline_serializer(
                            name="LagReportCurrent",
                            fields={
                                **_lag_fields(),
                                "catch_up_s": serializers.FloatField(allow_null=True),
                                "retention_risk": serializers.BooleanField(allow_null=True),
                                "committed_offset": serializers.IntegerField(),
                                "log_end_offset": serializers.IntegerField(),
                            },
                        )
                    ),
                },
            ),
            **errors(400),
        },
    )
    def get(self, request):
        q = validate_input(self.QuerySerializer, request.query_params.dict())
        rows = selectors.lag_rows(
            organisation=self.organisation, group=q.get("group"), hours=q["hours"]
        )
        current = selectors.lag_current(organisation=self.organisation, group=q.get("group"))
        return Response(
            {
                "rows": [_lag(r) for r in rows],
                "current": [
                    {
                        **_lag(r),
                        "catch_up_s": r.catch_up_s,
                        "retention_risk": r.retention_risk,
                        "committed_offset": r.committed_offset,
                        "log_end_offset": r.log_end_offset,
                    }
                    for r in current
                ],
            }
        )


def _lag(r) -> dict:
    return {
        "ts": r.ts,
        "group_id": r.group_id,
        "topic": r.topic,
        "partition": r.partition,
        "offset_lag": r.offset_lag,
        "time_lag_ms": r.time_lag_ms,
        "status": r.status,
    }


class ThroughputReportApi(TenantAPIView):
    class QuerySerializer(StrictSerializer):
        topic = serializers.CharField(required=False, max_length=249)
        granularity = serializers.ChoiceField(choices=["minute", "hour"], default="minute")
        hours = serializers.FloatField(min_value=0.01, max_value=24 * 31, default=24)

    @extend_schema(
        operation_id="reports_throughput",
        tags=TAGS,
        parameters=[QuerySerializer],
        responses={
            200: _rows(
                "ThroughputReport",
                {
                    "ts": serializers.DateTimeField(),
                    "topic": serializers.CharField(),
                    "partition": serializers.IntegerField(),
                    "records": serializers.IntegerField(),
                    "bytes": serializers.IntegerField(),
                },
            ),
            **errors(400),
        },
    )
    def get(self, request):
        q = validate_input(self.QuerySerializer, request.query_params.dict())
        rows = selectors.throughput_rows(
            organisation=self.organisation,
            topic=q.get("topic"),
            granularity=q["granularity"],
            hours=q["hours"],
        )
        return Response(
            {
                "rows": [
                    {
                        "ts": r.ts,
                        "topic": r.topic,
                        "partition": r.partition,
                        "records": r.records,
                        "bytes": r.bytes,
                    }
                    for r in rows
                ]
            }
        )


RETENTION_FIELDS = (
    "topic",
    "partition",
    "bytes",
    "segments",
    "oldest_ts",
    "delete_1h_bytes",
    "delete_6h_bytes",
    "delete_24h_bytes",
    "delete_1h_records",
    "delete_6h_records",
    "delete_24h_records",
)


class RetentionReportApi(TenantAPIView):
    @extend_schema(
        operation_id="reports_retention",
        tags=TAGS,
        description="Per partition, from the last retention run: stored bytes and segments, "
        "the oldest segment's newest record, and what retention deletes within 1, 6, 24 h. "
        "`as_of`: when that run finished (null: no run yet, so sizes are not measured yet).",
        responses={
            200: inline_serializer(
                name="RetentionReport",
                fields={
                    "rows": serializers.ListField(
                        child=inline_serializer(
                            name="RetentionReportRow",
                            fields={
                                **{f: serializers.IntegerField() for f in RETENTION_FIELDS},
                                "topic": serializers.CharField(),
                                "oldest_ts": serializers.DateTimeField(allow_null=True),
                            },
                        )
                    ),
                    "as_of": serializers.DateTimeField(
                        allow_null=True, help_text="when the run these rows come from finished"
                    ),
                },
            ),
            **errors(),
        },
    )
    def get(self, request):
        rows = list(selectors.retention_rows(organisation=self.organisation))
        finished = [r.run.finished_at or r.run.started_at for r in rows if r.run]
        finished = [t for t in finished if t is not None]
        return Response(
            {
                "rows": [{f: getattr(r, f) for f in RETENTION_FIELDS} for r in rows],
                "as_of": max(finished, default=None),
            }
        )


USAGE_FIELDS = (
    "ts",
    "service_account",
    "topic",
    "bytes_in",
    "bytes_out",
    "records_in",
    "records_out",
    "storage_gb_hours",
    "requests",
    "throttle_ms",
)


SUGGESTION_FIELDS = (
    "service_account",
    "minutes",
    "p99_produce_bytes_per_sec",
    "p99_fetch_bytes_per_sec",
    "p99_requests_per_sec",
    "produce_bytes_per_sec",
    "fetch_bytes_per_sec",
    "request_rate",
)


class UsageReportApi(TenantAPIView):
    class QuerySerializer(StrictSerializer):
        granularity = serializers.ChoiceField(choices=["hour", "day"], default="hour")
        days = serializers.FloatField(min_value=0.01, max_value=400, default=7)

    @extend_schema(
        operation_id="reports_usage",
        tags=TAGS,
        parameters=[QuerySerializer],
        description="Traffic per service account and topic, storage per topic (rows with an "
        "empty service_account), per hour or day; `quota_suggestions`: per service account, "
        "p99 over minutes of produce/fetch bytes and requests per second, and quotas 1.5x "
        "that (from the last usage run).",
        responses={
            200: inline_serializer(
                name="UsageReport",
                fields={
                    "rows": serializers.ListField(
                        child=inline_serializer(
                            name="UsageReportRow",
                            fields={
                                **{f: serializers.IntegerField() for f in USAGE_FIELDS},
                                "ts": serializers.DateTimeField(),
                                "service_account": serializers.CharField(),
                                "topic": serializers.CharField(),
                                "storage_gb_hours": serializers.FloatField(),
                            },
                        )
                    ),
                    "quota_suggestions": serializers.ListField(
                        child=inline_serializer(
                            name="QuotaSuggestion",
                            fields={
                                "service_account": serializers.CharField(),
                                **{f: serializers.FloatField() for f in SUGGESTION_FIELDS[1:]},
                            },
                        )
                    ),
                },
            ),
            **errors(400),
        },
    )
    def get(self, request):
        q = validate_input(self.QuerySerializer, request.query_params.dict())
        rows = selectors.usage_rows(
            organisation=self.organisation, granularity=q["granularity"], days=q["days"]
        )
        suggestions = selectors.quota_suggestions(organisation=self.organisation)
        return Response(
            {
                "rows": [{f: getattr(r, f) for f in USAGE_FIELDS} for r in rows],
                "quota_suggestions": [
                    {f: getattr(x, f) for f in SUGGESTION_FIELDS} for x in suggestions
                ],
            }
        )


PEAK_FIELDS = ("topic", "peak_ts", "peak_records", "peak_bytes", "mean_records")


class PeaksReportApi(TenantAPIView):
    class QuerySerializer(StrictSerializer):
        topic = serializers.CharField(required=False, max_length=249)

    @extend_schema(
        operation_id="reports_peaks",
        tags=TAGS,
        parameters=[QuerySerializer],
        description="Per topic, from the last throughput run (its look-back, 24 h by "
        "default): the busiest minute by records (earliest on ties), its records and the "
        "busiest minute's bytes, and the mean records per minute with traffic.",
        responses={
            200: _rows(
                "PeaksReport",
                {
                    "topic": serializers.CharField(),
                    "peak_ts": serializers.DateTimeField(),
                    "peak_records": serializers.IntegerField(),
                    "peak_bytes": serializers.IntegerField(),
                    "mean_records": serializers.FloatField(),
                },
            ),
            **errors(400),
        },
    )
    def get(self, request):
        q = validate_input(self.QuerySerializer, request.query_params.dict())
        rows = selectors.peak_rows(organisation=self.organisation, topic=q.get("topic"))
        return Response({"rows": [{f: getattr(r, f) for f in PEAK_FIELDS} for r in rows]})


SKEW_FIELDS = ("ts", "topic", "busiest_partition", "max_share", "skew", "hot_partition")


class SkewReportApi(TenantAPIView):
    class QuerySerializer(StrictSerializer):
        topic = serializers.CharField(required=False, max_length=249)
        hours = serializers.FloatField(min_value=0.01, max_value=24 * 31, default=24)
        hot_only = serializers.BooleanField(default=False)

    @extend_schema(
        operation_id="reports_skew",
        tags=TAGS,
        parameters=[QuerySerializer],
        description="Per topic and hour: the busiest partition, its share of the records, "
        "skew = share x partition count (1 is even) and `hot_partition` (the busiest one when "
        "skew >= 2, else null). `hot_only=true` keeps the hours with a hot partition.",
        responses={
            200: _rows(
                "SkewReport",
                {
                    "ts": serializers.DateTimeField(),
                    "topic": serializers.CharField(),
                    "busiest_partition": serializers.IntegerField(),
                    "max_share": serializers.FloatField(),
                    "skew": serializers.FloatField(),
                    "hot_partition": serializers.IntegerField(allow_null=True),
                },
            ),
            **errors(400),
        },
    )
    def get(self, request):
        q = validate_input(self.QuerySerializer, request.query_params.dict())
        rows = selectors.skew_rows(
            organisation=self.organisation,
            topic=q.get("topic"),
            hours=q["hours"],
            hot_only=q["hot_only"],
        )
        return Response({"rows": [{f: getattr(r, f) for f in SKEW_FIELDS} for r in rows]})


COMPACTION_FIELDS = (
    "topic",
    "partition",
    "records",
    "distinct_keys",
    "tombstones",
    "keyless",
    "effectiveness",
)


class CompactionReportApi(TenantAPIView):
    class QuerySerializer(StrictSerializer):
        topic = serializers.CharField(required=False, max_length=249)

    @extend_schema(
        operation_id="reports_compaction",
        tags=TAGS,
        parameters=[QuerySerializer],
        description="Per partition of each compacted topic, from the last retention run: "
        "records, distinct keys, tombstones, keyless records and effectiveness = distinct "
        "keys / records (1.0: nothing left to compact; null for an empty partition).",
        responses={
            200: _rows(
                "CompactionReport",
                {
                    "topic": serializers.CharField(),
                    "partition": serializers.IntegerField(),
                    "records": serializers.IntegerField(),
                    "distinct_keys": serializers.IntegerField(),
                    "tombstones": serializers.IntegerField(),
                    "keyless": serializers.IntegerField(),
                    "effectiveness": serializers.FloatField(allow_null=True),
                },
            ),
            **errors(400),
        },
    )
    def get(self, request):
        q = validate_input(self.QuerySerializer, request.query_params.dict())
        rows = selectors.compaction_rows(organisation=self.organisation, topic=q.get("topic"))
        return Response({"rows": [{f: getattr(r, f) for f in COMPACTION_FIELDS} for r in rows]})
