"""What an app may run on a shared cluster: the operator-level policy (the chart's ``policy`` values).

The API's own checks say whether a StreamApp makes sense; the policy says whether this cluster lets its
author run it. ``streamapp validate``, the admission webhook and every reconcile apply the same policy;
without a policy file they apply ``Policy()``, the choice for a cluster whose StreamApp authors are not
its admins (docs/security.md). Pure functions over the models.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Iterator

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from . import contract
from .errors import InvalidSpec, Issue, issues_from_validation_error
from .expressions import expression_sites, functions_in
from .spec import StreamApp

DEFAULT_IMAGES = ("streamapp/runtime",)
DEFAULT_REFUSED_FUNCTIONS = ("reflect", "java_method", "try_reflect")

# Spark settings an author may set without an admin's say: tuning of SQL, state, memory, shuffle,
# timeouts, the UI and executor sizing. Globs; what is not here is refused unless `sparkConf.allow`
# lets it through (the operator's own keys are refused by rules.py whatever the policy says).
SAFE_SPARK_CONF = (
    "spark.sql.adaptive.*", "spark.sql.ansi.enabled", "spark.sql.session.timeZone", "spark.sql.caseSensitive",
    "spark.sql.autoBroadcastJoinThreshold", "spark.sql.broadcastTimeout", "spark.sql.files.maxPartitionBytes",
    "spark.sql.execution.arrow.*", "spark.sql.execution.pythonUDF.*", "spark.sql.optimizer.*",
    "spark.sql.codegen.*", "spark.sql.inMemoryColumnarStorage.*", "spark.sql.streaming.*",
    "spark.sql.ui.retained*", "spark.default.parallelism", "spark.locality.wait*", "spark.memory.*",
    "spark.network.timeout", "spark.network.timeoutInterval", "spark.executor.heartbeatInterval",
    "spark.task.maxFailures", "spark.speculation", "spark.speculation.*", "spark.rdd.compress",
    "spark.io.compression.*", "spark.shuffle.compress", "spark.shuffle.spill.compress", "spark.shuffle.file.buffer",
    "spark.shuffle.io.*", "spark.reducer.maxSizeInFlight", "spark.broadcast.blockSize", "spark.broadcast.compress",
    "spark.ui.enabled", "spark.ui.showConsoleProgress", "spark.ui.retained*", "spark.cleaner.*",
    "spark.driver.maxResultSize", "spark.executor.pyspark.memory", "spark.python.worker.*", "spark.log.level",
    "spark.kubernetes.executor.request.cores", "spark.kubernetes.executor.limit.cores",
    "spark.kubernetes.allocation.batch.size", "spark.kubernetes.allocation.batch.delay",
    "spark.kubernetes.executor.deleteOnTermination", "spark.kubernetes.executor.apiPollingInterval",
    "spark.kubernetes.executor.missingPodDetectDelta", "spark.decommission.enabled", "spark.storage.decommission.*",
    "spark.executor.decommission.*", "spark.kafka.consumer.cache.*", "spark.kafka.producer.cache.*",
    "spark.excludeOnFailure.*", "spark.stage.maxConsecutiveAttempts",
)
# Why a key is not safe, for the message (checked before the safe list: some sit under safe prefixes).
_UNSAFE_SPARK_CONF: tuple[tuple[tuple[str, ...], str], ...] = (
    (("*.class", "*Class", "*.classes", "*Classes", "*.plugins", "spark.plugins", "*extraListeners", "*Listeners",
      "spark.sql.extensions", "spark.sql.catalog.*", "spark.jars", "spark.jars.*", "spark.files", "spark.archives",
      "spark.submit.pyFiles", "spark.pyFiles", "*extraJavaOptions", "*extraClassPath", "*extraLibraryPath",
      "*userClassPathFirst", "spark.sql.hive.*", "spark.serializer", "spark.kryo.*"),
     "loads code into the driver or the executors"),
    (("spark.kubernetes.*volumes.*", "spark.kubernetes.*secrets.*", "spark.kubernetes.*secretKeyRef.*",
      "spark.kubernetes.*.podTemplateFile", "spark.kubernetes.*.podTemplateContainerName",
      "spark.kubernetes.*.container.image", "spark.kubernetes.*.label.*", "spark.kubernetes.*.annotation.*",
      "spark.kubernetes.*.node.selector.*", "spark.kubernetes.node.selector.*", "spark.kubernetes.*.scheduler.name"),
     "changes the pods the app runs in (host paths, Secrets, images, labels other policies select on)"),
    (("spark.kubernetes.authenticate.*", "spark.kubernetes.*.serviceAccountName", "spark.kubernetes.context",
      "spark.kubernetes.*.apiserver.*", "spark.master"),
     "changes whose credentials the app uses or which cluster it talks to"),
    (("spark.eventLog.*", "spark.history.*", "spark.metrics.conf*", "spark.sql.warehouse.dir", "spark.local.dir",
      "*.url", "*.uri", "spark.sql.streaming.checkpointFileManagerClass"),
     "reads from or writes to a location of the author's choosing"),
)
# Keys whose value is a credential (by how they end), refused in the spec whatever the policy allows.
_CREDENTIAL = re.compile(r"(password|secret|secret[._-]?key|access[._-]?key|token|credentials?|private[._-]?key|"
                         r"jaas\.config)$", re.IGNORECASE)

# Kafka client options (spec.kafka.options) that load code, run commands or fetch from URLs in the
# Spark driver and executors (Java client) or the operator (librdkafka).
_UNSAFE_KAFKA_OPTIONS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("*.class", "*.classes", "config.providers*", "metric.reporters", "plugin.library.paths", "ssl.engine.location",
      "ssl.engine.id", "ssl.providers", "sasl.kerberos.kinit.cmd", "sasl.kerberos.service.name"),
     "loads code or runs a command in the driver, the executors or the operator"),
    (("*.url", "*.urls", "sasl.oauthbearer.*endpoint*", "sasl.oidc.*"),
     "makes the app or the operator fetch from a URL of the author's choosing"),
)


class _PolicyModel(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, validate_by_alias=True,
                              validate_by_name=True, frozen=True)


class SparkConfPolicy(_PolicyModel):
    allow: tuple[str, ...] = Field(default=(), description="Globs of sparkConf keys allowed beyond the safe list "
                                   "(e.g. 'spark.kubernetes.node.selector.*'); '*' allows every key.")


class FunctionPolicy(_PolicyModel):
    refuse: tuple[str, ...] = Field(default=DEFAULT_REFUSED_FUNCTIONS,
                                    description="SQL functions refused in every expression (case-insensitive).")


class KafkaOptionPolicy(_PolicyModel):
    allow: tuple[str, ...] = Field(default=(), description="Globs of spec.kafka.options keys allowed although "
                                   "they load code or fetch from URLs (e.g. an OAuth token endpoint).")


class Policy(_PolicyModel):
    """The operator-level policy (a YAML file, the chart's ``policy`` values)."""

    images: tuple[str, ...] = Field(default=DEFAULT_IMAGES, description="Prefixes spec.image must start with "
                                    "(a repository, or a registry ending in '/'); '*' allows any image.")
    spark_conf: SparkConfPolicy = SparkConfPolicy()
    functions: FunctionPolicy = FunctionPolicy()
    kafka_options: KafkaOptionPolicy = KafkaOptionPolicy()

    @classmethod
    def from_mapping(cls, document: Any) -> "Policy":
        """The policy, or InvalidSpec naming each wrong key (e.g. 'sparkConf.alow')."""
        try:
            return cls.model_validate(document or {})
        except ValidationError as exc:
            raise InvalidSpec(issues_from_validation_error(exc, cls)) from exc

    @classmethod
    def from_file(cls, path: str | Path) -> "Policy":
        return cls.from_mapping(yaml.safe_load(Path(path).read_text()))


def _matches(key: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(key, pattern) for pattern in patterns)


def _why_unsafe(key: str, table: tuple[tuple[tuple[str, ...], str], ...]) -> str | None:
    return next((why for patterns, why in table if _matches(key, patterns)), None)


def image_allowed(image: str, prefixes: tuple[str, ...]) -> bool:
    """``streamapp/runtime`` allows ``streamapp/runtime:1.0`` and ``streamapp/runtime@sha256:…``, never
    ``streamapp/runtime-other``; a prefix ending in '/' (a registry or project) allows what is under it."""
    for prefix in prefixes:
        if prefix == "*" or image == prefix:
            return True
        if image.startswith(prefix) and (prefix.endswith(("/", ":", "@")) or image[len(prefix)] in ":@"):
            return True
    return False


def _check_image(app: StreamApp, policy: Policy) -> Iterator[Issue]:
    image = app.spec.image
    if image is not None and not image_allowed(image, policy.images):
        allowed = ", ".join(policy.images) or "(none: only the operator's runtime image)"
        yield Issue("spec.image", f"image {image!r} is not allowed on this cluster; images must start with one of: "
                    f"{allowed} (operator policy 'images'); leave spec.image out to run the operator's runtime image")


def _check_spark_conf(app: StreamApp, policy: Policy) -> Iterator[Issue]:
    for key in app.spec.spark_conf or {}:
        path = f"spec.sparkConf[{key}]"
        if not key.startswith("spark.") or any(c in key for c in "=: \t\r\n"):
            continue  # rules.py names what is wrong with the key itself
        if contract.is_s3a_secret_conf(key):
            yield Issue(path, f"{key!r} looks like a credential of the object store: sparkConf is copied into a "
                        "ConfigMap that anyone who can read ConfigMaps in the namespace can read; put the key pair "
                        "in a Secret and name it in spec.state.checkpoint.s3.secretRef (driver and executors get "
                        f"it as {contract.ENV_S3_ACCESS_KEY_ID} and {contract.ENV_S3_SECRET_ACCESS_KEY})")
            continue
        if _CREDENTIAL.search(key):
            yield Issue(path, f"{key!r} looks like a credential: sparkConf is copied into a ConfigMap that "
                        "anyone who can read ConfigMaps in the namespace can read; pass credentials in a Secret")
            continue
        if _matches(key, policy.spark_conf.allow):
            continue
        why = _why_unsafe(key, _UNSAFE_SPARK_CONF)
        if why is not None:
            yield Issue(path, f"{key!r} is refused on this cluster: it {why}; an admin can allow it with the "
                        "operator policy 'sparkConf.allow'")
        elif not _matches(key, SAFE_SPARK_CONF):
            yield Issue(path, f"{key!r} is not on the operator's list of safe Spark settings (tuning of SQL, "
                        "state, memory, shuffle, timeouts and executor sizing); an admin can allow it with the "
                        "operator policy 'sparkConf.allow'")


def _check_kafka_options(app: StreamApp, policy: Policy) -> Iterator[Issue]:
    secret_hint = ("put it in the Secret named by spec.kafka.secretRef (its keys are client options) so it stays "
                   "out of the spec and the app's ConfigMap")
    for key, value in (app.spec.kafka.options or {}).items():
        path = f"spec.kafka.options[{key}]"
        if _CREDENTIAL.search(key) or re.search(r"password\s*=", value, re.IGNORECASE):
            yield Issue(path, f"{key!r} carries a credential in plain text; {secret_hint}")
            continue
        why = _why_unsafe(key, _UNSAFE_KAFKA_OPTIONS)
        if why is not None and not _matches(key, policy.kafka_options.allow):
            yield Issue(path, f"{key!r} is refused on this cluster: it {why}; an admin can allow it with the "
                        "operator policy 'kafkaOptions.allow'")


def _check_functions(app: StreamApp, policy: Policy) -> Iterator[Issue]:
    refused = {f.lower() for f in policy.functions.refuse}
    if not refused:
        return
    for path, text in expression_sites(app):  # what does not parse has no functions (the API's checks say why)
        for name in sorted(functions_in(text) & refused):
            yield Issue(path, f"function {name}() is refused on this cluster: it calls arbitrary Java methods "
                        "(operator policy 'functions.refuse')" if "reflect" in name or "java" in name else
                        f"function {name}() is refused on this cluster (operator policy 'functions.refuse')")


def check_policy(app: StreamApp, policy: Policy | None = None) -> list[Issue]:
    """Every way ``app`` breaks ``policy`` (default: ``Policy()``), each naming the field."""
    policy = policy or Policy()
    return [*_check_image(app, policy), *_check_spark_conf(app, policy), *_check_kafka_options(app, policy),
            *_check_functions(app, policy)]
