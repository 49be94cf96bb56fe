"""Hypothesis strategies for values of any message version in the compact schema, so codec
tests cover every API and version without hand-written examples.

A generated value has every field of the message (absent ones with their defaults), which
is what the decoder returns, so ``decode(encode(x)) == x`` holds exactly."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from brokernodes.server.protocol.kafka import apis, codec
from brokernodes.server.protocol.kafka.schema import Field, MessageSpec

_INTS = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}


def primitive(t: str) -> st.SearchStrategy:
    if t in _INTS:
        return st.integers(*_INTS[t])
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "bool":
        return st.booleans()
    if t == "string":
        return st.text(max_size=8)
    if t in ("bytes", "records"):
        return st.binary(max_size=8)
    if t == "uuid":
        return st.binary(min_size=16, max_size=16)
    raise KeyError(t)


def field_value(f: Field, version: int) -> st.SearchStrategy:
    if f.is_array:
        element = struct_value(f.fields, version) if f.is_struct else primitive(f.element)
        strategy = st.lists(element, max_size=3)
    elif f.is_struct:
        strategy = struct_value(f.fields, version)
    else:
        strategy = primitive(f.type)
    nullable_type = f.is_array or f.is_struct or f.type in ("string", "bytes", "records")
    if nullable_type and f.nullable_in(version):
        strategy = st.none() | strategy
    return strategy


def struct_value(fields: list[Field], version: int) -> st.SearchStrategy:
    return st.fixed_dictionaries(
        {
            f.key: field_value(f, version)
            if f.present(version)
            else st.just(codec.default_value(f, version))
            for f in fields
        }
    )


def message_value(spec: MessageSpec, version: int) -> st.SearchStrategy:
    return struct_value(spec.fields, version)


def plain(value: Any) -> Any:
    """A decoded value with record views as bytes (comparable)."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def every_message_version() -> list[tuple[MessageSpec, int]]:
    """(spec, version) for every request and response version Sluice advertises."""
    specs = apis._specs()
    return [
        (spec, version)
        for _, spec in sorted(specs.items())
        for version in range(spec.versions[0], spec.versions[1] + 1)
    ]
