"""The handler clients/conformance/draft-cases.json's steps run against, as a
FastAPI application behind IdempotencyMiddleware: every POST or PATCH path
writes one effect (a row in shop.effects, tagged with the key) through the
request's connection, then answers what the x-test-answer header says: its
status, its headers in order (a name twice: two lines), its exact bytes,
or an exception with "throw"."""
import base64
import json
import os

from fastapi import FastAPI, Request, Response

from draft_table import REPLAY_HEADERS
from idem_client import IdempotencyMiddleware


def make_table_app(dsn, **options):
    app = FastAPI()
    app.add_middleware(IdempotencyMiddleware, dsn=dsn,
                       replay_headers=options.pop("replay_headers", REPLAY_HEADERS), **options)

    @app.api_route("/{path:path}", methods=["POST", "PATCH"])
    async def handler(request: Request, path: str):
        answer = json.loads(request.headers["x-test-answer"])
        idem = request.state.idem
        await idem.connection.execute(
            "INSERT INTO shop.effects (scope, idempotency_key, amount, served_by)"
            " VALUES (%s, %s, 0, 'table')", [idem.scope, idem.key])
        if answer.get("throw"):
            raise RuntimeError("the handler failed after its effect, as the case asks")
        body = base64.b64decode(answer["body_base64"]) if "body_base64" in answer \
            else answer.get("body", "").encode("utf-8")
        response = Response(content=body, status_code=answer["status"])
        # Exactly the answer's headers, in order; a length where there is a body.
        response.raw_headers = [(n.encode("latin-1"), v.encode("latin-1"))
                                for n, v in answer["headers"]]
        if answer["status"] not in (204, 304):
            response.raw_headers.append((b"content-length", str(len(body)).encode()))
        return response

    return app


def app_from_environment():
    return make_table_app(os.environ["IDEM_TEST_DSN"])
