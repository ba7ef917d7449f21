"""The storm: 32 concurrent clients send 500 keys, each 3 times, in a random
order, to two servers, whose handler fails at random after its charge (an
exception, or a 503); a client retries a 5xx and a 409 until it gets its
201. Every effect must happen exactly once: one charge per key, one first
answer per key, every other answer a byte-identical replay."""
import collections
import concurrent.futures
import os
import random
import threading
import time

import httpx

from servers import Server

CLIENTS = int(os.environ.get("IDEM_STORM_CLIENTS", "32"))
KEYS = int(os.environ.get("IDEM_STORM_KEYS", "500"))
COPIES = 3


def test_storm_every_effect_exactly_once(admin, unique):
    env = {"IDEM_APP_SCOPE": unique, "IDEM_APP_OPTIONS": "wait=10"}
    counts = collections.Counter()
    lock = threading.Lock()
    local = threading.local()
    deadline = time.monotonic() + 600

    def send(servers, key, body):
        if not hasattr(local, "client"):
            local.client = httpx.Client(timeout=60)
        while True:
            url = random.choice(servers).url + "/charges"
            try:
                answer = local.client.post(url, json=body, headers={"Idempotency-Key": key})
                status = answer.status_code
            except httpx.TransportError:
                # The server dropped the connection (uvicorn closes it after
                # an exception in the application): whether the request ran
                # is unknown, which is what the key is for. Send it again.
                status = "dropped"
            with lock:
                counts["requests"] += 1
                counts[status] += 1
            if status == "dropped":
                continue
            if answer.status_code == 201:
                return key, answer.headers.get("idempotent-replayed"), answer.content
            assert answer.status_code in (409, 500, 503), answer.text
            assert time.monotonic() < deadline, "the storm did not end before its deadline"
            if answer.status_code == 409:
                time.sleep(0.05)  # a retry interval, bounded by the deadline

    bodies = {f"k{i}": {"amount": i, "fail": "random"} for i in range(KEYS)}
    jobs = [key for key in bodies for _ in range(COPIES)]
    random.shuffle(jobs)
    with Server("apps:app_from_environment", env) as one, \
            Server("apps:app_from_environment", env) as two:
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
            answers = list(pool.map(lambda key: send([one, two], key, bodies[key]), jobs))
        took = time.monotonic() - started

    by_key = collections.defaultdict(list)
    for key, replayed, content in answers:
        by_key[key].append((replayed, content))
    per_key = dict(admin.execute(
        "SELECT idempotency_key, count(*) FROM shop.effects WHERE scope = %s GROUP BY 1",
        [unique]).fetchall())
    effects = sum(per_key.values())
    duplicates = sum(n - 1 for n in per_key.values() if n > 1)
    line = (f"storm: {counts['requests']} requests from {CLIENTS} clients, {KEYS} keys x {COPIES},"
            f" {took:.1f} s: {effects} effects, {duplicates} duplicates,"
            f" {counts[500] + counts[503]} injected failures retried ({counts['dropped']} dropped"
            f" connections), {counts[409]} 409s,"
            f" {sum(1 for a in answers if a[1] == 'true')} replays")
    print(line)
    report = os.environ.get("IDEM_TEST_REPORT")
    if report:
        with open(report, "a") as out:
            out.write(line + "\n")
    assert duplicates == 0
    assert effects == KEYS and all(per_key.get(key) == 1 for key in bodies)
    assert all(sum(1 for r, _ in answers_of if r is None) == 1 for answers_of in by_key.values())
    assert all(len({c for _, c in answers_of}) == 1 for answers_of in by_key.values())
    assert counts[500] + counts[503] > 0  # the failures did happen
