"""A real Apache Kafka broker in KRaft mode (combined broker + controller) on 127.0.0.1."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from .paths import installed
from .process import ManagedProcess, free_port, port_open, run

# Log4j 2 (Kafka 4 dropped log4j 1); the properties syntax needs no YAML parser.
LOG4J2 = """\
status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class KafkaBroker:
    """One-node Kafka cluster. `bootstrap` is what clients connect to.

    Auto-creation of topics stays on (Kafka's default) so that a producer in a demo just works;
    tests that need a partition count create their topics explicitly.

    ``stop()`` then ``start()`` brings the same broker back: same ports, same cluster id, same data
    directory, so clients reconnect to the address they had and find their topics and offsets.
    """

    def __init__(self, workdir: Path, java: str = "java", heap: str = "512m", host: str = "127.0.0.1"):
        """`host`: the address it listens on and advertises (the single-node cluster passes its
        node address so that pods reach it)."""
        self.workdir = workdir
        self.host = host
        self.java = shutil.which(java) or java
        self.heap = heap
        self.port = free_port()
        self.controller_port = free_port()
        self.cluster_id = uuid.uuid4().hex[:22]
        self.proc: ManagedProcess | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def _classpath(self) -> str:
        return str(installed().kafka_jars / "*")

    def _write_config(self) -> Path:
        data = self.workdir / "data"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            # A single-node dynamic quorum, the way Kafka 4's quick start formats it (--standalone).
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            # Share groups are on by default in Kafka 4.2+; their state topic wants 3 replicas.
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            # Small segments and fast compaction so that KTable tests see compaction happen.
            "log.cleaner.backoff.ms": "1000",
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.workdir / "log4j2.properties").write_text(LOG4J2)
        return path

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            self.java,
            f"-Xmx{self.heap}",
            f"-Xms{self.heap}",
            "-XX:+UseG1GC",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            "-Djava.awt.headless=true",
            "-cp",
            self._classpath(),
            main,
            *args,
        ]

    def start(self, timeout: float = 90) -> "KafkaBroker":
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        # --standalone: this node is the whole controller quorum. --ignore-formatted: on a restart the
        # data directory is kept as it is.
        run(self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(config), "--standalone",
                       "--ignore-formatted"))
        self.proc = ManagedProcess("kafka", self._java("kafka.Kafka", str(config)), self.workdir / "kafka.log").start()
        self.proc.wait_until(self._ready, timeout, "a broker answering metadata requests")
        return self

    def _ready(self) -> bool:
        if not port_open(self.port, self.host):
            return False
        from confluent_kafka.admin import AdminClient

        metadata = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=2)
        return bool(metadata.brokers)

    def stop(self) -> None:
        if self.proc:
            self.proc.stop()
            self.proc = None
