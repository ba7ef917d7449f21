"""Drives one example server with a short load of concurrent duplicates and
checks the contract from outside: one order per key, every answer for a key
the same bytes, Retry-After on every 409, and the error mapping. Prints what
it counted, one "ok"/"not ok" line per check, and "<name>: N passed, N failed".

  drive.py NAME URL DSN [--keys K] [--copies C] [--threads T]

DSN is a superuser's connection (to count orders and to hold a key)."""
import argparse
import concurrent.futures
import json
import random
import sys
import time
import urllib.error
import urllib.request

import psycopg

results = {"passed": 0, "failed": 0}


def check(ok, what):
    results["passed" if ok else "failed"] += 1
    print(("ok - " if ok else "not ok - ") + what, flush=True)


def post(url, key, body):
    """One POST; returns (status, headers, body bytes)."""
    request = urllib.request.Request(url, data=body.encode("utf-8"), method="POST",
                                     headers={"Content-Type": "application/json"})
    if key is not None:
        request.add_header("Idempotency-Key", key)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def send_until_answered(url, key, body, deadline):
    """Sends, and after each 409 waits its Retry-After, until an answer
    other than 409 or the deadline. Returns (answer, retry_afters)."""
    retry_afters = []
    while True:
        status, headers, data = post(url, key, body)
        if status != 409 or time.monotonic() > deadline:
            return (status, headers, data), retry_afters
        retry_afters.append(headers.get("Retry-After"))
        time.sleep(int(headers.get("Retry-After") or 1))  # the client does what it is told


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("url")
    parser.add_argument("dsn")
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    run = f"{args.name}-{int(time.time() * 1000)}"

    # The load: every key sent --copies times at once, in a random order.
    bodies = {f"{run}-{i}": json.dumps({"item": f"book {i}", "quantity": i % 5 + 1})
              for i in range(args.keys)}
    jobs = [key for key in bodies for _ in range(args.copies)]
    random.shuffle(jobs)
    deadline = time.monotonic() + 120
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
        answers = list(pool.map(lambda key: (key, *send_until_answered(
            args.url, key, bodies[key], deadline)), jobs))
    took = time.monotonic() - started

    by_key = {}
    retry_afters = []
    for key, (status, headers, data), waits in answers:
        by_key.setdefault(key, []).append((status, headers.get("Idempotent-Replayed"), data))
        retry_afters.extend(waits)
    first = sum(1 for answers_of in by_key.values() for a in answers_of if a[1] is None)
    replays = sum(1 for answers_of in by_key.values() for a in answers_of if a[1] == "true")
    with psycopg.connect(args.dsn) as db:
        orders = dict(db.execute(
            "SELECT idempotency_key, count(*) FROM shop.orders"
            " WHERE idempotency_key LIKE %s GROUP BY 1", [run + "-%"]).fetchall())
    print(f"{args.name}: {len(jobs)} requests, {len(bodies)} keys x {args.copies} copies, "
          f"{args.threads} threads, {took:.1f} s: {sum(orders.values())} orders "
          f"({len(orders)} keys with one or more), {first} first answers, {replays} replays, "
          f"{len(retry_afters)} 409s (Retry-After values {sorted(set(retry_afters))})", flush=True)

    check(all(a[0] == 201 for answers_of in by_key.values() for a in answers_of),
          "every request answered 201, first or replayed")
    check(all(orders.get(key) == 1 for key in bodies), "exactly one order per key")
    check(all(sum(1 for a in answers_of if a[1] is None) == 1 for answers_of in by_key.values()),
          "exactly one first answer per key, the rest marked Idempotent-Replayed")
    check(all(len({a[2] for a in answers_of}) == 1 for answers_of in by_key.values()),
          "the first answer and every replay of a key are the same bytes")
    check(all(value is not None and value.isdigit() and 0 <= int(value) <= 300
              for value in retry_afters), "every 409 carries a Retry-After in seconds")

    # A key held by a twin (claimed by hand, as a request in progress would
    # be): 409, and a Retry-After from how long this scope's requests take.
    held = f"{run}-held"
    body = json.dumps({"item": "held", "quantity": 1})
    with psycopg.connect(args.dsn, autocommit=True) as db:
        db.execute("SELECT idem.claim_idempotency_key('orders', %s,"
                   " idem.request_hash(%s::jsonb))", [held, body])
    status, headers, _ = post(args.url, held, body)
    print(f"{args.name}: a held key answered {status} with Retry-After "
          f"{headers.get('Retry-After')} (the lock has about 300 s left)", flush=True)
    # Requests take ~50 ms: 1 s, with room for a loaded machine, far below 300.
    retry_after = headers.get("Retry-After") or ""
    check(status == 409 and retry_after.isdigit() and 1 <= int(retry_after) <= 5,
          "a held key: 409 with a Retry-After of seconds (requests take ms), not the lock's 300 s")

    # The error mapping.
    key = next(iter(bodies))
    for what, request_key, request_body, expected_status, expected_sqlstate in [
        ("the same key with another body", key, json.dumps({"item": "other", "quantity": 9}),
         422, "P4002"),
        ("a body that is not JSON", f"{run}-bad-json", "{not json", 400, "22P02"),
        ("a number JSON cannot carry exactly", f"{run}-big",
         '{"item": "x", "quantity": 12345678901234567890}', 400, "P4005"),
        ("no Idempotency-Key", None, body, 400, "P4001"),
    ]:
        status, _, data = post(args.url, request_key, request_body)
        try:
            sqlstate = json.loads(data).get("sqlstate")
        except ValueError:
            sqlstate = None
        check(status == expected_status and sqlstate == expected_sqlstate,
              f"{what}: {expected_status} ({expected_sqlstate}), got {status} ({sqlstate})")
    _, _, data = post(args.url, None, body)
    answer = json.loads(data)  # {"error": ...} or problem details (RFC 9457) with "detail"
    check("Idempotency-Key is required" in (answer.get("error") or answer.get("detail") or ""),
          "no Idempotency-Key: the error says the Idempotency-Key is required")

    print(f"{args.name}: {results['passed']} passed, {results['failed']} failed", flush=True)
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
