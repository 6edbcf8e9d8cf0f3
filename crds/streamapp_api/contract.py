"""The driver contract (docs/runtime-contract.md): every name and format that the operator and the
runtime share, stated once. The operator writes the driver pod and its ConfigMap from these; the
runtime reads them back with the same names. Pure, and imports nothing but the standard library, so
both sides (and the API's tests) can import it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# An app's Kafka credentials, as each kind of client takes them (docs/kafka.md).
from .kafka_credentials import librdkafka_options, option_key
# spark.properties is written and read by one codec, whose reader is exactly its writer's inverse.
from .properties import SPARK_PROPERTIES_FILE, PropertiesError, format_properties, parse_properties  # noqa: F401

# --- the ConfigMap, mounted read-only in the driver pod -----------------------------------------
CONFIG_DIR = "/etc/streamapp"
MANIFEST_FILE = "streamapp.yaml"
EXECUTOR_TEMPLATE_FILE = "executor-template.yaml"

# --- the environment of the driver container ----------------------------------------------------
ENV_CHECKPOINT_DIR = "STREAMAPP_CHECKPOINT_DIR"
ENV_METRICS_PORT = "STREAMAPP_METRICS_PORT"
ENV_POD_IP = "STREAMAPP_POD_IP"
ENV_POD_UID = "STREAMAPP_POD_UID"  # the driver's own, in its checkpoint's owner marker (runtime checkpoint/fence.py)
ENV_KAFKA_PREFIX = "STREAMAPP_KAFKA_"  # envFrom spec.kafka.secretRef: STREAMAPP_KAFKA_SASL_JAAS_CONFIG
ENV_POSTGRES_PREFIX = "STREAMAPP_POSTGRES_"
# The schema registry's HTTP Basic credentials ('user:password'): spec.kafka.schemaRegistry.secretRef's
# key SCHEMA_REGISTRY_USER_INFO_KEY (confluent-kafka's name for the setting).
ENV_SCHEMA_REGISTRY_USER_INFO = "STREAMAPP_SCHEMA_REGISTRY_USER_INFO"
SCHEMA_REGISTRY_USER_INFO_KEY = "basic.auth.user.info"


def postgres_uri_env(secret_name: str) -> str:
    """The variable that carries a Postgres sink's connection URI (the operator sets it from the
    Secret): the secret's name upper-cased, every other character than a letter or digit as ``_``."""
    return ENV_POSTGRES_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", secret_name).upper()


def kafka_env_options(environ: dict[str, str]) -> dict[str, str]:
    """``STREAMAPP_KAFKA_SASL_JAAS_CONFIG=…`` → ``{'sasl.jaas.config': …}`` (keys as the Secret's are read:
    ``kafka_credentials.option_key``)."""
    return {option_key(k[len(ENV_KAFKA_PREFIX):]): v for k, v in environ.items()
            if k.startswith(ENV_KAFKA_PREFIX) and len(k) > len(ENV_KAFKA_PREFIX)}


def admin_client_options(options: dict[str, str]) -> dict[str, str]:
    """The options an admin client of ours (librdkafka) takes from an app's (un-prefixed) Kafka client
    options: those on kafka_credentials.LIBRDKAFKA_OPTIONS, credentials derived from either flavour."""
    return librdkafka_options(options)


# --- rescale in place: the executor count a running driver is to have ----------------------------
# The operator writes it on the driver pod (the count the pod was started with, then each new target);
# the runtime reads its own pod through the API server (its service account may get pods) and applies
# it through Spark's executor allocation (runtime run/rescale.py). ANN_EXECUTORS_ASKED_AT says when the
# operator last changed it (RFC 3339): how long the driver has had to apply it.
ANN_EXECUTORS = "streamapp.io/executors"
ANN_EXECUTORS_ASKED_AT = "streamapp.io/executors-asked-at"


