"""The binary produce's transactional batches (HTTP and WebSocket): the caller's
``transactional_id`` authorized (WRITE on the TRANSACTIONAL_ID resource) and the batches
verified with the coordinator (``transactions/produce_check.py``) before the append."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from brokernodes.errors import InvalidRequestError
from brokernodes.server.coordinator.offsets_topic import qualify
from brokernodes.server.http.util import auth_header
from brokernodes.server.transactions.produce_check import transactional_header, verify_produce

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

MAX_TRANSACTIONAL_ID = 249


async def check_transactional(
    broker: Broker,
    request: Any,
    topic: str,
    partition: Any,
    buf,
    transactional_id: str | None,
    *,
    authorization: str | None = None,
    where: str = "Sluice's binary produce",
) -> None:
    """Raise unless ``buf`` may be appended to ``partition`` (see the module docstring); a
    body without transactional or control batches costs one header walk."""
    txn, control, _, _ = transactional_header(buf)
    if not txn and not control:
        return
    qualified = None
    if transactional_id is not None and not control:
        if not transactional_id or len(transactional_id) > MAX_TRANSACTIONAL_ID:
            raise InvalidRequestError(
                f"transactional_id: 1..{MAX_TRANSACTIONAL_ID} characters, the producer's id"
            )
        auth = authorization if request is None else auth_header(request)
        principal = broker.authorize(
            auth, "WRITE", "transactional_id", transactional_id, count=False
        )
        qualified = qualify(principal.tenant, transactional_id)
    await verify_produce(
        broker.transactions,
        qualified,
        topic,
        partition.partition,
        partition.leader_epoch,
        buf,
        where,
    )
