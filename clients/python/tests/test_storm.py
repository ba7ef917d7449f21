"""The storm against the ASGI middleware: 32 concurrent clients send 500
keys, each 3 times, to two uvicorn servers (tests/storm.py says what it
asserts: one effect per key, byte-identical replays with their headers)."""
import os

from servers import Server
from storm import run_storm

CLIENTS = int(os.environ.get("IDEM_STORM_CLIENTS", "32"))
KEYS = int(os.environ.get("IDEM_STORM_KEYS", "500"))


def test_storm_every_effect_exactly_once(admin, unique):
    env = {"IDEM_APP_SCOPE": unique, "IDEM_APP_OPTIONS": "wait=10"}
    with Server("apps:app_from_environment", env) as one, \
            Server("apps:app_from_environment", env) as two:
        run_storm("FastAPI", [one, two], admin, unique, CLIENTS, KEYS)
