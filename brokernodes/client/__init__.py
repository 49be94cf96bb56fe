"""Sluice Python SDK: producer, consumer and admin client over the broker's HTTP data plane.

    from brokernodes.client import Producer, Consumer

    with Producer("http://127.0.0.1:9092", api_key) as producer:
        producer.send("orders", b"value", key=b"customer-1")

    with Consumer("http://127.0.0.1:9092", api_key) as consumer:
        consumer.assign([("orders", 0)])
        consumer.seek_to_beginning()
        records = consumer.poll(1.0)

``TransactionalProducer`` writes Kafka transactions (docs/sdk.md, "Transactions").
``AsyncProducer``, ``AsyncConsumer`` and ``AsyncAdmin`` are the asyncio versions; the blocking
ones run them on a private event loop thread. See docs/data-plane-api.md for the wire API.
"""

from brokernodes.client.accumulator import RecordFuture, RecordMetadata
from brokernodes.client.admin import Admin, AsyncAdmin
from brokernodes.client.consumer import (
    AsyncConsumer,
    Consumer,
    ConsumerRecord,
    OffsetAndTimestamp,
)
from brokernodes.client.group_consumer import AsyncGroupConsumer, CommitFailedError, GroupConsumer
from brokernodes.client.metadata import ClusterMetadata, TopicPartition
from brokernodes.client.producer import AsyncProducer, Producer
from brokernodes.client.transactional import (
    AsyncTransactionalProducer,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalProducer,
    TransactionStateError,
)

__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncConsumer",
    "AsyncGroupConsumer",
    "AsyncProducer",
    "AsyncTransactionalProducer",
    "ClusterMetadata",
    "CommitFailedError",
    "Consumer",
    "ConsumerRecord",
    "GroupConsumer",
    "OffsetAndTimestamp",
    "Producer",
    "ProducerFencedError",
    "RecordFuture",
    "RecordMetadata",
    "TopicPartition",
    "TransactionAbortableError",
    "TransactionStateError",
    "TransactionalProducer",
]
