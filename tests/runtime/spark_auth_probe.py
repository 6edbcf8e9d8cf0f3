"""Run in a process of its own by test_spark_auth.py (one SparkContext per JVM): a local-cluster
driver with the operator's Spark security settings (operator render/security.py), its executors in
JVMs of their own (RPC and block transfers go over the network), and two executors started by hand
that try to join it, one with the app's key and one with another; what it let in, as JSON.

The key is given as spark.authenticate.secret: Spark 4.0 refuses a key file outside Kubernetes
("Secret keys provided via files is only allowed in Kubernetes mode"), so the file the operator
mounts is checked on the real cluster (tests/e2e).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time

import pyspark
from pyspark.sql import SparkSession

from streamapp_operator.render.security import SPARK_SECURITY_CONF

KEY = base64.b64encode(os.urandom(32)).decode()
PORT = int(os.environ.get("PROBE_DRIVER_PORT", "17078"))


def session(conf: dict) -> SparkSession:
    builder = SparkSession.builder
    for key, value in {"spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1",
                       "spark.driver.bindAddress": "127.0.0.1", **conf}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def executors(sc) -> int:
    return sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # the driver's block manager aside


def outside_executor(sc, key: str, executor_id: str) -> subprocess.Popen:
    """An executor JVM nobody asked for, with the operator's settings and ``key``, joining the driver."""
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")
    options = [f"-D{k}={v}" for k, v in SPARK_SECURITY_CONF.items() if k != "spark.authenticate.secret.file"]
    command = ["java", "-cp", jars, *options, "org.apache.spark.executor.CoarseGrainedExecutorBackend",
               "--driver-url", f"spark://CoarseGrainedScheduler@127.0.0.1:{PORT}", "--executor-id", executor_id,
               "--hostname", "127.0.0.1", "--cores", "1", "--app-id", sc.applicationId, "--resourceProfileId", "0"]
    return subprocess.Popen(command, env={**os.environ, "_SPARK_AUTH_SECRET": key}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def cluster() -> dict:
    conf = {k: v for k, v in SPARK_SECURITY_CONF.items() if k != "spark.authenticate.secret.file"}
    spark = session({**conf, "spark.master": "local-cluster[2,1,1024]", "spark.authenticate.secret": KEY,
                     "spark.driver.port": str(PORT)})
    sc = spark.sparkContext
    counts = dict(sc.parallelize(range(1000), 4).map(lambda n: (n % 3, 1)).reduceByKey(lambda a, b: a + b).collect())
    out = {"counts": counts, "executors": executors(sc)}
    wrong = outside_executor(sc, base64.b64encode(os.urandom(32)).decode(), "901")
    try:
        out["wrong_exit"] = wrong.wait(timeout=120)
    except subprocess.TimeoutExpired:
        wrong.kill()
        out["wrong_exit"] = None
    out["after_wrong"] = executors(sc)
    right = outside_executor(sc, KEY, "902")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and executors(sc) == out["after_wrong"]:
        time.sleep(1)
    out["after_right"] = executors(sc)
    right.kill()
    right.wait()
    spark.stop()
    return out


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("SPARK_LOCAL_HOSTNAME", "localhost")
    print("PROBE " + json.dumps(cluster()))
