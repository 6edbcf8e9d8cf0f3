"""The SparkSession: spark.properties verbatim, then the runtime's defaults, then local conveniences."""

from __future__ import annotations

import logging
import os
import sys

from streamapp_runtime import spark_compat

log = logging.getLogger("streamapp.runtime")


# The Kafka connector jars of a local run, comma-separated (`spark.jars`): this variable when set
# (the tests and the benchmarks set it), else what `streamapp jars` resolved; in the runtime image
# the jars are in Spark's own folder and neither is needed.
JARS_ENV = "STREAMAPP_SPARK_JARS"


def local_jars() -> str | None:
    from streamapp_runtime import jars

    return os.environ.get(JARS_ENV) or jars.resolved_jars()


# Without these, a local-mode JVM looks for this machine's first non-loopback address and asks DNS
# for its name (a PTR query to the machine's resolver on every start); a local run needs neither.
LOOPBACK_ENV = {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "localhost"}


# Spark 4.0 made these in the current directory (artifacts: SPARK-52396; 4.2 no longer makes it there
# when a session starts) and leaves them empty; a run removes the ones it made, when still empty.
SCRATCH_DIRS = ("artifacts", "spark-warehouse")
_made_here: list[str] = []


# A class-data-sharing archive of the classes a driver loads (streamapp_runtime/class_archive.py):
# the runtime image has one, the test bed makes one per Python environment. The driver's and the
# executors' JVMs map it and start with about half the CPU; one that does not fit their JDK or jars is
# ignored, quietly.
CLASS_ARCHIVE_ENV = "STREAMAPP_CLASS_ARCHIVE"
JAVA_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def with_class_archive(conf: dict[str, str], archive: str | None) -> dict[str, str]:
    """``conf`` with the JVM options that map ``archive``, when it is a file; else ``conf`` unchanged."""
    if not archive or not os.path.isfile(archive):
        return conf
    options = f"-XX:SharedArchiveFile={archive} -Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
    return conf | {key: f"{conf[key]} {options}" if conf.get(key) else options for key in JAVA_OPTIONS}


def bind_to_loopback() -> None:
    """Keep a local-mode Spark (driver, UI, block manager) on loopback, before its JVM starts."""
    for name, value in LOOPBACK_ENV.items():
        os.environ.setdefault(name, value)


def create_session(conf: dict[str, str]):
    from pyspark.sql import SparkSession

    conf = with_class_archive(dict(conf), os.environ.get(CLASS_ARCHIVE_ENV))
    # Python workers need the runtime's packages (pandas, psycopg): use this interpreter unless told otherwise.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if conf.get("spark.master", "local").startswith("local"):
        bind_to_loopback()
    if conf.get("spark.master", "").startswith("local") and "spark.jars" not in conf and "spark.jars.packages" not in conf:
        jars = local_jars()
        if jars:
            conf["spark.jars"] = jars
        else:
            log.warning("no Kafka connector jars: Spark will not find the data source 'kafka'; "
                        "run `streamapp jars` once (Maven), or set %s", JARS_ENV)
    _made_here[:] = [os.path.abspath(d) for d in SCRATCH_DIRS if not os.path.exists(d)]
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("STREAMAPP_SPARK_LOG_LEVEL", "WARN"))
    if "STREAMAPP_SPARK_LOG_LEVEL" not in os.environ:
        quiet_kafka_clients(spark)
    return spark


def quiet_kafka_clients(spark) -> None:
    """While a broker is down, Kafka's NetworkClient warns several times a second per client; the
    runtime's own line says what happens instead (Spark's offset-fetch warnings stay)."""
    try:
        spark_compat.set_jvm_log_level(spark, "org.apache.kafka.clients.NetworkClient", "ERROR")
    except Exception as exc:  # noqa: BLE001 - a different logging backend: keep its warnings
        log.debug("could not quiet Kafka's NetworkClient: %s", exc)


def stop_session(spark) -> None:
    spark_compat.shut_down_jvm(spark)
    for path in _made_here:
        try:
            os.rmdir(path)  # only when empty: anything Spark put there stays
        except OSError:
            pass
    _made_here.clear()


def object_store_session(app, command: str):
    """For a command that reaches an app's s3a:// location (through Spark's Hadoop FileSystem): None
    when this process runs a SparkSession already (a test's, a notebook's, a driver's: it is used, and
    never stopped by the command), else a local one with the app's object-store settings, which the
    caller stops. The same test as the files read through it (``checkpoint.files``)."""
    from streamapp_runtime.run.settings import spark_defaults

    if spark_compat.running_session() is not None:
        return None
    logging.getLogger("py4j").setLevel(logging.WARNING)
    conf = spark_defaults(app.metadata.name, app.spec.state.store, {}, app.spec.state.checkpoint.spark_conf())
    conf.update({"spark.master": "local[1]", "spark.app.name": f"streamapp-{command}-{app.metadata.name}"})
    return create_session(conf)