# --- snapshots: what a running driver is asked to copy ----------------------------------------------
# The operator writes the ask on the driver pod as JSON, {"nonce": spec.state.snapshotNonce or null,
# "every": seconds or null, "keep": n}, and changes it without restarting the driver; the runtime reads
# it with the executor count (run/snapshots.py), takes a snapshot named after a new nonce after the next
# committed batch, a periodic one ``every`` seconds, deletes the periodic ones beyond ``keep``, and
# reports the last one in the metrics below, which the operator copies into status.state.lastSnapshot.
ANN_SNAPSHOT = "streamapp.io/snapshot"
# Gauges, labels app and snapshot: the last snapshot taken (time it completed, in seconds since the
# epoch; its size in bytes; label location too on the first), and per query the batch it holds.
METRIC_SNAPSHOT_TIME = "streamapp_snapshot_last_timestamp_seconds"
METRIC_SNAPSHOT_BYTES = "streamapp_snapshot_last_bytes"
METRIC_SNAPSHOT_BATCH = "streamapp_snapshot_last_batch"
# The last snapshot that failed (labels app, snapshot and reason: the error's first line, at most 200
# characters), its time as the value; gone once a later snapshot of that name succeeds.
METRIC_SNAPSHOT_FAILED = "streamapp_snapshot_failed_timestamp_seconds"
# Every complete snapshot of the app the driver found or took (and retention has not deleted), labels app
# and snapshot: when it completed (0: not recorded), its size in bytes (-1: not recorded) and per query
# (label query too) the batch it holds (-1: none); the operator lists them in status.state.snapshots.
# How many there are, label app (-1: not listed yet, so the series above say nothing yet).
METRIC_SNAPSHOTS_KEPT = "streamapp_snapshots_kept"
METRIC_SNAPSHOT_KEPT = "streamapp_snapshot_kept_timestamp_seconds"
METRIC_SNAPSHOT_KEPT_BYTES = "streamapp_snapshot_kept_bytes"
METRIC_SNAPSHOT_KEPT_BATCH = "streamapp_snapshot_kept_batch"
# Where a driver restores a new state generation from: set by the operator (which resolves
# spec.state.restoreFrom, another app's too) on the driver pod; a local run resolves its own.
ENV_RESTORE_FROM = "STREAMAPP_RESTORE_FROM"
# With it, a restore that replaces a generation's checkpoint (a rollback: the state the failed spec wrote
# goes): the generation is restored from ENV_RESTORE_FROM even though it holds a checkpoint, unless that
# checkpoint was restored under this id already (a later driver of the rollback). The id is recorded in
# the generation's RESTORED_FILE.
ENV_RESTORE_ID = "STREAMAPP_RESTORE_ID"
RESTORED_FILE = "_restored.json"


# --- metrics and health, served by the driver -----------------------------------------------------
METRICS_PORT = 9090
HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"
# The metrics the operator reads for status (the runtime serves more).
METRIC_SOURCE_LAG = "streamapp_source_lag_records"
METRIC_LAST_BATCH = "streamapp_last_batch_timestamp_seconds"
METRIC_SHUFFLE_PARTITIONS = "streamapp_shuffle_partitions"
# Per query, of its last batch: what scaling.mode load decides from (with the lag above).
METRIC_INPUT_RATE = "streamapp_input_rows_per_second"
METRIC_PROCESSED_RATE = "streamapp_processed_rows_per_second"
METRIC_BATCH_DURATION = "streamapp_batch_duration_seconds"
METRIC_BATCHES = "streamapp_query_batches"  # a counter: batches since the driver started (warm-up)
METRIC_EXECUTORS = "streamapp_executors"  # executors registered with the driver
# The executor count the driver has applied (spark.executor.instances at its start, then each target
# read from ANN_EXECUTORS): the operator sees a rescale in place took effect when it equals the target.
METRIC_EXECUTORS_TARGET = "streamapp_executors_target"
# Counters per query (the family names; their samples end in _total), since the driver started.
METRIC_KAFKA_TRANSACTIONS = "streamapp_kafka_transactions"
METRIC_KAFKA_TRANSACTIONS_ABORTED = "streamapp_kafka_transactions_aborted"
METRIC_PARTITIONS_SKIPPED = "streamapp_sink_partitions_skipped"
METRIC_GROUP_COMMIT_FAILURES = "streamapp_consumer_group_commit_failures"


def consumer_group(namespace: str, app: str, query: str) -> str:
    """The Kafka consumer group the runtime commits a query's processed offsets to after each batch
    (Spark never commits any), so that kafka-consumer-groups, KEDA and lag exporters see its lag."""
    return f"streamapp.{namespace}.{app}.{query}"


