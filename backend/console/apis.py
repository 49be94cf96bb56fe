"""The console's own routes under /api/v1/console/: partition state, brokers, the message
browser (with export), test produce and the console policy. Thin views: the role check is
``TenantAPIView``'s, before any broker is called."""

from __future__ import annotations

import csv
import io
import json

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from backend.console import browse, selectors, services, traffic
from backend.console.credentials import console_token
from backend.console.filters import InvalidJsonPath, parse_json_path
from backend.core.exceptions import ApplicationError, PermissionDenied
from backend.core.schema import errors
from backend.core.serializers import StrictSerializer, validate_input
from backend.tenancy import roles
from backend.tenancy.permissions import TenantAPIView
from backend.topics import selectors as topic_selectors

TAGS = ["console"]
NAME_PARAM = OpenApiParameter("name", str, OpenApiParameter.PATH, description="topic name")


class ConsoleLogDirSerializer(serializers.Serializer):
    path = serializers.CharField()
    log_bytes = serializers.IntegerField(allow_null=True, help_text="bytes its partition logs hold")
    free_bytes = serializers.IntegerField(
        allow_null=True, help_text="free on the file system; null: could not be read"
    )
    total_bytes = serializers.IntegerField(allow_null=True, help_text="size of the file system")


class ConsoleBrokerInfoSerializer(serializers.Serializer):
    version = serializers.CharField()
    started_at_ms = serializers.IntegerField(help_text="when the process started, epoch ms")
    uptime_s = serializers.FloatField()
    log_dirs = ConsoleLogDirSerializer(many=True)
    hosted_partitions = serializers.IntegerField(
        allow_null=True, help_text="partition logs open on it (its own count)"
    )
    configs = serializers.DictField(
        child=serializers.JSONField(), help_text="the non-secret settings it runs with"
    )


