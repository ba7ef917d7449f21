"""The claim/outcome context manager, without HTTP: sync and async."""
import asyncio

import psycopg
import pytest

from conftest import effects, key_status
from idem_client import AsyncIdem, Idem, InProgress

CHARGE = ("INSERT INTO shop.effects (scope, idempotency_key, amount) VALUES (%s, %s, %s)"
          " RETURNING id")


def charge(idem, scope, key, amount):
    with idem.claim(scope, key, {"amount": amount}) as run:
        if run.replayed:
            return run.response_code, run.response_text, True
        (charge_id,) = idem.connection.execute(CHARGE, [scope, key, amount]).fetchone()
        code, text = run.succeed(201, {"charge_id": charge_id, "amount": amount})
        return code, text, False


def test_sync_claim_succeed_replay(app_dsn, admin, unique):
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        idem = Idem(conn)
        first = charge(idem, unique, "k1", 5)
        again = charge(idem, unique, "k1", 5)
        with pytest.raises(psycopg.Error) as reused:
            charge(idem, unique, "k1", 6)
    assert first[0] == 201 and not first[2]
    assert again == (first[0], first[1], True)
    assert reused.value.sqlstate == "P4002"
    assert effects(admin, unique, "k1") == 1


def test_sync_exception_rolls_back_and_releases(app_dsn, admin, unique):
    with psycopg.connect(app_dsn) as conn:  # not autocommit: also works
        idem = Idem(conn)
        with pytest.raises(ZeroDivisionError):
            with idem.claim(unique, "k1", {"amount": 1}):
                conn.execute(CHARGE, [unique, "k1", 1])
                1 / 0
        assert key_status(admin, unique, "k1") is None
        assert charge(idem, unique, "k1", 2)[0] == 201  # any request, afresh
    assert effects(admin, unique, "k1") == 1


def test_sync_no_outcome_is_an_error(app_dsn, admin, unique):
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        with pytest.raises(RuntimeError):
            with Idem(conn).claim(unique, "k1", {"amount": 1}):
                pass
    assert key_status(admin, unique, "k1") is None


def test_sync_key_in_progress(app_dsn, admin, unique):
    with psycopg.connect(app_dsn, autocommit=True) as owner, \
            psycopg.connect(app_dsn, autocommit=True) as twin:
        with Idem(owner).claim(unique, "k1", {"amount": 1}) as run:
            with pytest.raises(InProgress) as busy:
                with Idem(twin).claim(unique, "k1", {"amount": 1}):
                    pass
            run.succeed(200, {"ok": True})
    assert busy.value.retry_after >= 1


def test_sync_needs_a_connection_outside_a_transaction(app_dsn):
    with psycopg.connect(app_dsn) as conn:
        conn.execute("SELECT 1")  # psycopg opened a transaction
        with pytest.raises(ValueError):
            with Idem(conn).claim("x", "k1", {}):
                pass


def test_async_claim_and_failure(app_dsn, admin, unique):
    async def go():
        async with await psycopg.AsyncConnection.connect(app_dsn, autocommit=True) as conn:
            idem = AsyncIdem(conn)
            async with idem.claim(unique, "k1", {"amount": 3}) as run:
                assert run.kind == "new_claim"
                await conn.execute(CHARGE, [unique, "k1", 3])
                first = await run.fail(402, {"error": "declined"}, failure_code="card_declined")
            async with idem.claim(unique, "k1", {"amount": 3}) as run:
                return first, run.replayed, run.response_code, run.response_text
    first, replayed, code, text = asyncio.run(go())
    assert replayed and (code, text) == first == (402, '{"error": "declined"}')
    assert key_status(admin, unique, "k1") == "failed_final"
    assert effects(admin, unique, "k1") == 1


def test_peek_reads_by_key_alone(app_dsn, admin, unique):
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        idem = Idem(conn)
        assert idem.peek(unique, "k1") is None
        with idem.claim(unique, "k1", {"amount": 1}) as run:
            with psycopg.connect(app_dsn, autocommit=True) as other:
                assert Idem(other).peek(unique, "k1").kind == "processing_active"
            run.succeed(201, {"ok": 1})
        seen = idem.peek(unique, "k1")
    assert seen.replayed and seen.fence is None
    assert (seen.response_code, seen.response_body) == (201, {"ok": 1})
