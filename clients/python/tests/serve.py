"""Serves an ASGI application with uvicorn on 127.0.0.1, on a port the
kernel picks, and prints "listening on port N" once the socket listens.

    serve.py tests.apps:app_from_environment      (a factory, called)
    serve.py path/to/file.py:app                  (a module file's app)"""
import importlib
import importlib.util
import socket
import sys

import uvicorn


def load(spec):
    where, name = spec.rsplit(":", 1)
    if where.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location("served_app", where)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    app = getattr(module, name)
    return app() if name.startswith("app_from") else app


if __name__ == "__main__":
    app = load(sys.argv[1])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"listening on port {sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    server.run(sockets=[sock])
