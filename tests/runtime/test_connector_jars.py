"""`streamapp jars` then `streamapp run`, as a user outside the test bed does (docs/install.md,
"Run a StreamApp without Kubernetes"): the connector resolved by Maven into the user cache, found there by the run
without STREAMAPP_SPARK_JARS, and real Spark reading and writing real Kafka with it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from streamapp_testkit.runtime import REPO, consume, produce
from streamapp_testbed.paths import cache_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def upper_words_app(kafka, names, tmp_path):
    """Six words on a fresh topic and an app that writes them upper-cased to another: (manifest path, output topic)."""
    source, out = names("in"), names("out")
    produce(kafka.bootstrap, source, [(f"k{i}", {"word": w}) for i, w in enumerate("a b a c a b".split())])
    app = {"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": names("app")[:40].rstrip("-")},
           "spec": {"kafka": {"bootstrapServers": "kafka:9092"},
                    "sources": [{"name": "words", "topic": source, "format": "json", "schema": {"word": "string"},
                                 "startingOffsets": "earliest"}],
                    "streams": [{"name": "upper", "from": "words", "steps": [{"withColumns": {"word": "upper(word)"}}]}],
                    "sinks": [{"from": "upper", "kafka": {"topic": out}}]}}  # fmt: skip
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(app))
    return path, out


def test_jars_command_fills_the_user_cache_and_a_run_reads_kafka_with_it(kafka, names, tmp_path):
    cache = tmp_path / "cache"
    env = {**os.environ, "STREAMAPP_CACHE": str(cache),
           "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("crds", "apps"))}
    env.pop("STREAMAPP_SPARK_JARS", None)
    streamapp = [sys.executable, "-m", "streamapp_api"]
    # The network guard is on during tests: Maven resolves from the project's warm local repository,
    # offline (a user's first run downloads from Maven Central instead).
    resolved = subprocess.run([*streamapp, "jars", "--maven-repo", str(cache_dir() / "m2"), "--offline"],
                              env=env, capture_output=True, text=True, timeout=300)
    assert resolved.returncode == 0, resolved.stdout + resolved.stderr
    import pyspark

    folder = cache / "jars" / f"spark-kafka-{pyspark.__version__}"
    assert (folder / ".complete").is_file()
    assert {p.name.split("_")[0] for p in folder.glob("spark-*.jar")} == {"spark-sql-kafka-0-10", "spark-token-provider-kafka-0-10"}
    assert len(list(folder.glob("streamapp-runtime-*.jar"))) == 1, "the runtime's own jar (the JSON fast path)"
    again = subprocess.run([*streamapp, "jars"], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "already resolved" in again.stdout

    path, out = upper_words_app(kafka, names, tmp_path)
    run = subprocess.run([*streamapp, "run", str(path), "--kafka", kafka.bootstrap, "--available-now",
                          "--checkpoint", str(tmp_path / "checkpoint"), "--metrics-port", "0"],
                         env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "no Kafka connector jars" not in run.stderr
    assert "from_json only" not in run.stdout + run.stderr, "the JSON fast path found its class"
    words = sorted(r["value"]["word"] for r in consume(kafka.bootstrap, out, expect=6))
    assert words == ["A", "A", "A", "B", "B", "C"]


def test_without_jars_the_run_says_how_to_get_them(kafka, names, tmp_path):
    env = {**os.environ, "STREAMAPP_CACHE": str(tmp_path / "empty"),
           "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("crds", "apps"))}
    env.pop("STREAMAPP_SPARK_JARS", None)
    path, _ = upper_words_app(kafka, names, tmp_path)
    run = subprocess.run([sys.executable, "-m", "streamapp_api", "run", str(path), "--kafka", kafka.bootstrap,
                          "--available-now", "--checkpoint", str(tmp_path / "cp"), "--metrics-port", "0"],
                         env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)  # fmt: skip
    assert run.returncode != 0
    assert "run `streamapp jars` once" in run.stdout + run.stderr


def test_jars_takes_a_relative_dest_from_the_working_directory(tmp_path):
    """Maven reads a relative outputDirectory from the pom's folder; `--dest` is the user's path, so the
    jars land where the user pointed (they went inside the installed package once, and the command failed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("crds", "apps"))}
    done = subprocess.run([sys.executable, "-m", "streamapp_api", "jars", "--dest", "jars/here", "--maven-repo",
                           str(cache_dir() / "m2"), "--offline"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    folder = tmp_path / "jars" / "here"
    assert (folder / ".complete").is_file()
    assert any(p.name.startswith("spark-sql-kafka-") for p in folder.glob("*.jar"))
