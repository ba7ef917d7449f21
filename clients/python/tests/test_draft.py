"""The IETF draft's cases, against a real server: missing key, first
request, replay, mismatch, a concurrent twin (409, and waiting with
claim_or_wait), a crash between charge and outcome taken over, a retry after
the lock expired, and a handler error that releases the key."""
import asyncio
import time

import httpx
import pytest

from apps import HELD, HOLDS, make_app
from conftest import effects, key_status
from servers import Server

SCOPE = "charges"


def run(coroutine):
    return asyncio.run(coroutine)


def client(app):
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://test")


async def post(c, key, body, path="/charges", content=None):
    headers = {} if key is None else {"Idempotency-Key": key}
    if content is None:
        return await c.post(path, json=body, headers=headers)
    return await c.post(path, content=content, headers={**headers,
                                                         "Content-Type": "application/json"})


def problem(response):
    assert response.headers["content-type"] == "application/problem+json"
    return response.json()


def test_missing_key(app_dsn, admin, unique):
    async def go():
        async with client(make_app(app_dsn, scope=unique)) as c:
            return await post(c, None, {"amount": 1})
    response = run(go())
    assert response.status_code == 400
    body = problem(response)
    assert body["sqlstate"] == "P4001" and "Idempotency-Key is required" in body["detail"]
    assert effects(admin, unique) == 0


def test_key_not_required_passes_through(app_dsn, admin, unique):
    async def go():
        async with client(make_app(app_dsn, scope=unique, required=False)) as c:
            return await c.post("/plain", content=b"x")
    response = run(go())
    assert response.status_code == 200 and response.text == "done: x"


def test_first_request_then_replay(app_dsn, admin, unique):
    async def go():
        async with client(make_app(app_dsn, scope=unique)) as c:
            first = await post(c, "k1", {"amount": 10})
            again = await post(c, "k1", {"amount": 10})
            # The same document written otherwise is the same request.
            reordered = await post(c, "k1", None, content=b'{ "amount" : 1.0e1 }')
            return first, again, reordered
    first, again, reordered = run(go())
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    assert first.json()["amount"] == 10 and first.json()["taken_as"] == "new_claim"
    for replay in (again, reordered):
        assert replay.status_code == 201
        assert replay.headers["idempotent-replayed"] == "true"
        assert replay.content == first.content  # byte-identical
    assert effects(admin, unique, "k1") == 1


def test_mismatch_is_422(app_dsn, admin, unique):
    async def go():
        async with client(make_app(app_dsn, scope=unique)) as c:
            first = await post(c, "k1", {"amount": 10})
            other = await post(c, "k1", {"amount": 11})
            return first, other
    first, other = run(go())
    assert first.status_code == 201
    assert other.status_code == 422
    body = problem(other)
    assert body["sqlstate"] == "P4002" and body["status"] == 422
    assert effects(admin, unique, "k1") == 1


def test_bad_bodies_are_400(app_dsn, admin, unique):
    async def go():
        async with client(make_app(app_dsn, scope=unique)) as c:
            not_json = await post(c, "k1", None, content=b"{not json")
            inexact = await post(c, "k2", None, content=b'{"amount": 12345678901234567890}')
            return not_json, inexact
    not_json, inexact = run(go())
    assert not_json.status_code == 400 and problem(not_json)["sqlstate"] == "22P02"
    assert inexact.status_code == 400 and problem(inexact)["sqlstate"] == "P4005"
    assert effects(admin, unique) == 0


def test_final_failure_is_replayed(app_dsn, admin, unique):
    async def go():
        async with client(make_app(app_dsn, scope=unique)) as c:
            return [await post(c, "k1", {"amount": 5, "fail": 402}) for _ in range(2)]
    first, again = run(go())
    assert first.status_code == 402 and again.status_code == 402
    assert again.headers["idempotent-replayed"] == "true" and again.content == first.content
    assert key_status(admin, unique, "k1") == "failed_final"


