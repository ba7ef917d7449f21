"""Waiting never starves the owner: 30 simultaneous requests of one key, a
300 ms handler, wait=5, through psycopg_pool's AsyncConnectionPool (at most
4 connections, and its defaults) and through a connection per request (dsn=).
A request takes one connection for its claim and, when it owns the key, its
handler, so a twin waiting inside idem.claim_or_wait holds no connection the
owner needs: all 30 get the owner's answer, none a 409. Prints each
burst's finish times relative to the owner's (the assertion is on counts,
never on times)."""
import asyncio
import os
import time

import pytest

from apps import make_app
from conftest import effects
from test_draft import client

REQUESTS = 30
REPLAYED = ("content-type", "location", "x-order-id")


async def _burst(app, key):
    async with client(app) as c:
        async def one():
            response = await c.post("/charges", json={"amount": 3, "sleep": 0.3},
                                    headers={"Idempotency-Key": key}, timeout=60)
            return response, time.monotonic()
        started = time.monotonic()
        return started, await asyncio.gather(*(one() for _ in range(REQUESTS)))


def _report(label, started, answers):
    owner = [t for r, t in answers if "idempotent-replayed" not in r.headers]
    owner_at = owner[0] if owner else started
    after = [t - owner_at for r, t in answers if "idempotent-replayed" in r.headers]
    line = (f"pool ({label}): {REQUESTS} requests of one key, 300 ms handler, wait 5 s:"
            f" {sum(1 for r, _ in answers if r.status_code == 409)} 409s,"
            f" owner finished at {1000 * (owner_at - started):.0f} ms,"
            f" the {len(after)} replays finished {1000 * min(after, default=0):+.0f}"
            f" to {1000 * max(after, default=0):+.0f} ms from the owner")
    print("# " + line)
    report = os.environ.get("IDEM_TEST_REPORT")
    if report:
        with open(report, "a") as out:
            out.write(line + "\n")


def _check(admin, unique, key, answers):
    statuses = [r.status_code for r, _ in answers]
    assert statuses.count(409) == 0 and statuses == [201] * REQUESTS, statuses
    first = [r for r, _ in answers if "idempotent-replayed" not in r.headers]
    assert len(first) == 1
    for response, _ in answers:
        assert response.content == first[0].content
        for name in REPLAYED:
            assert response.headers.get_list(name) == first[0].headers.get_list(name), name
    assert effects(admin, unique, key) == 1


@pytest.mark.parametrize("pool_options", [{"max_size": 4, "min_size": 1}, {}, None],
                         ids=["pool of 4", "pool defaults", "connection per request"])
def test_thirty_twins_on_a_small_pool_all_get_the_answer(app_dsn, admin, unique, pool_options):
    psycopg_pool = pytest.importorskip("psycopg_pool")
    key = "k1"

    async def go():
        if pool_options is None:
            return await _burst(make_app(app_dsn, scope=unique, wait=5), key)
        async with psycopg_pool.AsyncConnectionPool(app_dsn, **pool_options) as pool:
            return await _burst(make_app(None, pool=pool, scope=unique, wait=5), key)
    started, answers = asyncio.run(asyncio.wait_for(go(), 120))
    label = "connection per request" if pool_options is None else \
        f"AsyncConnectionPool({', '.join(f'{k}={v}' for k, v in pool_options.items()) or 'defaults: 4'})"
    _report(label, started, answers)
    _check(admin, unique, key, answers)
