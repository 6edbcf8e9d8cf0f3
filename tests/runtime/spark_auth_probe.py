"""Run in a process of its own by test_spark_auth.py (one SparkContext per JVM): a local-cluster
driver with the operator's Spark security settings (operator render/security.py), its executors in
JVMs of their own (RPC and block transfers go over the network), then executors started by hand the
way an executor pod starts (KubernetesExecutorBackend, the settings as JVM options, the key from a
file, the executor template's SPARK_JAVA_OPT_ variable) try to join it; what it let in, as JSON.

The driver takes the key as spark.authenticate.secret (the file's bytes, base64, as Spark reads a
key file): Spark 4.0 reads a driver's key file only on Kubernetes ("Secret keys provided via files
is only allowed in Kubernetes mode"), so the driver's file is checked on the real cluster (tests/e2e).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import time

import pyspark
from pyspark.sql import SparkSession

from streamapp_operator.render.security import EXECUTOR_MASTER_ENV, SPARK_SECURITY_CONF

PORT = int(os.environ.get("PROBE_DRIVER_PORT", "17078"))
FILE_KEY = "spark.authenticate.secret.file"


def session(conf: dict) -> SparkSession:
    builder = SparkSession.builder
    for key, value in {"spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1",
                       "spark.driver.bindAddress": "127.0.0.1", **conf}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def executors(sc) -> int:
    return sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # the driver's block manager aside


def key_file(folder: str, name: str, key: bytes) -> str:
    path = os.path.join(folder, name)
    with open(path, "wb") as out:
        out.write(key)
    os.chmod(path, 0o440)
    return path


def executor_pod(sc, key_path: str, executor_id: str, template_env: bool = True) -> subprocess.Popen:
    """An executor as its pod runs it: the operator's settings (the key file at ``key_path``) and,
    with ``template_env``, the executor template's JVM option."""
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")
    options = [f"-D{k}={key_path if k == FILE_KEY else v}" for k, v in SPARK_SECURITY_CONF.items()]
    if template_env:
        options.append(EXECUTOR_MASTER_ENV["value"])
    command = ["java", "-cp", jars, *options, "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
               "--driver-url", f"spark://CoarseGrainedScheduler@127.0.0.1:{PORT}", "--executor-id", executor_id,
               "--hostname", "127.0.0.1", "--cores", "1", "--app-id", sc.applicationId, "--resourceProfileId", "0",
               "--podName", f"probe-exec-{executor_id}"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def joins(sc, proc: subprocess.Popen, timeout: float = 90) -> tuple[bool, int | None]:
    """(whether one more executor registered, the process's exit code if it ended)."""
    before = executors(sc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and executors(sc) == before and proc.poll() is None:
        time.sleep(1)
    joined = executors(sc) > before
    if proc.poll() is None:
        proc.kill()
        proc.wait()
        return joined, None
    return joined, proc.returncode


def main(folder: str) -> dict:
    key = os.urandom(32)
    conf = {k: v for k, v in SPARK_SECURITY_CONF.items() if k != FILE_KEY}
    spark = session({**conf, "spark.master": "local-cluster[2,1,1024]", "spark.driver.port": str(PORT),
                     "spark.authenticate.secret": base64.b64encode(key).decode()})
    sc = spark.sparkContext
    counts = dict(sc.parallelize(range(1000), 4).map(lambda n: (n % 3, 1)).reduceByKey(lambda a, b: a + b).collect())
    out: dict = {"counts": counts, "executors": executors(sc)}
    right, other = key_file(folder, "right", key), key_file(folder, "other", os.urandom(32))
    out["other_key"] = joins(sc, executor_pod(sc, other, "901"))
    out["no_template_env"] = joins(sc, executor_pod(sc, right, "902", template_env=False))
    out["as_the_pod"] = joins(sc, executor_pod(sc, right, "903"))
    spark.stop()
    return out


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("SPARK_LOCAL_HOSTNAME", "localhost")
    with tempfile.TemporaryDirectory() as folder:
        print("PROBE " + json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else folder)))
