"""Shared type codecs: every codec is a decode/encode pair.

Formats import from here and never redefine a codec. Names follow Kaitai's habit:
``u2be`` is an unsigned 2-byte big-endian integer, ``s4le`` a signed 4-byte little-endian
one. Layout structs are compiled once (``struct.Struct``) at import time.

Also here: the canonical rendering of decoded values into the JSON row images of SPEC
section 5 (``RowRenderer``), so that every format renders the same value the same way.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import struct
from decimal import Context, Decimal, InvalidOperation

# exact decimal arithmetic for up to 31-digit DECIMALs (the default context rounds at 28)
_DEC = Context(prec=80)
from typing import Callable, Iterable, Sequence

import numpy as np

from .errors import BadValue, NeedData

# --------------------------------------------------------------------------- integers

_INT_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}


def _int_struct(size: int, signed: bool, big: bool) -> struct.Struct:
    code = _INT_CODES[size]
    return struct.Struct((">" if big else "<") + (code.lower() if signed else code))


u1 = struct.Struct("B")
s1 = struct.Struct("b")
u2be, u2le = _int_struct(2, False, True), _int_struct(2, False, False)
s2be, s2le = _int_struct(2, True, True), _int_struct(2, True, False)
u4be, u4le = _int_struct(4, False, True), _int_struct(4, False, False)
s4be, s4le = _int_struct(4, True, True), _int_struct(4, True, False)
u8be, u8le = _int_struct(8, False, True), _int_struct(8, False, False)
s8be, s8le = _int_struct(8, True, True), _int_struct(8, True, False)
f4be, f4le = struct.Struct(">f"), struct.Struct("<f")
f8be, f8le = struct.Struct(">d"), struct.Struct("<d")


def int_struct(size: int, *, signed: bool, big_endian: bool) -> struct.Struct:
    """The precompiled struct for an integer of ``size`` bytes."""
    return _int_struct(size, signed, big_endian)


def read(st: struct.Struct, buf: bytes | memoryview, offset: int, what: str = "field") -> tuple:
    """``st.unpack_from`` that raises ``NeedData`` (with the offset) instead of struct.error."""
    if offset < 0 or offset + st.size > len(buf):
        raise NeedData(
            f"{what} needs {st.size} bytes", offset=offset, expected=st.size,
            actual=max(0, len(buf) - offset),
        )
    return st.unpack_from(buf, offset)


def take(buf: bytes | memoryview, offset: int, length: int, what: str = "field") -> bytes:
    """``length`` bytes at ``offset``; ``NeedData`` if the buffer is shorter. Never allocates
    by an unchecked length: the bound is checked before the slice."""
    if length < 0:
        raise BadValue(f"{what} has a negative length", offset=offset, expected=">= 0", actual=length)
    end = offset + length
    if end > len(buf):
        raise NeedData(f"{what} needs {length} bytes", offset=offset, expected=length,
                       actual=max(0, len(buf) - offset))
    return bytes(buf[offset:end])


# --------------------------------------------------------------------------- IEEE floats

def decode_f4(raw: bytes, big_endian: bool = True) -> float:
    return (f4be if big_endian else f4le).unpack(raw)[0]


def encode_f4(value: float, big_endian: bool = True) -> bytes:
    return (f4be if big_endian else f4le).pack(value)


def decode_f8(raw: bytes, big_endian: bool = True) -> float:
    return (f8be if big_endian else f8le).unpack(raw)[0]


def encode_f8(value: float, big_endian: bool = True) -> bytes:
    return (f8be if big_endian else f8le).pack(value)


class Float4(float):
    """A value that came from a 4-byte float: rendered as the shortest text that reads
    back to the same 4-byte value."""

    __slots__ = ()


# --------------------------------------------------------------------------- packed decimal (BCD)

_POSITIVE_SIGNS = {0xC, 0xF, 0xA, 0xE}
_NEGATIVE_SIGNS = {0xD, 0xB}


def packed_len(precision: int) -> int:
    """Bytes of a packed decimal of ``precision`` digits: p/2+1 (== (p+2)//2)."""
    return precision // 2 + 1


def decode_packed(raw: bytes, scale: int = 0) -> Decimal:
    """Packed decimal ``dd dd ... ds``: digits in nibbles, sign in the last nibble
    (C/F/A/E positive, D/B negative)."""
    if not raw:
        raise BadValue("empty packed decimal")
    hexed = raw.hex()
    digits, sign = hexed[:-1], int(hexed[-1], 16)
    if not digits.isdigit():
        bad = next(i for i, ch in enumerate(digits) if not ch.isdigit())
        raise BadValue("packed decimal digit nibble is not 0-9", offset=bad // 2,
                       expected="0-9", actual=digits[bad].upper())
    if sign in _POSITIVE_SIGNS:
        negative = False
    elif sign in _NEGATIVE_SIGNS:
        negative = True
    else:
        raise BadValue("bad packed-decimal sign nibble", offset=len(raw) - 1,
                       expected="C/F (+) or D/B (-)", actual=f"0x{sign:X}")
    value = Decimal(int(digits)).scaleb(-scale, _DEC)
    return value.copy_negate() if negative else value  # exact: no context rounding


def encode_packed(value: Decimal | int | str, precision: int, scale: int = 0, *,
                  positive_sign: int = 0xC, negative_sign: int = 0xD) -> bytes:
    """Inverse of ``decode_packed`` for a DECIMAL(precision, scale)."""
    dec = Decimal(value)
    unscaled = int(dec.scaleb(scale, _DEC).to_integral_value(context=_DEC))
    negative = unscaled < 0 or (unscaled == 0 and dec.is_signed())
    digits = str(abs(unscaled))
    if len(digits) > precision:
        raise ValueError(f"{value} does not fit DECIMAL({precision},{scale})")
    nibbles = 2 * packed_len(precision) - 1
    text = digits.rjust(nibbles, "0") + format(negative_sign if negative else positive_sign, "X")
    return bytes.fromhex(text)


def decode_bcd_digits(raw: bytes, what: str = "packed field") -> str:
    """Unsigned BCD (Db2 packed DATE/TIME/TIMESTAMP): the digit string, checked."""
    text = raw.hex()
    if not text.isdigit():
        raise BadValue(f"{what} holds a non-decimal nibble", expected="0-9 nibbles",
                       actual=text.upper())
    return text


def encode_bcd_digits(digits: str) -> bytes:
    if len(digits) % 2:
        digits = "0" + digits
    return bytes.fromhex(digits)


# --------------------------------------------------------------------------- dates and times

def make_date(year: int, month: int, day: int, what: str = "DATE") -> _dt.date:
    try:
        return _dt.date(year, month, day)
    except ValueError as exc:
        raise BadValue(f"{what} out of range", expected="a calendar date",
                       actual=f"{year:04d}-{month:02d}-{day:02d}") from exc


def make_time(hour: int, minute: int, second: int, microsecond: int = 0,
              what: str = "TIME") -> _dt.time:
    try:
        return _dt.time(hour, minute, second, microsecond)
    except ValueError as exc:
        raise BadValue(f"{what} out of range", expected="a time of day",
                       actual=f"{hour:02d}:{minute:02d}:{second:02d}.{microsecond}") from exc


def make_timestamp(year: int, month: int, day: int, hour: int, minute: int, second: int,
                   microsecond: int = 0, what: str = "TIMESTAMP") -> _dt.datetime:
    try:
        return _dt.datetime(year, month, day, hour, minute, second, microsecond)
    except ValueError as exc:
        raise BadValue(f"{what} out of range", expected="a date and time",
                       actual=f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:"
                              f"{second:02d}.{microsecond:06d}") from exc


# Character dates and times (Log Master's external format, Db2 ISO): ASCII bytes (callers
# translate EBCDIC first); ``vectors.char_dates`` / ``char_times`` / ``char_timestamps`` are
# the vectorised twins.
_CHAR_DATE = re.compile(rb"(\d{4})-(\d\d)-(\d\d)")
_CHAR_TIME = re.compile(rb"(\d\d)[.:](\d\d)[.:](\d\d)")
_CHAR_TIMESTAMP = re.compile(rb"(\d{4})-(\d\d)-(\d\d)[-T ](\d\d)[.:](\d\d)[.:](\d\d)\.(\d{6})")


def _char(text: bytes, pattern, build, what: str):
    m = pattern.fullmatch(text)
    if m is None:
        raise BadValue(f"{what} is not in ISO character format", expected=what,
                       actual=text.decode("ascii", "replace"))
    return build(*map(int, m.groups()), what=what)


def char_date(text: bytes) -> _dt.date:
    """``YYYY-MM-DD``."""
    return _char(text, _CHAR_DATE, make_date, "DATE")


def char_time(text: bytes) -> _dt.time:
    """``HH.MM.SS`` (or ``HH:MM:SS``)."""
    return _char(text, _CHAR_TIME, make_time, "TIME")


def char_timestamp(text: bytes) -> _dt.datetime:
    """``YYYY-MM-DD-HH.MM.SS.NNNNNN`` (also ``T`` or blank between date and time, ``:`` in
    the time)."""
    return _char(text, _CHAR_TIMESTAMP, make_timestamp, "TIMESTAMP")


def decode_db2_date(raw: bytes) -> _dt.date:
    d = decode_bcd_digits(raw, "DATE")
    return make_date(int(d[0:4]), int(d[4:6]), int(d[6:8]))


def encode_db2_date(value: _dt.date) -> bytes:
    return encode_bcd_digits(f"{value.year:04d}{value.month:02d}{value.day:02d}")


def decode_db2_time(raw: bytes) -> _dt.time:
    d = decode_bcd_digits(raw, "TIME")
    return make_time(int(d[0:2]), int(d[2:4]), int(d[4:6]))


def encode_db2_time(value: _dt.time) -> bytes:
    return encode_bcd_digits(f"{value.hour:02d}{value.minute:02d}{value.second:02d}")


def decode_db2_timestamp(raw: bytes) -> _dt.datetime:
    d = decode_bcd_digits(raw, "TIMESTAMP")
    return make_timestamp(int(d[0:4]), int(d[4:6]), int(d[6:8]), int(d[8:10]), int(d[10:12]),
                          int(d[12:14]), int(d[14:20]))


def encode_db2_timestamp(value: _dt.datetime) -> bytes:
    v = value
    return encode_bcd_digits(f"{v.year:04d}{v.month:02d}{v.day:02d}{v.hour:02d}{v.minute:02d}"
                             f"{v.second:02d}{v.microsecond:06d}")


# VMS time: signed quadword of 100 ns ticks since 1858-11-17 00:00 (local time of the source).
VMS_EPOCH = _dt.datetime(1858, 11, 17)
VMS_UNIX_EPOCH_TICKS = 35067168000000000
_TICKS_PER_US = 10


def decode_vms_time(ticks: int) -> _dt.datetime:
    """VMS absolute time -> naive datetime (source-local), truncated to microseconds."""
    if ticks < 0:
        raise BadValue("VMS time is a delta time (negative), not an absolute time",
                       expected=">= 0", actual=ticks)
    try:
        return VMS_EPOCH + _dt.timedelta(microseconds=ticks // _TICKS_PER_US)
    except OverflowError as exc:
        raise BadValue("VMS time beyond year 9999", expected="<= 9999-12-31", actual=ticks) from exc


def encode_vms_time(value: _dt.datetime, extra_ticks: int = 0) -> int:
    """Naive datetime -> VMS ticks; ``extra_ticks`` (0-9) adds sub-microsecond ticks."""
    delta = value - VMS_EPOCH
    return (delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds) \
        * _TICKS_PER_US + extra_ticks


# --------------------------------------------------------------------------- IBM hexadecimal float

def decode_ibm_float(raw: bytes) -> float:
    """IBM System/360 hexadecimal floating point, 4 or 8 bytes, big-endian:
    sign bit, 7-bit excess-64 base-16 exponent, 24/56-bit fraction."""
    if len(raw) == 4:
        bits = u4be.unpack(raw)[0]
        frac_bits = 24
        sign, exp, frac = bits >> 31, (bits >> 24) & 0x7F, bits & 0xFFFFFF
    elif len(raw) == 8:
        bits = u8be.unpack(raw)[0]
        frac_bits = 56
        sign, exp, frac = bits >> 63, (bits >> 56) & 0x7F, bits & 0xFFFFFFFFFFFFFF
    else:
        raise BadValue("IBM hex float must be 4 or 8 bytes", expected="4 or 8", actual=len(raw))
    if frac == 0:
        return -0.0 if sign else 0.0
    value = math.ldexp(frac, 4 * (exp - 64) - frac_bits)
    return -value if sign else value


def encode_ibm_float(value: float, size: int = 8) -> bytes:
    """Python float -> IBM hex float (truncating, as the hardware conversion does)."""
    if size not in (4, 8):
        raise ValueError("IBM hex float size is 4 or 8")
    if math.isnan(value) or math.isinf(value):
        raise ValueError("IBM hex float has no NaN or infinity")
    frac_bits = 24 if size == 4 else 56
    sign = 1 if math.copysign(1.0, value) < 0 else 0
    mag = abs(value)
    if mag == 0.0:
        body = 0
    else:
        mant, exp2 = math.frexp(mag)  # mag = mant * 2**exp2, 0.5 <= mant < 1
        exp16 = -((-exp2) // 4)  # ceil(exp2 / 4)
        shift = 4 * exp16 - exp2  # 0..3: mant * 2**-shift in [1/16, 1)
        frac = int(math.ldexp(mant, frac_bits - shift))
        exp = exp16 + 64
        if exp > 127:
            raise ValueError(f"{value} is too large for IBM hex float")
        if exp < 0:
            frac, exp = 0, 0  # underflow to zero
        body = (exp << frac_bits) | frac
    bits = (sign << (frac_bits + 7)) | body
    return (u4be if size == 4 else u8be).pack(bits)


# --------------------------------------------------------------------------- text

def decode_text(raw: bytes, encoding: str, what: str = "text") -> str:
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise BadValue(f"{what} is not valid {encoding}", offset=exc.start,
                       expected=encoding, actual=raw[exc.start:exc.start + 4].hex()) from exc
    except LookupError as exc:
        raise BadValue(f"unknown encoding {encoding!r}", expected="a Python codec",
                       actual=encoding) from exc


def encode_text(value: str, encoding: str) -> bytes:
    return value.encode(encoding)


def ebcdic(raw: bytes, codepage: str = "cp037") -> str:
    return decode_text(raw, codepage, "EBCDIC text")


def to_ebcdic(value: str, codepage: str = "cp037") -> bytes:
    return value.encode(codepage)


# --------------------------------------------------------------------------- canonical JSON rendering

class BlobRef(int):
    """A BLOB reference (solidDB BLOB id): rendered as ``{"blob_id": n}``."""

    __slots__ = ()


def _float4_text_numpy(value: float) -> str:
    f = np.float32(value)
    mag = abs(float(f))
    if mag != 0.0 and (mag < 1e-5 or mag >= 1e16):
        return np.format_float_scientific(f, unique=True, trim="-").replace("e+", "e")
    return np.format_float_positional(f, unique=True, trim="-")


_f4_pack, _f4_unpack = struct.Struct("<f").pack, struct.Struct("<f").unpack
_u4_unpack = struct.Struct("<I").unpack
_F4_FORMATS = tuple(f"%.{k}e" for k in range(9))      # 1..9 significant digits
_f4_cache: dict[float, str] = {}


def float4_text(value: float) -> str:
    """Shortest decimal text that reads back to the same IEEE single.

    Pure Python (no numpy per value): round to the single with ``struct``, then try 1..9
    significant digits (``%.{k-1}e``, correctly rounded) until the text reads back to the
    same single. Where the single's rounding interval is symmetric that is exactly the
    shortest, closest text numpy's Dragon4 gives; at powers of two (asymmetric interval),
    zero, and values outside the single's range, numpy decides. The text is then laid out
    as numpy's positional (1e-5 <= |v| < 1e16) or scientific form."""
    got = _f4_cache.get(value)
    if got is not None:
        return got
    try:
        packed = _f4_pack(value)
    except OverflowError:
        return _float4_text_numpy(value)
    if not (_u4_unpack(packed)[0] & 0x7FFFFF) or value != value:
        return _float4_text_numpy(value)      # powers of two, zero, NaN: numpy decides
    f = _f4_unpack(packed)[0]
    for fmt in _F4_FORMATS:
        text = fmt % f
        try:
            if _f4_pack(float(text)) == packed:
                break
        except OverflowError:             # rounded past the largest single
            continue
    mant, exp = text.split("e")
    e = int(exp)
    neg = mant[0] == "-"
    digits = mant.lstrip("-").replace(".", "").rstrip("0") or "0"
    mag = abs(f)
    if mag < 1e-5 or mag >= 1e16:
        out = digits[0] + ("." + digits[1:] if len(digits) > 1 else "") + \
            ("e-%02d" % -e if e < 0 else "e%02d" % e)
    elif e < 0:
        out = "0." + "0" * (-e - 1) + digits
    elif e + 1 >= len(digits):
        out = digits + "0" * (e + 1 - len(digits))
    else:
        out = digits[:e + 1] + "." + digits[e + 1:]
    if neg:
        out = "-" + out
    if len(_f4_cache) > 65536:
        _f4_cache.clear()
    _f4_cache[value] = out
    return out


def float8_text(value: float) -> str:
    return repr(float(value))


def _json_number(text: str) -> str:
    # JSON has no NaN/Infinity: render non-finite floats as strings (documented in README).
    if text in ("nan", "inf", "-inf"):
        return json.dumps({"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[text])
    return text


def decimal_text(value: Decimal | int | str, scale: int) -> str:
    """Exactly ``scale`` decimals, no exponent: ``-12.30``."""
    try:
        dec = Decimal(value)
    except InvalidOperation as exc:
        raise BadValue("not a decimal number", expected="a decimal string", actual=value) from exc
    if not dec.is_finite():
        raise BadValue("decimal is not finite", expected="a finite decimal", actual=value)
    try:
        q = dec.quantize(Decimal(1).scaleb(-scale), context=_DEC)
    except InvalidOperation as exc:    # more digits than any DECIMAL holds (e.g. 1E+78)
        raise BadValue("decimal has more digits than a DECIMAL can hold",
                       expected=f"at most {_DEC.prec} digits with {scale} decimals",
                       actual=str(value)[:40]) from exc
    text = format(q, "f")
    if text.startswith("-") and q.is_zero():
        text = text[1:]
    return text


def _r_int(v) -> str:
    return str(int(v))


def _r_float(v) -> str:
    if isinstance(v, Float4):
        return _json_number(float4_text(v) if math.isfinite(v) else float8_text(v))
    return _json_number(float8_text(v))


def _r_float4(v) -> str:
    return _json_number(float4_text(v) if math.isfinite(v) else float8_text(v))


def _r_str(v) -> str:
    return json.dumps(v, ensure_ascii=False)


def _r_hex(v) -> str:
    return '"' + bytes(v).hex() + '"'


def _r_date(v) -> str:
    return '"' + v.isoformat() + '"'


def _r_time(v) -> str:
    return '"' + v.strftime("%H:%M:%S") + '"'


def _r_timestamp(v) -> str:
    return '"' + f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:" \
                 f"{v.second:02d}.{v.microsecond:06d}" + '"'


def _r_lob(v) -> str:
    if isinstance(v, BlobRef):
        return '{"blob_id": ' + str(int(v)) + "}"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return _r_hex(v)
    return _r_str(v)


def value_renderer(col) -> Callable[[object], str]:
    """The JSON renderer of one catalog column (``decoders.catalog.Column``)."""
    t = col.type
    if t in ("SMALLINT", "INTEGER", "BIGINT", "TINYINT"):
        return _r_int
    if t == "DECIMAL":
        scale = col.scale or 0
        return lambda v: '"' + decimal_text(v, scale) + '"'
    if t == "REAL" or (t == "FLOAT" and col.length == 4):
        return _r_float4
    if t in ("DOUBLE", "FLOAT"):
        return _r_float
    if t in ("CHAR", "VARCHAR"):
        return _r_str
    if t in ("BINARY", "VARBINARY"):
        return _r_hex
    if t == "DATE":
        return _r_date
    if t == "TIME":
        return _r_time
    if t == "TIMESTAMP":
        return _r_timestamp
    if t in ("BLOB", "CLOB"):
        return _r_lob
    raise ValueError(f"no renderer for column type {t}")


_encode_str = json.encoder.encode_basestring     # what json.dumps(str, ensure_ascii=False) calls
_Decimal = Decimal


def _decimal_renderer(scale: int) -> Callable[[object], str]:
    exp = -scale

    def render(v) -> str:
        # fast path: a Decimal already at the column's scale (what decoders produce)
        if type(v) is _Decimal:
            t = v.as_tuple()
            if t.exponent == exp:
                text = format(v, "f")
                if t.sign and not any(t.digits):
                    text = text[1:]
                return '"' + text + '"'
        return '"' + decimal_text(v, scale) + '"'
    return render


def _float_expr(v: str) -> str:
    return (f"(_repr({v}) if type({v}) is float and {v} - {v} == 0.0 "
            f"else _r_float({v}))")


# per column type: a Python expression rendering the (not None) value ``{v}``; the
# generated row function inlines them (no per-value call where the type allows it)
_EXPR = {
    "int": "(str({v}) if type({v}) is int else _r_int({v}))",
    "str": "(_enc({v}) if type({v}) is str else _r_str({v}))",
    "float4": "_r_float4({v})",
    "date": "('\"' + {v}.isoformat() + '\"')",
    "time": "('\"%02d:%02d:%02d\"' % ({v}.hour, {v}.minute, {v}.second))",
    "timestamp": "('\"%04d-%02d-%02dT%02d:%02d:%02d.%06d\"' % ({v}.year, {v}.month, "
                 "{v}.day, {v}.hour, {v}.minute, {v}.second, {v}.microsecond))",
    "hex": "('\"' + ({v}.hex() if type({v}) is bytes else bytes({v}).hex()) + '\"')",
}


def _column_expr(col, i: int, env: dict) -> str:
    """The inlined rendering of column ``i`` (its value is ``v{i}``)."""
    fn = value_renderer(col)               # the reference; also rejects unknown types
    v = f"v{i}"
    kind = {_r_int: "int", _r_str: "str", _r_float4: "float4", _r_date: "date",
            _r_time: "time", _r_timestamp: "timestamp", _r_hex: "hex"}.get(fn)
    if fn is _r_float:
        expr = _float_expr(v)
    elif kind is not None and not (kind == "time" and col.type != "TIME"):
        expr = _EXPR[kind].format(v=v)
    else:
        name = f"_f{i}"
        env[name] = _decimal_renderer(col.scale or 0) if col.type == "DECIMAL" else fn
        expr = f"{name}({v})"
    return f"('null' if {v} is None else {expr})"


def _compile_row(columns: Sequence) -> Callable[[Sequence], str]:
    """One function per table: ``render(values) -> JSON text``, with the keys as constants
    and each value's rendering inlined (identical text to ``value_renderer`` per value)."""
    env = {"_repr": repr, "_enc": _encode_str, "_r_int": _r_int, "_r_str": _r_str,
           "_r_float": _r_float, "_r_float4": _r_float4, "_list": list, "_tuple": tuple,
           "_len": len}
    n = len(columns)
    if n == 0:
        def empty(values) -> str:
            for _ in zip((), values, strict=True):
                pass
            return "{}"
        return empty
    parts = []
    for i, col in enumerate(columns):
        key = json.dumps(col.name) + ": "
        env[f"_k{i}"] = ("{" if i == 0 else ", ") + key
        parts.append(f"_k{i}")
        parts.append(_column_expr(col, i, env))
    names = ", ".join(f"v{i}" for i in range(n))
    src = (f"def render(values):\n"
           f"    if type(values) is not _list and type(values) is not _tuple:\n"
           f"        values = _list(values)\n"
           f"    if _len(values) != {n}:\n"
           f"        raise ValueError('row has %d values for {n} columns' % _len(values))\n"
           f"    {names}, = values\n"
           f"    return ''.join(({', '.join(parts)}, '}}'))\n")
    exec(compile(src, "<RowRenderer>", "exec"), env)
    return env["render"]


class RowRenderer:
    """Renders a row (values in catalog column order) as the canonical JSON object.

    Compiled once per table (``_compile_row``): the text is exactly what joining
    ``value_renderer(column)(value)`` per column gives (``tests/test_codecs.py`` checks)."""

    __slots__ = ("_render", "columns")

    def __init__(self, columns: Sequence) -> None:
        self.columns = tuple(columns)
        self._render = _compile_row(self.columns)

    def __call__(self, values: Iterable) -> str:
        return self._render(values)

    def reference(self, values: Iterable) -> str:
        """The per-value rendering the compiled function must equal (tests, benchmarks)."""
        out = []
        for col, value in zip(self.columns, values, strict=True):
            out.append(json.dumps(col.name) + ": " +
                       ("null" if value is None else value_renderer(col)(value)))
        return "{" + ", ".join(out) + "}"
