"""The request fingerprint: SHA-256 hex of the RFC 8785 (JCS) canonical form
of a JSON document, the same text idem.request_hash(jsonb) answers.

The document is parsed here with every number kept as its text, not as a
float: a number is accepted only when the shortest double form of its nearest
double is numerically equal to it, as idem refuses one with P4005 (two
different amounts must never share a fingerprint; 12345678901234567890 and
12345678901234567999 are one double). What Postgres's jsonb refuses (a lone
surrogate, \\u0000, NaN) is refused too, as 22P02 / 22P05 would."""
import hashlib
import json
import math
from decimal import Decimal


class FingerprintError(ValueError):
    """The body cannot be fingerprinted; sqlstate is what idem would raise."""

    def __init__(self, sqlstate, message):
        super().__init__(message)
        self.sqlstate = sqlstate


class _Number:
    """A JSON number as written, checked and put in ECMAScript form."""
    __slots__ = ("text",)

    def __init__(self, literal):
        self.text = _number_text(literal)


def _number_text(literal):
    value = float(literal)
    exact = Decimal(literal)
    if math.isinf(value) or Decimal(repr(value)) != exact:
        raise FingerprintError(
            "P4005", f"the number {literal} cannot be canonicalized exactly: send it as a string")
    if value == 0:
        return "0"
    # repr() is Python's shortest round-trip form; ECMAScript's
    # Number::toString places the same digits by its own rules.
    sign, digits, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digits))
    k = len(digits)
    n = k + exponent  # value = 0.digits * 10^n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        text = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return ("-" if value < 0 else "") + text


def _refuse_constant(name):
    raise FingerprintError("22P02", f"the body is not JSON: {name} is not a JSON value")


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n",
            "\f": "\\f", "\r": "\\r"}


def _string(text):
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20:
            if code == 0:
                raise FingerprintError("22P05", "the body holds \\u0000, which jsonb cannot store")
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            raise FingerprintError("22P02", "the body is not JSON: a lone UTF-16 surrogate")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _utf16_order(key):
    return key.encode("utf-16-be", "surrogatepass")


def _write(value, out):
    if isinstance(value, dict):
        out.append("{")
        for i, key in enumerate(sorted(value, key=_utf16_order)):
            if i:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, _Number):
        out.append(value.text)
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif value is None:
        out.append("null")
    else:  # a Python value given to canonicalize(), not parsed text
        out.append(_python_number(value))


def _python_number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise TypeError(f"not a JSON value: {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise FingerprintError("22P02", f"{value} is not a JSON number")
    return _number_text(str(value))


def parse(text):
    """Parses JSON text (str or UTF-8 bytes), numbers kept exact."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise FingerprintError("22021", "the body is not valid UTF-8") from None
    try:
        return json.loads(text, parse_float=_Number, parse_int=_Number,
                          parse_constant=_refuse_constant)
    except FingerprintError:
        raise
    except RecursionError:
        raise FingerprintError("54001", "the body is nested too deeply") from None
    except ValueError as error:
        raise FingerprintError("22P02", f"the body is not JSON: {error}") from None


def canonicalize(value):
    """The RFC 8785 text of a parsed document (from parse()) or of plain
    Python values (dict, list, str, int, float, Decimal, bool, None)."""
    out = []
    try:
        _write(value, out)
    except RecursionError:
        raise FingerprintError("54001", "the document is nested too deeply") from None
    return "".join(out)


def fingerprint(body):
    """idem.request_hash(body::jsonb) for JSON text (str or bytes)."""
    return fingerprint_value(parse(body))


def fingerprint_value(value):
    """idem.request_hash of a document given as Python values."""
    return hashlib.sha256(canonicalize(value).encode("utf-8")).hexdigest()


def fingerprint_bytes(data):
    """idem.request_hash(bytea): SHA-256 hex of raw bytes."""
    return hashlib.sha256(bytes(data)).hexdigest()
