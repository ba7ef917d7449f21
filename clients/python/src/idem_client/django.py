"""A Django middleware for the IETF draft "The Idempotency-Key HTTP Header
Field", on idem: the ASGI middleware's design (idem_client.asgi) for
Django's synchronous request cycle.

    MIDDLEWARE = [..., "idem_client.django.IdempotencyMiddleware"]
    IDEM = {"DSN": "postgresql://app@db/shop"}   # or "POOL": a ConnectionPool

Each request of the idempotent methods takes ONE psycopg connection (a new
one to IDEM["DSN"], or one from IDEM["POOL"], a psycopg_pool ConnectionPool
or its dotted path): the claim commits on it (bound to its session: a
crashed process frees its keys as soon as its connections end); a replay,
a 409 or a 422 gives it back at once; an owned key runs the view in a
transaction on it, request.idem.connection, where the view writes its
effects, and records the answer in that transaction: below 400 succeeded,
4xx a final failure (both replayed, idem_client.answer's stored form),
5xx or an exception rolled back and the key given up.

IDEM's other keys, as the ASGI middleware's options: SCOPE (a string or a
function of the request, in place of `<METHOD> <path>`), PRINCIPAL (a
function of the request: the account or tenant the scope starts with),
REPLAY_HEADERS, METHODS, REQUIRED, HEADER, WAIT, LOCK_TIMEOUT, ON_ERROR,
BIND_LOCK_TO_SESSION (False behind a transaction pooler). PRINCIPAL and
POOL may be given as dotted paths. Django's HttpResponse holds one value per header
name: a stored answer with a name twice replays it as one line, the values
joined with ", "."""
from contextlib import contextmanager

import psycopg
from django.conf import settings
from django.http import HttpResponse
from django.utils.module_loading import import_string

from . import answer, http_common
from .http_common import OwnedClaim, SessionBinding, problem_of, request_fingerprint
from .jcs import FingerprintError
from .key_header import parse_key
from .store import Idem, Run

_OPTIONS = {"DSN", "POOL", "SCOPE", "PRINCIPAL", "REPLAY_HEADERS", "METHODS", "REQUIRED",
            "HEADER", "WAIT", "LOCK_TIMEOUT", "ON_ERROR", "BIND_LOCK_TO_SESSION"}


class IdemState(OwnedClaim):
    """request.idem: the owned claim (http_common.OwnedClaim), with the
    recovery point written on its connection."""

    def set_recovery_point(self, point):
        self.run.set_recovery_point(point)


def _resolve(value):
    return import_string(value) if isinstance(value, str) else value


class _Rollback(Exception):
    """Rolls back the view's transaction for a 5xx answer."""


