"""What the ASGI and the Django middleware share, framework aside: the
default scope, the request fingerprint, the problem answers (RFC 9457) and
the session binding's check."""
import json
import logging
from typing import Optional

from .jcs import fingerprint, fingerprint_bytes

log = logging.getLogger("idem_client")

# What a client's request caused; anything else (a bad option, a handler's
# answer jsonb refuses) is the server's error: 500. P4000/P4004 cover a
# scope idem refuses (longer than 255 characters).
BAD_REQUEST = {"P4000", "P4001", "P4003", "P4004", "P4005", "22P02", "22P05", "22021", "54001"}


def is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def request_fingerprint(body: bytes, content_type: str) -> str:
    """A JSON body's canonical hash; any other body's bytes' hash (an empty
    body included), as idem.request_hash(jsonb) / (bytea) answer."""
    if body and is_json(content_type):
        return fingerprint(body)
    return fingerprint_bytes(body)


def compose_scope(method: str, path: str, scope_option: Optional[str],
                  principal: Optional[str]) -> str:
    """`<METHOD> <path>` (or the scope option's string), after the
    principal when there is one: keys are per route and per account."""
    base = scope_option if scope_option is not None else f"{method.upper()} {path}"
    return f"{principal} {base}" if principal else base


def problem(status, title, detail, sqlstate=None, headers=()):
    """(status, body bytes, [(name, value)]) of a problem answer."""
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    if sqlstate:
        body["sqlstate"] = sqlstate
    return status, json.dumps(body).encode("utf-8"), \
        [("content-type", "application/problem+json")] + list(headers)


def missing_key(header_name):
    return problem(400, f"{header_name} is missing",
                   f"the {header_name} is required: this operation is idempotent; send one "
                   "unique key per operation and the same key with each retry of it", "P4001")


def in_progress(header_name, retry_after):
    return problem(409, "A request is outstanding for this Idempotency-Key",
                   f"a request with this {header_name} is in progress: retry after "
                   f"{retry_after} s", None, [("retry-after", str(retry_after))])


def newer_envelope(error):
    return problem(500, "The stored answer cannot be read", str(error))


def problem_of(error, header_name):
    """The problem answer for an error idem raised, or None (a 500)."""
    state = error.sqlstate
    message = error.diag.message_primary or str(error)
    if state == "P4002":
        return problem(422, f"{header_name} is already used",
                       f"{message}: {error.diag.message_detail or ''}".rstrip(": "), state)
    if state == "P4012":
        return problem(409, "A newer request took this key over", message, state)
    if state in BAD_REQUEST:
        return problem(400, "Bad request", message, state)
    return None


class SessionBinding:
    """bind_lock_to_session: on for each claim that may own, until an
    outcome's transaction runs on another backend than its claim (a
    transaction pooler in between): then a warning, once, and no more
    binding for this middleware (the key would live as long as a server
    session the pooler shares)."""

    def __init__(self, enabled: bool):
        self.enabled = bool(enabled)

    def refused(self, error) -> bool:
        """Whether a claim failed for the binding alone: idem cannot bind
        here (55000: the C++ engine without its preload, the portable
        engine's owner not seeing pg_stat_activity). Then a warning, once,
        no more binding, and the caller claims again without it."""
        if not (self.enabled and getattr(error, "sqlstate", None) == "55000"):
            return False
        self.enabled = False
        log.warning("idem: cannot bind locks to sessions here (%s): bind_lock_to_session is "
                    "off from now on; a crashed process's keys wait for their lock", error)
        return True

    def check(self, claim_pid, outcome_pid):
        if self.enabled and claim_pid is not None and claim_pid != outcome_pid:
            self.enabled = False
            log.warning("idem: the claim ran on backend %s and its outcome on backend %s "
                        "(a transaction pooler?): bind_lock_to_session is off from now on; "
                        "set bind_lock_to_session=False behind a pooler", claim_pid, outcome_pid)


class OwnedClaim:
    """What a handler sees of the claim its request owns (request.idem in
    Django, request.state.idem in ASGI): the run and its connection, in the
    transaction the outcome will commit in."""

    def __init__(self, run):
        self.run = run
        self.connection = run.connection
        self.scope = run.scope
        self.key = run.key
        self.kind = run.kind
        self.fence = run.fence
        self.recovery_point = run.recovery_point
