"""Kafka client options of an app (spec.kafka.options and the Secret spec.kafka.secretRef names) and the
topics it writes: allow, don't deny; compare keys as their readers do. Pure.

Spark's Kafka connector lower-cases option keys (``kafka.Config.Providers`` is ``config.providers`` to
the client); the runtime turns a Secret's keys into options through the driver's environment
(``contract.kafka_env_options``: ``SASL_JAAS_CONFIG`` is ``sasl.jaas.config``). So each key is put in
that form first, then judged: a credential (refused in the spec, the Secret's purpose), a setting that
loads code, runs a command, reads a file or fetches a URL (refused unless an admin allows it), a plain
client setting on the safe list, or unknown (refused unless an admin allows it).
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Iterator, Mapping

from ..errors import Issue, shown
from ..kafka_credentials import LOGIN_MODULE, OAUTHBEARER_MODULE, PLAIN_MODULE, SCRAM_MODULE, option_key
from ..sources import SPARK_MANAGED_KAFKA_OPTIONS

# Plain client settings (the Java client's consumer, producer and admin configs, and librdkafka's for the
# operator's own client) that load no code, run nothing, read no file and fetch no URL.
SAFE_KAFKA_OPTIONS = frozenset({
    # consumer tuning
    "fetch.min.bytes", "fetch.max.bytes", "fetch.max.wait.ms", "max.partition.fetch.bytes", "max.poll.records",
    "max.poll.interval.ms", "session.timeout.ms", "heartbeat.interval.ms", "isolation.level", "check.crcs",
    "allow.auto.create.topics", "exclude.internal.topics", "group.protocol", "group.instance.id",
    "auto.commit.interval.ms",
    # producer tuning
    "acks", "batch.size", "buffer.memory", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "delivery.timeout.ms", "linger.ms", "max.block.ms", "max.request.size",
    "enable.idempotence", "max.in.flight.requests.per.connection", "retries", "transaction.timeout.ms",
    "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable", "partitioner.availability.timeout.ms",
    # connections, metadata, timeouts
    "client.id", "client.rack", "client.dns.lookup", "connections.max.idle.ms", "default.api.timeout.ms",
    "request.timeout.ms", "receive.buffer.bytes", "send.buffer.bytes", "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms", "metadata.max.age.ms", "metadata.max.idle.ms",
    "metadata.recovery.strategy", "metadata.recovery.rebootstrap.trigger.ms", "reconnect.backoff.ms",
    "reconnect.backoff.max.ms", "retry.backoff.ms", "retry.backoff.max.ms", "enable.metrics.push",
    "metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms", "auto.include.jmx.reporter",
    # security: which protocol and mechanism, public certificates, TLS parameters
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
    "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms", "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.retry.backoff.ms", "sasl.login.retry.backoff.max.ms", "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.header.urlencode",
    "ssl.protocol", "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm",
    "ssl.keystore.type", "ssl.truststore.type", "ssl.truststore.certificates", "ssl.keystore.certificate.chain",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
    "ssl.ca.pem", "ssl.certificate.pem", "ssl.curves.list", "ssl.sigalgs.list", "enable.ssl.certificate.verification",
})
# Credentials: refused in the spec whatever the policy (it is copied into the app's ConfigMap); what
# the Secret is for. Also any key that ends like one (CREDENTIAL_SUFFIX), e.g. a new client's *.client.secret.
CREDENTIAL_OPTIONS = frozenset({
    "sasl.jaas.config", "sasl.password", "ssl.key.password", "ssl.keystore.key", "ssl.key.pem",
    "ssl.keystore.password", "ssl.truststore.password",
})
CREDENTIAL_SUFFIX = re.compile(r"(password|secret|secret[._-]?key|access[._-]?key|token|credentials?|private[._-]?key|"
                         r"jaas\.config)$")
_LOADS_CODE = "loads code or runs a command in the driver, the executors or the operator"
_READS_FILE = "reads a file of the driver's, the executors' or the operator's pod"
_FETCHES_URL = "makes the app or the operator fetch from a URL of the author's choosing"
# Known-dangerous keys, with the reason (checked before the safe list; globs over the canonical key).
UNSAFE_KAFKA_OPTIONS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("*.class", "*.classes", "config.providers*", "metric.reporters", "plugin.library.paths", "ssl.engine.*",
      "ssl.providers", "ssl.provider", "security.providers", "sasl.kerberos.kinit.cmd", "sasl.kerberos.service.name",
      "partition.assignment.strategy", "*.deserializer", "*.serializer", "*.module", "*interceptor*"), _LOADS_CODE),
    (("*.url", "*.urls", "*.uri", "sasl.oauthbearer.*endpoint*", "sasl.oidc.*", "sasl.oauthbearer.method",
      "*.endpoint"), _FETCHES_URL),
    (("*.location", "*.keytab", "*.file", "*.path", "*.paths", "*.dir", "*.directory"), _READS_FILE),
)
# Login modules a sasl.jaas.config in the Secret may name: Kafka's own for PLAIN, SCRAM and OAUTHBEARER
# (others read files: Kerberos keytabs; or fetch: JNDI, LDAP).
# The JAAS line is read as kafka_credentials reads it (LOGIN_MODULE), which derives it for PLAIN and SCRAM.
SAFE_LOGIN_MODULES = frozenset({PLAIN_MODULE, SCRAM_MODULE, OAUTHBEARER_MODULE})
_KEY_CHARS = re.compile(r"^[a-z0-9._-]+$")
# Kafka's own topics and its ecosystem's (offsets, transactions, KRaft metadata, Schema Registry, Confluent).
INTERNAL_TOPICS = ("__*", "_schemas", "_confluent*")
_ALLOW_HINT = "an admin can allow it with the operator policy 'kafkaOptions.allow'"
_MANAGED_HINT = {"bootstrap.servers": "use spec.kafka.bootstrapServers"}


def canonical_option(key: str) -> str:
    """A key of spec.kafka.options as the client reads it: Spark's Kafka connector lower-cases keys."""
    return key.strip().lower()


