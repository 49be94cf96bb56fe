"""Default and sticky partitioners: bit-for-bit with Kafka's Java client."""

from __future__ import annotations

import random
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokernodes.records.partitioner import (
    StickyPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

with warnings.catch_warnings():  # kafka-python's import-time importlib.resources warnings
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import DefaultPartitioner
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2


def as_signed32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


# Apache Kafka, clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java,
# testMurmur2 (Java ints). Each was also checked against kafka-python 3.0.12.
KAFKA_UTILS_TEST_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

# librdkafka src/rdmurmur2.c unittest_murmur2 (java_murmur2_results, unsigned); together they
# cover every tail length (0-3) and the empty key. Also checked against kafka-python.
LIBRDKAFKA_VECTORS = [
    (b"kafka", 0xD067CF64),
    (b"giberish123456789", 0x8F552B0C),
    (b"1234", 0x9FC97B14),
    (b"234", 0xE7C009CA),
    (b"34", 0x873930DA),
    (b"4", 0x5A4B5CA1),
    (b"PreAmbleWillBeRemoved,ThePrePartThatIs", 0x78424F1C),
    (b"reAmbleWillBeRemoved,ThePrePartThatIs", 0x4A62B377),
    (b"eAmbleWillBeRemoved,ThePrePartThatIs", 0xE0E4E09E),
    (b"AmbleWillBeRemoved,ThePrePartThatIs", 0x62B8B43F),
    (b"", 0x106E08D9),
]


@pytest.mark.parametrize(("key", "expected"), KAFKA_UTILS_TEST_VECTORS)
def test_murmur2_matches_kafka_utils_test(key, expected):
    assert murmur2(key) == expected
    assert as_signed32(kafka_python_murmur2(key)) == expected


@pytest.mark.parametrize(("key", "expected_unsigned"), LIBRDKAFKA_VECTORS)
def test_murmur2_matches_librdkafka_java_results(key, expected_unsigned):
    assert murmur2(key) == as_signed32(expected_unsigned)
    assert kafka_python_murmur2(key) == expected_unsigned


@pytest.mark.parametrize(
    ("key", "num_partitions", "expected"),
    [
        # toPositive(murmur2(key)) % n, worked by hand from the vectors above.
        (b"foobar", 50, 16),  # (2**31 - 790332482) % 50
        (b"foobar", 12, 6),
        (b"21", 50, 40),
        (b"21", 12, 0),
        (b"abc", 50, 7),
        (b"abc", 12, 3),
        (b"", 50, 31),
        (b"anything", 1, 0),
    ],
)
def test_partition_for_key_known_values(key, num_partitions, expected):
    assert partition_for_key(key, num_partitions) == expected


def test_accepts_bytearray_and_memoryview():
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482
    assert murmur2(memoryview(b"xxfoobar")[2:]) == -790332482


def test_to_positive_clears_sign_bit_like_java():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0  # Math.abs would overflow here; toPositive does not
    assert to_positive(5) == 5


def test_partition_count_must_be_positive():
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)
    with pytest.raises(ValueError):
        StickyPartitioner().partition(None, 0)


@given(st.binary(max_size=300))
def test_murmur2_equals_kafka_python(key):
    assert murmur2(key) == as_signed32(kafka_python_murmur2(key))


class FakeCluster:
    """The slice of kafka-python's ClusterMetadata that DefaultPartitioner reads."""

    def __init__(self, num_partitions):
        self.parts = set(range(num_partitions))

    def topics(self):
        return {"t"}

    def partitions_for_topic(self, topic):
        return self.parts

    def available_partitions_for_topic(self, topic):
        return self.parts


@given(st.binary(max_size=100), st.integers(min_value=1, max_value=1000))
def test_partition_equals_kafka_python_default_partitioner(key, num_partitions):
    cluster = FakeCluster(num_partitions)
    expected = DefaultPartitioner().partition("t", key, key, None, None, cluster)
    assert partition_for_key(key, num_partitions) == expected
    assert StickyPartitioner().partition(key, num_partitions) == expected


def test_sticky_keeps_one_partition_until_new_batch():
    partitioner = StickyPartitioner(random.Random(1))
    first = partitioner.partition(None, 8)
    assert all(partitioner.partition(None, 8) == first for _ in range(100))
    assert partitioner.sticky_partition == first


def test_sticky_moves_to_another_partition_on_new_batch():
    partitioner = StickyPartitioner(random.Random(2))
    seen = set()
    current = partitioner.partition(None, 4)
    for _ in range(200):
        moved = partitioner.on_new_batch(current, 4)
        assert moved != current
        assert partitioner.partition(None, 4) == moved
        seen.add(moved)
        current = moved
    assert seen == {0, 1, 2, 3}


def test_sticky_ignores_stale_new_batch_signal():
    partitioner = StickyPartitioner(random.Random(3))
    current = partitioner.partition(None, 6)
    stale = (current + 1) % 6
    assert partitioner.on_new_batch(stale, 6) == current
    assert partitioner.partition(None, 6) == current


def test_sticky_with_one_partition_stays_put():
    partitioner = StickyPartitioner(random.Random(4))
    assert partitioner.partition(None, 1) == 0
    assert partitioner.on_new_batch(0, 1) == 0


def test_sticky_prefers_available_partitions():
    partitioner = StickyPartitioner(random.Random(5))
    for _ in range(50):
        current = partitioner.partition(None, 10, available=[3, 7])
        assert current in (3, 7)
        assert partitioner.on_new_batch(current, 10, available=[3, 7]) == ({3, 7} - {current}).pop()
    # the sticky partition loses its leader: the next keyless record re-picks
    current = partitioner.partition(None, 10, available=[3, 7])
    other = ({3, 7} - {current}).pop()
    assert partitioner.partition(None, 10, available=[other]) == other
    # no partition available at all: any partition, like Kafka
    assert 0 <= partitioner.on_new_batch(other, 10, available=[]) < 10


@given(st.integers(min_value=2, max_value=20), st.randoms(use_true_random=False))
def test_new_batch_never_picks_the_previous_partition(num_partitions, rng):
    partitioner = StickyPartitioner(rng)
    current = partitioner.partition(None, num_partitions)
    for _ in range(20):
        moved = partitioner.on_new_batch(current, num_partitions)
        assert moved != current and 0 <= moved < num_partitions
        current = moved


def test_sticky_repicks_when_partition_count_shrinks():
    partitioner = StickyPartitioner(random.Random(6))
    while partitioner.on_new_batch(partitioner.partition(None, 10), 10) < 5:
        pass
    assert partitioner.partition(None, 5) < 5


def test_keyed_records_do_not_move_the_sticky_partition():
    partitioner = StickyPartitioner(random.Random(7))
    sticky = partitioner.partition(None, 16)
    assert partitioner.partition(b"foobar", 16) == partition_for_key(b"foobar", 16)
    assert partitioner.partition(None, 16) == sticky


def test_the_sdk_module_names_the_same_partitioners():
    from brokernodes.client import partitioner as sdk

    assert sdk.StickyPartitioner is StickyPartitioner
    assert sdk.murmur2 is murmur2
    assert sdk.partition_for_key is partition_for_key
    assert sdk.to_positive is to_positive
