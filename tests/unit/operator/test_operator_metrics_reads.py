"""Driver metrics read in the background over real sockets: a driver that answers reaches the cache
(and says it changed), one that never answers costs the timeout and nothing else."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
import time

import pytest

from streamapp_operator.observe.metrics import ProgressCache, scrape, session

pytestmark = pytest.mark.unit
METRICS = """# TYPE streamapp_source_lag_records gauge
streamapp_source_lag_records{query="q1",topic="t",partition="0"} 12
streamapp_source_lag_records{query="q2",topic="t",partition="0"} 1
# TYPE streamapp_last_batch_timestamp_seconds gauge
streamapp_last_batch_timestamp_seconds{query="q1"} 1767225600
"""
KEY = ("ns", "app")


def _serve(body: str, status: int = 200) -> http.server.HTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_driver_that_answers_reaches_the_cache_once_and_then_reads_as_unchanged():
    server = _serve(METRICS)
    cache = ProgressCache(port=server.server_port)

    async def scenario() -> None:
        try:
            assert cache.latest(KEY, "uid-1").lag is None  # nothing read yet: no data, no waiting
            assert await cache.scrape(KEY, "uid-1", "127.0.0.1") is True
            assert cache.latest(KEY, "uid-1").lag == 13
            assert dict(cache.latest(KEY, "uid-1").sink_lag) == {"q1": 12, "q2": 1}
            assert await cache.scrape(KEY, "uid-1", "127.0.0.1") is False
            assert cache.latest(KEY, "uid-2").lag is None  # a new driver starts with no data
            assert not cache.due(KEY, "uid-1", every=60) and cache.due(KEY, "uid-2", every=60)
        finally:
            await cache.close()

    try:
        asyncio.run(scenario())
    finally:
        server.shutdown()


def _scrape(port: int, timeout: float = 3.0):
    async def once():
        async with session() as http:
            return await scrape(http, "127.0.0.1", port, timeout=timeout)

    return asyncio.run(once())


def test_an_error_page_is_no_data():
    server = _serve("oops", status=500)
    try:
        assert _scrape(server.server_port).lag is None
    finally:
        server.shutdown()


def test_drivers_that_never_answer_cost_the_timeout_once_all_at_the_same_time():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(200)  # accepts connections, never answers (a kwok pod, a hung JVM)
    cache = ProgressCache(timeout=0.5, concurrency=50, port=silent.getsockname()[1])

    async def many() -> list[bool]:
        try:
            return await asyncio.gather(*(cache.scrape(("ns", f"app-{i}"), "uid", "127.0.0.1") for i in range(100)))
        finally:
            await cache.close()

    try:
        started = time.monotonic()
        changed = asyncio.run(many())
        took = time.monotonic() - started
    finally:
        silent.close()
    assert changed == [False] * 100  # no data before, no data now
    assert 0.9 < took < 3  # two rounds of 50 at once, 0.5 s each; not 100 × 0.5 s


def test_nothing_listening_is_no_data_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    assert _scrape(port, timeout=5).lag is None
    assert time.monotonic() - started < 1