def secret_option(key: str) -> str:
    """A key of the Secret as the client reads it: through the driver's environment, lower-cased with
    '_' as '.' (``contract.kafka_env_options``, ``kafka_credentials.option_key``)."""
    return option_key(key)


def _matches(key: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(key, pattern.strip().lower()) for pattern in patterns)


def is_credential(canonical: str) -> bool:
    return canonical in CREDENTIAL_OPTIONS or bool(CREDENTIAL_SUFFIX.search(canonical))


def why_unsafe(canonical: str) -> str | None:
    return next((why for patterns, why in UNSAFE_KAFKA_OPTIONS if _matches(canonical, patterns)), None)


def key_refusal(canonical: str, allow: tuple[str, ...]) -> str | None:
    """Why a (canonical) client option is refused under ``allow``, credentials aside; None when it is not."""
    if not _KEY_CHARS.match(canonical):
        return ("has characters other than letters, digits, '.', '_' and '-'; Kafka client options are plain "
                "ASCII keys such as 'security.protocol'")
    if _matches(canonical, allow):
        return None
    why = why_unsafe(canonical)
    if why is not None:
        return f"is refused on this cluster: it {why}; {_ALLOW_HINT}"
    if canonical not in SAFE_KAFKA_OPTIONS:
        return f"is not on the operator's list of safe Kafka client options; {_ALLOW_HINT}"
    return None


def login_module_refusal(jaas: str) -> str | None:
    modules = LOGIN_MODULE.findall(jaas)
    unsafe = [m for m in modules if m not in SAFE_LOGIN_MODULES]
    if modules and not unsafe:
        return None
    named = f"names login module {shown(unsafe[0])}" if unsafe else "names no login module"
    return (f"{named}: only Kafka's PLAIN, SCRAM and OAUTHBEARER modules are allowed (others read files or fetch "
            f"from URLs); {_ALLOW_HINT} ('sasl.jaas.config')")


def option_issues(options: Mapping[str, str], allow: tuple[str, ...],
                  path: str = "spec.kafka.options") -> Iterator[Issue]:
    """Every refused key of spec.kafka.options, each naming the key as written and why."""
    seen: dict[str, str] = {}
    secret_hint = ("put it in the Secret named by spec.kafka.secretRef (its keys are client options) so it stays "
                   "out of the spec and the app's ConfigMap")
    providers_allowed = _matches("config.providers", allow)
    for key, value in options.items():
        where, canonical = f"{path}[{key}]", canonical_option(key)
        if key in SPARK_MANAGED_KAFKA_OPTIONS or key.startswith("kafka."):
            continue  # rules.py names it
        if key != key.strip():
            yield Issue(where, f"{shown(key)} has spaces around it; write {shown(canonical)}")
            continue
        if canonical in seen:
            yield Issue(where, f"{shown(key)} is the same option as {shown(seen[canonical])} (the Kafka client "
                        "reads keys lower-case); keep one")
            continue
        seen[canonical] = key
        if canonical in SPARK_MANAGED_KAFKA_OPTIONS or canonical.startswith("kafka."):
            yield Issue(where, f"{shown(key)} is managed by Spark or the operator and cannot be set (the Kafka client "
                        "reads keys lower-case); options are plain Kafka client settings without the 'kafka.' prefix")
            continue
        if is_credential(canonical) or re.search(r"password\s*=", value, re.IGNORECASE):
            yield Issue(where, f"{shown(key)} carries a credential in plain text; {secret_hint}")
            continue
        refusal = key_refusal(canonical, allow)
        if refusal is not None:
            hint = _MANAGED_HINT.get(canonical)
            yield Issue(where, f"{shown(key)} {refusal}" + (f" ({hint})" if hint else ""))
        elif "${" in value and not providers_allowed:
            yield Issue(where, f"the value of {shown(key)} holds '${{', a reference Kafka's config providers would "
                        "replace with a file's or the environment's content; write the value itself")


def secret_issues(secret: str, data: Mapping[str, str], allow: tuple[str, ...]) -> list[Issue]:
    """Every refused key of the Secret spec.kafka.secretRef names (key -> decoded value), naming the
    Secret's key: credentials are what it is for; code, commands, files and URLs are refused as in the spec."""
    issues = []
    for key, value in sorted(data.items()):
        canonical = secret_option(key)
        if is_credential(canonical) and _KEY_CHARS.match(canonical) and why_unsafe(canonical) is None:
            refusal = (login_module_refusal(value) if canonical == "sasl.jaas.config"
                       and not _matches(canonical, allow) else None)
        else:
            refusal = key_refusal(canonical, allow)
        if refusal is not None:
            issues.append(Issue("spec.kafka.secretRef", f"Secret {shown(secret)}, key {shown(key)} (Kafka option "
                                f"{shown(canonical)}) {refusal}; the driver is not started until it is fixed"))
    return issues


def internal_topic(topic: str) -> bool:
    """Kafka's internal topics (offsets, transactions, KRaft metadata) and Schema Registry's or Confluent's."""
    return any(fnmatchcase(topic.lower(), pattern) for pattern in INTERNAL_TOPICS)


def topic_issue(path: str, topic: str, what: str) -> Issue:
    return Issue(path, f"{what} {shown(topic)} is an internal topic of Kafka or its registry (__*, _schemas, "
                 "_confluent*): writing there corrupts consumer offsets, transactions or schemas of every app on "
                 "the cluster; choose a topic of the app's own")
