"""Sluice's compact schema for Kafka protocol messages: a parser from text to a field tree.

Each API is one text file in ``messages/``: a header line per message, then one line per
field, nested by two-space indentation::

    Fetch 1 request 4-17 flexible 12+
      ReplicaId int32 4-14 default=-1
      Topics []FetchTopic
        Topic string 4-12
        TopicId uuid 13+

A field line is ``Name type [versions] [null[=versions]] [tag=N[@versions]] [default=X]``.
Versions are ``N``, ``N-M`` or ``N+`` within the message's range (absent: every version);
``null`` marks where the field may be null (it changes the wire format only for structs);
``tag=N`` makes it a tagged field of flexible versions. Types: int8/16/32/64, uint16, float64,
bool, string, bytes, records, uuid, ``[]T`` arrays and ``Name`` (a struct: the indented lines
below). The names, types and version ranges are facts of Kafka's protocol definitions; the
format and this parser are Sluice's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

PRIMITIVES = frozenset(
    {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "float64",
        "bool",
        "string",
        "bytes",
        "records",
        "uuid",
    }
)
MAX_VERSION = 1 << 15

_HEADER = re.compile(
    r"^(?P<api>\w+) (?P<key>\d+) (?P<kind>request|response) (?P<lo>\d+)(?:-(?P<hi>\d+))?"
    r"(?: flexible (?P<flex>\d+)\+)?$"
)


def parse_versions(text: str) -> tuple[int, int]:
    """``N`` / ``N-M`` / ``N+`` -> inclusive (low, high)."""
    if text.endswith("+"):
        return int(text[:-1]), MAX_VERSION
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def snake(name: str) -> str:
    """Kafka's CamelCase field name as the decoded dict's key (``TopicId`` -> ``topic_id``)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


@dataclass(slots=True)
class Field:
    name: str  # Kafka's name
    key: str  # the dict key (snake case)
    type: str  # a primitive, "[]T" or a struct name
    versions: tuple[int, int]
    nullable: tuple[int, int] | None = None
    tag: int | None = None
    tag_versions: tuple[int, int] | None = None
    default: str | None = None
    fields: list[Field] = field(default_factory=list)  # a struct's or array-of-structs' fields

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element not in PRIMITIVES

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def nullable_in(self, version: int) -> bool:
        return self.nullable is not None and self.nullable[0] <= version <= self.nullable[1]

    def tagged_in(self, version: int) -> bool:
        if self.tag is None:
            return False
        low, high = self.tag_versions or self.versions
        return low <= version <= high


@dataclass(slots=True)
class MessageSpec:
    api: str  # e.g. "Fetch"
    api_key: int
    kind: str  # "request" | "response"
    versions: tuple[int, int]
    flexible_from: int | None
    fields: list[Field]

    def flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


def _parse_field(tokens: list[str]) -> Field:
    name, type_ = tokens[0], tokens[1]
    f = Field(name, snake(name), type_, (0, MAX_VERSION))
    for token in tokens[2:]:
        if token == "null":
            f.nullable = f.versions
        elif token.startswith("null="):
            f.nullable = parse_versions(token[5:])
        elif token.startswith("tag="):
            tag, _, versions = token[4:].partition("@")
            f.tag = int(tag)
            f.tag_versions = parse_versions(versions) if versions else None
        elif token.startswith("default="):
            f.default = token[8:]
        else:
            f.versions = parse_versions(token)
            if f.nullable is not None and f.nullable == (0, MAX_VERSION):
                f.nullable = f.versions
    return f


def parse(text: str) -> list[MessageSpec]:
    """The messages (request and response) described by one schema text."""
    messages: list[MessageSpec] = []
    stack: list[tuple[int, list[Field]]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:
            m = _HEADER.match(line)
            if m is None:
                raise ValueError(f"line {number}: not a message header: {line!r}")
            low = int(m["lo"])
            spec = MessageSpec(
                m["api"],
                int(m["key"]),
                m["kind"],
                (low, int(m["hi"] or low)),
                int(m["flex"]) if m["flex"] else None,
                [],
            )
            messages.append(spec)
            stack = [(0, spec.fields)]
            continue
        if not stack or indent % 2:
            raise ValueError(f"line {number}: a field outside a message or odd indentation")
        depth = indent // 2
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if not stack or stack[-1][0] != depth - 1:
            raise ValueError(f"line {number}: indented too far: {line!r}")
        f = _parse_field(line.split())
        stack[-1][1].append(f)
        stack.append((depth, f.fields))
    return messages


MESSAGES_DIR = Path(__file__).with_name("messages")


def load_all() -> dict[tuple[int, str], MessageSpec]:
    """Every message in ``messages/``, by (api key, "request"/"response")."""
    specs: dict[tuple[int, str], MessageSpec] = {}
    for path in sorted(MESSAGES_DIR.glob("*.txt")):
        for spec in parse(path.read_text()):
            specs[spec.api_key, spec.kind] = spec
    return specs
