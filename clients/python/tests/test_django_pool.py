"""The Django middleware in this process, on Django's RequestFactory: its
connections from a psycopg_pool ConnectionPool (IDEM["POOL"]), PRINCIPAL
given as a dotted path, and the view's writes on request.idem.connection."""
import json

import pytest

from conftest import effects

django = pytest.importorskip("django")
psycopg_pool = pytest.importorskip("psycopg_pool")


def tenant_of(request):
    """PRINCIPAL, by its dotted path test_django_pool.tenant_of."""
    return request.headers.get("x-tenant")


@pytest.fixture(scope="module")
def factory():
    from django.conf import settings
    if not settings.configured:
        settings.configure(DEBUG=False, ALLOWED_HOSTS=["*"], DATABASES={}, INSTALLED_APPS=[])
        django.setup()
    from django.test import RequestFactory
    return RequestFactory()


def view(request):
    from django.http import JsonResponse
    idem = request.idem
    charge = idem.connection.execute(
        "INSERT INTO shop.effects (scope, idempotency_key, amount, served_by)"
        " VALUES (%s, %s, 1, %s) RETURNING id", [idem.scope, idem.key, idem.kind]).fetchone()[0]
    return JsonResponse({"charge": charge}, status=201, headers={"Location": f"/c/{charge}"})


def test_connections_from_a_pool_and_a_principal(app_dsn, admin, unique, factory):
    from idem_client.django import IdempotencyMiddleware

    with psycopg_pool.ConnectionPool(app_dsn, min_size=1, max_size=2) as pool:
        middleware = IdempotencyMiddleware(view, POOL=pool, PRINCIPAL="test_django_pool.tenant_of")

        def send(tenant):
            return middleware(factory.post("/charges", data=json.dumps({"amount": 1}),
                                           content_type="application/json",
                                           HTTP_IDEMPOTENCY_KEY=f"{unique}-k",
                                           HTTP_X_TENANT=tenant))
        first, again, other = send("t1"), send("t1"), send("t2")
        lent = pool.get_stats().get("requests_num")
    assert first.status_code == again.status_code == other.status_code == 201
    assert "Idempotent-Replayed" not in first and again["Idempotent-Replayed"] == "true"
    assert again.content == first.content and again["Location"] == first["Location"]
    assert again["Content-Type"] == "application/json"
    assert "Idempotent-Replayed" not in other and other.content != first.content
    assert lent == 3  # one connection per request, from the pool
    assert effects(admin, "t1 POST /charges", f"{unique}-k") == 1
    assert effects(admin, "t2 POST /charges", f"{unique}-k") == 1
