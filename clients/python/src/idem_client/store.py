"""Claim, run, record the outcome: idem's three calls as a context manager,
for code that is not an HTTP endpoint (a job, a consumer, a command line)
and as the core the ASGI middleware uses.

    with Idem(conn).claim("payments", key, request) as run:
        if run.replayed:
            return run.response_code, run.response_body
        conn.execute("INSERT INTO ...")       # in run's transaction
        run.succeed(201, {"id": 1})           # commits with the insert

The claim commits in a transaction of its own (a twin sees the key at
once); the block runs in a second transaction that commits with the
outcome, so an effect written through the same connection commits with it
or not at all. An exception rolls the block back and gives the key up:
idem.release (the next claim starts afresh, with any request) or, with
on_error="fail", idem.mark_failed as retryable (the next claim with the
same request takes it over). A key another caller holds raises InProgress."""
import json
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Optional

import psycopg
from psycopg.pq import TransactionStatus

from . import sql
from .jcs import fingerprint, fingerprint_value

OWNING = frozenset({"new_claim", "retryable_failure", "processing_stale"})
REPLAYED = frozenset({"replay_success", "final_failure"})


class InProgress(Exception):
    """The key is held by a request still running (processing_active)."""

    def __init__(self, scope, key, retry_after):
        super().__init__(f"a request with key {key!r} in scope {scope!r} is in progress; "
                         f"retry after {retry_after} s")
        self.scope, self.key, self.retry_after = scope, key, retry_after


@dataclass
class Claim:
    """What idem answered to a claim (the idem.claim row, the columns used)."""
    scope: str
    key: str
    kind: str
    fence: Optional[int]
    recovery_point: Optional[str]
    response_code: Optional[int]
    response_text: Optional[str]  # the stored response_body as jsonb text
    retry_after: Optional[int]
    backend_pid: Optional[int] = None  # the claim's session (pg_backend_pid())

    @property
    def owner(self):
        return self.kind in OWNING

    @property
    def replayed(self):
        return self.kind in REPLAYED

    @property
    def response_body(self):
        return None if self.response_text is None else json.loads(self.response_text)


def _interval(value):
    if value is None or isinstance(value, timedelta):
        return value
    return timedelta(seconds=value)


def hash_of(request):
    """The fingerprint of a request: JSON text (str, bytes) or Python values."""
    if isinstance(request, (str, bytes, bytearray)):
        return fingerprint(request)
    return fingerprint_value(request)


def _as_json_text(body):
    return None if body is None else json.dumps(body, ensure_ascii=False)


def _claim_statement(scope, key, hash_, lock_timeout, wait):
    params = {"scope": scope, "key": key, "hash": hash_,
              "lock_timeout": _interval(lock_timeout), "max_wait": _interval(wait)}
    return (sql.CLAIM if wait is None else sql.CLAIM_OR_WAIT), params


def _claim_of(scope, key, row):
    return Claim(scope, key, *row)


def _check_idle(conn):
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise ValueError("claim needs a connection outside a transaction: the claim commits "
                         "on its own, so that a twin sees the key at once")


class _RunBase:
    """An owned claim being worked on; the outcome goes in its transaction."""

    def __init__(self, conn, claim):
        self.connection = conn
        self.claim = claim
        self.answer = None  # (response_code, response_text) once recorded
        self.outcome_pid = None  # the backend the outcome ran on

    scope = property(lambda self: self.claim.scope)
    key = property(lambda self: self.claim.key)
    kind = property(lambda self: self.claim.kind)
    fence = property(lambda self: self.claim.fence)
    recovery_point = property(lambda self: self.claim.recovery_point)
    replayed = property(lambda self: self.claim.replayed)
    response_code = property(lambda self: self.claim.response_code)
    response_text = property(lambda self: self.claim.response_text)
    response_body = property(lambda self: self.claim.response_body)

    def _params(self, **more):
        return {"scope": self.claim.scope, "key": self.claim.key, "fence": self.claim.fence,
                **more}

    def _recorded(self, code, text, retryable, row):
        self.outcome_pid = row[-1]
        self.answer = (code, text) if retryable else tuple(row[:2])
        return self.answer

    def _outcome(self, code, text, retryable, failure_code, message):
        if retryable:
            return sql.FAIL_RETRYABLE, self._params(
                code=code, body=text, failure_code=failure_code, failure_message=message)
        if failure_code is None:
            return sql.SUCCEED, self._params(code=code, body=text)
        return sql.FAIL_FINAL, self._params(
            code=code, body=text, failure_code=failure_code, failure_message=message)


class Run(_RunBase):
    def set_recovery_point(self, point):
        self.connection.execute(sql.SET_RECOVERY_POINT, self._params(point=point))

    def succeed(self, code=200, body=None):
        """Records success; returns (code, text) exactly as replays carry it."""
        return self.record(code, _as_json_text(body))

    def fail(self, code=None, body=None, *, failure_code="failed", message=None,
             retryable=False):
        """Records a failure: a final one is replayed, a retryable one is
        taken over by the next claim with the same request."""
        return self.record(code, _as_json_text(body), failure_code=failure_code,
                           message=message, retryable=retryable)

    def record(self, code, text, *, failure_code=None, message=None, retryable=False):
        statement, params = self._outcome(code, text, retryable, failure_code, message)
        row = self.connection.execute(statement, params).fetchone()
        return self._recorded(code, text, retryable, row)


