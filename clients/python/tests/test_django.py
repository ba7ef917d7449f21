"""The Django middleware (idem_client.django) behind Django's threaded WSGI
server (tests/serve_django.py, django_settings.py, django_views.py): the
draft's shared cases (clients/conformance/draft-cases.json) and the storm
(20 clients, 20 keys each, 3 copies of every request)."""
import pytest

from draft_table import CASES, run_case
from servers import Server
from storm import run_storm
from test_draft_table import count_effects

# Django's HttpResponse holds one value per header name.
MISSING = {"repeated-headers"}


def django_server(env=None):
    return Server("django_settings", env, script="serve_django.py")


@pytest.fixture(scope="module")
def server():
    with django_server() as running:
        yield running


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_draft_case(server, case):
    if MISSING & set(case.get("needs", [])):
        pytest.skip(f"Django cannot: {sorted(MISSING & set(case['needs']))}")
    failures = run_case(case, server.url, count_effects)
    assert not failures, "\n".join(failures)


def test_storm_every_effect_exactly_once(admin, unique):
    env = {"IDEM_APP_OPTIONS": "wait=10"}
    with django_server(env) as one, django_server(env) as two:
        run_storm("Django", [one, two], admin, unique, clients=20, keys=20 * 20)
