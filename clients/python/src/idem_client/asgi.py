"""An ASGI middleware (Starlette, FastAPI) for the IETF draft "The
Idempotency-Key HTTP Header Field", on idem.

For each request of the idempotent methods: the Idempotency-Key header (400
when it is required and missing), the fingerprint of the body (RFC 8785 +
SHA-256, as idem.request_hash), one claim, then
  - a stored answer (replay_success, final_failure): sent again, the same
    status and bytes, with Idempotent-Replayed: true;
  - the key held by a request still running: 409 with Retry-After
    (idem.retry_after), or, with wait=, idem.claim_or_wait first;
  - the key reused with another body (P4002): 422;
  - the key owned: the handler runs in a transaction on the request's
    connection (request.state.idem.connection), and its answer is recorded
    in that transaction: a status below 400 as success, a 4xx as a final
    failure (both replayed); the first answer sent is the text every replay
    will send. A 5xx or an exception rolls the transaction back and gives the
    key up (idem.release, or idem.mark_failed retryable with on_error="fail").
Errors are application/problem+json (RFC 9457) with the SQLSTATE idem gave."""
import json
from typing import Callable, Optional, Union

import psycopg

from . import sql
from .jcs import FingerprintError, fingerprint, fingerprint_bytes
from .key_header import parse_key
from .store import AsyncIdem, AsyncRun

# What a client's request caused; anything else (a bad option, a handler's
# answer jsonb refuses) is the server's error: 500.
_BAD_REQUEST = {"P4000", "P4001", "P4003", "P4005", "22P02", "22P05", "22021", "54001"}


class IdemState:
    """request.state.idem: the owned claim and the request's connection,
    in the transaction the outcome will commit in."""

    def __init__(self, run: AsyncRun):
        self.run = run
        self.connection = run.connection
        self.scope = run.scope
        self.key = run.key
        self.kind = run.kind
        self.fence = run.fence
        self.recovery_point = run.recovery_point

    async def set_recovery_point(self, point):
        await self.run.set_recovery_point(point)


def _problem(status, title, detail, sqlstate=None, headers=()):
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    if sqlstate:
        body["sqlstate"] = sqlstate
    return status, json.dumps(body).encode("utf-8"), \
        [(b"content-type", b"application/problem+json")] + list(headers)


def _is_json(content_type):
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def request_fingerprint(body: bytes, content_type: str) -> str:
    """A JSON body's canonical hash; any other body's bytes' hash (an empty
    body included), as idem.request_hash(jsonb) / (bytea) answer."""
    if body and _is_json(content_type):
        return fingerprint(body)
    return fingerprint_bytes(body)


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
                 methods=("POST", "PATCH"), required: bool = True,
                 header: str = "Idempotency-Key", wait=None, lock_timeout=None,
                 on_error: str = "release"):
        """scope: a string, or a function of the ASGI scope; by default the
        request's path. wait: seconds (or a timedelta) to wait for a running
        twin with idem.claim_or_wait before answering 409. lock_timeout: the
        claim's lock (NULL: idem's settings). on_error: "release" or "fail"."""
        self.app = app
        self.connector_args = (dsn, connect, pool)
        _Connector(*self.connector_args)  # refuse a bad combination now
        self.scope = scope
        self.methods = {m.upper() for m in methods}
        self.required = required
        self.header = header.lower().encode("latin-1")
        self.header_name = header
        self.wait = wait
        self.lock_timeout = lock_timeout
        self.on_error = on_error

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"].upper() not in self.methods:
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])  # the last of repeated headers
        key = headers.get(self.header)
        if key is None:
            if not self.required:
                return await self.app(scope, receive, send)
            return await _send(send, *_problem(
                400, f"{self.header_name} is missing",
                f"the {self.header_name} is required: this operation is idempotent; send one "
                "unique key per operation and the same key with each retry of it",
                "P4001"))
        key = parse_key(key.decode("latin-1"))
        body, receive_again = await _read_body(receive)
        try:
            hash_ = request_fingerprint(body, headers.get(b"content-type", b"").decode("latin-1"))
        except FingerprintError as error:
            return await _send(send, *_problem(
                400, "The request body cannot be fingerprinted", str(error), error.sqlstate))
        idem_scope = self.scope(scope) if callable(self.scope) else (self.scope or scope["path"])
        async with _Connector(*self.connector_args) as conn:
            idem = AsyncIdem(conn, lock_timeout=self.lock_timeout, wait=self.wait,
                             on_error=self.on_error)
            try:
                claim = await idem.claim_only(idem_scope, key, request_hash=hash_)
            except psycopg.Error as error:
                answer = _problem_of(error, self.header_name)
                if answer is None:
                    raise
                return await _send(send, *answer)
            if claim.replayed:
                # A final failure recorded without an HTTP status (by code
                # that is not this middleware) replays as a 500.
                return await _send(send, claim.response_code or 500,
                                   _body_bytes(claim.response_text),
                                   _json_headers(claim.response_text) +
                                   [(b"idempotent-replayed", b"true")])
            if claim.kind == "processing_active":
                return await _send(send, *_problem(
                    409, "A request is outstanding for this Idempotency-Key",
                    f"a request with this {self.header_name} is in progress: retry after "
                    f"{claim.retry_after} s", None,
                    [(b"retry-after", str(claim.retry_after).encode())]))
            return await self._run(idem, claim, scope, receive_again, send)

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
                text = _stored_text(captured)
                if captured.status < 400:
                    code, text = await run.record(captured.status, text)
                else:
                    code, text = await run.record(captured.status, text,
                                                  failure_code=f"http_{captured.status}")
        except _Rollback:
            await idem.give_up(claim, RuntimeError(f"the handler answered {captured.status}"))
            return await _send(send, captured.status, captured.body, captured.headers)
        except psycopg.Error as error:
            await idem.give_up(claim, error)
            if error.sqlstate != "P4012":  # the handler's own error: 500
                raise
            return await _send(send, *_problem_of(error, self.header_name))
        except BaseException as error:
            await idem.give_up(claim, error)
            raise
        headers = [(k, v) for k, v in captured.headers
                   if k.lower() not in (b"content-type", b"content-length")]
        return await _send(send, code, _body_bytes(text), _json_headers(text) + headers)


def _problem_of(error, header_name):
    state = error.sqlstate
    message = error.diag.message_primary or str(error)
    if state == "P4002":
        return _problem(422, f"{header_name} is already used",
                        f"{message}: {error.diag.message_detail or ''}".rstrip(": "), state)
    if state == "P4012":
        return _problem(409, "A newer request took this key over", message, state)
    if state in _BAD_REQUEST:
        return _problem(400, "Bad request", message, state)
    return None


def _stored_text(captured):
    """The handler's body as the JSON text to store: JSON as it is, any
    other body as a JSON string, no body as NULL."""
    if not captured.body:
        return None
    content_type = dict((k.lower(), v) for k, v in captured.headers).get(b"content-type", b"")
    if _is_json(content_type.decode("latin-1")):
        return captured.body.decode("utf-8")
    return json.dumps(captured.body.decode("utf-8"), ensure_ascii=False)


def _body_bytes(text):
    return b"" if text is None else text.encode("utf-8")


def _json_headers(text):
    return [] if text is None else [(b"content-type", b"application/json")]


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
    headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
