"""The FastAPI application the tests drive: POST /charges writes one effect
(a row in shop.effects) through the request's connection, so the effect
commits with idem's outcome. The body steers it: {"amount": n} charges;
"fail": "raise" raises after the charge, "fail": 503 answers 503 after it,
"fail": 402 answers a 402 (a final failure), "exit": true ends the process
between charge and outcome (a crash), "hold": name waits for the test to
set HOLDS[name]; both only for a new claim, so that a takeover goes on;
"sleep": seconds makes the handler take that long. A charge answers 201 with
Location and X-Order-Id (replayed: replay_headers) and X-Served-At (not
replayed: it is not in the allow-list)."""
import asyncio
import os
import random
import time

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from idem_client import IdempotencyMiddleware

HOLDS = {}
HELD = set()


def make_app(dsn, **options):
    app = FastAPI()
    options.setdefault("replay_headers", ["X-Order-Id"])
    app.add_middleware(IdempotencyMiddleware, dsn=dsn, **options)

    @app.post("/charges", status_code=201)
    async def charge(request: Request):
        body = await request.json()
        idem = request.state.idem
        cursor = await idem.connection.execute(
            "INSERT INTO shop.effects (scope, idempotency_key, amount, served_by)"
            " VALUES (%s, %s, %s, %s) RETURNING id",
            [idem.scope, idem.key, body["amount"], idem.kind])
        (charge_id,) = await cursor.fetchone()
        # A hold and a crash happen to the first owner only: a takeover runs.
        if body.get("hold") and idem.kind == "new_claim":
            HELD.add(body["hold"])
            await HOLDS.setdefault(body["hold"], asyncio.Event()).wait()
        if body.get("exit") and idem.kind == "new_claim":
            os._exit(3)
        fail = body.get("fail")
        if fail == "raise":
            raise RuntimeError("the handler failed after its charge")
        if fail == "random":  # the storm: a failure one time in five
            roll = random.random()
            if roll < 0.1:
                raise RuntimeError("a random failure after the charge")
            if roll < 0.2:
                return JSONResponse({"error": "try again"}, status_code=503)
        if isinstance(fail, int):
            return JSONResponse({"error": "declined", "code": fail}, status_code=fail)
        if body.get("sleep"):
            await asyncio.sleep(body["sleep"])
        return JSONResponse(
            {"charge_id": charge_id, "amount": body["amount"], "taken_as": idem.kind},
            status_code=201,
            headers={"Location": f"/charges/{charge_id}", "X-Order-Id": str(charge_id),
                     "X-Served-At": str(time.monotonic())})

    @app.post("/accounts/{account}/charges", status_code=201)
    async def account_charge(request: Request, account: str):
        return await charge(request)

    @app.post("/plain")
    async def plain(request: Request):
        from fastapi.responses import PlainTextResponse
        return PlainTextResponse("done: " + (await request.body()).decode())

    return app


def app_from_environment():
    """For tests/serve.py: IDEM_TEST_DSN, and IDEM_APP_OPTIONS as
    "wait=5,lock_timeout=1,bind_lock_to_session=false" (seconds)."""
    options = {}
    for item in filter(None, os.environ.get("IDEM_APP_OPTIONS", "").split(",")):
        name, value = item.split("=", 1)
        if name in ("wait", "lock_timeout"):
            options[name] = float(value)
        elif name == "bind_lock_to_session":
            options[name] = value == "true"
        else:
            options[name] = value
    return make_app(os.environ["IDEM_TEST_DSN"], scope=os.environ.get("IDEM_APP_SCOPE"),
                    **options)
