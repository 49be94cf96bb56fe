"""The operators' read-only credential on the data plane: ``Authorization: Cluster <secret>``.

With the control plane, the analytics jobs (docs/analytics.md) read every tenant's topics and
the internal topics (``__consumer_offsets``, ``__usage``) with the cluster secret, as
``/metrics`` does, instead of holding an API key per tenant. The operator has no tenant, so it
sees the global image (topics by topic id) and may only read and describe: anything else is
refused as for an unknown key. A broker without a cluster secret (static metadata) has no
operator. The secret is compared in constant time and never logged.
"""

from __future__ import annotations

import hmac

from brokernodes.errors import UnauthenticatedError
from brokernodes.server.auth import Principal
from brokernodes.server.metadata.cluster import current_tenant

OPERATOR = Principal("Cluster:operator", "", None)
READ_OPERATIONS = frozenset({"READ", "DESCRIBE", "DESCRIBE_CONFIGS"})


def operator_principal(
    secret: str,
    header: str | None,
    operation: str,
    resource_type: str = "",
    resource_name: str = "",
    image=None,
) -> Principal | None:
    """``OPERATOR`` for a valid ``Cluster <secret>`` header, None for any other scheme.

    One write is allowed: another broker appending its usage windows to the ``__usage``
    partition this broker leads (``brokernodes.server.usage``)."""
    if not header or not header.startswith("Cluster "):
        return None
    if not secret or not hmac.compare_digest(header.encode(), f"Cluster {secret}".encode()):
        raise UnauthenticatedError("unknown cluster credential")
    if operation.upper() == "WRITE" and resource_type.lower() == "topic" and image is not None:
        from brokernodes.server.usage import usage_topic

        topic = usage_topic(image.root or image)
        if topic is not None and topic.name == resource_name:
            current_tenant.set(None)
            return OPERATOR
    if operation.upper() not in READ_OPERATIONS:
        raise UnauthenticatedError(
            "the cluster credential only reads and describes on the data plane; use an API key"
        )
    current_tenant.set(None)
    return OPERATOR
