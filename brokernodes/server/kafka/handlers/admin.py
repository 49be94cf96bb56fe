"""Kafka's admin APIs, forwarded to the control plane with the caller's own API key
(``kafka.control_plane``): CreateTopics v2-7, DeleteTopics v1-6, CreatePartitions v0-3,
DescribeConfigs v1-4, AlterConfigs v0-2, IncrementalAlterConfigs v0-1, DescribeAcls,
CreateAcls and DeleteAcls v1-3; DescribeCluster v0-1 is answered from the broker's image.

Before forwarding, the broker authorizes the request as Kafka does (CREATE, DELETE, ALTER,
DESCRIBE_CONFIGS, ALTER_CONFIGS on the topic), so deny ACLs apply; the control plane then
checks the service account's role, the quotas and the request itself, and records the
change in the audit log. ACL requests need the admin role (the control plane decides).
After a topic is created, deleted or grown, the answer waits (bounded by the request's
timeout, at most ``IMAGE_WAIT_S``) until this broker's metadata shows the change, so a
client that creates a topic and produces at once finds it.

A broker on a static metadata file has no control plane: changes answer POLICY_VIOLATION and
ACL requests SECURITY_DISABLED, with a message saying so; topic configs are described from
the file's overrides over the defaults.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from brokernodes.errors import SluiceError
from brokernodes.server.kafka import acl_codes, config_entries
from brokernodes.server.kafka.context import Handler, KafkaContext
from brokernodes.server.kafka.control_plane import AdminError, call, kafka_error, topic_path
from brokernodes.server.kafka.handlers.metadata import (
    brokers_of,
    cluster_operations,
    controller_of,
    find_by_id,
)
from brokernodes.server.metadata.client import ControlPlaneMetadataSource
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.server.protocol.kafka.codec import ZERO_UUID, uuid_bytes

if TYPE_CHECKING:
    from brokernodes.server.metadata.cluster import ClusterMetadata
    from brokernodes.server.protocol.kafka.frames import RequestHeader

IMAGE_WAIT_S = 10.0


def _authorize(ctx: KafkaContext, operation: str, resource_type: str, name: str = "") -> None:
    """Kafka's ACL check for one resource; a denial becomes an ``AdminError``."""
    try:
        ctx.authorize(operation, resource_type, name)
    except SluiceError as e:
        if kerr.kafka_code(e) == kerr.SASL_AUTHENTICATION_FAILED:
            raise  # the key is gone: the connection closes
        raise AdminError(kerr.kafka_code(e), e.message) from None


async def _wait_image(
    ctx: KafkaContext, done: Callable[[ClusterMetadata], bool], timeout_ms: int
) -> bool:
    """Until this broker's image (the caller's tenant view) satisfies ``done``; bounded."""
    limit = min(max(timeout_ms, 0) / 1000, IMAGE_WAIT_S)
    deadline = time.monotonic() + limit
    while not done(ctx.broker.image):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def _duplicates(names: list[Any]) -> set:
    return {n for n, count in Counter(names).items() if count > 1}


# --- topics ------------------------------------------------------------------------------


def _created(topic_id: str, partitions: int) -> Callable[[ClusterMetadata], bool]:
    def check(image: ClusterMetadata) -> bool:
        for t in image.topics.values():
            if t.topic_id == topic_id:
                return len(t.partitions) >= partitions and all(p.leader >= 0 for p in t.partitions)
        return False

    return check