class AsyncRun(_RunBase):
    async def set_recovery_point(self, point):
        await self.connection.execute(sql.SET_RECOVERY_POINT, self._params(point=point))

    async def succeed(self, code=200, body=None):
        return await self.record(code, _as_json_text(body))

    async def fail(self, code=None, body=None, *, failure_code="failed", message=None,
                   retryable=False):
        return await self.record(code, _as_json_text(body), failure_code=failure_code,
                                 message=message, retryable=retryable)

    async def record(self, code, text, *, failure_code=None, message=None, retryable=False):
        statement, params = self._outcome(code, text, retryable, failure_code, message)
        cursor = await self.connection.execute(statement, params)
        row = await cursor.fetchone()
        return self._recorded(code, text, retryable, row)


class _IdemBase:
    def __init__(self, conn, *, lock_timeout=None, wait=None, on_error="release"):
        if on_error not in ("release", "fail"):
            raise ValueError('on_error is "release" or "fail"')
        self.connection = conn
        self.lock_timeout = lock_timeout
        self.wait = wait
        self.on_error = on_error

    def _give_up_statements(self, claim, error):
        """idem.release, or mark_failed (retryable); release first falls
        back to mark_failed where idem has no release (before 1.2) or the
        role may not call it."""
        params = {"scope": claim.scope, "key": claim.key, "fence": claim.fence}
        fail = (sql.FAIL_RETRYABLE, {**params, "code": None, "body": None,
                                     "failure_code": "exception",
                                     "failure_message": f"{type(error).__name__}: {error}"[:1000]})
        if self.on_error == "release":
            return [(sql.RELEASE, params), fail]
        return [fail]


_NO_OUTCOME = "the block ended without run.succeed() or run.fail(): the key is given up"


class Idem(_IdemBase):
    """The claim/outcome calls on a psycopg (sync) connection."""

    def claim_only(self, scope, key, request=None, *, request_hash=None, bind_session=False):
        """One claim, committed; returns a Claim (any kind). bind_session:
        idem.bind_lock_to_session on for this claim's transaction only."""
        _check_idle(self.connection)
        hash_ = request_hash or hash_of(request)
        statement, params = _claim_statement(scope, key, hash_, self.lock_timeout, self.wait)
        with self.connection.transaction():
            if bind_session:
                self.connection.execute(sql.BIND_LOCK_TO_SESSION)
            row = self.connection.execute(statement, params).fetchone()
        return _claim_of(scope, key, row)

    def peek(self, scope, key):
        """What a claim with the stored request would answer (idem.peek,
        1.2), without writing; None when the key has no live row."""
        row = self.connection.execute(sql.PEEK, {"scope": scope, "key": key}).fetchone()
        return None if row[0] is None else _claim_of(scope, key, row)

    @contextmanager
    def claim(self, scope, key, request=None, *, request_hash=None):
        claim = self.claim_only(scope, key, request, request_hash=request_hash)
        if claim.kind == "processing_active":
            raise InProgress(scope, key, claim.retry_after)
        run = Run(self.connection, claim)
        if not claim.owner:
            yield run
            return
        try:
            with self.connection.transaction():
                yield run
                if run.answer is None:
                    raise RuntimeError(_NO_OUTCOME)
        except BaseException as error:
            self.give_up(claim, error)
            raise

    def give_up(self, claim, error=None):
        """Releases the key (or marks it failed, retryable); quietly does
        nothing when that fails (a newer claim owns it, the connection is
        gone): the lock then runs out and the next claim takes it over."""
        for statement, params in self._give_up_statements(claim, error):
            try:
                with self.connection.transaction():
                    self.connection.execute(statement, params)
                return
            except (psycopg.errors.UndefinedFunction, psycopg.errors.InsufficientPrivilege):
                continue
            except psycopg.Error:
                return


class AsyncIdem(_IdemBase):
    """The same on a psycopg AsyncConnection."""

    async def claim_only(self, scope, key, request=None, *, request_hash=None,
                         bind_session=False):
        _check_idle(self.connection)
        hash_ = request_hash or hash_of(request)
        statement, params = _claim_statement(scope, key, hash_, self.lock_timeout, self.wait)
        async with self.connection.transaction():
            if bind_session:
                await self.connection.execute(sql.BIND_LOCK_TO_SESSION)
            cursor = await self.connection.execute(statement, params)
            row = await cursor.fetchone()
        return _claim_of(scope, key, row)

    async def peek(self, scope, key):
        cursor = await self.connection.execute(sql.PEEK, {"scope": scope, "key": key})
        row = await cursor.fetchone()
        return None if row[0] is None else _claim_of(scope, key, row)

    @asynccontextmanager
    async def claim(self, scope, key, request=None, *, request_hash=None):
        claim = await self.claim_only(scope, key, request, request_hash=request_hash)
        if claim.kind == "processing_active":
            raise InProgress(scope, key, claim.retry_after)
        run = AsyncRun(self.connection, claim)
        if not claim.owner:
            yield run
            return
        try:
            async with self.connection.transaction():
                yield run
                if run.answer is None:
                    raise RuntimeError(_NO_OUTCOME)
        except BaseException as error:
            await self.give_up(claim, error)
            raise

    async def give_up(self, claim, error=None):
        for statement, params in self._give_up_statements(claim, error):
            try:
                async with self.connection.transaction():
                    await self.connection.execute(statement, params)
                return
            except (psycopg.errors.UndefinedFunction, psycopg.errors.InsufficientPrivilege):
                continue
            except psycopg.Error:
                return