class IdempotencyMiddleware:
    def __init__(self, get_response, **options):
        """options: IDEM's keys (settings.IDEM when none are given)."""
        self.get_response = get_response
        config = options or dict(getattr(settings, "IDEM", {}))
        unknown = set(config) - _OPTIONS
        if unknown:
            raise ValueError(f"IDEM: unknown keys {sorted(unknown)}")
        self.dsn = config.get("DSN")
        self.pool = _resolve(config.get("POOL"))
        if (self.dsn is None) == (self.pool is None):
            raise ValueError('IDEM: give exactly one of "DSN" and "POOL"')
        self.scope = config.get("SCOPE")
        self.principal = _resolve(config.get("PRINCIPAL"))
        self.allowed = answer.allow_list(config.get("REPLAY_HEADERS", ()))
        self.methods = {m.upper() for m in config.get("METHODS", ("POST", "PATCH"))}
        self.required = config.get("REQUIRED", True)
        self.header_name = config.get("HEADER", "Idempotency-Key")
        self.wait = config.get("WAIT")
        self.lock_timeout = config.get("LOCK_TIMEOUT")
        self.on_error = config.get("ON_ERROR", "release")
        self.binding = SessionBinding(config.get("BIND_LOCK_TO_SESSION", True))

    def idem_scope(self, request) -> str:
        option = self.scope(request) if callable(self.scope) else self.scope
        principal = None if self.principal is None else self.principal(request)
        path = request.get_full_path().split("?", 1)[0]
        return http_common.compose_scope(request.method, path, option, principal)

    @contextmanager
    def _connection(self):
        if self.pool is not None:
            with self.pool.connection() as conn:
                conn.autocommit = True
                yield conn
            return
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            yield conn

    def __call__(self, request):
        if request.method.upper() not in self.methods:
            return self.get_response(request)
        key = request.headers.get(self.header_name)
        if key is None:
            if not self.required:
                return self.get_response(request)
            return _response(*http_common.missing_key(self.header_name))
        key = parse_key(key)
        try:
            hash_ = request_fingerprint(request.body, request.META.get("CONTENT_TYPE", ""))
        except FingerprintError as error:
            return _response(*http_common.problem(
                400, "The request body cannot be fingerprinted", str(error), error.sqlstate))
        idem_scope = self.idem_scope(request)
        with self._connection() as conn:
            idem = Idem(conn, lock_timeout=self.lock_timeout, wait=self.wait,
                        on_error=self.on_error)
            try:
                claim = self._claim(idem, idem_scope, key, hash_)
            except psycopg.Error as error:
                problem = problem_of(error, self.header_name)
                if problem is None:
                    raise
                return _response(*problem)
            if claim.replayed:
                return _replay(claim)
            if claim.kind == "processing_active":
                return _response(*http_common.in_progress(self.header_name, claim.retry_after))
            return self._run(idem, claim, request)

    def _claim(self, idem, idem_scope, key, hash_):
        try:
            return idem.claim_only(idem_scope, key, request_hash=hash_,
                                   bind_session=self.binding.enabled)
        except psycopg.Error as error:
            if not self.binding.refused(error):
                raise
        return idem.claim_only(idem_scope, key, request_hash=hash_)

    def _run(self, idem, claim, request):
        run = Run(idem.connection, claim)
        request.idem = IdemState(run)
        response = None
        try:
            with idem.connection.transaction():
                response = _buffered(self.get_response(request))
                if response.status_code >= 500:
                    raise _Rollback()
                stored = answer.encode(response.items(), response.content, self.allowed)
                if response.status_code < 400:
                    run.record(response.status_code, stored)
                else:
                    run.record(response.status_code, stored,
                               failure_code=f"http_{response.status_code}")
                self.binding.check(claim.backend_pid, run.outcome_pid)
        except _Rollback:
            idem.give_up(claim, RuntimeError(f"the view answered {response.status_code}"))
            return response
        except psycopg.Error as error:
            idem.give_up(claim, error)
            if error.sqlstate != "P4012":  # the view's own error: 500
                raise
            return _response(*problem_of(error, self.header_name))
        except BaseException as error:
            idem.give_up(claim, error)
            raise
        return response  # the first answer: the view's, unchanged


def _buffered(response):
    """A streaming response read into one (its bytes are stored)."""
    if not getattr(response, "streaming", False):
        return response
    buffered = HttpResponse(b"".join(response.streaming_content), status=response.status_code)
    del buffered["Content-Type"]
    for name, value in response.items():
        buffered[name] = value
    return buffered


def _replay(claim):
    try:
        headers, body = answer.decode(claim.response_text)
    except answer.NewerEnvelope as error:
        return _response(*http_common.newer_envelope(error))
    return _response(claim.response_code or 500, body, headers + [("idempotent-replayed", "true")])


def _response(status, body, headers):
    """An HttpResponse with exactly these headers (Django adds a
    content-type of its own unless told otherwise) and a computed length."""
    response = HttpResponse(body, status=status)
    del response["Content-Type"]
    values = {}
    for name, value in headers:
        if name.lower() != "content-length":
            values.setdefault(name.lower(), []).append(value)
    for name, joined in values.items():
        response[name] = ", ".join(joined)
    if not answer.has_no_body(status):
        response["Content-Length"] = str(len(body))
    return response