class ConsolePartitionRefSerializer(serializers.Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()


class ConsoleBrokerSerializer(serializers.Serializer):
    broker_id = serializers.IntegerField()
    url = serializers.CharField()
    kafka = serializers.CharField(
        allow_null=True,
        help_text="its Kafka listener as clients reach it ('host:port', SASL/PLAIN with an "
        "API key); null: it has none",
    )
    live = serializers.BooleanField()
    last_heartbeat_at = serializers.DateTimeField()
    registered_at = serializers.DateTimeField()
    metadata_version = serializers.IntegerField()
    leader_partitions = serializers.IntegerField(
        help_text="how many of your organisation's partitions it leads"
    )
    partitions = serializers.IntegerField(
        help_text="replicas assigned to it, every organisation's (the controller's table)"
    )
    leaders = serializers.IntegerField(help_text="partitions it leads, every organisation's")
    under_replicated = serializers.IntegerField(
        help_text="partitions it leads whose ISR lacks a replica (Kafka's "
        "UnderReplicatedPartitions, per leader)"
    )
    out_of_isr = serializers.IntegerField(
        help_text="partitions it hosts whose ISR it is not in (it is behind or down)"
    )
    your_under_replicated = ConsolePartitionRefSerializer(
        many=True, help_text="your organisation's under-replicated partitions it leads"
    )
    info = ConsoleBrokerInfoSerializer(
        allow_null=True, help_text="what the broker says of itself; null: see info_error"
    )
    info_error = serializers.CharField(
        allow_null=True, help_text="why info is null (down, unreachable); null when read"
    )


class ConsoleOpenTransactionSerializer(serializers.Serializer):
    producer_id = serializers.IntegerField()
    producer_epoch = serializers.IntegerField()
    first_offset = serializers.IntegerField(
        help_text="its first record: read_committed readers wait here until it ends"
    )
    started_ms = serializers.IntegerField(
        allow_null=True, help_text="its first batch's timestamp (epoch ms, the producer's clock)"
    )
    open_ms = serializers.IntegerField(
        allow_null=True,
        help_text="how long it has been open (a lower bound when its first batch is no longer "
        "in the producer state), null when unknown",
    )


class ConsolePartitionStateSerializer(serializers.Serializer):
    partition = serializers.IntegerField()
    leader = serializers.IntegerField(help_text="-1: no leader")
    leader_epoch = serializers.IntegerField()
    replicas = serializers.ListField(child=serializers.IntegerField())
    isr = serializers.ListField(child=serializers.IntegerField())
    offline = serializers.BooleanField()
    under_replicated = serializers.BooleanField()
    log_start_offset = serializers.IntegerField(allow_null=True)
    log_end_offset = serializers.IntegerField(allow_null=True)
    high_watermark = serializers.IntegerField(allow_null=True)
    last_stable_offset = serializers.IntegerField(
        allow_null=True,
        help_text="the LSO: below it every transaction is decided (read_committed stops here)",
    )
    open_transactions = ConsoleOpenTransactionSerializer(
        many=True, help_text="transactions open on this partition, oldest first (its leader's)"
    )


class ConsoleTopicStateSerializer(serializers.Serializer):
    name = serializers.CharField()
    partitions = ConsolePartitionStateSerializer(many=True)


class ConsolePartitionStatesSerializer(serializers.Serializer):
    ts = serializers.DateTimeField()
    topics = ConsoleTopicStateSerializer(many=True)
    errors = serializers.ListField(child=serializers.CharField())


class RecordHeaderSerializer(serializers.Serializer):
    name = serializers.CharField()
    value = serializers.CharField(allow_null=True, help_text="base64")


class ConsoleRecordSerializer(serializers.Serializer):
    partition = serializers.IntegerField()
    offset = serializers.IntegerField()
    timestamp = serializers.IntegerField(help_text="epoch ms")
    timestamp_type = serializers.CharField()
    key = serializers.JSONField(allow_null=True)
    key_format = serializers.CharField(required=False)
    value = serializers.JSONField(allow_null=True)
    value_format = serializers.CharField(required=False)
    headers = RecordHeaderSerializer(many=True)


class ConsoleBrowsePartitionSerializer(serializers.Serializer):
    partition = serializers.IntegerField()
    log_start_offset = serializers.IntegerField()
    high_watermark = serializers.IntegerField()
    scanned = serializers.IntegerField(help_text="records read from it for this page")
    to_scan = serializers.IntegerField(help_text="records in its range for this page")
    unavailable = serializers.CharField(
        allow_null=True, help_text="why it could not be read (e.g. no live leader), else null"
    )


class ConsoleBrowseSerializer(serializers.Serializer):
    topic = serializers.CharField()
    order = serializers.CharField(help_text="newest_first (start=latest) or oldest_first")
    key_partition = serializers.BooleanField(help_text="the partition was computed from the key")
    partitions = ConsoleBrowsePartitionSerializer(many=True, help_text="the partitions read")
    records = ConsoleRecordSerializer(many=True)
    scanned = serializers.IntegerField(help_text="records read for this page, all partitions")
    to_scan = serializers.IntegerField(help_text="records in this page's ranges")
    scan_budget = serializers.IntegerField(help_text="records this page could read at most")
    cursor = serializers.CharField(
        allow_null=True,
        help_text="pass it back as cursor for the next page (newest first: older records); "
        "null: nothing left",
    )
    reached_end = serializers.BooleanField()
    unavailable = serializers.CharField(
        allow_null=True, help_text="why nothing could be read (e.g. no live leader), else null"
    )


class ConsoleByteCounterSerializer(serializers.Serializer):
    broker_id = serializers.IntegerField()
    topic = serializers.CharField()
    bytes_in = serializers.IntegerField(help_text="record-batch bytes appended since it started")
    bytes_out = serializers.IntegerField(help_text="record-batch bytes served by fetch")


class ConsoleTrafficSerializer(serializers.Serializer):
    ts = serializers.DateTimeField()
    brokers = serializers.ListField(
        child=serializers.IntegerField(), help_text="the live brokers whose counters were read"
    )
    counters = ConsoleByteCounterSerializer(many=True)
    errors = serializers.ListField(child=serializers.CharField())


class ConsolePolicySerializer(serializers.Serializer):
    allow_export = serializers.BooleanField()


class ConsoleBrokersApi(TenantAPIView):
    @extend_schema(
        operation_id="console_brokers",
        tags=TAGS,
        responses={200: ConsoleBrokerSerializer(many=True), **errors()},
        description="Every broker: registry and liveness, the whole cluster's partition, "
        "leader and under-replicated counts per broker (names only of your partitions), and "
        "what each live broker says of itself (version, uptime, disk per log directory, "
        "settings); info is null with info_error 'down: ...' or 'unreachable: ...' when it "
        "could not be read.",
    )
    def get(self, request):
        return Response(
            ConsoleBrokerSerializer(
                selectors.broker_list(organisation=self.organisation), many=True
            ).data
        )


class ConsolePartitionsApi(TenantAPIView):
    class FilterSerializer(StrictSerializer):
        topic = serializers.CharField(required=False, max_length=249)

    @extend_schema(
        operation_id="console_partitions",
        tags=TAGS,
        parameters=[FilterSerializer],
        responses={200: ConsolePartitionStatesSerializer, **errors(400)},
        description="Partitions of the organisation's topics with leader, replicas, ISR, "
        "offsets and open transactions (from the leaders). Poll it to draw rates.",
    )
    def get(self, request):
        f = validate_input(self.FilterSerializer, request.query_params)
        states = selectors.partition_states(
            organisation=self.organisation, topic_name=f.get("topic")
        )
        return Response(ConsolePartitionStatesSerializer(states).data)


class ConsoleTrafficApi(TenantAPIView):
    @extend_schema(
        operation_id="console_traffic",
        tags=TAGS,
        responses={200: ConsoleTrafficSerializer, **errors()},
        description="Your organisation's byte counters on each live broker, per topic "
        "(counters since each broker started, not rates): read twice and divide the "
        "difference by the time between the readings, per broker and topic; a counter "
        "that went down means that broker restarted.",
    )
    def get(self, request):
        return Response(
            ConsoleTrafficSerializer(traffic.byte_counters(organisation=self.organisation)).data
        )


class ConsoleMessagesApi(TenantAPIView):
    class FilterSerializer(StrictSerializer):
        partition = serializers.IntegerField(
            required=False, min_value=0, help_text="one partition; absent: every partition"
        )
        start = serializers.ChoiceField(
            choices=["earliest", "latest", "offset", "timestamp"], required=False, default="latest"
        )
        offset = serializers.IntegerField(required=False, min_value=0)
        timestamp = serializers.IntegerField(required=False, min_value=0, help_text="epoch ms")
        limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=50)
        key = serializers.CharField(required=False, max_length=1000, trim_whitespace=False)
        header_name = serializers.CharField(required=False, max_length=256)
        header_value = serializers.CharField(required=False, max_length=1000)
        json_path = serializers.CharField(required=False, max_length=200)
        json_value = serializers.CharField(required=False, max_length=1000)
        cursor = serializers.CharField(
            required=False,
            max_length=browse.MAX_CURSOR_LENGTH,
            help_text="a previous answer's cursor: the next page",
        )
        scan_budget = serializers.IntegerField(
            required=False,
            min_value=10,
            max_value=browse.MAX_SCAN_BUDGET,
            default=browse.DEFAULT_SCAN_BUDGET,
            help_text="records read at most for this page, over all partitions",
        )
        export = serializers.ChoiceField(choices=["json", "csv"], required=False)

    class InputSerializer(StrictSerializer):
        key = serializers.CharField(
            required=False, allow_null=True, max_length=10_000, trim_whitespace=False
        )
        value = serializers.CharField(
            required=False,
            allow_null=True,
            allow_blank=True,
            max_length=1_000_000,
            trim_whitespace=False,
        )
        value_type = serializers.ChoiceField(
            choices=["STRING", "JSON"], required=False, default="STRING"
        )
        headers = serializers.ListField(
            child=inline_serializer(
                "ConsoleHeaderInput",
                {
                    "name": serializers.CharField(max_length=256),
                    "value": serializers.CharField(
                        max_length=10_000, allow_blank=True, trim_whitespace=False
                    ),
                },
            ),
            required=False,
            max_length=50,
        )
        partition = serializers.IntegerField(required=False, allow_null=True, min_value=0)

    @extend_schema(
        operation_id="console_messages_browse",
        tags=TAGS,
        parameters=[NAME_PARAM, FilterSerializer],
        responses={200: ConsoleBrowseSerializer, **errors(400, 404)},
        description="Browse every partition (or one, or the key's) with filters: newest "
        "first across partitions with start=latest, else oldest first from the earliest "
        "offset, an offset or a time on each partition, merged by timestamp. Each page reads "
        "at most scan_budget records and says how many it read of how many in range; pass "
        "cursor back for the next page. With export=json|csv the records come as a "
        "download, unless the console policy forbids export (403 EXPORT_DISABLED).",
    )
    def get(self, request, name: str):
        f = validate_input(self.FilterSerializer, request.query_params)
        topic = topic_selectors.topic_get(organisation=self.organisation, name=name)
        if f["start"] == "offset" and "offset" not in f:
            raise ApplicationError("give the offset to start from", {"offset": ["required"]})
        if f["start"] == "timestamp" and "timestamp" not in f:
            raise ApplicationError("give the time to start from", {"timestamp": ["required"]})
        try:
            path = parse_json_path(f["json_path"]) if f.get("json_path") else None
        except InvalidJsonPath as e:
            raise ApplicationError(str(e), {"json_path": [str(e)]}) from None
        cursor = browse.parse_cursor(f["cursor"]) if f.get("cursor") else None
        export = f.get("export")
        if export and not services.policy_get(organisation=self.organisation).allow_export:
            raise ExportDisabled("your organisation's policy does not allow exporting messages")
        q = browse.BrowseQuery(
            partition=f.get("partition"),
            start=f["start"],
            offset=f.get("offset"),
            timestamp=f.get("timestamp"),
            limit=f["limit"],
            key=f.get("key"),
            header_name=f.get("header_name"),
            header_value=f.get("header_value"),
            json_path=path,
            json_value=f.get("json_value"),
            cursor=cursor,
            scan_budget=f["scan_budget"],
        )
        token = console_token(self.organisation)
        result = browse.browse(token=token, topic=topic, q=q)
        if export:
            return export_response(topic.name, result["records"], export)
        return Response(ConsoleBrowseSerializer(result).data)

    @extend_schema(
        operation_id="console_messages_produce",
        tags=TAGS,
        parameters=[NAME_PARAM],
        request=InputSerializer,
        responses={
            200: inline_serializer(
                "ConsoleProduced",
                {
                    "topic": serializers.CharField(),
                    "partition": serializers.IntegerField(),
                    "offset": serializers.IntegerField(),
                    "timestamp": serializers.CharField(),
                },
            ),
            **errors(400, 404),
        },
        description="Produce one test message on your behalf (members and above).",
    )
    def post(self, request, name: str):
        data = validate_input(self.InputSerializer, request.data)
        topic = topic_selectors.topic_get(organisation=self.organisation, name=name)
        if data.get("value_type") == "JSON" and data.get("value") is not None:
            try:
                data["value"] = json.loads(data["value"])
            except ValueError:
                raise ApplicationError(
                    "the value is not valid JSON", {"value": ["not valid JSON"]}
                ) from None
        out = services.produce_test_message(
            ctx=self.ctx,
            topic=topic,
            key=data.get("key"),
            value=data.get("value"),
            value_type=data.get("value_type", "STRING"),
            headers=data.get("headers") or [],
            partition=data.get("partition"),
        )
        return Response(out)


