"""Codecs generated from the compact schema: one decoder and one encoder per message version.

``compile_message(spec, version)`` turns a :class:`~.schema.MessageSpec` into Python source,
one function per struct, with every version test decided at generation time, and ``exec``s
it once. Decoded messages are dicts keyed by snake-case field names; a field the version does
not carry gets its default, so handlers read every field of every version the same way.
Encoders take such dicts and fill missing keys with defaults too.

Record data (``records`` fields) is never copied on decode (a ``memoryview`` of the request)
and may be a *deferred* value on encode: anything with a ``length`` attribute that is not
bytes-like (the fetch path's open segment slices). The encoder then writes the length prefix
and ends the current chunk, so the answer is a list of byte chunks and deferred values that
the connection sends in order, the deferred ones with ``sendfile``.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

from brokernodes.server.protocol.kafka.schema import Field, MessageSpec


class ProtocolError(ValueError):
    """The bytes do not follow the message's schema (truncated, a bad length)."""


class Out(bytearray):
    """An encoder's output: the bytes so far, plus the chunks already closed by deferred
    record data (``parts``)."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[Any] = []

    def defer(self, value: Any) -> None:
        self.parts.append(bytes(self))
        self.parts.append(value)
        del self[:]

    def chunks(self) -> list[Any]:
        """Every chunk in order (bytes and deferred values); ``self`` is closed into it."""
        return [*self.parts, bytes(self)] if self.parts else [bytes(self)]

    @property
    def size(self) -> int:
        deferred = sum(
            p.length if not isinstance(p, (bytes, bytearray)) else len(p) for p in self.parts
        )
        return deferred + len(self)


_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

FIXED = {
    "int8": (_I8, 1),
    "int16": (_I16, 2),
    "uint16": (_U16, 2),
    "int32": (_I32, 4),
    "int64": (_I64, 8),
    "float64": (_F64, 8),
}
ZERO_UUID = bytes(16)


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise ProtocolError("truncated varint") from None
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ProtocolError("varint longer than 10 bytes")


def write_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _null(nullable: bool, what: str) -> None:
    """A null where the schema allows one; otherwise the message is malformed (Kafka's own
    decoders refuse it too), so handlers never meet ``None`` in a non-nullable field."""
    if not nullable:
        raise ProtocolError(f"a non-nullable {what} field is null")
    return None


def _need(buf, pos: int, n: int) -> None:
    if n < 0 or pos + n > len(buf):
        raise ProtocolError(f"a field of {n} bytes runs past the end of the message")


def _read_length(buf, pos: int, flexible: bool, classic: struct.Struct) -> tuple[int, int]:
    """A length prefix (-1: null): a compact unsigned varint of length + 1 in flexible
    versions, else ``classic`` (int16 for strings, int32 for bytes and arrays)."""
    if flexible:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    _need(buf, pos, classic.size)
    return classic.unpack_from(buf, pos)[0], pos + classic.size


def read_string(buf, pos: int, flexible: bool, nullable: bool = True) -> tuple[str | None, int]:
    n, pos = _read_length(buf, pos, flexible, _I16)
    if n < 0:
        return _null(nullable, "string"), pos
    _need(buf, pos, n)
    try:
        return str(buf[pos : pos + n], "utf-8"), pos + n
    except UnicodeDecodeError:
        raise ProtocolError("a string field is not UTF-8") from None


def read_bytes(buf, pos: int, flexible: bool, view: bool = False, nullable: bool = True):
    n, pos = _read_length(buf, pos, flexible, _I32)
    if n < 0:
        return _null(nullable, "bytes"), pos
    _need(buf, pos, n)
    data = buf[pos : pos + n]
    return (data if view else bytes(data)), pos + n


def read_count(buf, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's length (-1: null), checked against the bytes left (each element takes at
    least one byte), so a hostile count cannot make the decoder loop or allocate."""
    n, pos = _read_length(buf, pos, flexible, _I32)
    if n > len(buf) - pos:
        raise ProtocolError(f"an array of {n} elements cannot fit in the message")
    return n, pos


