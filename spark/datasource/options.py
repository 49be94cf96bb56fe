"""The ``sluice`` source's options, parsed and checked once (pure: no I/O).

Names and meanings are those of Spark's Kafka source wherever Kafka has one, so a Kafka job
moves over by changing ``format("kafka")`` to ``format("sluice")`` and adding the API key.
Spark's options are case-insensitive; so is this. ``KAFKA_SOURCE_OPTIONS`` lists Kafka's 23
source options and whether Sluice supports each; an option Kafka has and Sluice does not, a
``kafka.*`` consumer setting, or a name neither knows is refused with the whole list, since a
silently ignored option is a job that does something other than what its author reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

EARLIEST, LATEST = -2, -1
DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000
DEFAULT_FETCH_OFFSET_RETRIES = 3
DEFAULT_FETCH_OFFSET_RETRY_MS = 10


class SluiceOptionError(ValueError):
    """A missing, malformed, conflicting or unsupported option; the message names it."""


# Kafka's source options (Structured Streaming + Kafka integration guide): name -> None when
# Sluice supports it, else why not.
KAFKA_SOURCE_OPTIONS: dict[str, str | None] = {
    "assign": None,
    "subscribe": None,
    "subscribePattern": None,
    "kafka.bootstrap.servers": None,
    "startingTimestamp": None,
    "startingOffsetsByTimestamp": None,
    "startingOffsets": None,
    "endingTimestamp": None,
    "endingOffsetsByTimestamp": None,
    "endingOffsets": None,
    "failOnDataLoss": None,
    "kafkaConsumer.pollTimeoutMs": None,
    "fetchOffset.numRetries": None,
    "fetchOffset.retryIntervalMs": None,
    "maxOffsetsPerTrigger": None,
    "minOffsetsPerTrigger": None,
    "maxTriggerDelay": None,
    "minPartitions": None,
    "groupIdPrefix": "the source joins no consumer group (offsets live in the checkpoint)",
    "kafka.group.id": "the source joins no consumer group (offsets live in the checkpoint)",
    "includeHeaders": None,
    "startingOffsetsByTimestampStrategy": None,
    "maxRecordsPerPartition": None,
}
SLUICE_SOURCE_OPTIONS = (
    "bootstrap",
    "apiKey",
    "clusterSecret",
    "topic",
    "tenant",
    "decode",
    "includeUnreadable",
)
_KNOWN = {n.lower(): n for n in (*KAFKA_SOURCE_OPTIONS, *SLUICE_SOURCE_OPTIONS)}
_STREAM_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
_BATCH_ONLY = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def supported_names() -> list[str]:
    return [n for n, why in KAFKA_SOURCE_OPTIONS.items() if why is None] + list(
        SLUICE_SOURCE_OPTIONS
    )


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: ``subscribe`` (topics), ``subscribePattern`` (a regex over
    the topics the key sees) or ``assign`` (explicit partitions)."""

    kind: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assignment: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends, per Kafka's precedence: a timestamp for every partition,
    else timestamps per partition, else offsets (``EARLIEST``/``LATEST`` or per partition)."""

    default: int
    offsets: tuple[tuple[str, int, int], ...] = ()
    timestamp: int | None = None
    timestamps: tuple[tuple[str, int, int], ...] = ()

    def offset_for(self, topic: str, partition: int) -> int:
        for t, p, o in self.offsets:
            if t == topic and p == partition:
                return o
        return self.default

    def timestamp_for(self, topic: str, partition: int) -> int | None:
        if self.timestamp is not None:
            return self.timestamp
        for t, p, ts in self.timestamps:
            if t == topic and p == partition:
                return ts
        return None

    @property
    def by_timestamp(self) -> bool:
        return self.timestamp is not None or bool(self.timestamps)


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    api_key: str | None
    cluster_secret: str | None
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    by_timestamp_strategy: str
    fail_on_data_loss: bool
    include_headers: bool
    max_records_per_partition: int
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    poll_timeout_s: float | None
    fetch_offset_retries: int
    fetch_offset_retry_ms: int
    tenant: str | None
    decode: str | None
    include_unreadable: bool


def _json(name: str, value: str, example: str):
    try:
        doc = json.loads(value)
    except ValueError as e:
        raise SluiceOptionError(f"option {name!r} is not JSON ({e}); use e.g. {example}") from e
    if not isinstance(doc, dict):
        raise SluiceOptionError(f"option {name!r} must be a JSON object like {example}")
    return doc


def parse_partition_map(name: str, value: str) -> tuple[tuple[str, int, int], ...]:
    """``{"topic": {"0": 23, "1": -1}}`` -> sorted ``(topic, partition, value)`` triples."""
    example = '{"orders": {"0": 42, "1": -2}}'
    doc = _json(name, value, example)
    out = []
    try:
        for topic, parts in doc.items():
            for p, v in parts.items():
                out.append((str(topic), int(p), int(v)))
    except (AttributeError, TypeError, ValueError) as e:
        raise SluiceOptionError(
            f"option {name!r}: {value!r} is not offsets per partition; use e.g. {example}"
        ) from e
    return tuple(sorted(out))


def parse_offsets(name: str, value: str | None, default: int) -> OffsetSpec:
    """``earliest``, ``latest`` or Kafka's JSON (-2 earliest, -1 latest per partition)."""
    if value is None or value.strip() == "":
        return OffsetSpec(default)
    s = value.strip()
    if s.lower() == "earliest":
        return OffsetSpec(EARLIEST)
    if s.lower() == "latest":
        return OffsetSpec(LATEST)
    if not s.startswith("{"):
        raise SluiceOptionError(
            f"option {name!r}: {value!r}: use 'earliest', 'latest' or JSON like "
            '{"orders": {"0": 42, "1": -2}}'
        )
    offsets = parse_partition_map(name, s)
    for t, p, o in offsets:
        if o < EARLIEST:
            raise SluiceOptionError(
                f"option {name!r}: offset {o} of {t}-{p}: use an offset >= 0, -2 (earliest) "
                "or -1 (latest)"
            )
    return OffsetSpec(default, offsets=offsets)


