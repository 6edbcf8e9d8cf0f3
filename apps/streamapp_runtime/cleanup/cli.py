"""``streamapp cleanup FILE``: list what a deleted app left behind; with ``--yes``, delete it.

Reaches Kafka, Postgres and the checkpoint as ``streamapp run`` does: ``--kafka`` (else
spec.kafka.bootstrapServers) with the app's Kafka options and ``STREAMAPP_KAFKA_*`` variables,
``--postgres SECRET=URI`` (or ``STREAMAPP_POSTGRES_<SECRET>``), ``--checkpoint`` (else the app's
object-store location, read through local Spark with its s3 settings and ``AWS_*`` variables).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict

COMMAND = "streamapp cleanup"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the StreamApp manifest (YAML), as applied")
    parser.add_argument("-n", "--namespace", help="the namespace the app ran in (default: metadata.namespace, "
                        "else default): it is part of its consumer groups' names")
    parser.add_argument("--kafka", metavar="HOST:PORT", help="bootstrap servers, overriding spec.kafka.bootstrapServers")
    parser.add_argument("--checkpoint", metavar="DIR", help="the app's checkpoint (default: $STREAMAPP_CHECKPOINT_DIR, "
                        "else spec.state.checkpoint.location, else ./.streamapp/checkpoints/<app>)")
    parser.add_argument("--postgres", action="append", default=[], metavar="SECRET=URI",
                        help="connection URI for a Postgres sink's secretRef (repeatable; '*=URI' for all)")
    parser.add_argument("--yes", action="store_true", help="delete what is marked delete (default: only list)")
    parser.add_argument("--force", action="store_true", help="delete even though the checkpoint's owner marker "
                        "says a driver holds it (one that was killed, never stopped cleanly)")
    parser.add_argument("--delete-sink-topics", action="store_true", help="delete the Kafka topics the sinks wrote "
                        "too (the app's output)")
    parser.add_argument("--keep-dead-letter-topic", action="store_true", help="keep the dead-letter topic")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format")


def run(args: argparse.Namespace) -> int:
    from streamapp_runtime.cleanup import leftovers
    from streamapp_runtime.cli import load_app
    from streamapp_runtime.run.settings import SettingsError

    app = load_app(args.file, COMMAND)
    namespace = args.namespace or app.metadata.namespace or "default"
    try:
        uris = postgres_uris(args.postgres, dict(os.environ))
    except SettingsError as exc:
        print(f"{COMMAND}: {exc}", file=sys.stderr)
        return 2
    from streamapp_api.checkpoint import is_local

    from streamapp_runtime.cleanup.observe import checkpoint_base
    from streamapp_runtime.run.settings import checkpoint_root

    base = checkpoint_base(args.checkpoint, dict(os.environ), app, checkpoint_root(None, {}, app.metadata.name))
    from streamapp_runtime.run.session import object_store_session

    # An object-store checkpoint is listed and deleted through Spark's Hadoop FileSystem: Spark starts first.
    spark = None if is_local(base) else object_store_session(app, "cleanup")
    try:
        try:
            found, queries, admin = observe(app, args, base, uris)
        except Exception as exc:  # noqa: BLE001 - a connection refused, a Secret without URI: said in one line
            print(f"{COMMAND}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
            return 2
        choices = leftovers.Choices(args.delete_sink_topics, args.keep_dead_letter_topic)
        items = leftovers.plan(app, namespace, queries, found, choices)
        live = leftovers.live_drivers(found.owners)
        print(render(items, args.output))
        if found.checkpoint is None:
            print(f"{COMMAND}: no checkpoint at {base}: the dead-letter cursors, exactly-once writers and ledger rows "
                  "are told apart by the query ids in it, so none is deleted; give --checkpoint (a volume: where its "
                  "claim is mounted)", file=sys.stderr)
        for reason in live:
            print(f"{COMMAND}: the checkpoint may still be in use: {reason}", file=sys.stderr)
        return act(items, live, admin, uris, args)
    finally:
        if spark is not None:
            from streamapp_runtime.run.session import stop_session

            stop_session(spark)


def observe(app, args, base: str, uris: dict[str, str]):
    """(what exists, the app's query names, the admin client)."""
    from confluent_kafka.admin import AdminClient

    from streamapp_api.contract import kafka_env_options

    from streamapp_runtime import plan
    from streamapp_runtime.cleanup.observe import observe as found_of
    from streamapp_runtime.connections import admin_config, librdkafka_client

    options = plan.kafka_options(app, args.kafka, kafka_env_options(dict(os.environ)))
    admin = librdkafka_client(AdminClient, admin_config(options))
    planned = [qp.name for qp in plan.query_plans(app, base)]
    found, queries = found_of(app, base, admin, options["kafka.bootstrap.servers"], uris, planned)
    return found, queries, admin


def postgres_uris(flags: list[str], environ: dict[str, str]) -> dict[str, str]:
    """The Postgres URIs as ``streamapp run`` takes them: the variables, then the flags over them."""
    from streamapp_runtime.cli import postgres_flags
    from streamapp_runtime.connections import postgres_env_name
    from streamapp_runtime.run.settings import postgres_env_uris

    uris = postgres_env_uris(environ)
    uris.update({postgres_env_name(k) if k != "*" else "*": v for k, v in postgres_flags(flags).items()})
    return uris


def act(items, live: list[str], admin, uris: dict[str, str], args) -> int:
    from streamapp_runtime.cleanup.act import delete
    from streamapp_runtime.cleanup.leftovers import DELETE

    chosen = [item for item in items if item.action == DELETE]
    if not args.yes:
        print(f"{COMMAND}: dry run, nothing deleted; --yes deletes the {len(chosen)} marked delete", file=sys.stderr)
        return 0
    if live and not args.force:
        print(f"{COMMAND}: refused: stop the app first (kubectl delete streamapp, or end `streamapp run`); if its "
              "driver was killed and can no longer run, --force", file=sys.stderr)
        return 3
    failed = delete(items, admin, uris)
    for name, why in failed.items():
        print(f"{COMMAND}: not deleted: {name}: {why}", file=sys.stderr)
    print(f"{COMMAND}: deleted {len(chosen) - len(failed)} of {len(chosen)}; kept {len(items) - len(chosen)} "
          "(see WHY)", file=sys.stderr)
    return 1 if failed else 0


def render(items, output: str) -> str:
    from streamapp_runtime.cleanup.leftovers import format_table

    if output == "json":
        return json.dumps([{k: v for k, v in asdict(item).items() if k != "target"} for item in items], indent=2)
    return format_table(items)
