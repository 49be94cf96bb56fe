"""The broker's hosted partitions and their replication, the I/O shell around the pure
``brokernodes.replication`` state machines: ``Partition``, the ``ReplicaManager``, the
replica fetcher, the high-watermark checkpoint, the segment scrubber, produce-time checks,
and replication errors and metrics. Named ``replica`` so it is not mistaken for the
top-level ``brokernodes.replication`` package it drives."""
