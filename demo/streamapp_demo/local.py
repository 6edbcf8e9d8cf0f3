"""`make demo-local` (``python -m streamapp_demo --local``): the click-sessions example end to end on
the local test bed, no cluster.

Starts Kafka and Postgres, creates the topics, produces a generated click stream (seed 0), runs
`streamapp run examples/click-sessions.yaml --available-now`, prints the windowed results and how
many database writes the windows saved, and stops everything it started (also on SIGTERM: see
__main__).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from streamapp_testbed import clickstream
from streamapp_testbed.paths import local_run_env

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "click-sessions.yaml"
BAD_RECORDS = [("bad-1", "{not json"), ("bad-2", '{"uuid": "u", "session_id": "s", "event": "click", '
               '"time_spent": "long?", "ts": "2026-01-01T12:00:05Z"}'), ("bad-3", '{"uuid": "u", "event": "click"}')]


def run_to_end(command: list[str], env: dict[str, str]) -> int:
    """Run `command` to its end; when the demo is stopped meanwhile, stop it as its pod would be
    (SIGTERM, then SIGKILL after 30 s) before passing the stop on. Like a container's, what the
    command started (Spark's JVM, its Python workers) ends with it: a JVM that outlived a killed
    run kept writing to Postgres while the demo stopped Postgres."""
    proc = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        return proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main() -> int:
    import psycopg
    from streamapp_testbed import bed, kafka_admin

    with ExitStack() as stack:
        print("starting Kafka and Postgres from the test bed ...", flush=True)
        testbed = bed.start(stack, ("kafka", "postgres"))
        kafka, dsn = testbed.kafka.bootstrap, testbed.postgres.dsn
        for topic in ("clickstream", "session-summaries", "click-sessions.dlq"):
            kafka_admin.create_topic(kafka, topic, partitions=2 if topic == "clickstream" else 1)
        events = clickstream.generate(seed=0)
        counted = [e for e in events if e.event in ("click", "page_view")]
        span = max(e.ts for e in events) - min(e.ts for e in events)
        print(f"producing {len(events)} click events (seed 0): {len({e.session_id for e in events})} sessions of "
              f"{len({e.uuid for e in events})} users over {span.total_seconds() / 60:.1f} minutes of event time, "
              f"plus {len(BAD_RECORDS)} unreadable records", flush=True)
        kafka_admin.produce(kafka, "clickstream", [(e.session_id, e.to_json()) for e in events] + BAD_RECORDS)
        checkpoint = Path(tempfile.mkdtemp(prefix="streamapp-demo-"))
        stack.callback(__import__("shutil").rmtree, checkpoint, True)
        command = [sys.executable, "-m", "streamapp_api", "run", str(EXAMPLE), "--kafka", kafka, "--available-now",
                   "--checkpoint", str(checkpoint), "--postgres", f"pg={dsn}", "--metrics-port", "0"]
        print("$ streamapp run examples/click-sessions.yaml --available-now ...", flush=True)
        started = time.monotonic()
        code = run_to_end(command, env={**os.environ, **local_run_env()})
        if code != 0:
            print(f"streamapp run exited with {code}", file=sys.stderr)
            return code
        print(f"\nthe run took {time.monotonic() - started:.0f}s\n")
        with psycopg.connect(dsn) as conn:
            per_window = conn.execute(
                "SELECT window_start, count(*), sum(clicks), sum(page_views), sum(time_spent) FROM session_stats "
                "GROUP BY window_start ORDER BY window_start").fetchall()
            sample = conn.execute(
                "SELECT window_start, session_id, clicks, page_views, time_spent FROM session_stats "
                "ORDER BY clicks + page_views DESC, session_id LIMIT 5").fetchall()
            rows, writes = conn.execute("SELECT count(*), coalesce(sum(rows), 0) FROM streamapp_batches").fetchone()
            stored = conn.execute("SELECT count(*) FROM session_stats").fetchone()[0]
        print("windowed results (1-minute tumbling windows, emitted once the 30s watermark closed them):")
        print(f"  {'window start (UTC)':<20} {'sessions':>8} {'clicks':>7} {'views':>6} {'time spent':>10}")
        for start, sessions, clicks, views, spent in per_window:
            print(f"  {start:%Y-%m-%d %H:%M}     {sessions:>8} {clicks:>7} {views:>6} {spent:>10}")
        print("busiest session windows:")
        for start, session, clicks, views, spent in sample:
            print(f"  {start:%H:%M} {session:<16} clicks={clicks} page_views={views} time_spent={spent}")
        summaries = kafka_admin.consume_all(kafka, "session-summaries", expect=stored, timeout=30)
        dead = kafka_admin.consume_all(kafka, "click-sessions.dlq", expect=len(BAD_RECORDS), timeout=30)
        covered = sum(c + v for _, _, c, v, _ in per_window)
        print(f"\nKafka: {len(summaries)} session summaries on 'session-summaries', {len(dead)} records on "
              f"'click-sessions.dlq' (the unreadable ones, with the reason in a header)")
        print(f"Postgres: {writes} row writes in {rows} partition commits, {stored} rows in session_stats")
        if writes:
            print(f"DB write reduction: {len(events)} events in / {writes} rows written = {len(events) / writes:.1f}x "
                  f"fewer writes ({covered} clicks and page views in closed windows; the last window stays open "
                  f"until newer events move the watermark past it)")
        print(f"(events counted: {len(counted)} clicks and page views; the rest were scrolls, filtered out)")
    print("stopped Kafka and Postgres")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
