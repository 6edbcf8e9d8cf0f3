"""Each version is written once, in testbed/versions.env: everything else takes it from there or is
checked here against it (pyproject's pin cannot read a file)."""

from __future__ import annotations

import re
import tomllib

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


# Maven's own schema version in every pom is not ours.
POM_BOILERPLATE = re.compile(r"<modelVersion>4\.0\.0</modelVersion>|POM/4\.0\.0|maven-4\.0\.0\.xsd")


def test_the_version_literals_appear_nowhere_else():
    literals = {versions()["SPARK_VERSION"], versions()["KAFKA_VERSION"]}
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
