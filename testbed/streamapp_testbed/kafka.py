"""A real Apache Kafka broker in KRaft mode (combined broker + controller) on 127.0.0.1."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from .certs import client_cert, make_ca, serving_cert
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


# The user the SASL_SSL listener knows (SCRAM-SHA-512), made when the data directory is formatted.
SCRAM_USER = "streamapp"
SCRAM_MECHANISM = "SCRAM-SHA-512"


class KafkaBroker:
    """One-node Kafka cluster. `bootstrap` is what clients connect to (PLAINTEXT).

    Two more listeners on the same broker, for clients with credentials: `sasl_bootstrap` (SASL_SSL,
    SCRAM-SHA-512, user SCRAM_USER with `scram_password`) and `mtls_bootstrap` (SSL, a client
    certificate required). Their certificates are made at the first start: a CA of the broker's own
    (`ca_pem`), the broker's for 127.0.0.1, localhost and `host`, and a client's (`client_cert_pem`,
    `client_key_pem`). `credentials(listener)` gives a client's options for each.

    Auto-creation of topics stays on (Kafka's default) so that a producer in a demo just works;
    tests that need a partition count create their topics explicitly.

    ``stop()`` then ``start()`` brings the same broker back: same ports, same cluster id, same data
    directory, so clients reconnect to the address they had and find their topics and offsets.
    """

    def __init__(self, workdir: Path, java: str = "java", heap: str = "512m", host: str = "127.0.0.1"):
        """`host`: the address it listens on and advertises (the kind bed passes the kind network's
        gateway so that pods reach it)."""
        self.workdir = workdir
        self.host = host
        self.java = shutil.which(java) or java
        self.heap = heap
        self.port = free_port()
        self.controller_port = free_port()
        self.sasl_port = free_port()
        self.mtls_port = free_port()
        self.cluster_id = uuid.uuid4().hex[:22]
        self.scram_password = uuid.uuid4().hex
        self.proc: ManagedProcess | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"{self.host}:{self.sasl_port}"

    @property
    def mtls_bootstrap(self) -> str:
        return f"{self.host}:{self.mtls_port}"

    @property
    def tls_dir(self) -> Path:
        return self.workdir / "tls"

    ca_pem = property(lambda self: (self.tls_dir / "ca.crt").read_text())
    client_cert_pem = property(lambda self: (self.tls_dir / "client.crt").read_text())
    client_key_pem = property(lambda self: (self.tls_dir / "client.key").read_text())

    def credentials(self, listener: str) -> dict[str, str]:
        """A client's options (librdkafka's names) for the listener ``sasl`` or ``mtls``."""
        if listener == "sasl":
            return {"security.protocol": "SASL_SSL", "sasl.mechanism": SCRAM_MECHANISM, "sasl.username": SCRAM_USER,
                    "sasl.password": self.scram_password, "ssl.ca.pem": self.ca_pem}
        if listener == "mtls":
            return {"security.protocol": "SSL", "ssl.ca.pem": self.ca_pem, "ssl.certificate.pem": self.client_cert_pem,
                    "ssl.key.pem": self.client_key_pem}
        raise ValueError(f"listener {listener!r}: 'sasl' or 'mtls'")

    def listener(self, name: str) -> str:
        """The bootstrap address of the listener ``plaintext``, ``sasl`` or ``mtls``."""
        return {"plaintext": self.bootstrap, "sasl": self.sasl_bootstrap, "mtls": self.mtls_bootstrap}[name]

    def _make_certs(self) -> None:
        if (self.tls_dir / "broker.pem").exists():
            return  # a restart: the same certificates
        pki = make_ca(self.tls_dir, "streamapp-testbed-kafka-ca")
        names = ["DNS:localhost", "IP:127.0.0.1"] + ([f"IP:{self.host}"] if self.host != "127.0.0.1" else [])
        crt, key = serving_cert(pki, "broker", names)
        (self.tls_dir / "broker.pem").write_text(key.read_text() + crt.read_text())  # what a PEM keystore file holds
        client_cert(pki, "client", "streamapp-client")

    def _classpath(self) -> str:
        return str(installed().kafka_jars / "*")

    def _write_config(self) -> Path:
        data = self.workdir / "data"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            # A single-node dynamic quorum, the way Kafka 4's quick start formats it (--standalone).
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://127.0.0.1:{self.controller_port},"
                         f"SCRAM://{self.host}:{self.sasl_port},MTLS://{self.host}:{self.mtls_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port},SCRAM://{self.host}:{self.sasl_port},"
                                    f"MTLS://{self.host}:{self.mtls_port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SCRAM:SASL_SSL,MTLS:SSL",
            # The secured listeners: one PEM keystore and truststore (the broker's CA), SCRAM on one,
            # a client certificate required on the other.
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.tls_dir / "broker.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.tls_dir / "ca.crt"),
            "listener.name.scram.sasl.enabled.mechanisms": SCRAM_MECHANISM,
            f"listener.name.scram.{SCRAM_MECHANISM.lower()}.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.mtls.ssl.client.auth": "required",
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
        self._make_certs()
        config = self._write_config()
        # --standalone: this node is the whole controller quorum. --ignore-formatted: on a restart the
        # data directory is kept as it is. --add-scram: the SASL_SSL listener's user, in the first metadata.
        run(self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(config), "--standalone",
                       "--ignore-formatted", "--add-scram",
                       f"{SCRAM_MECHANISM}=[name={SCRAM_USER},password={self.scram_password}]"))
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