def test_concurrent_twin_gets_409_then_the_replay(app_dsn, admin, unique):
    hold = f"{unique}-twin"

    async def go():
        async with client(make_app(app_dsn, scope=unique)) as c:
            original = asyncio.create_task(post(c, "k1", {"amount": 7, "hold": hold}))
            while hold not in HELD:  # the original owns the key and charged
                await asyncio.sleep(0.01)  # polling; the test's timeout bounds it
            twin = await post(c, "k1", {"amount": 7, "hold": hold})
            HOLDS[hold].set()
            first = await original
            replay = await post(c, "k1", {"amount": 7, "hold": hold})
            return twin, first, replay
    twin, first, replay = run(asyncio.wait_for(go(), 60))
    assert twin.status_code == 409
    assert twin.headers["retry-after"].isdigit() and int(twin.headers["retry-after"]) >= 1
    assert problem(twin)["status"] == 409
    assert first.status_code == 201
    assert replay.headers["idempotent-replayed"] == "true" and replay.content == first.content
    assert effects(admin, unique, "k1") == 1


def test_twin_waits_with_claim_or_wait(app_dsn, admin, unique):
    hold = f"{unique}-wait"

    def twin_waiting():
        return admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
            " AND query LIKE '%%idem.claim_or_wait(%%' AND pid <> pg_backend_pid()").fetchone()[0] > 0

    async def go():
        async with client(make_app(app_dsn, scope=unique, wait=30)) as c:
            original = asyncio.create_task(post(c, "k1", {"amount": 8, "hold": hold}))
            while hold not in HELD:
                await asyncio.sleep(0.01)  # polling; the test's timeout bounds it
            twin = asyncio.create_task(post(c, "k1", {"amount": 8, "hold": hold}))
            while not twin_waiting():  # the twin waits inside idem.claim_or_wait
                await asyncio.sleep(0.01)  # polling; the test's timeout bounds it
            HOLDS[hold].set()
            return await original, await twin
    first, twin = run(asyncio.wait_for(go(), 60))
    assert first.status_code == 201
    assert twin.status_code == 201 and twin.content == first.content
    assert twin.headers["idempotent-replayed"] == "true"
    assert effects(admin, unique, "k1") == 1


def test_handler_error_releases_the_key(app_dsn, admin, unique):
    async def go():
        async with client(make_app(app_dsn, scope=unique)) as c:
            failed = await post(c, "k1", {"amount": 3, "fail": "raise"})
            status_after = key_status(admin, unique, "k1")
            corrected = await post(c, "k1", {"amount": 3})
            return failed, status_after, corrected
    failed, status_after, corrected = run(go())
    assert failed.status_code == 500
    assert status_after is None  # released: the key is forgotten
    assert corrected.status_code == 201 and corrected.json()["taken_as"] == "new_claim"
    assert effects(admin, unique, "k1") == 1  # the failed attempt's charge rolled back


def test_handler_error_with_on_error_fail(app_dsn, admin, unique):
    async def go():
        async with client(make_app(app_dsn, scope=unique, on_error="fail")) as c:
            failed = await post(c, "k1", {"amount": 3, "fail": 503})
            status_after = key_status(admin, unique, "k1")
            other = await post(c, "k1", {"amount": 4})
            retried = await post(c, "k1", {"amount": 3, "fail": None})
            same = await post(c, "k1", {"amount": 3, "fail": 503})
            return failed, status_after, other, retried, same
    failed, status_after, other, retried, same = run(go())
    assert failed.status_code == 503
    assert status_after == "failed_retryable"
    assert other.status_code == 422  # still bound to the first request
    assert retried.status_code == 422  # a different body again ("fail": null)
    assert same.status_code == 503  # taken over, and it failed again
    assert effects(admin, unique, "k1") == 0


def test_retry_after_the_lock_expired(app_dsn, admin, unique):
    hold = f"{unique}-slow"
    body = {"amount": 9, "hold": hold}

    async def go():
        async with client(make_app(app_dsn, scope=unique, lock_timeout=1)) as c:
            slow = asyncio.create_task(post(c, "k1", body))
            while hold not in HELD:
                await asyncio.sleep(0.01)  # polling; the test's timeout bounds it
            conflicts = []
            while True:  # the client retries until the slow owner's lock ran out
                answer = await post(c, "k1", body)
                if answer.status_code != 409:
                    break
                conflicts.append(answer.headers["retry-after"])
                await asyncio.sleep(0.05)  # a retry interval, bounded by wait_for
            HOLDS[hold].set()  # the slow original goes on, too late
            return await slow, answer, conflicts
    slow, takeover, conflicts = run(asyncio.wait_for(go(), 60))
    assert conflicts and all(value.isdigit() for value in conflicts)
    assert takeover.status_code == 201 and takeover.json()["taken_as"] == "processing_stale"
    # The original lost its key: its outcome is refused (P4012), its charge undone.
    assert slow.status_code == 409 and problem(slow)["sqlstate"] == "P4012"
    assert effects(admin, unique, "k1") == 1
    assert key_status(admin, unique, "k1") == "succeeded"


