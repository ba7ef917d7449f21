"""POST /orders with an Idempotency-Key: the idem HTTP mapping in Python
(psycopg 3, the standard library's HTTP server). docs/clients.md walks
through it. Environment: DATABASE_URL, PORT (0: any free port, printed), WORK_MS
(simulated work)."""
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg

DSN = os.environ["DATABASE_URL"]
SCOPE = "orders"
WORK_SECONDS = int(os.environ.get("WORK_MS", "0")) / 1000.0

# The raw body is hashed by idem in the claim statement itself: ::jsonb
# is needed (an uncast parameter is ambiguous between request_hash(jsonb)
# and (bytea): 42725), and a body that is not JSON fails there (22P02).
CLAIM = """
SELECT c.kind::text, c.fence, c.response_code, c.response_body::text,
       idem.retry_after(%(scope)s, c)
  FROM idem.claim_idempotency_key(%(scope)s, %(key)s,
                                  idem.request_hash(%(body)s::jsonb)) c
"""

# The effect and its outcome commit together; the answer comes back as the
# stored jsonb's text, exactly what every replay will send.
TAKE_ORDER = """
WITH o AS (
  INSERT INTO shop.orders (idempotency_key, item, quantity, served_by)
  VALUES (%(key)s, %(body)s::jsonb ->> 'item', (%(body)s::jsonb ->> 'quantity')::int, 'python')
  RETURNING id, item, quantity)
SELECT a.response_code, a.response_body::text
  FROM o, idem.mark_succeeded_returning(%(scope)s, %(key)s, %(fence)s, 201,
         jsonb_build_object('order_id', o.id, 'item', o.item, 'quantity', o.quantity)) a
"""

# SQLSTATE -> HTTP status (README, "Mapping to HTTP").
STATUS_OF_SQLSTATE = {
    "P4000": 400, "P4001": 400, "P4003": 400,  # scope, key, hash missing or bad
    "P4005": 400,  # a number JSON cannot carry exactly: send it as a string
    "22P02": 400,  # the body is not JSON
    "P4002": 422,  # the key was used for a different request
    "P4012": 409,  # a newer request took the key over: this one lost it
}


class Orders(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet under load
        pass

    def answer(self, status, body, headers=()):
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        if self.path != "/orders":
            return self.answer(404, '{"error": "not found"}')
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode("utf-8")
        key = self.headers.get("Idempotency-Key")  # None: idem answers P4001
        args = {"scope": SCOPE, "key": key, "body": raw}
        try:
            with psycopg.connect(DSN, autocommit=True) as conn:
                kind, fence, code, stored, retry_after = conn.execute(CLAIM, args).fetchone()
                if kind in ("replay_success", "final_failure"):
                    return self.answer(code, stored, [("Idempotent-Replayed", "true")])
                if kind == "processing_active":
                    return self.answer(409, '{"error": "a request with this key is in progress"}',
                                       [("Retry-After", str(retry_after))])
                # new_claim, processing_stale, retryable_failure: do the work.
                with conn.transaction():
                    if WORK_SECONDS:
                        conn.execute("SELECT pg_sleep(%s)", [WORK_SECONDS])
                    code, stored = conn.execute(TAKE_ORDER, {**args, "fence": fence}).fetchone()
                return self.answer(code, stored)
        except psycopg.Error as error:
            status = STATUS_OF_SQLSTATE.get(error.sqlstate)
            if status is None:
                return self.answer(500, '{"error": "internal error"}')
            message = error.diag.message_primary
            return self.answer(status, json.dumps({"error": message, "sqlstate": error.sqlstate}))


class OrdersServer(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: a burst of concurrent
    # retries (the clients suite sends 16 at once) overflows it on a busy
    # machine, and the kernel resets the connections it cannot queue. 64 as
    # the Java example's HttpServer.
    request_queue_size = 64


if __name__ == "__main__":
    server = OrdersServer(("127.0.0.1", int(os.environ["PORT"])), Orders)
    # PORT=0 takes any free port; the line says which one.
    print(f"listening on port {server.server_address[1]}", flush=True)
    server.serve_forever()
