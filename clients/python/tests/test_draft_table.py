"""clients/conformance/draft-cases.json, the IETF draft's cases every idem
HTTP middleware runs, against the ASGI middleware in FastAPI under uvicorn
(tests/table_app.py answers what each step asks)."""
import pytest

from conftest import ADMIN_DSN
from draft_table import CASES, run_case
from servers import Server


def count_effects(run):
    import psycopg
    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        return admin.execute("SELECT count(*) FROM shop.effects WHERE idempotency_key LIKE %s",
                             [f"%{run}%"]).fetchone()[0]


@pytest.fixture(scope="module")
def server():
    with Server("table_app:app_from_environment") as running:
        yield running


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_draft_case(server, case):
    failures = run_case(case, server.url, count_effects)
    assert not failures, "\n".join(failures)