def shuffle_partitions_to_grow_into(max_executors: int | None, executor_cores: int) -> int | None:
    """scaling.mode load: the fewest shuffle partitions a new checkpoint gets, so that the app can
    grow to maxExecutors with every core busy in its stateful stages (the count is fixed by the
    checkpoint). None without maxExecutors."""
    return max_executors * executor_cores if max_executors else None

# --- why a driver ended: its termination message ----------------------------------------------------
# On a fatal error the runtime writes "<reason>: <exception type>: <message>" and the first lines of
# the Spark or Python error to this file (the path from ENV_TERMINATION_LOG, which only the driver pod
# sets: a local run writes nothing); the kubelet keeps it in the pod's status, and the operator copies
# it into status.lastRestart.message and an event.
ENV_TERMINATION_LOG = "STREAMAPP_TERMINATION_LOG"
TERMINATION_LOG = "/dev/termination-log"
TERMINATION_MESSAGE_LIMIT = 4096  # bytes: the kubelet keeps no more of it
# The reasons the runtime names (the first word of its message): an error of the pipeline itself (an
# expression, a sink's table, ...), and Kafka refusing the app (credentials, offsets gone, records
# refused). Kafka out of reach is never fatal: the runtime waits and retries (kafka_wait, recovery).
TERMINATION_REASONS = ("PipelineError", "KafkaError", "Refused")  # Refused: REFUSED_REASON, below

# --- the checkpoint (how its locations are formed: checkpoint.py) ----------------------------------
CHECKPOINT_MOUNT = "/var/lib/streamapp/checkpoint"  # the volume's, in driver and executors
DLQ_QUERY_PREFIX = "dlq-"


# --- user code (python steps): spec.userCode.configMaps, mounted in driver and executors -------------
# Each ConfigMap is a directory of its own under this one; the runtime puts those directories first on
# the Python path before it imports a python step's module (the driver's and each Python worker's).
USER_CODE_DIR = "/opt/streamapp/user-code"
# Overrides USER_CODE_DIR (a local run, a test: the ConfigMaps' files copied to directories there).
ENV_USER_CODE_DIR = "STREAMAPP_USER_CODE_DIR"


def user_code_path(config_map: str, root: str = USER_CODE_DIR) -> str:
    """Where a user-code ConfigMap's files are, in the driver and the executors."""
    return f"{root}/{config_map}"


# --- Protobuf descriptor sets: a source's or table's protobuf.descriptorSet, mounted in the driver ------
# Each ConfigMap is a directory of its own under this one. The driver reads the set once when the app
# starts and ships its bytes with the decoder, so the executors need no mount and all read one version.
DESCRIPTOR_SET_DIR = "/opt/streamapp/descriptor-sets"
# Overrides DESCRIPTOR_SET_DIR (a local run, a test: the ConfigMaps' files copied to directories there).
ENV_DESCRIPTOR_SET_DIR = "STREAMAPP_DESCRIPTOR_SET_DIR"


def descriptor_set_dir(config_map: str, root: str = DESCRIPTOR_SET_DIR) -> str:
    """Where a descriptor-set ConfigMap's keys are files, in the driver."""
    return f"{root}/{config_map}"


# --- an object-store checkpoint (s3a://): Hadoop's S3A connector in driver and executors ------------
# The access key pair, from the app's Secret (secretKeyRef in the driver pod and the executor template):
# the names S3A's EnvironmentVariableCredentialsProvider reads.
ENV_S3_ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
ENV_S3_SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"
S3A_PREFIX = "spark.hadoop.fs.s3a."
S3A_ENV_CREDENTIALS = "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
# Never in spec.sparkConf (policy.py refuses them): a key pair there would sit in the app's ConfigMap.
# Also per bucket (fs.s3a.bucket.<bucket>.access.key …), as S3A reads them.
S3A_SECRET_CONF = ("access.key", "secret.key", "session.token")


def is_s3a_secret_conf(key: str) -> bool:
    """An S3A credential setting: spark.hadoop.fs.s3a.access.key, its per-bucket twin, and the like."""
    if not key.startswith(S3A_PREFIX):
        return False
    rest = key[len(S3A_PREFIX):]
    return rest in S3A_SECRET_CONF or (rest.startswith("bucket.") and rest.endswith(tuple(f".{o}" for o in S3A_SECRET_CONF)))


