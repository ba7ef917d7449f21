"""The Idempotency-Key header read as every idem package reads it: the cases
of clients/conformance/idempotency-key.json (the Node package's tests read
the same file), then through the middleware: "k" and k are one key."""
import asyncio
import json
import os

import httpx
import pytest

from idem_client import parse_key
from apps import make_app
from conftest import effects

VECTORS = os.environ.get("IDEM_KEY_VECTORS")


def cases():
    assert VECTORS, "IDEM_KEY_VECTORS names clients/conformance/idempotency-key.json"
    with open(VECTORS, encoding="utf-8") as f:
        return json.load(f)["cases"]


def test_the_shared_cases_are_there():
    assert len(cases()) >= 10


@pytest.mark.parametrize("case", cases() if VECTORS else [], ids=lambda c: c["name"])
def test_parse_key(case):
    assert parse_key(case["header"]) == case["key"]


def test_quoted_and_bare_are_one_key(app_dsn, admin, unique):
    async def go():
        transport = httpx.ASGITransport(app=make_app(app_dsn, scope=unique),
                                        raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            bare = await c.post("/charges", json={"amount": 5}, headers={"Idempotency-Key": "k-7"})
            quoted = await c.post("/charges", json={"amount": 5},
                                  headers={"Idempotency-Key": ' "k-7" '})
            return bare, quoted
    bare, quoted = asyncio.run(go())
    assert bare.status_code == 201 and "idempotent-replayed" not in bare.headers
    assert quoted.status_code == 201 and quoted.headers["idempotent-replayed"] == "true"
    assert quoted.content == bare.content
    assert effects(admin, unique, "k-7") == 1
