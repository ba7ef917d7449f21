"""A server killed (SIGKILL) while its handler runs: the claim bound the key
to its session (bind_lock_to_session, the default), so the key is free as
soon as that session ends and the client's retry takes it over at once,
though the lock (600 s here) runs on. Without the binding the same retry
gets 409 for the whole lock."""
import threading

import httpx
import psycopg

from conftest import effects, key_status, wait_until
from servers import Server


def _sessions(admin, name):
    return admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                         [name]).fetchone()[0]


def _charged_and_holding(admin, name):
    """The handler's transaction is open and its charge written (its last
    statement), the claim long committed."""
    return admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        " AND state = 'idle in transaction' AND query LIKE 'INSERT INTO shop.effects%%'",
        [name]).fetchone()[0] == 1


def _kill_mid_handler(app_dsn, admin, unique, options):
    """Starts a server, sends it a request whose handler charges and then
    never ends, kills the server once the handler's transaction is open,
    and waits for its session to end. Returns the request's body."""
    name = f"crash-{unique}"
    env = {"IDEM_TEST_DSN": psycopg.conninfo.make_conninfo(app_dsn, application_name=name),
           "IDEM_APP_SCOPE": unique, "IDEM_APP_OPTIONS": options}
    body = {"amount": 14, "hold": "never set in that process"}
    with Server("apps:app_from_environment", env) as crashing:
        def send():
            try:
                httpx.post(crashing.url + "/charges", json=body,
                           headers={"Idempotency-Key": "k1"}, timeout=60)
            except httpx.TransportError:
                pass  # the server died: expected
        sender = threading.Thread(target=send)
        sender.start()
        wait_until(lambda: _charged_and_holding(admin, name),
                   "the handler charging in its open transaction")
        crashing.process.kill()
        crashing.process.wait(30)
        sender.join(60)
    wait_until(lambda: _sessions(admin, name) == 0, "the killed server's session to end")
    assert key_status(admin, unique, "k1") == "processing"  # its lock runs on
    return body


def test_a_killed_server_frees_its_key_at_once(app_dsn, admin, unique):
    body = _kill_mid_handler(app_dsn, admin, unique, "lock_timeout=600")
    env = {"IDEM_APP_SCOPE": unique, "IDEM_APP_OPTIONS": "lock_timeout=600"}
    with Server("apps:app_from_environment", env) as other:
        retry = httpx.post(other.url + "/charges", json=body,
                           headers={"Idempotency-Key": "k1"}, timeout=60)
        replay = httpx.post(other.url + "/charges", json=body,
                            headers={"Idempotency-Key": "k1"}, timeout=60)
    assert retry.status_code == 201 and retry.json()["taken_as"] == "processing_stale"
    assert replay.headers["idempotent-replayed"] == "true" and replay.content == retry.content
    assert effects(admin, unique, "k1") == 1  # the killed handler's charge rolled back


def test_without_the_binding_the_key_waits_for_its_lock(app_dsn, admin, unique):
    options = "lock_timeout=600,bind_lock_to_session=false"
    body = _kill_mid_handler(app_dsn, admin, unique, options)
    with Server("apps:app_from_environment",
                {"IDEM_APP_SCOPE": unique, "IDEM_APP_OPTIONS": options}) as other:
        retry = httpx.post(other.url + "/charges", json=body,
                           headers={"Idempotency-Key": "k1"}, timeout=60)
    assert retry.status_code == 409 and int(retry.headers["retry-after"]) >= 1
    assert effects(admin, unique, "k1") == 0
