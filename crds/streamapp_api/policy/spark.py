"""Spark settings an author may set (spec.sparkConf): a safe list of tuning keys, and within it what
still names a class, a module, a path or a URL. Pure.

Spark reads its keys as written (case-sensitive), so they are compared as written; rules.py has
already refused keys that are not one ``spark.`` key on one line and the operator's own keys.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Iterator, Mapping

from .. import contract
from ..errors import Issue, shown
from .kafka import CREDENTIAL_SUFFIX

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
# Why a key is not safe, for the message (checked before the safe list: some sit under safe globs, e.g.
# spark.sql.streaming.checkpointFileManagerClass, spark.python.worker.module,
# spark.storage.decommission.fallbackStorage.path).
UNSAFE_SPARK_CONF: tuple[tuple[tuple[str, ...], str], ...] = (
    (("*.class", "*Class", "*.classes", "*Classes", "*.plugins", "spark.plugins", "*extraListeners", "*Listeners",
      "spark.sql.extensions", "spark.sql.catalog.*", "spark.jars", "spark.jars.*", "spark.files", "spark.archives",
      "spark.submit.pyFiles", "spark.pyFiles", "*extraJavaOptions", "*extraClassPath", "*extraLibraryPath",
      "*userClassPathFirst", "spark.sql.hive.*", "spark.serializer", "spark.kryo.*", "*.module", "*.modules",
      "spark.sql.streaming.disabledV2*"),
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
      "*.url", "*.uri", "*.path", "*Path", "*.dir", "*Dir", "*.location", "*Location", "*.file", "*File"),
     "reads from or writes to a location of the author's choosing"),
)
# Compression codecs: Spark takes a short name or any class name; only the short names are safe.
CODEC_KEYS = ("*.codec",)
SPARK_CODECS = ("lz4", "lzf", "snappy", "zstd")
_ALLOW_HINT = "an admin can allow it with the operator policy 'sparkConf.allow'"


def _matches(key: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(key, pattern) for pattern in patterns)


def why_unsafe(key: str) -> str | None:
    return next((why for patterns, why in UNSAFE_SPARK_CONF if _matches(key, patterns)), None)


def _refusal(key: str, value: str, allow: tuple[str, ...]) -> str | None:
    """Why ``key: value`` is refused (credentials and '${' aside), or None."""
    if _matches(key, allow):
        return None
    why = why_unsafe(key)
    if why is not None:
        return f"{shown(key)} is refused on this cluster: it {why}; {_ALLOW_HINT}"
    if not _matches(key, SAFE_SPARK_CONF):
        return (f"{shown(key)} is not on the operator's list of safe Spark settings (tuning of SQL, state, memory, "
                f"shuffle, timeouts and executor sizing); {_ALLOW_HINT}")
    if _matches(key, CODEC_KEYS) and value.strip().lower() not in SPARK_CODECS:
        return (f"{shown(key)} takes a codec's short name ({', '.join(SPARK_CODECS)}), not {shown(value)}: Spark "
                f"loads any other value as a class; {_ALLOW_HINT}")
    return None


def spark_conf_issues(conf: Mapping[str, str], allow: tuple[str, ...]) -> Iterator[Issue]:
    for key, value in conf.items():
        path = f"spec.sparkConf[{key}]"
        if not key.startswith("spark.") or any(c in key for c in "=: "):
            continue  # rules.py names what is wrong with the key itself
        if contract.is_s3a_secret_conf(key):
            yield Issue(path, f"{shown(key)} looks like a credential of the object store: sparkConf is copied into a "
                        "ConfigMap that anyone who can read ConfigMaps in the namespace can read; put the key pair "
                        "in a Secret and name it in spec.state.checkpoint.s3.secretRef (driver and executors get "
                        f"it as {contract.ENV_S3_ACCESS_KEY_ID} and {contract.ENV_S3_SECRET_ACCESS_KEY})")
        elif CREDENTIAL_SUFFIX.search(key.lower()):
            yield Issue(path, f"{shown(key)} looks like a credential: sparkConf is copied into a ConfigMap that "
                        "anyone who can read ConfigMaps in the namespace can read; pass credentials in a Secret")
        elif "${" in value:
            yield Issue(path, f"the value of {shown(key)} holds '${{': Spark replaces ${{env:…}} and ${{system:…}} in "
                        "settings with the driver's environment and system properties; write the value itself")
        else:
            refusal = _refusal(key, value, allow)
            if refusal is not None:
                yield Issue(path, refusal)