def _send_until_answered(url, key, body, deadline=60):
    limit = time.monotonic() + deadline
    while True:
        answer = httpx.post(url, json=body, headers={"Idempotency-Key": key}, timeout=30)
        if answer.status_code != 409:
            return answer
        assert time.monotonic() < limit, "no answer before the deadline"
        time.sleep(0.05)  # a retry interval, bounded by the deadline


def test_crash_between_charge_and_outcome_is_taken_over(app_dsn, admin, unique):
    env = {"IDEM_APP_SCOPE": unique, "IDEM_APP_OPTIONS": "lock_timeout=1"}
    body = {"amount": 12, "exit": True}
    with Server("apps:app_from_environment", env) as crashing, \
            Server("apps:app_from_environment", env) as other:
        with pytest.raises(httpx.TransportError):
            httpx.post(crashing.url + "/charges", json=body,
                       headers={"Idempotency-Key": "k1"}, timeout=30)
        assert crashing.process.wait(30) == 3  # it ended between charge and outcome
        assert effects(admin, unique, "k1") == 0  # the charge died with its transaction
        # The client retries at the other server: 409 while the dead owner's
        # lock lasts, then a takeover that charges once.
        answer = _send_until_answered(other.url + "/charges", "k1", body)
        replay = httpx.post(other.url + "/charges", json=body,
                            headers={"Idempotency-Key": "k1"}, timeout=30)
    assert answer.status_code == 201 and answer.json()["taken_as"] == "processing_stale"
    assert replay.status_code == 201 and replay.content == answer.content
    assert effects(admin, unique, "k1") == 1


def test_connections_from_a_pool(app_dsn, admin, unique):
    """pool=: anything with an async connection() context manager, as
    psycopg_pool's AsyncConnectionPool has."""
    import contextlib

    import psycopg

    class Pool:
        def __init__(self):
            self.lent = 0

        @contextlib.asynccontextmanager
        async def connection(self):
            self.lent += 1
            async with await psycopg.AsyncConnection.connect(app_dsn) as conn:
                yield conn

    pool = Pool()

    async def go():
        async with client(make_app(None, pool=pool, scope=unique)) as c:
            return [await post(c, "k1", {"amount": 2}) for _ in range(2)]
    first, again = run(go())
    assert first.status_code == 201 and again.content == first.content
    assert again.headers["idempotent-replayed"] == "true" and pool.lent == 2
    assert effects(admin, unique, "k1") == 1


def test_a_handler_answer_that_is_not_valid_json_replays_as_its_bytes(app_dsn, admin, unique):
    """The stored answer keeps bytes, not a JSON document: what the handler
    labels application/json but is not JSON replays as it was sent."""
    from fastapi.responses import Response

    app = make_app(app_dsn, scope=unique)

    @app.post("/broken")
    async def broken():
        return Response(b"{not json", media_type="application/json")

    async def go():
        async with client(app) as c:
            return [await post(c, "k1", {}, path="/broken") for _ in range(2)]
    first, again = run(go())
    assert first.status_code == again.status_code == 200 and first.content == b"{not json"
    assert again.headers["idempotent-replayed"] == "true" and again.content == first.content
    assert again.headers["content-type"] == first.headers["content-type"] == "application/json"
    assert key_status(admin, unique, "k1") == "succeeded"


def test_a_key_recorded_without_http_replays(app_dsn, admin, unique):
    """A key the context manager finished (its request given as Python
    values: the same fingerprint as the JSON body), with a final failure
    that has no HTTP status: replayed as a 500."""
    import psycopg

    from idem_client import Idem

    with psycopg.connect(app_dsn, autocommit=True) as conn:
        with Idem(conn).claim(unique, "k1", {"amount": 1, "note": "é"}) as job:
            job.fail(failure_code="declined")

    async def go():
        async with client(make_app(app_dsn, scope=unique)) as c:
            return await post(c, "k1", {"note": "é", "amount": 1.0})
    answer = run(go())
    assert answer.status_code == 500 and answer.content == b""
    assert answer.headers["idempotent-replayed"] == "true"
