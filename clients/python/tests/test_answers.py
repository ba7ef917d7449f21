"""The stored answer (idem_client.answer, the form every idem package
shares), the default scope and its principal, and the session binding's
check: units, then through the ASGI middleware."""
import asyncio
import base64
import json
import logging

import psycopg

from apps import make_app
from conftest import effects
from idem_client import Idem, answer
from idem_client.asgi import request_path
from idem_client.http_common import SessionBinding, compose_scope
from test_draft import client, post, problem

ALLOWED = answer.allow_list(["X-Order-Id"])


def run(coroutine):
    return asyncio.run(coroutine)


def test_envelope_keeps_text_bytes_and_allow_listed_headers_in_order():
    headers = [("Content-Type", "text/plain; charset=utf-8"), ("X-Request-Id", "r1"),
               ("Location", "/orders/17"), ("X-Order-Id", "7"), ("x-order-id", "8"),
               ("Content-Length", "12")]
    stored = answer.encode(headers, "created 17 é".encode(), ALLOWED)
    assert json.loads(stored) == {
        "idem_http": 1, "body": "created 17 é",
        "headers": [["content-type", "text/plain; charset=utf-8"], ["location", "/orders/17"],
                    ["x-order-id", "7"], ["x-order-id", "8"]]}
    assert answer.decode(stored) == (
        [("content-type", "text/plain; charset=utf-8"), ("location", "/orders/17"),
         ("x-order-id", "7"), ("x-order-id", "8")], "created 17 é".encode())


def test_envelope_base64_for_bytes_that_are_not_text():
    for body in (b"\xff\xfe\x00", b"a\x00b"):  # not UTF-8; UTF-8 with a NUL jsonb refuses
        stored = json.loads(answer.encode([], body, ALLOWED))
        assert "body" not in stored and base64.b64decode(stored["body_base64"]) == body
        assert answer.decode(json.dumps(stored)) == ([], body)
    assert json.loads(answer.encode([], b"", ALLOWED))["body"] == ""


def test_legacy_and_unknown_stored_bodies():
    assert answer.decode(None) == ([], b"")
    assert answer.decode('{"a": 1}') == ([("content-type", "application/json")], b'{"a": 1}')
    assert answer.decode('"text"') == ([("content-type", "application/json")], b'"text"')
    try:
        answer.decode('{"idem_http": 2, "body": ""}')
    except answer.NewerEnvelope as error:
        assert "newer version" in str(error)
    else:
        raise AssertionError("an unknown envelope version was read")


def test_request_path_is_the_path_as_sent():
    assert request_path({"raw_path": b"/a%20b/c", "path": "/a b/c", "root_path": ""}) == "/a%20b/c"
    # httpx's ASGI transport puts the query string into raw_path
    assert request_path({"raw_path": b"/orders?x=1", "path": "/orders"}) == "/orders"
    # mounted below a prefix the proxy strips: root_path first, once
    assert request_path({"raw_path": b"/orders", "root_path": "/api"}) == "/api/orders"
    assert request_path({"raw_path": b"/api/orders", "root_path": "/api"}) == "/api/orders"
    assert request_path({"path": "/é x", "root_path": ""}) == "/%C3%A9%20x"
    assert compose_scope("post", "/orders", None, None) == "POST /orders"
    assert compose_scope("POST", "/orders", "orders", "acct-1") == "acct-1 orders"
    assert compose_scope("POST", "/orders", None, "") == "POST /orders"


def test_session_binding_stops_on_another_backend(caplog):
    binding = SessionBinding(True)
    binding.check(10, 10)
    assert binding.enabled
    with caplog.at_level(logging.WARNING, logger="idem_client"):
        binding.check(10, 11)
        binding.check(12, 13)
    assert not binding.enabled
    assert len([r for r in caplog.records if "bind_lock_to_session" in r.getMessage()]) == 1


def _stored(app_dsn, scope, key, request, text, code=201):
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        with Idem(conn).claim(scope, key, request) as job:
            job.record(code, text)


def test_a_legacy_stored_body_still_replays(app_dsn, unique):
    """An answer stored by the package's earlier versions (or SQL code): its
    JSON text, as application/json."""
    _stored(app_dsn, unique, "k1", {"amount": 1}, json.dumps({"b": 1, "a": "é"}))

    async def go():
        async with client(make_app(app_dsn, scope=unique)) as c:
            return await post(c, "k1", {"amount": 1})
    replay = run(go())
    assert replay.status_code == 201 and replay.headers["idempotent-replayed"] == "true"
    assert replay.headers["content-type"] == "application/json"
    assert replay.content == '{"a": "é", "b": 1}'.encode()  # jsonb's text
    assert replay.headers["content-length"] == str(len(replay.content))


