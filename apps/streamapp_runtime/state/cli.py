"""``streamapp state FILE --stream NAME [--key col=value ...]``: a stream's aggregate state from the checkpoint.

Runs local Spark only (no Kafka): reads the state store of the stream's query at its last committed
batch. Mistakes that need no Spark (unknown stream, stateless stream, no committed batch, bad --key)
are reported before a JVM starts.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

log = logging.getLogger("streamapp.runtime")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the StreamApp manifest (YAML)")
    parser.add_argument("--checkpoint", metavar="DIR", help="checkpoint root (default: $STREAMAPP_CHECKPOINT_DIR, "
                        "else ./.streamapp/checkpoints/<app>)")
    parser.add_argument("--stream", required=True, metavar="NAME", help="the stream whose aggregate state to show")
    parser.add_argument("--key", action="append", default=[], metavar="COLUMN=VALUE",
                        help="only groups whose groupBy column equals VALUE (repeatable; compared as text)")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format")


def run(args: argparse.Namespace) -> int:
    from streamapp_runtime.cli import load_app
    from streamapp_runtime.run.session import object_store_session
    from streamapp_runtime.run.settings import checkpoint_root
    from streamapp_runtime.state import StateError, find_target, parse_keys

    from streamapp_api.checkpoint import is_local

    app = load_app(args.file)
    checkpoint = app.spec.state.checkpoint
    root = checkpoint_root(args.checkpoint, dict(os.environ), app.metadata.name, checkpoint.location,
                           app.spec.state.reset_nonce)
    # An object-store checkpoint is listed through Spark's Hadoop FileSystem: Spark starts first.
    spark = None if is_local(root) else object_store_session(app, "state")
    try:
        try:
            target = find_target(app, root, args.stream)
            keys = parse_keys(args.key, target.group_by, args.stream)
            rows = query(app, target, keys)
        except StateError as exc:
            print(f"streamapp state: {exc}", file=sys.stderr)
            return 2
    finally:
        if spark is not None:
            from streamapp_runtime.run.session import stop_session

            stop_session(spark)
    print(render(rows, target, keys, args.output))
    return 0


def query(app, target, keys) -> list[dict]:
    """Read the state with the SparkSession this process runs (tests, notebooks, the one `run` started
    for an object store), else a local one."""
    from streamapp_runtime import plan, spark_compat
    from streamapp_runtime.run.session import object_store_session, stop_session
    from streamapp_runtime.state import read_state

    options = plan.kafka_options(app, None, {})  # only to compile the plan: nothing connects to Kafka
    own = object_store_session(app, "state")
    try:
        return read_state(own or spark_compat.running_session(), app, target, keys, options)
    finally:
        if own is not None:
            stop_session(own)


def render(rows: list[dict], target, keys: dict[str, str], output: str) -> str:
    from streamapp_runtime.state import format_table, output_columns

    if output == "json":
        return json.dumps({"stream": target.stream, "query": target.query, "checkpoint": target.checkpoint,
                           "batchId": target.batch_id, "keys": keys, "rows": rows}, indent=2, default=str)
    header = (f"# stream {target.stream}: state of query {target.query} at batch {target.batch_id} "
              f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    if not rows:
        return header
    return header + "\n" + format_table(rows, output_columns(rows, target))
