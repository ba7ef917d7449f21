"""The runner of clients/conformance/draft-cases.json (its "_doc" says what
a case means): sends a case's steps to a server whose handler answers what
each step's "answer" says (the x-test-answer header), and checks each
response against the step's "expect". The ASGI and the Django tests run
the same cases through it."""
import base64
import json
import os
import uuid

import httpx

HERE = os.path.dirname(os.path.abspath(__file__))
CASES_FILE = os.environ.get(
    "IDEM_DRAFT_CASES", os.path.join(HERE, "..", "..", "conformance", "draft-cases.json"))

with open(CASES_FILE) as _file:
    TABLE = json.load(_file)
CASES = TABLE["cases"]
ALLOWED = frozenset(name.lower() for name in
                    TABLE["default_replay_headers"] + TABLE["middleware"]["replay_headers"])
REPLAY_HEADERS = TABLE["middleware"]["replay_headers"]


def body_of(item):
    """A step's (or an answer's) bytes: body, body_base64, or none."""
    if "body_base64" in item:
        return base64.b64decode(item["body_base64"])
    return item.get("body", "").encode("utf-8")


def answer_header():
    """The request header that tells the test handler what to answer."""
    return "x-test-answer"


def _values(response, name):
    return [v for k, v in response.headers.multi_items() if k == name]


def check(step, response, steps, effects_now):
    """The differences between a response and the step's expect (empty: ok)."""
    expect, wrong = step["expect"], []
    status = response.status_code
    if "status" in expect and status != expect["status"]:
        wrong.append(f"status {status}, expected {expect['status']}: {response.content[:300]!r}")
    if "replayed" in expect:
        replayed = _values(response, "idempotent-replayed")
        if replayed != (["true"] if expect["replayed"] else []):
            wrong.append(f"idempotent-replayed {replayed}, expected replayed={expect['replayed']}")
    for name, value in expect.get("headers", {}).items():
        wanted = value if isinstance(value, list) else [value]
        if _values(response, name) != wanted:
            wrong.append(f"header {name}: {_values(response, name)}, expected {wanted}")
    for name in expect.get("absent_headers", []):
        if _values(response, name):
            wrong.append(f"header {name} present: {_values(response, name)}")
    if expect.get("problem") or "sqlstate" in expect:
        media = response.headers.get("content-type", "").split(";")[0].strip()
        try:
            problem = json.loads(response.content)
        except ValueError:
            problem = None
        if media != "application/problem+json" or not isinstance(problem, dict) \
                or problem.get("status") != status:
            wrong.append(f"not a problem answer: {media} {response.content[:300]!r}")
        elif "sqlstate" in expect and problem.get("sqlstate") != expect["sqlstate"]:
            wrong.append(f"sqlstate {problem.get('sqlstate')}, expected {expect['sqlstate']}")
    if expect.get("as_answered"):
        wrong += _compare(response, step["answer"], lambda name: True, "its answer")
    if "same_as_step" in expect:
        n = expect["same_as_step"]
        wrong += _compare(response, steps[n]["answer"], lambda name: name in ALLOWED,
                          f"step {n}'s answer")
    if "effects" in expect and effects_now() != expect["effects"]:
        wrong.append(f"{effects_now()} effects, expected {expect['effects']}")
    return wrong


def _compare(response, answer, replayed, what):
    wrong = []
    if response.status_code != answer["status"]:
        wrong.append(f"status {response.status_code}, not {what}'s {answer['status']}")
    if response.content != body_of(answer):
        wrong.append(f"body {response.content[:300]!r}, not {what}'s {body_of(answer)[:300]!r}")
    for name in dict.fromkeys(n.lower() for n, _ in answer["headers"]):
        sent = [v for n, v in answer["headers"] if n.lower() == name]
        wanted = sent if replayed(name) else []
        if _values(response, name) != wanted:
            wrong.append(f"header {name}: {_values(response, name)}, {what} makes it {wanted}")
    return wrong


def run_case(case, base_url, count_effects):
    """Runs one case's steps against base_url; count_effects(run) counts the
    effect rows of keys containing run. Returns the failures, one line each."""
    run = uuid.uuid4().hex[:16]
    failures = []
    for index, step in enumerate(case["steps"]):
        headers = {name: value.replace("{run}", run) for name, value in step["headers"].items()}
        headers[answer_header()] = json.dumps(step["answer"])
        content = body_of(step) if ("body" in step or "body_base64" in step) else None
        try:
            # A connection per step: after a handler's exception the server
            # may reset the connection, and a kept-alive one would carry that
            # reset into the next step.
            with httpx.Client(base_url=base_url, timeout=60) as client:
                response = client.request(step["method"], step["path"].replace("{run}", run),
                                          headers=headers, content=content)
        except httpx.TransportError:
            # uvicorn may close the connection after the application's
            # exception, its 500 sent or not: only the effects tell.
            if not step["answer"].get("throw"):
                raise
            expect = step["expect"]
            if "effects" in expect and count_effects(run) != expect["effects"]:
                failures.append(f"step {index}: {count_effects(run)} effects, "
                                f"expected {expect['effects']}")
            continue
        for line in check(step, response, case["steps"], lambda: count_effects(run)):
            failures.append(f"step {index}: {line}")
    return failures
