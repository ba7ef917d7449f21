"""POST /orders with an Idempotency-Key, on the idem-client package
(clients/python): its ASGI middleware does the claim, the 409/422/400
answers and the replays; the endpoint takes the order through the request's
connection, so the order and idem's outcome commit together. FastAPI and
uvicorn are Debian's python3-fastapi and python3-uvicorn; install the package
first (`pip install --no-build-isolation --no-deps ./clients/python`).
docs/clients.md walks through the calls. Environment: DATABASE_URL, PORT (0:
any free port, printed), WORK_MS (simulated work)."""
import os
import socket

import uvicorn
from fastapi import FastAPI, Request

from idem_client import IdempotencyMiddleware

WORK_SECONDS = int(os.environ.get("WORK_MS", "0")) / 1000.0

app = FastAPI()
app.add_middleware(IdempotencyMiddleware, dsn=os.environ["DATABASE_URL"], scope="orders")


@app.post("/orders", status_code=201)
async def take_order(request: Request):
    order = await request.json()
    idem = request.state.idem  # the claim this request owns, and its transaction
    if WORK_SECONDS:
        await idem.connection.execute("SELECT pg_sleep(%s)", [WORK_SECONDS])
    cursor = await idem.connection.execute(
        "INSERT INTO shop.orders (idempotency_key, item, quantity, served_by)"
        " VALUES (%s, %s, %s, 'python') RETURNING id, item, quantity",
        [idem.key, order["item"], order["quantity"]])
    order_id, item, quantity = await cursor.fetchone()
    # The middleware stores this answer with the order and sends the stored
    # text, so every replay is the same bytes.
    return {"order_id": order_id, "item": item, "quantity": quantity}


if __name__ == "__main__":
    # PORT=0 takes any free port; the line says which one, once the socket
    # listens (connections queue until uvicorn accepts them).
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(os.environ["PORT"])))
    sock.listen(64)
    print(f"listening on port {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off")).run(sockets=[sock])
