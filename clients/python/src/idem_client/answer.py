"""The stored answer ("envelope") every idem HTTP package writes into idem's
response_body and reads back, so that an answer stored by one package (or
framework) replays through any other:

    {"idem_http": 1,
     "headers": [["content-type", "text/plain; charset=utf-8"], ["location", "/orders/17"]],
     "body": "created 17"}

body: the response's exact bytes as a JSON string when they are UTF-8 with
no U+0000 (jsonb keeps such a string exactly), else "body_base64". headers:
[lower-case name, value] in the handler's order, one pair per value, only
the allow-listed names (never content-length). A response_body that is not
an envelope was stored by an earlier version or by SQL code: it replays as
its JSON text with content-type application/json."""
import base64
import binascii
import json
from typing import Iterable, List, Optional, Tuple

VERSION = 1

DEFAULT_REPLAY_HEADERS = ("content-type", "content-location", "location", "etag",
                          "last-modified", "cache-control")

# Never stored, whatever the allow-list: the replay computes its own length;
# the rest are about the connection, not the answer.
_NEVER = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive",
                    "idempotent-replayed"})

Headers = List[Tuple[str, str]]


class NewerEnvelope(Exception):
    """The stored answer has an idem_http version this package does not know."""

    def __init__(self, version):
        super().__init__(f"the stored answer was stored by a newer version of the package "
                         f"(idem_http {version!r})")
        self.version = version


def allow_list(replay_headers: Iterable[str] = ()) -> frozenset:
    """The default names plus the application's own, case-insensitive."""
    return frozenset(name.lower() for name in (*DEFAULT_REPLAY_HEADERS, *replay_headers)) - _NEVER


def _text_of(body: bytes) -> Optional[str]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def encode(headers: Iterable[Tuple[str, str]], body: bytes, allowed: frozenset) -> str:
    """The envelope's JSON text for an answer's headers (in order) and bytes."""
    kept = [[name.lower(), value] for name, value in headers if name.lower() in allowed]
    envelope = {"idem_http": VERSION, "headers": kept}
    text = _text_of(body or b"")
    if text is None:
        envelope["body_base64"] = base64.b64encode(body).decode("ascii")
    else:
        envelope["body"] = text
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))


def decode(response_text: Optional[str]) -> Tuple[Headers, bytes]:
    """The headers and bytes to replay from response_body::text (None: no
    body stored). Raises NewerEnvelope for an unknown version and ValueError
    for an envelope that is not well formed."""
    if response_text is None:
        return [], b""
    stored = json.loads(response_text)
    if not (isinstance(stored, dict) and "idem_http" in stored):
        return [("content-type", "application/json")], response_text.encode("utf-8")
    if stored["idem_http"] != VERSION:
        raise NewerEnvelope(stored["idem_http"])
    headers = stored.get("headers", [])
    if not (isinstance(headers, list) and
            all(isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h)
                for h in headers)):
        raise ValueError("the stored answer's headers are not [name, value] pairs")
    if ("body" in stored) == ("body_base64" in stored):
        raise ValueError("the stored answer has not exactly one of body and body_base64")
    if "body" in stored:
        if not isinstance(stored["body"], str):
            raise ValueError("the stored answer's body is not a string")
        return [(n, v) for n, v in headers], stored["body"].encode("utf-8")
    try:
        return [(n, v) for n, v in headers], base64.b64decode(stored["body_base64"], validate=True)
    except (binascii.Error, TypeError) as error:
        raise ValueError(f"the stored answer's body_base64 is not base64: {error}") from None


def has_no_body(status: int) -> bool:
    """1xx, 204 and 304 carry no body and no content-length of one."""
    return status < 200 or status in (204, 304)
