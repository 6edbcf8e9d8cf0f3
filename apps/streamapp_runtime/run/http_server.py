"""One port for /metrics (Prometheus text) and /healthz (200 healthy, 503 otherwise)."""

from __future__ import annotations

import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from streamapp_api.contract import HEALTH_PATH, METRICS_PATH

from streamapp_runtime.run.metrics import Metrics


class NamelessServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer that asks no DNS for its own name."""

    daemon_threads = True

    def server_bind(self) -> None:
        # http.server names itself by a reverse DNS lookup of its address (socket.getfqdn): a query
        # to the cluster's or the machine's resolver on every start, for a name nobody reads.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])


def serve(metrics: Metrics, port: int, health: Callable[[], tuple[bool, str]], host: str = "0.0.0.0") -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.split("?")[0] == METRICS_PATH:
                body, status, kind = generate_latest(metrics.registry), 200, CONTENT_TYPE_LATEST
            elif self.path.split("?")[0] == HEALTH_PATH:
                ok, why = health()
                body, status, kind = (why + "\n").encode(), 200 if ok else 503, "text/plain; charset=utf-8"
            else:
                body, status, kind = b"not found: try /metrics or /healthz\n", 404, "text/plain; charset=utf-8"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = NamelessServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="streamapp-metrics", daemon=True).start()
    return server