def test_an_answer_from_a_newer_package_is_a_500(app_dsn, unique):
    _stored(app_dsn, unique, "k1", {"amount": 1}, '{"idem_http": 2, "body": "x"}')

    async def go():
        async with client(make_app(app_dsn, scope=unique)) as c:
            return await post(c, "k1", {"amount": 1})
    answer_ = run(go())
    assert answer_.status_code == 500 and "newer version" in problem(answer_)["detail"]


def test_first_answer_and_replay_carry_the_same_headers(app_dsn, admin, unique):
    async def go():
        async with client(make_app(app_dsn, scope=unique)) as c:
            return [await post(c, "k1", {"amount": 4}) for _ in range(2)]
    first, replay = run(go())
    assert first.status_code == replay.status_code == 201
    assert "x-served-at" in first.headers and "x-served-at" not in replay.headers
    for name in ("content-type", "location", "x-order-id", "content-length"):
        assert replay.headers[name] == first.headers[name], name
    assert replay.content == first.content and effects(admin, unique, "k1") == 1


def test_default_scope_is_method_and_path_per_account(app_dsn, admin, unique):
    """The same key and body for two accounts: two effects, B not replayed."""
    key = f"{unique}-k"

    async def go():
        async with client(make_app(app_dsn)) as c:
            a = await post(c, key, {"amount": 5}, path="/accounts/A/charges")
            b = await post(c, key, {"amount": 5}, path="/accounts/B/charges")
            b_again = await post(c, key, {"amount": 5}, path="/accounts/B/charges")
            return a, b, b_again
    a, b, b_again = run(go())
    assert a.status_code == b.status_code == 201
    assert "idempotent-replayed" not in b.headers and b.content != a.content
    assert b_again.headers["idempotent-replayed"] == "true" and b_again.content == b.content
    scopes = [r[0] for r in admin.execute(
        "SELECT scope FROM idem.idempotency_request WHERE key = %s ORDER BY scope", [key])]
    assert scopes == ["POST /accounts/A/charges", "POST /accounts/B/charges"]
    assert admin.execute("SELECT count(*) FROM shop.effects WHERE idempotency_key = %s",
                         [key]).fetchone()[0] == 2


def test_principal_prefixes_the_scope(app_dsn, admin, unique):
    key = f"{unique}-k"

    def tenant(scope):
        return dict(scope["headers"]).get(b"x-tenant", b"").decode() or None

    async def go():
        async with client(make_app(app_dsn, principal=tenant)) as c:
            one = await c.post("/charges", json={"amount": 6},
                               headers={"Idempotency-Key": key, "X-Tenant": "t1"})
            two = await c.post("/charges", json={"amount": 6},
                               headers={"Idempotency-Key": key, "X-Tenant": "t2"})
            return one, two
    one, two = run(go())
    assert one.status_code == two.status_code == 201 and "idempotent-replayed" not in two.headers
    scopes = [r[0] for r in admin.execute(
        "SELECT scope FROM idem.idempotency_request WHERE key = %s ORDER BY scope", [key])]
    assert scopes == ["t1 POST /charges", "t2 POST /charges"]


def test_a_scope_idem_refuses_is_a_400(app_dsn, unique):
    async def go():
        async with client(make_app(app_dsn, principal=lambda scope: "t" * 300)) as c:
            return await post(c, f"{unique}-k", {"amount": 1})
    refused = run(go())
    assert refused.status_code == 400 and problem(refused)["sqlstate"] in ("P4000", "P4004")


def test_where_idem_cannot_bind_the_middleware_claims_without(app_dsn, admin, unique, caplog):
    """55000 for the binding alone (the C++ engine without its preload, the
    portable engine's owner not seeing pg_stat_activity): one warning, the
    claim again without binding, and no binding from then on."""
    from idem_client import sql

    refused = []

    async def connect():
        conn = await psycopg.AsyncConnection.connect(app_dsn, autocommit=True)
        execute = conn.execute

        async def refusing(query, *args, **kwargs):
            if query == sql.BIND_LOCK_TO_SESSION:
                refused.append(query)
                raise psycopg.errors.ObjectNotInPrerequisiteState("cannot bind here")
            return await execute(query, *args, **kwargs)
        conn.execute = refusing
        return conn

    app = make_app(None, connect=connect, scope=unique)

    async def go():
        async with client(app) as c:
            return [await post(c, key, {"amount": 2}) for key in ("k1", "k2", "k1")]
    with caplog.at_level(logging.WARNING, logger="idem_client"):
        first, second, replay = run(go())
    assert first.status_code == second.status_code == 201
    assert replay.headers["idempotent-replayed"] == "true" and replay.content == first.content
    assert len(refused) == 1  # tried once, then never again
    assert len([r for r in caplog.records if "cannot bind" in r.getMessage()]) == 1
    assert effects(admin, unique) == 2
