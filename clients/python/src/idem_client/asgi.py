"""An ASGI middleware (Starlette, FastAPI) for the IETF draft "The
Idempotency-Key HTTP Header Field", on idem.

For each request of the idempotent methods: the Idempotency-Key header (400
when it is required and missing), the fingerprint of the body (RFC 8785 +
SHA-256, as idem.request_hash), one claim, then
  - a stored answer (replay_success, final_failure): sent again, the same
    status, allow-listed headers and bytes, with Idempotent-Replayed: true
    (idem_client.answer: the stored form every idem package shares);
  - the key held by a request still running: 409 with Retry-After
    (idem.retry_after), or, with wait=, idem.claim_or_wait first;
  - the key reused with another body (P4002): 422;
  - the key owned: the handler runs in a transaction on the request's
    connection (request.state.idem.connection), and its answer is recorded
    in that transaction: a status below 400 as success, a 4xx as a final
    failure (both replayed); the first answer is the handler's, unchanged,
    and every replay sends its status, bytes and allow-listed headers. A 5xx or an exception rolls the transaction back and gives the
    key up (idem.release, or idem.mark_failed retryable with on_error="fail").
The scope is `<METHOD> <path>` by default (the path as sent), after the
principal's id when principal= gives one. The claim that may own binds the
key to its session (bind_lock_to_session): a crashed process frees its keys
as soon as its connections end.
Errors are application/problem+json (RFC 9457) with the SQLSTATE idem gave."""
import inspect
from typing import Callable, Iterable, Optional, Union
from urllib.parse import quote

import psycopg

from . import answer, http_common
from .http_common import OwnedClaim, SessionBinding, problem_of, request_fingerprint
from .jcs import FingerprintError
from .key_header import parse_key
from .store import AsyncIdem, AsyncRun

# Kept importable from here, as before.
__all__ = ["IdempotencyMiddleware", "IdemState", "request_fingerprint", "request_path"]


class IdemState(OwnedClaim):
    """request.state.idem: the owned claim (http_common.OwnedClaim), with the
    recovery point written on its connection."""

    async def set_recovery_point(self, point):
        await self.run.set_recovery_point(point)


def request_path(scope) -> str:
    """The request target's path as sent (percent-encoded, with the mount
    prefix, without the query string): root_path + raw_path, latin-1."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if raw is not None else quote(scope.get("path", "/"), safe="/%:@!$&'()*+,;=")
    path = path.split("?", 1)[0]
    root = scope.get("root_path") or ""
    return path if path.startswith(root) else root + path


async def _call(option, scope):
    value = option(scope) if callable(option) else option
    return await value if inspect.isawaitable(value) else value


class _Connector:
    """One connection per request: from a pool (psycopg_pool's
    AsyncConnectionPool or anything with an async connection() context
    manager), an async factory, or a new connection to dsn."""

    def __init__(self, dsn, connect, pool):
        if sum(x is not None for x in (dsn, connect, pool)) != 1:
            raise ValueError("give exactly one of dsn=, connect= or pool=")
        self.dsn, self.connect, self.pool = dsn, connect, pool

    async def __aenter__(self):
        if self.pool is not None:
            self._context = self.pool.connection()
            conn = await self._context.__aenter__()
            await conn.set_autocommit(True)
            return conn
        self._context = None
        if self.connect is not None:
            self._conn = await self.connect()
        else:
            self._conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        if not self._conn.autocommit:
            await self._conn.set_autocommit(True)
        return self._conn

    async def __aexit__(self, *exc):
        if self._context is not None:
            return await self._context.__aexit__(*exc)
        await self._conn.close()


class _Rollback(Exception):
    """Rolls back the handler's transaction for a 5xx answer."""


