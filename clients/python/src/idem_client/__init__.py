"""idem from Python: an ASGI middleware for the Idempotency-Key header
(Starlette, FastAPI), a claim/outcome context manager, and the request
fingerprint idem.request_hash computes."""
from .jcs import FingerprintError, canonicalize, fingerprint, fingerprint_bytes, fingerprint_value
from .key_header import parse_key
from .store import AsyncIdem, Claim, Idem, InProgress

__all__ = ["AsyncIdem", "Claim", "FingerprintError", "Idem", "IdempotencyMiddleware", "InProgress",
           "canonicalize", "fingerprint", "fingerprint_bytes", "fingerprint_value", "parse_key"]
__version__ = "0.2.0"


def __getattr__(name):
    # The middleware needs nothing beyond psycopg either, but importing it
    # lazily keeps `import idem_client` light for non-HTTP users.
    if name == "IdempotencyMiddleware":
        from .asgi import IdempotencyMiddleware
        return IdempotencyMiddleware
    raise AttributeError(name)
