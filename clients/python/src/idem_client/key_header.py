"""The Idempotency-Key header's value read as every idem package reads it
(clients/conformance/idempotency-key.json is the shared table of cases)."""
import re

# One Structured Field string (RFC 8941: "..." with \" and \\ as its only
# escapes), with HTTP's optional spaces and tabs around it.
_SF_STRING = re.compile(r'[ \t]*"((?:[^"\\]|\\["\\])*)"[ \t]*', re.DOTALL)
_ESCAPE = re.compile(r'\\(["\\])')


def parse_key(value: str) -> str:
    """The key in a header value: an sf-string's contents, unescaped, so that
    "k" and k are one key; anything else as it is, less spaces and tabs."""
    quoted = _SF_STRING.fullmatch(value)
    if quoted:
        return _ESCAPE.sub(r"\1", quoted.group(1))
    return value.strip(" \t")
