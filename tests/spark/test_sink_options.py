"""The sink's options and columns, checked on the driver before any task runs."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark.datasource.sink import SinkOptions
from spark.datasource.sink_identity import SinkError

BASE = {"bootstrap": "h1:9092, http://h2:9092", "apiKey": "k.s", "topic": "t"}
HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def schema(**columns):
    return StructType([StructField(n, t) for n, t in columns.items()])


def test_defaults_and_kafka_spellings():
    o = SinkOptions.parse(BASE, schema(value=BinaryType()))
    assert o.bootstrap == ["http://h1:9092", "http://h2:9092"]
    assert (o.acks, o.compression, o.batch_size, o.linger_ms) == ("all", "none", 262144, 5.0)
    o = SinkOptions.parse(
        {
            "kafka.bootstrap.servers": "h:1",
            "APIKEY": "k.s",
            "kafka.acks": "-1",
            "kafka.compression.type": "zstd",
            "kafka.batch.size": "1000",
            "kafka.linger.ms": "0",
        },
        schema(value=StringType(), topic=StringType(), key=StringType(), headers=HEADERS),
    )
    assert (o.bootstrap, o.topic, o.acks, o.compression, o.batch_size) == (
        ["http://h:1"],
        None,
        "all",
        "zstd",
        1000,
    )


@pytest.mark.parametrize(
    ("options", "columns", "message"),
    [
        ({}, {"key": BinaryType()}, "no 'value' column"),
        ({}, {"value": LongType()}, "column 'value' is bigint; cast it"),
        ({}, {"value": BinaryType(), "partition": LongType()}, "it must be int"),
        ({"topic": ""}, {"value": BinaryType()}, "set option 'topic' or give"),
        ({}, {"value": BinaryType(), "headers": ArrayType(StringType())}, "array<struct<key"),
        ({"acks": "0"}, {"value": BinaryType()}, "acks=0 gets no acknowledgement"),
        ({"compression": "brotli"}, {"value": BinaryType()}, "compression must be one of"),
        ({"batchSize": "0"}, {"value": BinaryType()}, "batchSize must be positive"),
        ({"bootstrap": ""}, {"value": BinaryType()}, "'bootstrap' (or 'kafka.bootstrap"),
        ({"apiKey": ""}, {"value": BinaryType()}, "option 'apiKey' is required"),
    ],
)
def test_refusals_say_what_to_fix(options, columns, message):
    with pytest.raises(SinkError, match="INVALID_") as err:
        SinkOptions.parse({**BASE, **options}, schema(**columns))
    assert message in str(err.value)


def test_partition_column_int_is_accepted():
    SinkOptions.parse(BASE, schema(value=BinaryType(), partition=IntegerType()))