def read_fixed(s: struct.Struct, size: int, buf, pos: int):
    _need(buf, pos, size)
    return s.unpack_from(buf, pos)[0], pos + size


def read_uuid(buf, pos: int) -> tuple[bytes, int]:
    _need(buf, pos, 16)
    return bytes(buf[pos : pos + 16]), pos + 16


def read_bool(buf, pos: int) -> tuple[bool, int]:
    _need(buf, pos, 1)
    return buf[pos] != 0, pos + 1


def write_string(out: bytearray, value: str | None, flexible: bool, nullable: bool = True) -> None:
    if value is None:
        if not nullable:  # a handler's None where Kafka allows no null: the empty string
            value = ""
        else:
            out += b"\x00" if flexible else b"\xff\xff"
            return
    data = value.encode()
    if flexible:
        write_uvarint(out, len(data) + 1)
    else:
        out += _I16.pack(len(data))
    out += data


def write_bytes(out: bytearray, value, flexible: bool, nullable: bool = True) -> None:
    if value is None:
        if not nullable:
            value = b""
        else:
            out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            return
    if flexible:
        write_uvarint(out, len(value) + 1)
    else:
        out += _I32.pack(len(value))
    out += value


def write_records(out: Out, value, flexible: bool) -> None:
    if value is None or isinstance(value, (bytes, bytearray, memoryview)):
        write_bytes(out, value, flexible)
        return
    if flexible:
        write_uvarint(out, value.length + 1)
    else:
        out += _I32.pack(value.length)
    out.defer(value)


def write_uuid(out: bytearray, value: bytes | None) -> None:
    """16 bytes; ``None`` is the zero UUID (Kafka's "no id")."""
    if value is None:
        value = ZERO_UUID
    elif len(value) != 16:
        raise ValueError(f"a UUID field takes 16 bytes, not {len(value)}")
    out += value


def write_count(out: bytearray, value, flexible: bool, nullable: bool = True) -> None:
    if value is None and not nullable:
        value = ()
    if value is None:
        out += b"\x00" if flexible else b"\xff\xff\xff\xff"
    elif flexible:
        write_uvarint(out, len(value) + 1)
    else:
        out += _I32.pack(len(value))


