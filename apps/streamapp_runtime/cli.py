"""``streamapp run FILE``: run a StreamApp on local Spark (or in the driver pod, with --spark-conf)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import yaml

log = logging.getLogger("streamapp.runtime")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the StreamApp manifest (YAML)")
    parser.add_argument("--kafka", metavar="HOST:PORT", help="bootstrap servers, overriding spec.kafka.bootstrapServers")
    parser.add_argument("--checkpoint", metavar="DIR", help="checkpoint root (default: $STREAMAPP_CHECKPOINT_DIR, "
                        "else ./.streamapp/checkpoints/<app>)")
    parser.add_argument("--available-now", action="store_true", help="process what is in the topics, then exit")
    parser.add_argument("--spark-conf", metavar="FILE", help="spark.properties: key=value lines applied verbatim")
    parser.add_argument("--postgres", action="append", default=[], metavar="SECRET=URI",
                        help="connection URI for a Postgres sink's secretRef (repeatable; '*=URI' for all)")
    parser.add_argument("--console", action="store_true", help="print every sink's rows instead of writing them")
    parser.add_argument("--dry-run", action="store_true", help="compile every query without starting one (no Kafka "
                        "needed): report a bad expression with its step path, or what each query would write")
    parser.add_argument("--metrics-port", type=int, help="metrics and health port (default $STREAMAPP_METRICS_PORT "
                        "or 9090; 0 picks a free one; -1 disables)")


def load_app(path: str, command: str = "streamapp run"):
    from streamapp_api import InvalidSpec, load

    try:
        document = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SystemExit(f"{command}: cannot read {path}: {exc}") from exc
    try:
        return load(document)
    except InvalidSpec as exc:
        lines = "\n  ".join(str(i) for i in exc.issues)
        raise SystemExit(f"{command}: {path} is not a valid StreamApp:\n  {lines}") from exc


def postgres_flags(items: list[str]) -> dict[str, str]:
    """``--postgres SECRET=URI`` flags -> {secret: uri}; SettingsError for one that is not."""
    from streamapp_runtime.run.settings import SettingsError

    postgres = {}
    for item in items:
        name, sep, uri = item.partition("=")
        if not sep or not uri:
            raise SettingsError(f"--postgres {item!r}: expected SECRET=postgresql://...")
        postgres[name] = uri
    return postgres


def run(args: argparse.Namespace) -> int:
    from streamapp_api.contract import PropertiesError, parse_properties
    from streamapp_runtime.run.settings import SettingsError, expand_env, from_environment, merge_conf, spark_defaults

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    app = load_app(args.file)
    try:
        given = parse_properties(Path(args.spark_conf).read_text(), args.spark_conf) if args.spark_conf else {}
        given = expand_env(given, dict(os.environ), args.spark_conf or "spark.properties")
        postgres = postgres_flags(args.postgres)
        port = None if args.metrics_port is None else (None if args.metrics_port < 0 else args.metrics_port)
        settings = from_environment(checkpoint=args.checkpoint, app_name=app.metadata.name, kafka=args.kafka,
                                    available_now=args.available_now, console=args.console, spark_conf=given,
                                    postgres=postgres, location=app.spec.state.checkpoint.location,
                                    reset_nonce=app.spec.state.reset_nonce)
        if args.metrics_port is not None:
            from dataclasses import replace

            settings = replace(settings, metrics_port=port)
    except (OSError, SettingsError, PropertiesError) as exc:
        from streamapp_runtime.run import termination

        print(f"streamapp run: {exc}", file=sys.stderr)
        termination.write(termination.message(str(exc), "settings"))
        return 2
    conf = merge_conf(given, spark_defaults(app.metadata.name, app.spec.state.store, os.environ,
                                            app.spec.state.checkpoint.spark_conf()))
    for key, value in (app.spec.spark_conf or {}).items():
        conf.setdefault(key, value)
    from streamapp_runtime.sinks import session_conf

    conf = session_conf(app, conf)
    if args.dry_run:
        return dry_run(app, settings, conf)
    return execute(app, settings, conf, choose_local_master=app.spec.realtime and "spark.master" not in given)


def dry_run(app, settings, conf: dict[str, str]) -> int:
    from streamapp_runtime.run import runner
    from streamapp_runtime.run.session import create_session, stop_session

    spark = create_session(conf)
    try:
        lines = runner.dry_run(spark, app, settings)
    except Exception as exc:  # noqa: BLE001 - StepError and the sinks' checks name the field; Spark's own text otherwise
        print(f"streamapp run --dry-run: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    finally:
        stop_session(spark)
    print("\n".join(lines))
    print(f"{app.metadata.name}: {len(lines)} queries compile")
    return 0


def execute(app, settings, conf: dict[str, str], choose_local_master: bool = False) -> int:
    import threading

    from streamapp_runtime.run import runner
    from streamapp_runtime.run.http_server import serve
    from streamapp_runtime.run.kafka_wait import StopRequested
    from streamapp_runtime.run.session import create_session, stop_session

    stop_requested = threading.Event()
    runner.install_sigterm(stop_requested)  # before the wait for Kafka, so that it too ends cleanly
    if choose_local_master and conf.get("spark.master", "").startswith("local"):
        try:
            conf = {**conf, "spark.master": runner.local_realtime_master(app, settings, stop_requested)}
        except StopRequested as stopped:
            log.info("stop requested while %s: exiting", stopped)
            return 0
    fence = runner.claim_local_checkpoint(settings)
    spark = create_session(conf)
    log.info("Spark session started")  # a mark of the driver's start (bench/streamapp_bench/recovery_phases.py)
    runner.install_sigterm(stop_requested)  # again: SparkContext replaces the SIGINT handler with its own
    server = None
    try:
        running = runner.start(spark, app, settings, stop_requested=stop_requested, fence=fence)
        if settings.metrics_port is not None:
            stale = runner.stale_after(app)
            server = serve(running.metrics, settings.metrics_port,
                           lambda: running.metrics.healthy(running.query_names(), stale))
            log.info("metrics and health on :%d (/metrics, /healthz)", server.server_address[1])
        return runner.supervise(spark, running)
    except StopRequested as stopped:
        log.info("stop requested while %s: exiting", stopped)
        return 0
    except Exception as exc:
        from streamapp_runtime import spark_compat
        from streamapp_runtime.run import plan_guard, restoring, termination

        log.error("%s", str(exc).split("\n")[0])
        if isinstance(exc, plan_guard.AppRefused):  # as a settings error: the same app is refused every time
            termination.write(termination.refused(exc.refusals))
            return 2
        if isinstance(exc, restoring.RestoreRefused):  # the same snapshot is missing at the next start too
            termination.write(termination.refused([exc]))
            return 2
        termination.write(termination.message(termination.of_exception(exc, spark_compat.jvm_stack_trace(exc))))
        return 1
    finally:
        if server is not None:
            server.shutdown()
        stop_session(spark)