def s3a_conf(endpoint: str | None, region: str | None, path_style: bool, credentials_from_env: bool) -> dict[str, str]:
    """The Spark settings of an object-store checkpoint (spec.state.checkpoint.s3), for driver and
    executors alike (spark.hadoop.* reaches every Hadoop FileSystem Spark opens)."""
    conf = {f"{S3A_PREFIX}path.style.access": "true" if path_style else "false"}
    if endpoint:
        conf[f"{S3A_PREFIX}endpoint"] = endpoint
        conf[f"{S3A_PREFIX}connection.ssl.enabled"] = "true" if endpoint.startswith("https:") else "false"
    if region:
        conf[f"{S3A_PREFIX}endpoint.region"] = region
    if credentials_from_env:
        conf[f"{S3A_PREFIX}aws.credentials.provider"] = S3A_ENV_CREDENTIALS
    return conf


def dlq_query(source: str) -> str:
    return f"{DLQ_QUERY_PREFIX}{source}"


# --- Spark settings that depend on the app --------------------------------------------------------
STATE_STORE_PROVIDERS = {
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# The Python state API that keeps accumulate's and table joins' per-key state. A checkpoint's state
# can be read only by the API that wrote it, so the runtime records the choice in the checkpoint at
# its first run; this setting (spec.sparkConf) chooses for a new checkpoint only.
STATE_FUNCTION_CONF = "spark.streamapp.stateFunction"
STATE_FUNCTIONS = ("transformWithState", "applyInPandasWithState")  # the first: new checkpoints' default


def app_sql_conf(store: str) -> dict[str, str]:
    """The SQL settings every query of an app runs with. The operator writes them into
    spark.properties; the runtime sets them on its session when it starts the app (a session of
    ``streamapp run`` or of a test may have run another app before)."""
    return {
        "spark.sql.streaming.stateStore.providerClass": STATE_STORE_PROVIDERS[store],
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        # Spark would replace ${...} in SQL text (from its conf, the environment, system properties)
        # before parsing it: a string literal could open up after the admission check has read it.
        SQL_VARIABLE_SUBSTITUTE: "false",
    }


# --- the driver's reach through the API server ----------------------------------------------------
# Spark settings that keep the driver's Kubernetes calls to its executor pods, so that its Role can be
# pods only (operator render/rbac.py): set by the operator, refused in sparkConf (rules.py).
SPARK_DRIVER_SCOPE_CONF = {
    "spark.kubernetes.executor.disableConfigMap": "true",  # the image has no conf dir to ship
    "spark.kubernetes.driver.service.deleteOnTermination": "false",  # the Service is the operator's
    "spark.kubernetes.driver.ownPersistentVolumeClaim": "false",  # executors mount the app's own claim
    "spark.kubernetes.driver.reusePersistentVolumeClaim": "false",
}


# --- what the driver refuses to run: the cluster policy's refused SQL functions -------------------
# The admission check reads expressions with sqlglot; Spark parses them with its own parser. So the
# driver checks again where Spark parses (runtime run/plan_guard.py): every expression site read by
# Spark's parser, then every query's analysed plan by expression class, before any query starts. The
# operator writes the policy's functions.refuse into spark.properties under this key (comma-separated,
# lower-case; empty: none refused); authors cannot set it (rules.py SPARK_MANAGED_CONF). Without it
# (``streamapp run`` on a laptop) the runtime refuses the default list.
REFUSED_FUNCTIONS_CONF = "spark.streamapp.refusedFunctions"
DEFAULT_REFUSED_FUNCTIONS = ("reflect", "java_method", "try_reflect")
# The setting every app runs with false (app_sql_conf): Spark's ${...} substitution in SQL text.
SQL_VARIABLE_SUBSTITUTE = "spark.sql.variable.substitute"
# The first word of the termination message of a driver that refused its app: the same spec would be
# refused again, so the operator does not restart it (phase Failed until the spec changes).
REFUSED_REASON = "Refused"


def format_refused_functions(names: Iterable[str]) -> str:
    """The value of REFUSED_FUNCTIONS_CONF for these function names."""
    return ",".join(sorted({name.strip().lower() for name in names if name.strip()}))


def parse_refused_functions(value: str | None) -> frozenset[str]:
    """The refused function names a driver was given; the default list when it was given none."""
    if value is None:
        return frozenset(DEFAULT_REFUSED_FUNCTIONS)
    return frozenset(name.strip().lower() for name in value.split(",") if name.strip())
