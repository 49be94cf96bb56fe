"""The Kafka protocol front: a TCP listener beside the HTTP port that speaks Kafka's binary
protocol over the same partitions, groups, authorizer and quotas (docs/kafka-protocol.md).

``listener`` accepts connections, ``connection`` runs one (framing, SASL, in-order answers,
zero-copy record data, quota muting), ``handlers/`` answers each API. The codecs are the
sans-IO ``brokernodes.server.protocol.kafka``.
"""
