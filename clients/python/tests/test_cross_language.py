"""An answer stored by the Node package (@idem/postgres, Express) replays
byte for byte, headers included, through the Python package (FastAPI), and
the other way round: one database, one default scope (`POST /orders`), one
stored form (idem_client.answer, lib/answer.js). The Node package comes from
IDEM_NODE_PACKAGE (default: the tree's clients/node), copied and installed
with `npm ci`; node_app.js is its Express application."""
import json
import os
import shutil
import subprocess
import uuid

import httpx
import pytest

from conftest import APP_DSN, ADMIN_DSN
from draft_table import ALLOWED, check
from servers import Server

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_PACKAGE = os.environ.get("IDEM_NODE_PACKAGE",
                              os.path.join(HERE, "..", "..", "node"))
NODE = os.environ.get("IDEM_NODE", "node")
NPM = os.environ.get("IDEM_NPM", "npm")

# Answers of every kind: text with its charset and a non-ASCII character,
# headers allowed and not, JSON whose member order jsonb would change,
# bytes that are not UTF-8, a 204, a stored 4xx.
ANSWERS = {
    "text": {"status": 201, "headers": [["content-type", "text/plain; charset=utf-8"],
                                        ["location", "/orders/17"], ["x-order-id", "17"],
                                        ["x-request-id", "r-1"], ["cache-control", "no-store"]],
             "body": "created 17 \u00e9"},
    "json": {"status": 201, "headers": [["content-type", "application/json"], ["etag", "\"v1\""]],
             "body": "{\"b\": 1,   \"a\": [2, 1]}"},
    "binary": {"status": 200, "headers": [["content-type", "application/octet-stream"]],
               "body_base64": "/9j/AAD+gA=="},
    "no content": {"status": 204, "headers": [["location", "/orders/18"]]},
    "declined": {"status": 402, "headers": [["content-type", "application/problem+json"]],
                 "body": "{\"title\":\"declined\",\"status\":402}"},
}


@pytest.fixture(scope="module")
def node_app(tmp_path_factory):
    if not os.path.exists(os.path.join(NODE_PACKAGE, "lib", "answer.js")):
        pytest.skip(f"{NODE_PACKAGE} has no lib/answer.js: a Node package without the shared stored answer")
    if shutil.which(NODE) is None or shutil.which(NPM) is None:
        # The suite names its Node (IDEM_NODE): then a missing one is a failure.
        if "IDEM_NODE" in os.environ:
            pytest.fail(f"IDEM_NODE={NODE} or IDEM_NPM={NPM} cannot be run")
        pytest.skip(f"no {NODE} or {NPM} on the PATH")
    copy = tmp_path_factory.mktemp("node") / "package"
    shutil.copytree(NODE_PACKAGE, copy, ignore=shutil.ignore_patterns("node_modules", ".readme-*"))
    shutil.copy(os.path.join(HERE, "node_app.js"), copy / "node_app.js")
    cache = os.path.join(os.environ.get("IDEM_TEST_WORK", str(copy.parent)), "npm-cache")
    installed = subprocess.run([NPM, "ci", "--no-audit", "--no-fund", "--cache", cache],
                               cwd=copy, capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    with Server(None, {"DATABASE_URL": APP_DSN}, command=[NODE, "node_app.js"], cwd=copy) as server:
        yield server


@pytest.fixture(scope="module")
def python_app():
    with Server("table_app:app_from_environment") as server:
        yield server


def _effects(run):
    import psycopg
    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        return admin.execute("SELECT count(*) FROM shop.effects WHERE idempotency_key LIKE %s",
                             [f"%{run}%"]).fetchone()[0]


def _replayed_part(response):
    """What two replays of one answer share, whichever package sends them:
    status, the allow-listed header lines in order, the marker, the length
    and the bytes."""
    lines = [(k, v) for k, v in response.headers.multi_items()
             if k in ALLOWED or k in ("idempotent-replayed", "content-length")]
    return response.status_code, lines, response.content


@pytest.mark.parametrize("direction", ["node stores, python replays", "python stores, node replays"])
@pytest.mark.parametrize("kind", list(ANSWERS))
def test_an_answer_replays_through_the_other_package(node_app, python_app, direction, kind):
    owner, other = (node_app, python_app) if direction.startswith("node") else (python_app, node_app)
    run = uuid.uuid4().hex
    answer = ANSWERS[kind]
    request = {"method": "POST", "path": "/orders",
               "headers": {"idempotency-key": f"{run}-k", "content-type": "application/json"},
               "body": "{\"item\":\"book\"}"}
    steps = [{**request, "answer": answer,
              "expect": {"status": answer["status"], "replayed": False, "as_answered": True,
                         "effects": 1}},
             {**request, "answer": {"status": 500, "headers": [], "body": "ran twice"},
              "expect": {"replayed": True, "same_as_step": 0, "effects": 1}},
             {**request, "answer": {"status": 500, "headers": [], "body": "ran twice"},
              "expect": {"replayed": True, "same_as_step": 0, "effects": 1}}]
    failures, replays = [], []
    with httpx.Client(timeout=60) as client:
        for index, (server, step) in enumerate(zip([owner, other, owner], steps)):
            headers = {**step["headers"], "x-test-answer": json.dumps(step["answer"])}
            response = client.post(server.url + "/orders", headers=headers,
                                   content=step["body"].encode())
            failures += [f"step {index}: {line}"
                         for line in check(step, response, steps, lambda: _effects(run))]
            if index:
                replays.append(_replayed_part(response))
    assert not failures, "\n".join(failures)
    # The two packages' replays are the same status, header lines and bytes.
    assert replays[0] == replays[1]
