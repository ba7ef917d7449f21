"""The tests run against a real server: IDEM_TEST_DSN connects as the
application role (tests/setup.sql's idem_py_app), IDEM_TEST_ADMIN_DSN as the
database's owner (to count effects and look at keys)."""
import os
import time
import uuid

import psycopg
import pytest

APP_DSN = os.environ.get("IDEM_TEST_DSN", "")
ADMIN_DSN = os.environ.get("IDEM_TEST_ADMIN_DSN", APP_DSN)


def pytest_collection_modifyitems(config, items):
    if not APP_DSN:
        skip = pytest.mark.skip(reason="IDEM_TEST_DSN is not set")
        for item in items:
            item.add_marker(skip)


@pytest.fixture
def app_dsn():
    return APP_DSN


@pytest.fixture
def admin():
    with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
        yield conn


@pytest.fixture
def unique():
    """A prefix no other test (or earlier run) uses for its keys."""
    return uuid.uuid4().hex[:12]


def wait_until(predicate, what, seconds=60):
    """Polls predicate until it is true; fails after the deadline."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)  # a poll interval, bounded by the deadline


def key_status(admin, scope, key):
    row = admin.execute("SELECT status::text FROM idem.idempotency_request"
                        " WHERE scope = %s AND key = %s", [scope, key]).fetchone()
    return row and row[0]


def effects(admin, scope, key=None):
    if key is None:
        return admin.execute("SELECT count(*) FROM shop.effects WHERE scope = %s",
                             [scope]).fetchone()[0]
    return admin.execute("SELECT count(*) FROM shop.effects WHERE scope = %s"
                         " AND idempotency_key = %s", [scope, key]).fetchone()[0]