def parse_duration_ms(name: str, value: str) -> int:
    """``500`` (ms), ``500ms``, ``10s``, ``5m``/``5min``, ``2h``, ``1d``."""
    m = _DURATION.match(value)
    if not m:
        raise SluiceOptionError(f"option {name!r}: {value!r} is not a duration like 10s, 5m, 500ms")
    return int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()]


def _positive(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n <= 0:
        raise SluiceOptionError(f"option {name!r} must be a positive whole number, not {value!r}")
    return n


def _count(name: str, value: str | None, default: int) -> int:
    if value is None:
        return default
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise SluiceOptionError(f"option {name!r} must be a whole number >= 0, not {value!r}")
    return n


def _bool(name: str, value: str | None, default: bool) -> bool:
    if value is None:
        return default
    v = str(value).strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise SluiceOptionError(f"option {name!r} must be true or false, not {value!r}")


def check_names(options: Mapping[str, str]) -> None:
    """Refuse what Sluice does not support, listing every such option at once."""
    problems = []
    for key in options:
        name = _KNOWN.get(key.lower())
        why = KAFKA_SOURCE_OPTIONS.get(name) if name else None
        if name is None:
            kind = "a Kafka consumer setting" if key.lower().startswith("kafka.") else "unknown"
            problems.append(f"{key!r} ({kind})")
        elif why is not None:
            problems.append(f"{name!r} ({why})")
    if problems:
        raise SluiceOptionError(
            "format('sluice') does not support option(s) "
            + ", ".join(problems)
            + "; it supports: "
            + ", ".join(supported_names())
            + " (credentials go in 'apiKey' or 'clusterSecret')"
        )


def _subscription(o: Mapping[str, str]) -> Subscription:
    given = [n for n in ("assign", "subscribe", "subscribepattern", "topic") if o.get(n)]
    if len(given) != 1:
        raise SluiceOptionError(
            "format('sluice') needs exactly one of 'subscribe' (topics, comma-separated), "
            "'subscribePattern' (a regex) or 'assign' (JSON like {\"orders\": [0, 1]})"
            + (f"; got {', '.join(_KNOWN[g] for g in given)}" if given else "")
        )
    kind = given[0]
    if kind in ("subscribe", "topic"):
        topics = tuple(t.strip() for t in o[kind].split(",") if t.strip())
        if not topics:
            raise SluiceOptionError(f"option {_KNOWN[kind]!r} names no topic")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(o[kind])
        except re.error as e:
            raise SluiceOptionError(f"option 'subscribePattern' is not a regex: {e}") from e
        return Subscription("subscribePattern", pattern=o[kind])
    example = '{"orders": [0, 1]}'
    doc = _json("assign", o[kind], example)
    try:
        pairs = tuple(sorted((str(t), int(p)) for t, ps in doc.items() for p in ps))
    except (TypeError, ValueError) as e:
        raise SluiceOptionError(f"option 'assign' must look like {example}") from e
    if not pairs:
        raise SluiceOptionError(f"option 'assign' names no partition; use e.g. {example}")
    return Subscription("assign", assignment=pairs)


def _spec(o: Mapping[str, str], which: str, default: int) -> OffsetSpec:
    spec = parse_offsets(f"{which}Offsets", o.get(f"{which.lower()}offsets"), default)
    ts = o.get(f"{which.lower()}timestamp")
    by_ts = o.get(f"{which.lower()}offsetsbytimestamp")
    if ts is not None:
        try:
            stamp = int(ts)
        except ValueError:
            stamp = -1
        if stamp < 0:
            raise SluiceOptionError(f"option '{which}Timestamp' must be epoch ms >= 0, not {ts!r}")
        return OffsetSpec(spec.default, spec.offsets, timestamp=stamp)
    if by_ts is not None:
        stamps = parse_partition_map(f"{which}OffsetsByTimestamp", by_ts)
        return OffsetSpec(spec.default, spec.offsets, timestamps=stamps)
    return spec


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """``options`` as Spark passes them (any case) -> ``SourceOptions``, or
    ``SluiceOptionError`` naming what is wrong."""
    check_names(options)
    o = {k.lower(): v for k, v in options.items()}
    bootstrap = o.get("bootstrap") or o.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise SluiceOptionError(
            "format('sluice') needs the brokers' URL(s) in 'bootstrap' or "
            "'kafka.bootstrap.servers' (e.g. http://127.0.0.1:9092)"
        )
    if not o.get("apikey") and not o.get("clustersecret"):
        raise SluiceOptionError("format('sluice') needs option 'apiKey' or 'clusterSecret'")
    mode = "streaming" if streaming else "batch"
    wrong = _BATCH_ONLY if streaming else _STREAM_ONLY
    misplaced = [n for n in wrong if n.lower() in o]
    if misplaced:
        raise SluiceOptionError(
            f"option(s) {', '.join(misplaced)} do not apply to {mode} reads "
            f"({'a stream has no end' if streaming else 'they limit micro-batches'})"
        )
    starting = _spec(o, "starting", LATEST if streaming else EARLIEST)
    ending = _spec(o, "ending", LATEST)
    if not streaming:
        # -1/-2 for single partitions of the JSON stay allowed: an empty range is harmless
        if starting.default == LATEST:
            raise SluiceOptionError(
                "startingOffsets 'latest' reads nothing in a batch query; "
                "use 'earliest', offsets or a timestamp"
            )
        if ending.default == EARLIEST:
            raise SluiceOptionError(
                "endingOffsets 'earliest' reads nothing in a batch query; "
                "use 'latest', offsets or a timestamp"
            )
    strategy = (o.get("startingoffsetsbytimestampstrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise SluiceOptionError(
            f"option 'startingOffsetsByTimestampStrategy' is 'error' or 'latest', not {strategy!r}"
        )
    max_trigger = _positive("maxOffsetsPerTrigger", o.get("maxoffsetspertrigger"))
    min_trigger = _positive("minOffsetsPerTrigger", o.get("minoffsetspertrigger"))
    if max_trigger and min_trigger and min_trigger > max_trigger:
        raise SluiceOptionError(
            f"minOffsetsPerTrigger ({min_trigger}) is above maxOffsetsPerTrigger ({max_trigger})"
        )
    delay = o.get("maxtriggerdelay")
    poll = _positive("kafkaConsumer.pollTimeoutMs", o.get("kafkaconsumer.polltimeoutms"))
    retries = o.get("fetchoffset.numretries")
    return SourceOptions(
        bootstrap=bootstrap,
        api_key=o.get("apikey") or None,
        cluster_secret=o.get("clustersecret") or None,
        subscription=_subscription(o),
        starting=starting,
        ending=ending,
        by_timestamp_strategy=strategy,
        fail_on_data_loss=_bool("failOnDataLoss", o.get("failondataloss"), True),
        include_headers=_bool("includeHeaders", o.get("includeheaders"), False),
        max_records_per_partition=_positive(
            "maxRecordsPerPartition", o.get("maxrecordsperpartition")
        )
        or DEFAULT_MAX_RECORDS_PER_PARTITION,
        min_partitions=_positive("minPartitions", o.get("minpartitions")),
        max_offsets_per_trigger=max_trigger,
        min_offsets_per_trigger=min_trigger,
        max_trigger_delay_ms=(
            DEFAULT_MAX_TRIGGER_DELAY_MS
            if delay is None
            else parse_duration_ms("maxTriggerDelay", delay)
        ),
        poll_timeout_s=None if poll is None else poll / 1000,
        fetch_offset_retries=_count(
            "fetchOffset.numRetries", retries, DEFAULT_FETCH_OFFSET_RETRIES
        ),
        fetch_offset_retry_ms=_positive(
            "fetchOffset.retryIntervalMs", o.get("fetchoffset.retryintervalms")
        )
        or DEFAULT_FETCH_OFFSET_RETRY_MS,
        tenant=o.get("tenant") or None,
        decode=o.get("decode") or None,
        include_unreadable=_bool("includeUnreadable", o.get("includeunreadable"), False),
    )
