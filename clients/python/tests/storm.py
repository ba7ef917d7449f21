"""The storm both HTTP middlewares' tests run: concurrent clients send each
key several times, in a random order, to several servers whose handler
fails at random after its charge (an exception, or a 503); a client
retries a 5xx, a dropped connection and a 409 until it gets its 201. Every
effect must happen exactly once: one charge per key, one first answer per
key, every other answer a replay with the same status, bytes and
allow-listed headers (Location, X-Order-Id, Content-Type). Prints a line
(and appends it to IDEM_TEST_REPORT) for the suite's log."""
import collections
import concurrent.futures
import os
import random
import threading
import time

import httpx

# What a replay must carry exactly as the first answer did.
REPLAYED = ("content-type", "location", "x-order-id")


def run_storm(label, servers, admin, prefix, clients, keys, copies=3):
    counts = collections.Counter()
    lock = threading.Lock()
    local = threading.local()
    deadline = time.monotonic() + 600

    def send(key, body):
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
            if status == 201:
                seen = tuple(tuple(v for k, v in answer.headers.multi_items() if k == name)
                             for name in REPLAYED)
                return key, answer.headers.get("idempotent-replayed"), answer.content, seen
            assert status in (409, 500, 503, "dropped"), (status, answer.text)
            assert time.monotonic() < deadline, "the storm did not end before its deadline"
            if status == 409:
                time.sleep(0.05)  # a retry interval, bounded by the deadline

    bodies = {f"{prefix}-k{i}": {"amount": i, "fail": "random"} for i in range(keys)}
    jobs = [key for key in bodies for _ in range(copies)]
    random.shuffle(jobs)
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        answers = list(pool.map(lambda key: send(key, bodies[key]), jobs))
    took = time.monotonic() - started

    by_key = collections.defaultdict(list)
    for key, replayed, content, seen in answers:
        by_key[key].append((replayed, content, seen))
    per_key = dict(admin.execute(
        "SELECT idempotency_key, count(*) FROM shop.effects WHERE idempotency_key LIKE %s"
        " GROUP BY 1", [prefix + "-k%"]).fetchall())
    effects = sum(per_key.values())
    duplicates = sum(n - 1 for n in per_key.values() if n > 1)
    identical = sum(1 for answers_of in by_key.values()
                    if len({(c, s) for _, c, s in answers_of}) == 1)
    with_headers = sum(1 for answers_of in by_key.values()
                       if all(s[1] and s[2] for _, _, s in answers_of))
    line = (f"storm ({label}): {counts['requests']} requests from {clients} clients,"
            f" {keys} keys x {copies}, {took:.1f} s: {effects} effects, {duplicates} duplicates,"
            f" {counts[500] + counts[503]} injected failures retried ({counts['dropped']} dropped"
            f" connections), {counts[409]} 409s,"
            f" {sum(1 for a in answers if a[1] == 'true')} replays, {identical}/{keys} keys"
            f" byte-identical with headers")
    print("# " + line)
    report = os.environ.get("IDEM_TEST_REPORT")
    if report:
        with open(report, "a") as out:
            out.write(line + "\n")
    assert duplicates == 0
    assert effects == keys and all(per_key.get(key) == 1 for key in bodies)
    assert all(sum(1 for r, _, _ in answers_of if r is None) == 1
               for answers_of in by_key.values())
    assert all(sum(1 for r, _, _ in answers_of if r == "true") == copies - 1
               for answers_of in by_key.values())
    assert identical == keys and with_headers == keys
    assert counts[500] + counts[503] > 0  # the failures did happen