async def create_topics(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    ctx.authorize("DESCRIBE", "cluster")  # authenticates and sets the tenant
    topics = request["topics"]
    twice = _duplicates([t["name"] for t in topics])
    results, waits = [], []
    for t in topics:
        name = t["name"]
        result: dict[str, Any] = {"name": name, "topic_id": ZERO_UUID}
        try:
            if name in twice:
                raise AdminError(kerr.INVALID_REQUEST, f"topic {name!r} is named more than once")
            if t["assignments"]:
                raise AdminError(
                    kerr.INVALID_REPLICA_ASSIGNMENT,
                    "Sluice places replicas itself: send num_partitions and "
                    "replication_factor instead of assignments",
                )
            _authorize(ctx, "CREATE", "topic", name)
            body: dict[str, Any] = {
                "name": name,
                "configs": {c["name"]: c["value"] for c in t["configs"] if c["value"] is not None},
                "validate_only": request["validate_only"],
            }
            if t["num_partitions"] != -1:
                body["partitions"] = t["num_partitions"]
            if t["replication_factor"] != -1:
                body["replication_factor"] = t["replication_factor"]
            answer = await call(ctx, "POST", "topics/", body)
            if not answer.ok:
                raise kafka_error(answer, "topic")
            doc = answer.doc
            result.update(
                error_code=kerr.NONE,
                error_message=None,
                num_partitions=doc["partitions"],
                replication_factor=doc["replication_factor"],
                configs=config_entries.created_topic_configs(
                    doc.get("effective_configs") or {}, doc.get("configs") or {}
                ),
            )
            if doc.get("topic_id"):
                result["topic_id"] = uuid_bytes(doc["topic_id"])
                waits.append(_created(doc["topic_id"], doc["partitions"]))
        except AdminError as e:
            result.update(error_code=e.code, error_message=e.message)
        results.append(result)
    if waits:
        await _wait_image(ctx, lambda image: all(w(image) for w in waits), request["timeout_ms"])
    return {"throttle_time_ms": 0, "topics": results}


async def delete_topics(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    ctx.authorize("DESCRIBE", "cluster")
    if header.api_version >= 6:
        wanted = [(t["name"], t["topic_id"]) for t in request["topics"]]
    else:
        wanted = [(name, ZERO_UUID) for name in request["topic_names"]]
    twice = _duplicates([n if n is not None else i for n, i in wanted])
    image = ctx.broker.image
    results, gone = [], []
    for name, topic_id in wanted:
        result: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_message": None}
        as_named = name if name is not None else topic_id
        try:
            if as_named in twice:
                raise AdminError(kerr.INVALID_REQUEST, "the request names this topic twice")
            if name is None and topic_id != ZERO_UUID:
                topic = find_by_id(image, topic_id)
                if topic is None:
                    raise AdminError(kerr.UNKNOWN_TOPIC_ID, "no topic has this id")
                name = result["name"] = topic.name
            if name is None:
                raise AdminError(kerr.INVALID_REQUEST, "name a topic or its id")
            _authorize(ctx, "DELETE", "topic", name)
            known = image.topics.get(name)
            answer = await call(ctx, "DELETE", topic_path(name))
            if not answer.ok:
                raise kafka_error(answer, "topic")
            if known is not None:
                result["topic_id"] = uuid_bytes(known.topic_id)
            gone.append(name)
            result["error_code"] = kerr.NONE
        except AdminError as e:
            result.update(error_code=e.code, error_message=e.message)
        results.append(result)
    if gone:
        await _wait_image(
            ctx, lambda image: not any(n in image.topics for n in gone), request["timeout_ms"]
        )
    return {"throttle_time_ms": 0, "responses": results}


async def create_partitions(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    ctx.authorize("DESCRIBE", "cluster")
    twice = _duplicates([t["name"] for t in request["topics"]])
    results, grown = [], {}
    for t in request["topics"]:
        name = t["name"]
        result: dict[str, Any] = {"name": name, "error_code": kerr.NONE, "error_message": None}
        try:
            if name in twice:
                raise AdminError(kerr.INVALID_REQUEST, f"topic {name!r} is named more than once")
            if t["assignments"] is not None:
                raise AdminError(
                    kerr.INVALID_REPLICA_ASSIGNMENT,
                    "Sluice places the new partitions' replicas itself: send no assignments",
                )
            _authorize(ctx, "ALTER", "topic", name)
            body = {"partitions": t["count"], "validate_only": request["validate_only"]}
            answer = await call(ctx, "POST", topic_path(name, "partitions"), body)
            if not answer.ok:
                raise kafka_error(answer, "topic")
            if not request["validate_only"]:
                grown[name] = t["count"]
        except AdminError as e:
            result.update(error_code=e.code, error_message=e.message)
        results.append(result)
    if grown:

        def done(image: ClusterMetadata) -> bool:
            return all(
                (t := image.topics.get(n)) is not None and len(t.partitions) >= count
                for n, count in grown.items()
            )

        await _wait_image(ctx, done, request["timeout_ms"])
    return {"throttle_time_ms": 0, "results": results}


# --- configs -----------------------------------------------------------------------------


def broker_settings(ctx: KafkaContext) -> dict[str, str]:
    """What a tenant may read of the answering broker's settings, by Kafka's names."""
    config = ctx.broker.config
    image = ctx.broker.image
    protocol = "SASL_SSL" if config.kafka_tls_cert else "SASL_PLAINTEXT"
    out = {
        "broker.id": str(image.broker_id),
        "auto.create.topics.enable": "false",
        "delete.topic.enable": "true",
        "sasl.enabled.mechanisms": "PLAIN",
        "socket.request.max.bytes": str(config.max_request_bytes),
        "connections.max.idle.ms": str(int(config.connections_max_idle_s * 1000)),
        "replica.lag.time.max.ms": str(config.replica_lag_time_max_ms),
        "fetch.max.bytes": str(config.max_fetch_bytes),
    }
    if config.kafka_advertised:
        out["advertised.listeners"] = f"{protocol}://{config.kafka_advertised}"
    if config.kafka_port:
        out["listeners"] = f"{protocol}://{config.host}:{config.kafka_port}"
    return out


async def _topic(ctx: KafkaContext, name: str) -> dict:
    if not isinstance(ctx.broker.metadata, ControlPlaneMetadataSource):
        # a static metadata file: its overrides are all there is
        topic = ctx.broker.image.topics.get(name)
        if topic is None or name.startswith("__"):
            raise AdminError(kerr.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        overrides = dict(topic.configs)
        return {
            "configs": overrides,
            "effective_configs": config_entries.effective_configs(overrides),
        }
    answer = await call(ctx, "GET", topic_path(name))
    if not answer.ok:
        raise kafka_error(answer, "topic")
    return answer.doc


def _resource_result(resource: dict, error: AdminError | None = None, **extra) -> dict:
    return {
        "error_code": error.code if error else kerr.NONE,
        "error_message": error.message if error else None,
        "resource_type": resource["resource_type"],
        "resource_name": resource["resource_name"],
        **extra,
    }


def _broker_resource(ctx: KafkaContext, name: str) -> None:
    """Broker resources name this broker (or "" for its defaults)."""
    me = str(ctx.broker.image.broker_id)
    if name not in ("", me):
        raise AdminError(
            kerr.INVALID_REQUEST, f"this is broker {me}: ask broker {name} for its configs"
        )


async def describe_configs(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    ctx.authorize("DESCRIBE", "cluster")
    documentation = header.api_version >= 3 and request["include_documentation"]
    results = []
    for r in request["resources"]:
        rtype, name, keys = r["resource_type"], r["resource_name"], r["configuration_keys"]
        try:
            if rtype == config_entries.RESOURCE_TOPIC:
                _authorize(ctx, "DESCRIBE_CONFIGS", "topic", name)
                doc = await _topic(ctx, name)
                configs = config_entries.topic_entries(
                    doc.get("effective_configs") or {},
                    doc.get("configs") or {},
                    keys,
                    synonyms=request["include_synonyms"],
                    documentation=documentation,
                )
            elif rtype == config_entries.RESOURCE_BROKER:
                _broker_resource(ctx, name)
                configs = config_entries.broker_entries(broker_settings(ctx), keys)
            else:
                raise AdminError(
                    kerr.INVALID_REQUEST, f"Sluice describes TOPIC and BROKER configs, not {rtype}"
                )
            results.append(_resource_result(r, configs=configs))
        except AdminError as e:
            results.append(_resource_result(r, e, configs=[]))
    return {"throttle_time_ms": 0, "results": results}


async def _alter_topic(
    ctx: KafkaContext,
    resource: dict,
    plan: Callable[[dict], dict[str, str | None]],
    validate_only: bool,
    needs_current: bool,
) -> None:
    name = resource["resource_name"]
    _authorize(ctx, "ALTER_CONFIGS", "topic", name)
    current = await _topic(ctx, name) if needs_current else {}
    try:
        changes = plan(current)
    except config_entries.ConfigOpError as e:
        raise AdminError(kerr.INVALID_CONFIG, str(e)) from None
    body = {"configs": changes, "validate_only": validate_only}
    answer = await call(ctx, "PATCH", topic_path(name), body)
    if not answer.ok:
        raise kafka_error(answer, "topic")


def _not_topic(resource: dict) -> AdminError:
    if resource["resource_type"] == config_entries.RESOURCE_BROKER:
        return AdminError(
            kerr.CLUSTER_AUTHORIZATION_FAILED,
            "broker configs are managed by the service's operators, not by tenants",
        )
    return AdminError(kerr.INVALID_REQUEST, "Sluice alters TOPIC configs only")


async def alter_configs(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    ctx.authorize("DESCRIBE", "cluster")
    results = []
    for r in request["resources"]:
        try:
            if r["resource_type"] != config_entries.RESOURCE_TOPIC:
                raise _not_topic(r)
            await _alter_topic(
                ctx,
                r,
                lambda doc, r=r: config_entries.replace_changes(
                    doc.get("configs") or {}, r["configs"]
                ),
                request["validate_only"],
                needs_current=True,
            )
            results.append(_resource_result(r))
        except AdminError as e:
            results.append(_resource_result(r, e))
    return {"throttle_time_ms": 0, "responses": results}


async def incremental_alter_configs(
    ctx: KafkaContext, header: RequestHeader, request: dict
) -> dict:
    ctx.authorize("DESCRIBE", "cluster")
    results = []
    for r in request["resources"]:
        try:
            if r["resource_type"] != config_entries.RESOURCE_TOPIC:
                raise _not_topic(r)
            lists = {config_entries.OP_APPEND, config_entries.OP_SUBTRACT}
            await _alter_topic(
                ctx,
                r,
                lambda doc, r=r: config_entries.incremental_changes(
                    doc.get("effective_configs") or {}, r["configs"]
                ),
                request["validate_only"],
                needs_current=any(c["config_operation"] in lists for c in r["configs"]),
            )
            results.append(_resource_result(r))
        except AdminError as e:
            results.append(_resource_result(r, e))
    return {"throttle_time_ms": 0, "responses": results}


# --- ACLs --------------------------------------------------------------------------------


async def _acl_bindings(ctx: KafkaContext) -> list:
    answer = await call(ctx, "GET", "acls/", static_code=kerr.SECURITY_DISABLED)
    if not answer.ok:
        raise kafka_error(answer, "acl")
    return acl_codes.parse_bindings(answer.doc or [])


async def describe_acls(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    ctx.authorize("DESCRIBE", "cluster")
    try:
        acl_filter = acl_codes.filter_of(request)
        bindings = await _acl_bindings(ctx)
    except acl_codes.AclRequestError as e:
        return {"error_code": kerr.INVALID_REQUEST, "error_message": str(e), "resources": []}
    except AdminError as e:
        return {"error_code": e.code, "error_message": e.message, "resources": []}
    found = [b for _, b in bindings if acl_filter is not None and acl_filter.matches(b)]
    return {
        "throttle_time_ms": 0,
        "error_code": kerr.NONE,
        "error_message": None,
        "resources": acl_codes.describe_resources(found),
    }


async def create_acls(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    ctx.authorize("DESCRIBE", "cluster")
    results = []
    for creation in request["creations"]:
        try:
            body = acl_codes.binding_from_creation(creation)
            answer = await call(ctx, "POST", "acls/", body, static_code=kerr.SECURITY_DISABLED)
            if not answer.ok:
                doc = answer.doc if isinstance(answer.doc, dict) else {}
                if doc.get("error_code") != "CONFLICT":  # exists already: Kafka's success
                    raise kafka_error(answer, "acl")
            results.append({"error_code": kerr.NONE, "error_message": None})
        except acl_codes.AclRequestError as e:
            results.append({"error_code": kerr.INVALID_REQUEST, "error_message": str(e)})
        except AdminError as e:
            results.append({"error_code": e.code, "error_message": e.message})
    return {"throttle_time_ms": 0, "results": results}


async def delete_acls(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    ctx.authorize("DESCRIBE", "cluster")
    results = []
    try:
        bindings = await _acl_bindings(ctx)
    except AdminError as e:
        failed = {"error_code": e.code, "error_message": e.message, "matching_acls": []}
        return {"throttle_time_ms": 0, "filter_results": [failed for _ in request["filters"]]}
    deleted: set[str] = set()
    for f in request["filters"]:
        try:
            acl_filter = acl_codes.filter_of(f)
        except acl_codes.AclRequestError as e:
            results.append(
                {"error_code": kerr.INVALID_REQUEST, "error_message": str(e), "matching_acls": []}
            )
            continue
        matching = []
        for acl_id, b in bindings:
            if acl_filter is None or not acl_filter.matches(b):
                continue
            if acl_id not in deleted:
                try:
                    answer = await call(ctx, "DELETE", f"acls/{acl_id}")
                    if not answer.ok and answer.status != 404:
                        raise kafka_error(answer, "acl")
                except AdminError as e:
                    matching.append(acl_codes.matching_acl(b, e.code, e.message))
                    continue
                deleted.add(acl_id)
            matching.append(acl_codes.matching_acl(b))
        results.append({"error_code": kerr.NONE, "error_message": None, "matching_acls": matching})
    return {"throttle_time_ms": 0, "filter_results": results}


# --- the cluster -------------------------------------------------------------------------


async def describe_cluster(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    ctx.authorize("DESCRIBE", "cluster")
    image = ctx.broker.image
    body: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": kerr.NONE,
        "endpoint_type": request["endpoint_type"],
        "cluster_id": image.cluster_id,
        "controller_id": controller_of(image.brokers),
        "brokers": [
            {"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": None}
            for b in brokers_of(image.brokers)
        ],
    }
    if request["endpoint_type"] != 1:  # 2: controllers, which Sluice does not expose
        body.update(
            error_code=kerr.INVALID_REQUEST,
            error_message="Sluice's brokers describe brokers (endpoint type 1) only",
            brokers=[],
        )
    if request["include_cluster_authorized_operations"]:
        body["cluster_authorized_operations"] = cluster_operations(ctx)
    return body


HANDLERS: dict[int, Handler] = {
    apis.CREATE_TOPICS: create_topics,
    apis.DELETE_TOPICS: delete_topics,
    apis.CREATE_PARTITIONS: create_partitions,
    apis.DESCRIBE_CONFIGS: describe_configs,
    apis.ALTER_CONFIGS: alter_configs,
    apis.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
    apis.DESCRIBE_ACLS: describe_acls,
    apis.CREATE_ACLS: create_acls,
    apis.DELETE_ACLS: delete_acls,
    apis.DESCRIBE_CLUSTER: describe_cluster,
}
