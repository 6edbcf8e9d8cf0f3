"""The four contenders of the data-plane bench, each started as its own process on the same topics.

(a) runtime      `streamapp run` of examples/click-sessions.yaml (Kafka sink only; emit and
                 maxOffsetsPerTrigger set by the bench; dead letters on, as users get them)
(b) handwritten  the same aggregation by hand in PySpark (handwritten.py)
(c) kstreams     the same topology in Kafka Streams (kstreams/ClickSessions.java)
(d) raw          a Java consumer that only reads the topic (kstreams/RawConsumer.java)
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from streamapp_testbed import kafka_admin
from streamapp_testbed.paths import REPO_DIR, local_run_env
from streamapp_testbed.process import ManagedProcess

from . import kstreams

EXAMPLE = REPO_DIR / "examples" / "click-sessions.yaml"
PYTHONPATH = os.pathsep.join(str(REPO_DIR / p) for p in ("crds", "operator", "apps", "testbed", "bench"))
ENV = {"PYTHONPATH": PYTHONPATH, "PYTHONUNBUFFERED": "1"}
JVM_HEAP = "-Xmx1g"
PROGRESS = "progress.jsonl"


@dataclass(frozen=True)
class Run:
    """One engine on one input topic."""

    bootstrap: str
    source: str
    target: str
    workdir: Path
    mode: str  # "updates" or "final"
    max_offsets: int  # maxOffsetsPerTrigger of the Spark engines (0: no limit)
    partitions: int
    postgres_dsn: str | None = None
    registry: str | None = None  # the schema registry's URL, for the engines reading Avro (INPUT_FORMATS)


# What an engine reads when it is not the backlog's JSON: the same events in another format, on a topic
# of their own (dataplane.Backlogs).
INPUT_FORMATS = {"runtime-avro": "avro"}


def manifest(run: Run, name: str, dead_letters: bool = True, delivery: str = "at-least-once",
             value_format: str = "json") -> dict:
    """examples/click-sessions.yaml pointed at the bench's topics (``value_format`` avro: the source reads
    Avro values through the run's schema registry)."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["name"] = name
    spec = doc["spec"]
    spec["kafka"]["bootstrapServers"] = run.bootstrap
    spec["sources"][0]["topic"] = run.source
    if value_format != "json":
        spec["sources"][0]["format"] = value_format
        spec["kafka"]["schemaRegistry"] = {"url": run.registry}
    if run.max_offsets:
        spec["sources"][0]["maxOffsetsPerTrigger"] = run.max_offsets
    spec["streams"][0]["emit"] = run.mode
    sinks = [s for s in spec["sinks"] if "kafka" in s]
    sinks[0]["kafka"]["topic"] = run.target
    sinks[0]["kafka"]["delivery"] = delivery
    if run.postgres_dsn:
        sinks += [s for s in spec["sinks"] if "postgres" in s]
    spec["sinks"] = sinks
    spec.pop("trigger", None)  # as fast as possible, like the other engines
    if not dead_letters:
        spec["deadLetter"] = {"enabled": False}
    return doc


def runtime(run: Run, available_now: bool = False, dead_letters: bool = True,
            delivery: str = "at-least-once", value_format: str = "json") -> ManagedProcess:
    name = f"bench-{run.target}"[:50].rstrip("-.").replace("_", "-").lower()
    if dead_letters:
        kafka_admin.create_topic(run.bootstrap, f"{name}.dlq")
    path = run.workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(manifest(run, name, dead_letters, delivery, value_format), sort_keys=False))
    argv = [sys.executable, "-m", "streamapp_api", "run", str(path), "--kafka", run.bootstrap,
            "--checkpoint", str(run.workdir / "checkpoint"), "--metrics-port", "-1"]
    if run.postgres_dsn:
        argv += ["--postgres", f"pg={run.postgres_dsn}"]
    if available_now:
        argv.append("--available-now")
    # Spark's progress of every batch, for the bench's profile of where a batch goes.
    env = {**ENV, **local_run_env(), "STREAMAPP_PROGRESS_JSON": str(run.workdir / PROGRESS)}
    return ManagedProcess("runtime", argv, run.workdir / "runtime.log", env=env).start()


def runtime_query(run: Run, sink: str = "kafka") -> str:
    """The name of the runtime's query writing its Kafka sink (the one the bench measures), or its
    sink of another kind (`postgres`: the DB-write run's)."""
    from streamapp_api import load

    return next(s.query_name for s in load(manifest(run, "bench")).spec.sinks if getattr(s, sink) is not None)


def handwritten(run: Run, spark_defaults: bool = False) -> ManagedProcess:
    argv = [sys.executable, "-m", "streamapp_bench.handwritten", run.bootstrap, run.source, run.target,
            str(run.workdir / "checkpoint"), run.mode, str(run.max_offsets),
            "defaults" if spark_defaults else str(run.partitions)]
    return ManagedProcess("handwritten", argv, run.workdir / "handwritten.log", env=ENV).start()


def kafka_streams(run: Run, threads: int = 2, commit_ms: int = 1000) -> ManagedProcess:
    cp = kstreams.classpath(kstreams.build())
    argv = ["java", JVM_HEAP, "-cp", cp, "io.streamapp.bench.ClickSessions", run.bootstrap, run.source, run.target,
            f"bench-ks-{run.target}", str(run.workdir / "state"), str(threads), str(commit_ms), run.mode]
    return ManagedProcess("kstreams", argv, run.workdir / "kstreams.log").start()


def raw_consumer(run: Run, expected: int) -> ManagedProcess:
    cp = kstreams.classpath(kstreams.build())
    argv = ["java", JVM_HEAP, "-cp", cp, "io.streamapp.bench.RawConsumer", run.bootstrap, run.source, str(expected)]
    return ManagedProcess("raw", argv, run.workdir / "raw.log").start()


def raw_progress(log: Path) -> list[tuple[int, int]]:
    points = []
    for line in log.read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "progress":
            points.append((int(parts[1]), int(parts[2])))
    return points


ENGINES = {"runtime": runtime, "handwritten": handwritten, "kstreams": kafka_streams,
           # (b) on Spark's own settings: the plain job the compiler's choices are measured against
           "handwritten-plain": lambda run: handwritten(run, spark_defaults=True),
           # (a) with spec.deadLetter.enabled: false, to tell what the dead-letter query costs
           "runtime-nodlq": lambda run: runtime(run, dead_letters=False),
           # (a) with the Kafka sink's delivery exactly-once (the delivery bench)
           "runtime-eos": lambda run: runtime(run, delivery="exactly-once"),
           # (a) reading the same events as Avro through the schema registry: what the format costs
           "runtime-avro": lambda run: runtime(run, value_format=INPUT_FORMATS["runtime-avro"])}
