"""A real local HTTP server that receives webhooks (callbacks) and answers each path by plan."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.conftest import wait_for

WEBHOOK_ENV = {"WORQR_TEST_CALLBACK_HOSTS": "127.0.0.1,localhost", "WORQR_TEST_CALLBACK_TIMEOUT": "1"}


class Receiver:
    """Records every POST; answers each path from its plan of (status, body, headers, sleep)
    steps, the last step repeating."""

    def __init__(self):
        self.received, self.plans, self.lock = [], {}, threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    plan = receiver.plans.get(self.path, [(200, "", {}, 0)])
                    status, reply, headers, sleep = plan.pop(0) if len(plan) > 1 else plan[0]
                    receiver.received.append(
                        {"path": self.path, "at": time.time(), "headers": dict(self.headers), "body": json.loads(body)}
                    )
                time.sleep(sleep)
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    data = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the worker gave up waiting (timeout test)
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path):
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def plan(self, path, *steps):
        self.plans[path] = [(s + ({}, 0)[len(s) - 2 :]) if len(s) < 4 else s for s in steps]
        return self.url(path)

    def on(self, path):
        with self.lock:
            return [r for r in self.received if r["path"] == path]

    def wait(self, path, n, timeout=10):
        return wait_for(lambda: len(self.on(path)) >= n and self.on(path), timeout, message=f"{n} POSTs to {path}")

    def close(self):
        self.server.shutdown()
        self.server.server_close()
