"""Confluent REST Proxy's admin resources: API v3 (clusters, topics, topic configs,
partitions and replicas, brokers, consumer groups with consumers and lags, ACLs) and API v2's
metadata reads, over the same selectors and services as ``/api/v1`` (docs/rest-proxy.md).

The views only translate: Confluent's request shapes in, Confluent's resource shapes
(``kind``, ``metadata``, related links) out, and every refusal as Confluent's error body with
Sluice's stable code beside it (``errors``). Tenancy, roles, validation and the audit trail
are the tenant API's own (``backend.tenancy.permissions``, the apps' services)."""
