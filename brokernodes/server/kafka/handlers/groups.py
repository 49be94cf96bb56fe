"""Kafka API handlers: the consumer group protocol of KIP-848 (ConsumerGroupHeartbeat,
ConsumerGroupDescribe) and the group admin APIs (ListGroups, DeleteGroups, OffsetDelete).

They call the group service the HTTP group routes call (``coordinator/service.py``), so a
group joined over Kafka is the group REST, WebSocket and the console see. As on HTTP: the
caller's key decides the tenant and group ids are qualified within it, ACLs are checked
through ``ctx.authorize`` (READ on the group and on each subscribed topic to heartbeat,
DESCRIBE to describe or list, DELETE to delete a group or its offsets), and a group another
broker coordinates answers NOT_COORDINATOR. Errors are Kafka's codes with the service's
message.
"""

from __future__ import annotations

from functools import partial

from brokernodes.errors import SluiceError, UnauthenticatedError
from brokernodes.groups import ASSIGNORS, TopicPartition, UnsupportedAssignorError
from brokernodes.groups.errors import InvalidGroupRequestError
from brokernodes.server.coordinator.service import GroupService
from brokernodes.server.http.log_offsets import log_offsets
from brokernodes.server.kafka import group_messages as gm
from brokernodes.server.kafka.context import Handler, KafkaContext
from brokernodes.server.kafka.handlers import classic_groups
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.server.protocol.kafka.frames import RequestHeader


class InvalidGroupIdError(SluiceError):
    error_code = "INVALID_GROUP_ID"


def _service(ctx: KafkaContext) -> GroupService:
    return GroupService(ctx.broker.groups, partial(log_offsets, ctx.broker))


def _failure(e: SluiceError) -> tuple[int, str]:
    """(Kafka's code, message) for an error; an unauthenticated caller is not answered:
    the connection closes."""
    if isinstance(e, UnauthenticatedError):
        raise e
    return kerr.kafka_code(e), e.message


MAX_GROUP_ID = 249  # as on HTTP, so every group made over Kafka can be named over REST
MAX_MEMBER_ID = 1024


def _group_id(group_id: str | None) -> str:
    if not group_id or len(group_id) > MAX_GROUP_ID:
        raise InvalidGroupIdError(f"group ids are 1..{MAX_GROUP_ID} characters")
    return group_id


# --- ConsumerGroupHeartbeat (68) -----------------------------------------------------------


