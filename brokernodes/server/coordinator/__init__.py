"""The broker's group coordinator, the I/O shell around the pure ``brokernodes.groups``
package: the coordinator, the ``__consumer_offsets`` topic it keeps state in, and its lag
metrics. Named ``coordinator`` (Kafka's "group coordinator") so it is not mistaken for
``brokernodes.groups``. It gets the metadata and the replicas, never the ``Broker``."""
