"""Each version is written once, in testbed/versions.env: everything else takes it from there or is
checked here against it (pyproject's pin cannot read a file)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from streamapp_testbed.paths import REPO_DIR, versions

pytestmark = pytest.mark.unit
POMS = ["apps/streamapp_runtime/connector-pom.xml", "testbed/maven/kafka-broker/pom.xml", "bench/kstreams/pom.xml"]


def test_the_pyspark_pin_is_the_spark_version():
    project = tomllib.loads((REPO_DIR / "pyproject.toml").read_text())["project"]
    pins = [r for extra in project["optional-dependencies"].values() for r in extra if r.startswith("pyspark")]
    pins += [r for r in project["dependencies"] if r.startswith("pyspark")]
    assert pins and set(pins) == {f"pyspark=={versions()['SPARK_VERSION']}"}


@pytest.mark.parametrize("pom", POMS)
def test_maven_takes_spark_and_kafka_versions_from_the_command_line(pom):
    text = (REPO_DIR / pom).read_text()
    for group, prop in (("org.apache.spark", "spark.version"), ("org.apache.kafka", "kafka.version")):
        for block in re.findall(rf"<groupId>{re.escape(group)}</groupId>\s*<artifactId>[^<]+</artifactId>\s*<version>([^<]+)</version>", text):
            assert block == f"${{{prop}}}", f"{pom}: {group} pinned to {block}; pass -D{prop} from versions.env"
    assert f"<{'spark'}.version>" not in text and "<kafka.version>" not in text, f"{pom} must not default a version"


# Maven's own schema version in every pom is not ours; nor is Delta's, pinned in the connector pom (which
# `streamapp jars` reads outside the test bed too), that happens to be Kafka's version number as well.
POM_BOILERPLATE = re.compile(r"<modelVersion>4\.0\.0</modelVersion>|POM/4\.0\.0|maven-4\.0\.0\.xsd|"
                             r"<artifactId>delta-spark_[^<]+</artifactId>\s*<version>[^<]+</version>")


def test_the_version_literals_appear_nowhere_else():
    literals = {versions()[k] for k in ("SPARK_VERSION", "SPARK_PREVIOUS_VERSION", "KAFKA_VERSION", "HADOOP_VERSION",
                                        "AWSSDK_VERSION")}
    allowed = {"testbed/versions.env", "pyproject.toml"}
    found = []
    for folder in ("testbed", "bench", "apps", "operator", "crds", "charts", "demo"):
        for path in (REPO_DIR / folder).rglob("*"):
            relative = str(path.relative_to(REPO_DIR))
            if not path.is_file() or relative in allowed or path.suffix not in {".py", ".sh", ".xml", ".env", ".yaml", ".toml", ".txt", ""}:
                continue
            text = POM_BOILERPLATE.sub("", path.read_text(errors="replace"))
            found += [f"{relative}: {v}" for v in literals if re.search(rf"(?<![\d.]){re.escape(v)}(?![\d.])", text)]
    assert found == [], "write the version in testbed/versions.env only"


def test_the_installed_pyspark_is_the_spark_version_and_carries_the_hadoop_of_hadoop_aws():
    """The venv matches the pins (a stale venv would test another Spark), and hadoop-aws, which Maven
    resolves at HADOOP_VERSION, is for the Hadoop client inside that pyspark (its jars folder; found
    without importing pyspark)."""
    assert importlib.metadata.version("pyspark") == versions()["SPARK_VERSION"]
    jars = Path(importlib.util.find_spec("pyspark").origin).parent / "jars"
    hadoop = sorted(p.name for p in jars.glob("hadoop-client-api-*.jar"))
    assert hadoop == [f"hadoop-client-api-{versions()['HADOOP_VERSION']}.jar"]


# Where the prose names a version: the pinned one (or, for pyspark, the previous image's, which the
# upgrade test runs). The Figures' "Spark (pyspark) X" is what a benchmark measured on and is left out.
PROSE_VERSIONS = [
    (re.compile(r"\bpyspark (\d+\.\d+\.\d+)"), ("SPARK_VERSION", "SPARK_PREVIOUS_VERSION")),
    (re.compile(r"spark-sql-kafka-0-10_2\.13` (\d+\.\d+\.\d+)"), ("SPARK_VERSION",)),
    (re.compile(r"`hadoop-aws` (?:is )?(\d+\.\d+\.\d+)"), ("HADOOP_VERSION",)),
]


@pytest.mark.parametrize("doc", ["README.md", *sorted(str(p.relative_to(REPO_DIR)) for p in (REPO_DIR / "docs").glob("*.md"))])
def test_the_docs_name_the_pinned_versions(doc):
    text = (REPO_DIR / doc).read_text()
    wrong = [f"{pattern.pattern}: {found}" for pattern, keys in PROSE_VERSIONS for found in pattern.findall(text)
             if found not in {versions()[k] for k in keys}]
    assert wrong == [], f"{doc} names a version testbed/versions.env does not pin"
