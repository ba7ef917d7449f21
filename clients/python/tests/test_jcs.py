"""The fingerprint computed here is idem.request_hash's, on many documents:
the RFC 8785 corner cases, random documents, and the numbers idem refuses
(P4005) refused here too."""
import json
import random
import struct

import psycopg
import pytest

from idem_client import FingerprintError, canonicalize, fingerprint, fingerprint_bytes
from idem_client.jcs import parse

CORNERS = [
    "null", "true", "false", "0", "-0", "1", "-1", "1.0", "1e21", "1e+21", "1E21", "1e20",
    "123456789012345680000", "1e-6", "1e-7", "0.000001", "0.0000001", "5e-324",
    "1.7976931348623157e308", "2.2250738585072014e-308", "0.1", "0.30000000000000004",
    "9007199254740992e0", "4.35", "1e23", "-1.5e-10", "333333333.3333333", "[]", "{}",
    '""', '"\\u0001\\u001f\\"\\\\/\\b\\f\\n\\r\\t"', '"\\u007f\\u0080\\u2028\\u2029\\ufeff"',
    '"\\ud83d\\ude00 \u00e9\u4e2d"', '{"b": 1, "a": 2, "A": 3, "": 4}',
    '{"\\ud83d\\ude00": 1, "\\ufb33": 2, "\\u20ac": 3, "\\r": 4, "1": 5, "\u00f6": 6}',
    '{"a": {"z": [1, 2.5, {"y": null, "x": false}]}, "a ": []}',
    '{"dup": 1, "dup": 2}', ' [ 1 , 2 ] ', '{"numbers": [10, 1e1, 100e-1, 0.1e2]}',
    '{"literal": "1e21", "big": 1e300, "small": -1e-300}',
]

# Numbers whose nearest double prints as another number: idem refuses them.
INEXACT = ["12345678901234567890", "0.1000000000000000001", "9007199254740993",
           "1e400", "-1e400", "1.00000000000000000000000000001", "123456789.123456789123"]


def server_hashes(conn, documents):
    rows = conn.execute("SELECT idem.request_hash(d::jsonb) FROM unnest(%s::text[])"
                        " WITH ORDINALITY AS t(d, n) ORDER BY n", [documents]).fetchall()
    return [row[0] for row in rows]


@pytest.fixture
def conn(app_dsn):
    with psycopg.connect(app_dsn, autocommit=True) as c:
        yield c


def test_corner_cases_hash_as_idem(conn):
    assert [fingerprint(d) for d in CORNERS] == server_hashes(conn, CORNERS)


def test_ecmascript_number_forms():
    forms = {"1e21": "1e+21", "1e20": "100000000000000000000", "1.0": "1", "-0": "0",
             "1e-7": "1e-7", "0.000001": "0.000001", "5e-324": "5e-324",
             "1.7976931348623157e308": "1.7976931348623157e+308", "123e-20": "1.23e-18"}
    assert {k: canonicalize(parse(k)) for k in forms} == forms


def test_utf16_key_order():
    # U+1F600 is D83D DE00 in UTF-16: before U+FB33, after it in code points.
    assert canonicalize(parse('{"\\ufb33": 1, "\\ud83d\\ude00": 2}')) == '{"\U0001f600":2,"\ufb33":1}'


@pytest.mark.parametrize("number", INEXACT)
def test_inexact_numbers_are_refused_as_idem_does(conn, number):
    with pytest.raises(FingerprintError) as here:
        fingerprint(f'{{"amount": {number}}}')
    assert here.value.sqlstate == "P4005"
    with pytest.raises(psycopg.Error) as there:
        conn.execute("SELECT idem.request_hash(%s::jsonb)", [f'{{"amount": {number}}}'])
    assert there.value.sqlstate == "P4005"


@pytest.mark.parametrize("text", ['{"a": "\\u0000"}', '"\\ud800"', "NaN", "[1,]", "{'a': 1}"])
def test_what_jsonb_refuses_is_refused(conn, text):
    with pytest.raises(FingerprintError):
        fingerprint(text)
    with pytest.raises(psycopg.Error):
        conn.execute("SELECT idem.request_hash(%s::jsonb)", [text])


def test_bytes_hash_as_idem(conn):
    for data in (b"", b"\x00\x01", "é".encode(), bytes(range(256))):
        assert fingerprint_bytes(data) == conn.execute(
            "SELECT idem.request_hash(%s::bytea)", [data]).fetchone()[0]


def random_number(rng):
    kind = rng.randrange(5)
    if kind == 0:
        return str(rng.randint(-10**15, 10**15))
    if kind == 1:  # any finite double, written the way Python writes it
        while True:
            value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
            if value == value and abs(value) != float("inf"):
                return repr(value)
    if kind == 2:
        return f"{rng.randint(0, 10**6)}.{rng.randint(0, 999):03d}"
    if kind == 3:
        return f"{rng.randint(1, 9)}e{rng.randint(-30, 30)}"
    return repr(rng.uniform(-1e6, 1e6))


def random_string(rng):
    alphabet = ["a", "Z", "0", " ", '"', "\\", "\n", "\x01", "\x7f", "é", "\u2028", "中",
                "\ufb33", "\U0001f600", "\U00010000", "\uffff"]
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))


def random_value(rng, depth=0):
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return rng.choice(["null", "true", "false"])
    if kind in (1, 2):
        return random_number(rng)
    if kind in (3, 4):
        return json.dumps(random_string(rng), ensure_ascii=rng.random() < 0.5)
    if kind in (5, 6):
        items = [f"{json.dumps(random_string(rng))}: {random_value(rng, depth + 1)}"
                 for _ in range(rng.randrange(5))]
        return "{" + ", ".join(items) + "}"
    return "[" + ",".join(random_value(rng, depth + 1) for _ in range(rng.randrange(5))) + "]"


def test_random_documents_hash_as_idem(conn):
    rng = random.Random(30)
    documents = [random_value(rng) for _ in range(3000)]
    assert len(documents) == 3000
    assert [fingerprint(d) for d in documents] == server_hashes(conn, documents)