def skip_tags(buf, pos: int) -> int:
    """Skip a tagged-field section of unknown tags."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        _need(buf, pos, size)
        pos += size
    return pos


def default_value(f: Field, version: int) -> Any:
    """The value of a field absent from ``version`` (or absent from an encoder's input)."""
    if f.default == "null":
        return None
    if f.is_array:
        return None if f.nullable_in(version) and f.default == "null" else []
    t = f.type
    if t in FIXED:
        return int(f.default, 0) if f.default else 0
    if t == "bool":
        return f.default == "true"
    if t == "string":
        return f.default if f.default is not None else ""
    if t in ("bytes", "records"):
        return None if f.nullable_in(version) else b""
    if t == "uuid":
        return ZERO_UUID
    return None if f.nullable_in(version) else _struct_default(f, version)


def _struct_default(f: Field, version: int) -> dict[str, Any]:
    return {c.key: default_value(c, version) for c in f.fields}


class _Gen:
    """Source generator for one message version."""

    def __init__(self, version: int, flexible: bool) -> None:
        self.version = version
        self.flexible = flexible
        self.lines: list[str] = []
        self.module: list[str] = []  # tables built once the functions exist
        self.consts: dict[str, Any] = {}
        self.counter = 0

    def const(self, value: Any) -> str:
        name = f"_c{len(self.consts)}"
        self.consts[name] = value
        return name

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # --- decode ---------------------------------------------------------------------

    def decoder(self, fields: list[Field], name: str) -> str:
        """Emit ``name(buf, pos) -> (dict, pos)`` for a struct's fields; returns ``name``."""
        v, fl = self.version, self.flexible
        body = ["    m = {}"]
        tagged: dict[int, Field] = {}
        run: list[Field] = []  # consecutive fixed-size fields: read with one unpack
        for f in fields:
            if not f.present(v):
                body.append(f"    m[{f.key!r}] = {self._default_expr(f)}")
                continue
            if fl and f.tagged_in(v):
                tagged[f.tag] = f  # type: ignore[index]
                body.append(f"    m[{f.key!r}] = {self._default_expr(f)}")
                continue
            if _is_fixed(f):
                run.append(f)
                continue
            body.extend(self._read_run(run))
            run = []
            body.append(f"    m[{f.key!r}], pos = {self._read_expr(f)}")
        body.extend(self._read_run(run))
        if fl:
            if tagged:
                readers = ", ".join(
                    f"{t}: ({f.key!r}, {self._value_reader(f)})" for t, f in tagged.items()
                )
                table = self.fresh("_tags")
                self.module.append(f"{table} = {{{readers}}}")
                walk = f"read_tags(buf, pos, m, {table})"
            else:
                walk = "skip_tags(buf, pos)"
            # the usual empty tagged-field section is one zero byte: no walk for it
            body.append("    if pos < len(buf) and buf[pos] == 0:")
            body.append("        pos += 1")
            body.append("    else:")
            body.append(f"        pos = {walk}")
        body.append("    return m, pos")
        self.lines.append(f"def {name}(buf, pos):")
        self.lines.extend(body)
        return name

    def _read_run(self, run: list[Field]) -> list[str]:
        """Lines reading consecutive fixed-size fields with one struct (one bounds check)."""
        if not run:
            return []
        s = struct.Struct(">" + "".join(FIXED[f.type][0].format[1:] for f in run))
        targets = ", ".join(f"m[{f.key!r}]" for f in run)
        return [
            f"    if pos + {s.size} > len(buf):",
            f"        _short(buf, pos, {s.size})",
            f"    {targets}{',' if len(run) == 1 else ''} = {self.const(s)}.unpack_from(buf, pos)",
            f"    pos += {s.size}",
        ]

    def _default_expr(self, f: Field) -> str:
        value = default_value(f, self.version)
        if isinstance(value, (list, dict)):
            return f"_fresh({self.const(value)})"
        return self.const(value) if isinstance(value, bytes) else repr(value)

    def _value_reader(self, f: Field) -> str:
        """A function name reading one value of ``f`` (for tagged fields)."""
        name = self.fresh("_rv")
        expr = self._read_expr(f)
        self.lines.append(f"def {name}(buf, pos):")
        self.lines.append(f"    return {expr}")
        return name

    def _read_expr(self, f: Field) -> str:
        fl = self.flexible
        if f.is_array:
            elem = self._element_reader(f)
            return f"read_array(buf, pos, {fl}, {elem}, {f.nullable_in(self.version)})"
        if f.is_struct:
            dec = self.decoder(f.fields, self.fresh("_d"))
            if f.nullable_in(self.version):
                return f"read_nullable_struct(buf, pos, {dec})"
            return f"{dec}(buf, pos)"
        return self._primitive_read(f.type, f.nullable_in(self.version))

    def _element_reader(self, f: Field) -> str:
        if f.is_struct:
            return self.decoder(f.fields, self.fresh("_d"))
        name = self.fresh("_re")
        self.lines.append(f"def {name}(buf, pos):")
        self.lines.append(f"    return {self._primitive_read(f.element)}")
        return name

    def _primitive_read(self, t: str, nullable: bool = False) -> str:
        fl = self.flexible
        if t in FIXED:
            s, size = FIXED[t]
            return f"read_fixed({self.const(s)}, {size}, buf, pos)"
        return {
            "bool": "read_bool(buf, pos)",
            "string": f"read_string(buf, pos, {fl}, {nullable})",
            "bytes": f"read_bytes(buf, pos, {fl}, False, {nullable})",
            "records": f"read_bytes(buf, pos, {fl}, True, {nullable})",
            "uuid": "read_uuid(buf, pos)",
        }[t]

    # --- encode ---------------------------------------------------------------------

    def encoder(self, fields: list[Field], name: str) -> str:
        """Emit ``name(m, out)`` writing a struct's fields from dict ``m``."""
        v, fl = self.version, self.flexible
        body = ["    get = m.get"]
        tagged: list[Field] = []
        run: list[Field] = []  # consecutive fixed-size fields: written with one pack
        for f in fields:
            if not f.present(v):
                continue
            if fl and f.tagged_in(v):
                tagged.append(f)
                continue
            if _is_fixed(f):
                run.append(f)
                continue
            body.extend(self._write_run(run))
            run = []
            value = f"get({f.key!r}, {self._encode_default(f)})"
            body.extend("    " + line for line in self._write_lines(f, value))
        body.extend(self._write_run(run))
        if fl:
            if tagged:
                writers = ", ".join(
                    f"({f.tag}, {f.key!r}, {self._value_writer(f)}, "
                    f"{self.const(default_value(f, v))})"
                    for f in sorted(tagged, key=lambda f: f.tag)
                )
                table = self.fresh("_tags")
                self.module.append(f"{table} = ({writers},)")
                body.append(f"    write_tags(m, out, {table})")
            else:
                body.append("    out.append(0)")
        self.lines.append(f"def {name}(m, out):")
        self.lines.extend(body)
        return name

    def _encode_default(self, f: Field) -> str:
        """A default the encoder only reads: a shared constant, not a fresh copy per call
        (an empty tuple for an array)."""
        value = default_value(f, self.version)
        if isinstance(value, list):
            return "()"
        return self.const(value) if isinstance(value, (bytes, dict)) else repr(value)

    def _write_run(self, run: list[Field]) -> list[str]:
        """A line writing consecutive fixed-size fields with one struct."""
        if not run:
            return []
        s = struct.Struct(">" + "".join(FIXED[f.type][0].format[1:] for f in run))
        values = ", ".join(f"get({f.key!r}, {self._default_expr(f)})" for f in run)
        return [f"    out += {self.const(s.pack)}({values})"]

    def _value_writer(self, f: Field) -> str:
        name = self.fresh("_wv")
        lines = self._write_lines(f, "value")
        self.lines.append(f"def {name}(value, out):")
        self.lines.extend("    " + line for line in lines)
        return name

    def _write_lines(self, f: Field, value: str) -> list[str]:
        fl = self.flexible
        if f.is_array:
            var = self.fresh("_a")
            nullable = f.nullable_in(self.version)
            lines = [f"{var} = {value}", f"write_count(out, {var}, {fl}, {nullable})"]
            if f.is_struct:
                enc = self.encoder(f.fields, self.fresh("_e"))
                lines += [f"for _x in {var} or ():", f"    {enc}(_x, out)"]
            else:
                inner = self._primitive_write(f.element, "_x")
                lines += [f"for _x in {var} or ():", f"    {inner}"]
            return lines
        if f.is_struct:
            enc = self.encoder(f.fields, self.fresh("_e"))
            if f.nullable_in(self.version):
                var = self.fresh("_s")
                return [
                    f"{var} = {value}",
                    f"if {var} is None:",
                    "    out.append(0xFF)",
                    "else:",
                    "    out.append(1)",
                    f"    {enc}({var}, out)",
                ]
            return [f"{enc}({value} or {{}}, out)"]
        return [self._primitive_write(f.type, value, f.nullable_in(self.version))]

    def _primitive_write(self, t: str, value: str, nullable: bool = False) -> str:
        fl = self.flexible
        if t in FIXED:
            s, _ = FIXED[t]
            return f"out += {self.const(s.pack)}({value})"
        return {
            "bool": f"out.append(1 if {value} else 0)",
            "string": f"write_string(out, {value}, {fl}, {nullable})",
            "bytes": f"write_bytes(out, {value}, {fl}, {nullable})",
            "records": f"write_records(out, {value}, {fl})",
            "uuid": f"write_uuid(out, {value})",
        }[t]


def _is_fixed(f: Field) -> bool:
    return not f.is_array and not f.is_struct and f.type in FIXED


def _short(buf, pos: int, n: int) -> None:
    _need(buf, pos, n)  # raises: the fields run past the end


def _fresh(value):
    """A new copy of a default list or dict (decoded messages never share one)."""
    if isinstance(value, list):
        return []
    return {k: _fresh(v) if isinstance(v, (list, dict)) else v for k, v in value.items()}


def read_array(
    buf, pos: int, flexible: bool, element, nullable: bool = True
) -> tuple[list | None, int]:
    n, pos = read_count(buf, pos, flexible)
    if n < 0:
        return _null(nullable, "array"), pos
    items = []
    append = items.append
    for _ in range(n):
        item, pos = element(buf, pos)
        append(item)
    return items, pos


def read_nullable_struct(buf, pos: int, decoder):
    _need(buf, pos, 1)
    if buf[pos] == 0xFF:
        return None, pos + 1
    return decoder(buf, pos + 1)


def read_tags(buf, pos: int, m: dict, readers: dict) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        _need(buf, pos, size)
        reader = readers.get(tag)
        if reader is not None:
            key, read = reader
            m[key], _ = read(buf[pos : pos + size], 0)
        pos += size
    return pos


def write_tags(m: dict, out: bytearray, writers: list) -> None:
    present = []
    for tag, key, write, default in writers:
        value = m.get(key)
        if value is not None and value != default:
            data = Out()
            write(value, data)
            present.append((tag, data))
    write_uvarint(out, len(present))
    for tag, data in present:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


_RUNTIME = {
    "read_fixed": read_fixed,
    "read_bool": read_bool,
    "read_string": read_string,
    "read_bytes": read_bytes,
    "read_uuid": read_uuid,
    "read_array": read_array,
    "read_nullable_struct": read_nullable_struct,
    "read_tags": read_tags,
    "skip_tags": skip_tags,
    "write_string": write_string,
    "write_bytes": write_bytes,
    "write_records": write_records,
    "write_count": write_count,
    "write_uuid": write_uuid,
    "write_tags": write_tags,
    "_fresh": _fresh,
    "_short": _short,
}


@dataclass(frozen=True, slots=True)
class MessageCodec:
    """The generated decoder and encoder of one message version."""

    spec: MessageSpec
    version: int
    decode: Any  # (buf, pos) -> (dict, pos)
    encode: Any  # (dict, Out) -> None
    source: str

    def decode_all(self, buf) -> dict[str, Any]:
        """Decode a whole body; bytes left over are a protocol error."""
        m, pos = self.decode(buf, 0)
        if pos != len(buf):
            raise ProtocolError(
                f"{self.spec.api} v{self.version} {self.spec.kind}: "
                f"{len(buf) - pos} bytes left after the message"
            )
        return m

    def encode_new(self, m: dict[str, Any]) -> Out:
        out = Out()
        self.encode(m, out)
        return out


def compile_message(spec: MessageSpec, version: int) -> MessageCodec:
    if not spec.versions[0] <= version <= spec.versions[1]:
        raise ValueError(f"{spec.api} {spec.kind} has no version {version}")
    gen = _Gen(version, spec.flexible(version))
    gen.decoder(spec.fields, "decode")
    gen.encoder(spec.fields, "encode")
    source = "\n".join(gen.lines + gen.module) + "\n"
    namespace: dict[str, Any] = {**_RUNTIME, **gen.consts}
    exec(compile(source, f"<kafka {spec.api} {spec.kind} v{version}>", "exec"), namespace)
    return MessageCodec(spec, version, namespace["decode"], namespace["encode"], source)


def uuid_bytes(text: str) -> bytes:
    """A Sluice topic id (UUID text) as the protocol's 16 bytes; anything else -> zeros."""
    try:
        return uuid.UUID(text).bytes
    except (ValueError, AttributeError, TypeError):
        return ZERO_UUID