class IdempotencyMiddleware:
    def __init__(self, app, *, dsn: Optional[str] = None, connect: Optional[Callable] = None,
                 pool=None, scope: Union[str, Callable, None] = None,
                 principal: Optional[Callable] = None, replay_headers: Iterable[str] = (),
                 methods=("POST", "PATCH"), required: bool = True,
                 header: str = "Idempotency-Key", wait=None, lock_timeout=None,
                 on_error: str = "release", bind_lock_to_session: bool = True):
        """scope: a string, or a function of the ASGI scope (sync or async),
        in place of `<METHOD> <path>`. principal: a function of the ASGI
        scope giving the account or tenant (or None): the scope then starts
        with it. replay_headers: header names replayed beside the default
        allow-list (answer.DEFAULT_REPLAY_HEADERS). wait: seconds (or a
        timedelta) to wait for a running twin with idem.claim_or_wait before
        answering 409. lock_timeout: the claim's lock (NULL: idem's
        settings). on_error: "release" or "fail". bind_lock_to_session:
        False behind a transaction pooler (PgBouncer in transaction mode)."""
        self.app = app
        self.connector_args = (dsn, connect, pool)
        _Connector(*self.connector_args)  # refuse a bad combination now
        self.scope = scope
        self.principal = principal
        self.allowed = answer.allow_list(replay_headers)
        self.methods = {m.upper() for m in methods}
        self.required = required
        self.header = header.lower().encode("latin-1")
        self.header_name = header
        self.wait = wait
        self.lock_timeout = lock_timeout
        self.on_error = on_error
        self.binding = SessionBinding(bind_lock_to_session)

    async def idem_scope(self, scope) -> str:
        """The scope a request's key lives in."""
        option = None if self.scope is None else await _call(self.scope, scope)
        principal = None if self.principal is None else await _call(self.principal, scope)
        return http_common.compose_scope(scope["method"], request_path(scope), option, principal)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"].upper() not in self.methods:
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])  # the last of repeated headers
        key = headers.get(self.header)
        if key is None:
            if not self.required:
                return await self.app(scope, receive, send)
            return await _send(send, *http_common.missing_key(self.header_name))
        key = parse_key(key.decode("latin-1"))
        body, receive_again = await _read_body(receive)
        try:
            hash_ = request_fingerprint(body, headers.get(b"content-type", b"").decode("latin-1"))
        except FingerprintError as error:
            return await _send(send, *http_common.problem(
                400, "The request body cannot be fingerprinted", str(error), error.sqlstate))
        idem_scope = await self.idem_scope(scope)
        async with _Connector(*self.connector_args) as conn:
            idem = AsyncIdem(conn, lock_timeout=self.lock_timeout, wait=self.wait,
                             on_error=self.on_error)
            try:
                claim = await self._claim(idem, idem_scope, key, hash_)
            except psycopg.Error as error:
                problem = problem_of(error, self.header_name)
                if problem is None:
                    raise
                return await _send(send, *problem)
            if claim.replayed:
                return await _replay(send, claim)
            if claim.kind == "processing_active":
                return await _send(send, *http_common.in_progress(self.header_name,
                                                                  claim.retry_after))
            return await self._run(idem, claim, scope, receive_again, send)

    async def _claim(self, idem, idem_scope, key, hash_):
        try:
            return await idem.claim_only(idem_scope, key, request_hash=hash_,
                                         bind_session=self.binding.enabled)
        except psycopg.Error as error:
            if not self.binding.refused(error):
                raise
        return await idem.claim_only(idem_scope, key, request_hash=hash_)

    async def _run(self, idem, claim, scope, receive, send):
        run = AsyncRun(idem.connection, claim)
        scope.setdefault("state", {})["idem"] = IdemState(run)
        captured = _Captured()
        try:
            async with idem.connection.transaction():
                await self.app(scope, receive, captured.send)
                if captured.status is None:
                    raise RuntimeError("the handler sent no response")
                if captured.status >= 500:
                    raise _Rollback()
                stored = answer.encode(captured.text_headers(), captured.body, self.allowed)
                if captured.status < 400:
                    await run.record(captured.status, stored)
                else:
                    await run.record(captured.status, stored,
                                     failure_code=f"http_{captured.status}")
                self.binding.check(claim.backend_pid, run.outcome_pid)
        except _Rollback:
            await idem.give_up(claim, RuntimeError(f"the handler answered {captured.status}"))
            return await _send(send, captured.status, captured.body, captured.text_headers())
        except psycopg.Error as error:
            await idem.give_up(claim, error)
            if error.sqlstate != "P4012":  # the handler's own error: 500
                raise
            return await _send(send, *problem_of(error, self.header_name))
        except BaseException as error:
            await idem.give_up(claim, error)
            raise
        # The first answer is the handler's, headers and bytes unchanged.
        return await _send(send, captured.status, captured.body, captured.text_headers())


async def _replay(send, claim):
    """The stored answer: status, headers in order, bytes. A final failure
    recorded without an HTTP status (by code that is not a middleware)
    replays as a 500."""
    try:
        headers, body = answer.decode(claim.response_text)
    except answer.NewerEnvelope as error:
        return await _send(send, *http_common.newer_envelope(error))
    return await _send(send, claim.response_code or 500, body,
                       headers + [("idempotent-replayed", "true")])


class _Captured:
    def __init__(self):
        self.status = None
        self.headers = []
        self.chunks = []

    async def send(self, message):
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            self.chunks.append(message.get("body", b""))

    def text_headers(self):
        return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in self.headers]

    @property
    def body(self):
        return b"".join(self.chunks)


async def _read_body(receive):
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def receive_again():
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return body, receive_again


async def _send(send, status, body, headers):
    """headers: (name, value) text pairs; a computed content-length, none
    for a status that has no body."""
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers
           if k.lower() != "content-length"]
    if not answer.has_no_body(status):
        raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
