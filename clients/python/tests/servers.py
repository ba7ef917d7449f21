"""Runs tests/serve.py (or serve_django.py, or any command that prints
"listening on port N") in a process of its own and stops it."""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class Server:
    def __init__(self, spec, env=None, deadline=60, script="serve.py", command=None, cwd=None):
        self.log_path = os.path.join(os.environ.get("IDEM_TEST_WORK", "/tmp"),
                                     f"serve-{os.getpid()}-{time.monotonic_ns()}.log")
        self.log = open(self.log_path, "w+")
        self.process = subprocess.Popen(
            command or [sys.executable, os.path.join(HERE, script), spec],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=cwd or os.path.dirname(HERE),
            env={**os.environ, **(env or {})})
        limit = time.monotonic() + deadline
        self.port = None
        while self.port is None:
            with open(self.log_path) as log:
                for line in log:
                    if line.startswith("listening on port "):
                        self.port = int(line.split()[-1])
            if self.port is None:
                if self.process.poll() is not None or time.monotonic() > limit:
                    raise AssertionError("the server did not start: " + open(self.log_path).read())
                time.sleep(0.05)  # polling the log, bounded by the deadline
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
