"""Kafka admin requests forwarded to the control plane's tenant API with the caller's own
API key, so the control plane's validation, roles, quotas, tenancy and audit log apply to a
Kafka client exactly as to the CLI and the console. Any broker forwards (clients may send
admin requests to any of them); a broker on a static metadata file has no control plane and
refuses with a clear message.

``kafka_error`` (pure) turns the control plane's ``{"error_code", "message", "fields"}``
answer into Kafka's error code and message for the kind of resource the request was about.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp

from brokernodes.errors import UnauthenticatedError
from brokernodes.server.metadata.client import ControlPlaneMetadataSource
from brokernodes.server.protocol.kafka import errors as kerr

if TYPE_CHECKING:
    from brokernodes.server.kafka.context import KafkaContext

logger = logging.getLogger("sluice.kafka")

STATIC_METADATA = (
    "this broker serves a static metadata file and has no control plane: topics, configs "
    "and ACLs are changed by editing that file (start brokers with --control-plane to use "
    "Kafka's admin APIs)"
)
TIMEOUT_S = 15.0


class AdminError(Exception):
    """A Kafka admin request (or one resource of it) refused with ``code``."""

    def __init__(self, code: int, message: str | None = None, throttle_ms: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.throttle_ms = throttle_ms


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    doc: Any
    headers: Mapping[str, str]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


# field named in a control-plane refusal -> Kafka's code for it (topics)
_FIELD_CODES = {
    "name": kerr.INVALID_TOPIC_EXCEPTION,
    "partitions": kerr.INVALID_PARTITIONS,
    "replication_factor": kerr.INVALID_REPLICATION_FACTOR,
}


def message_of(doc: Any) -> str:
    """The control plane's message with its field errors (``field: message``)."""
    if not isinstance(doc, Mapping):
        return "the control plane gave no reason"
    parts = [str(doc.get("message") or doc.get("error_code") or "refused")]
    fields = doc.get("fields")
    if isinstance(fields, Mapping):
        for name, problems in fields.items():
            text = "; ".join(map(str, problems)) if isinstance(problems, list) else str(problems)
            parts.append(f"{name}: {text}")
    return " - ".join(parts)


def kafka_error(answer: Answer, resource: str = "topic") -> AdminError:
    """Kafka's code for a control-plane refusal of a request about ``resource`` ("topic",
    "acl"): field errors name INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR or
    INVALID_TOPIC_EXCEPTION where they are about those fields, quotas are POLICY_VIOLATION,
    a role that may not is TOPIC_ or CLUSTER_AUTHORIZATION_FAILED."""
    doc = answer.doc if isinstance(answer.doc, Mapping) else {}
    code = str(doc.get("error_code") or "")
    message = message_of(answer.doc)
    if answer.status == 429 or code == "THROTTLED":
        retry = answer.headers.get("Retry-After", "1")
        ms = int(retry) * 1000 if retry.isdigit() else 1000
        return AdminError(kerr.THROTTLING_QUOTA_EXCEEDED, message, ms)
    if code == "TOPIC_ALREADY_EXISTS":
        return AdminError(kerr.TOPIC_ALREADY_EXISTS, message)
    if code == "QUOTA_EXCEEDED":
        return AdminError(kerr.POLICY_VIOLATION, message)
    if code == "PERMISSION_DENIED" or answer.status == 403:
        denied = kerr.TOPIC_AUTHORIZATION_FAILED if resource == "topic" else None
        return AdminError(denied or kerr.CLUSTER_AUTHORIZATION_FAILED, message)
    if code == "NOT_FOUND" or answer.status == 404:
        missing = (
            kerr.UNKNOWN_TOPIC_OR_PARTITION if resource == "topic" else kerr.RESOURCE_NOT_FOUND
        )
        return AdminError(missing, message)
    if code in ("INVALID_CONFIG", "INVALID_REQUEST"):
        fields = doc.get("fields") if isinstance(doc.get("fields"), Mapping) else {}
        for name, field_code in _FIELD_CODES.items():
            if resource == "topic" and name in fields:
                return AdminError(field_code, message)
        if resource == "topic" and (code == "INVALID_CONFIG" or "configs" in fields):
            return AdminError(kerr.INVALID_CONFIG, message)
        return AdminError(kerr.INVALID_REQUEST, message)
    if code == "CONFLICT":
        return AdminError(kerr.INVALID_REQUEST, message)
    if answer.status >= 500:
        return AdminError(kerr.UNKNOWN_SERVER_ERROR, f"the control plane failed: {message}")
    return AdminError(kerr.INVALID_REQUEST, message)


def topic_path(name: str, *rest: str) -> str:
    return "/".join(("topics", urllib.parse.quote(name, safe=""), *rest))


async def call(
    ctx: KafkaContext,
    method: str,
    path: str,
    body: Any = None,
    *,
    static_code: int = kerr.POLICY_VIOLATION,
    params: dict[str, str] | None = None,
) -> Answer:
    """One call to the control plane's tenant API as the connection's principal. Raises
    ``AdminError`` when there is no control plane (``static_code``) or it cannot be reached
    (REQUEST_TIMED_OUT, retriable), ``UnauthenticatedError`` when it no longer accepts the
    key (revoked: the connection closes)."""
    source = ctx.broker.metadata
    if not isinstance(source, ControlPlaneMetadataSource):
        raise AdminError(static_code, STATIC_METADATA)
    assert ctx.auth_header is not None
    try:
        status, doc, headers = await source.tenant_request(
            method,
            path,
            authorization=ctx.auth_header,
            json_body=body,
            params=params,
            timeout_s=TIMEOUT_S,
        )
    except (aiohttp.ClientError, TimeoutError) as e:
        logger.warning("Kafka admin request: the control plane could not be reached: %s", e)
        raise AdminError(
            kerr.REQUEST_TIMED_OUT, f"the control plane could not be reached ({e or 'timeout'})"
        ) from None
    if status == 401:
        raise UnauthenticatedError(message_of(doc))
    return Answer(status, doc, headers)