class ExportDisabled(PermissionDenied):
    error_code = "EXPORT_DISABLED"


def export_response(topic: str, records: list[dict], fmt: str) -> HttpResponse:
    if fmt == "json":
        body = json.dumps(records, ensure_ascii=False, indent=1)
        resp = HttpResponse(body, content_type="application/json; charset=utf-8")
    else:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["partition", "offset", "timestamp", "key", "value", "headers"])
        for r in records:
            w.writerow(
                [
                    r["partition"],
                    r["offset"],
                    r["timestamp"],
                    _cell(r.get("key")),
                    _cell(r.get("value")),
                    json.dumps(r.get("headers") or []),
                ]
            )
        resp = HttpResponse(buf.getvalue(), content_type="text/csv; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="{_safe(topic)}.{fmt}"'
    resp["Cache-Control"] = "no-store"
    return resp


def _cell(v) -> str:
    text = "" if v is None else v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    # a spreadsheet would run a cell that starts with = + - @ as a formula
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


class ConsolePolicyApi(TenantAPIView):
    write_role = roles.ADMIN

    @extend_schema(
        operation_id="console_policy_retrieve",
        tags=TAGS,
        responses={200: ConsolePolicySerializer, **errors()},
    )
    def get(self, request):
        policy = services.policy_get(organisation=self.organisation)
        return Response(ConsolePolicySerializer(policy).data)

    class InputSerializer(StrictSerializer):
        allow_export = serializers.BooleanField()

    @extend_schema(
        operation_id="console_policy_update",
        tags=TAGS,
        request=InputSerializer,
        responses={200: ConsolePolicySerializer, **errors(400)},
    )
    def patch(self, request):
        data = validate_input(self.InputSerializer, request.data)
        policy = services.policy_update(ctx=self.ctx, allow_export=data["allow_export"])
        return Response(ConsolePolicySerializer(policy).data)