async def consumer_group_heartbeat(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    try:
        return await _heartbeat(ctx, request)
    except SluiceError as e:
        code, message = _failure(e)
        return {"error_code": code, "error_message": message}


async def _heartbeat(ctx: KafkaContext, request: dict) -> dict:
    group_id = request["group_id"]
    if not group_id:
        raise InvalidGroupRequestError("the group id must not be empty")
    tenant = ctx.authorize("READ", "group", _group_id(group_id)).tenant
    if len(request["member_id"]) > MAX_MEMBER_ID:
        raise InvalidGroupRequestError(f"member ids are at most {MAX_MEMBER_ID} characters")
    if request.get("subscribed_topic_regex"):  # librdkafka sends "" for none
        raise InvalidGroupRequestError(
            "regular-expression subscriptions are not supported yet; subscribe to topic names"
        )
    subscriptions = request["subscribed_topic_names"]
    for topic in subscriptions or ():
        ctx.authorize("READ", "topic", topic)
    assignor = request["server_assignor"]
    if assignor is not None and assignor not in ASSIGNORS:
        raise UnsupportedAssignorError(
            f"unknown server assignor {assignor!r}; this cluster has {', '.join(ASSIGNORS)}"
        )
    rebalance_timeout = request["rebalance_timeout_ms"]
    service = _service(ctx)
    ids = gm.TopicIds(service.view(tenant))
    response = await service.heartbeat(
        tenant,
        group_id,
        request["member_id"] or None,
        request["member_epoch"],
        subscriptions=subscriptions,
        owned=gm.owned_partitions(request["topic_partitions"], ids),
        instance_id=request["instance_id"],
        rebalance_timeout_ms=rebalance_timeout if rebalance_timeout >= 0 else None,
        assignor=assignor,
        client_id=ctx.client_id,
        client_host=ctx.peer_host,
    )
    return gm.heartbeat_answer(response, ids)


# --- ConsumerGroupDescribe (69) ------------------------------------------------------------


async def consumer_group_describe(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    service = _service(ctx)
    groups = []
    for group_id in request["group_ids"]:
        try:
            groups.append(await _describe(ctx, service, group_id, request))
        except SluiceError as e:
            groups.append(gm.failed_group(group_id, *_failure(e)))
    return {"groups": groups}


async def _describe(ctx: KafkaContext, service: GroupService, group_id: str, request) -> dict:
    tenant = ctx.authorize("DESCRIBE", "group", _group_id(group_id)).tenant
    group = await service.consumer_group(tenant, group_id)
    ids = gm.TopicIds(service.view(tenant))
    desc = group.describe()
    members = [
        gm.described_member(m, *service.member_client(tenant, group_id, m["member_id"]), ids)
        for m in desc["members"]
    ]
    operations = (
        classic_groups.group_operations(ctx, group_id)
        if request["include_authorized_operations"]
        else gm.AUTHORIZED_OPERATIONS_OMITTED
    )
    return gm.described_group(group_id, desc, members, operations)


# --- ListGroups (16) -----------------------------------------------------------------------


async def list_groups(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    """The groups this broker coordinates (clients ask every broker), those the caller may
    describe, kept by the states and types filters."""
    try:
        tenant = ctx.authorize("DESCRIBE", "cluster").tenant
        listings = await _service(ctx).list_groups(tenant)
    except SluiceError as e:
        return {"error_code": _failure(e)[0], "groups": []}
    visible = []
    for g in listings:
        try:
            ctx.authorize("DESCRIBE", "group", g.group_id, count=False)
        except UnauthenticatedError:
            raise
        except SluiceError:
            continue
        visible.append(g)
    rows = gm.listed_groups(visible, request["states_filter"], request["types_filter"])
    return {"error_code": kerr.NONE, "groups": rows}


# --- DeleteGroups (42) ---------------------------------------------------------------------


async def delete_groups(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    """Each group only when it has no members (NON_EMPTY_GROUP), with its offsets."""
    service = _service(ctx)
    results = []
    for group_id in request["groups_names"]:
        try:
            tenant = ctx.authorize("DELETE", "group", _group_id(group_id)).tenant
            await service.delete(tenant, group_id)
            code = kerr.NONE
        except SluiceError as e:
            code = _failure(e)[0]
        results.append({"group_id": group_id, "error_code": code})
    return {"results": results}


# --- OffsetDelete (47) ---------------------------------------------------------------------


async def offset_delete(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    """Delete a group's committed offsets of partitions, except those of topics its members
    subscribe to (GROUP_SUBSCRIBED_TO_TOPIC). Per partition: TOPIC_AUTHORIZATION_FAILED
    without READ on the topic, UNKNOWN_TOPIC_OR_PARTITION for one that does not exist."""
    group_id = request["group_id"]
    try:
        tenant = ctx.authorize("DELETE", "group", _group_id(group_id)).tenant
    except SluiceError as e:
        return {"error_code": _failure(e)[0], "topics": []}
    service = _service(ctx)
    view = service.view(tenant)
    errors: dict[TopicPartition, int] = {}
    wanted: list[TopicPartition] = []
    order: list[tuple[str, list[int]]] = []
    for topic in request["topics"]:
        name = topic["name"]
        numbers = [p["partition_index"] for p in topic["partitions"]]
        order.append((name, numbers))
        try:
            ctx.authorize("READ", "topic", name)
            denied = None
        except SluiceError as e:
            denied = _failure(e)[0]
        for number in numbers:
            tp = TopicPartition(name, number)
            if denied is not None:
                errors[tp] = denied
                continue
            try:
                view.partition(name, number)
            except SluiceError:
                errors[tp] = kerr.UNKNOWN_TOPIC_OR_PARTITION
                continue
            wanted.append(tp)
    try:
        outcome = await service.delete_offsets(tenant, group_id, wanted)
    except SluiceError as e:
        return {"error_code": _failure(e)[0], "topics": []}
    for tp, error in outcome.items():
        errors[tp] = kerr.NONE if error is None else kerr.kafka_code(error)
    return {
        "error_code": kerr.NONE,
        "topics": [
            {
                "name": name,
                "partitions": [
                    {"partition_index": n, "error_code": errors[TopicPartition(name, n)]}
                    for n in numbers
                ],
            }
            for name, numbers in order
        ],
    }


HANDLERS: dict[int, Handler] = {
    apis.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat,
    apis.CONSUMER_GROUP_DESCRIBE: consumer_group_describe,
    apis.LIST_GROUPS: list_groups,
    apis.DELETE_GROUPS: delete_groups,
    apis.OFFSET_DELETE: offset_delete,
    **classic_groups.HANDLERS,
}
