"""The class-data-sharing archive reaches the driver's and the executors' JVM options when it exists."""

from __future__ import annotations

import pytest

from streamapp_runtime.run.session import JAVA_OPTIONS, with_class_archive

pytestmark = pytest.mark.unit


def test_an_archive_that_exists_is_mapped_by_the_driver_and_the_executors(tmp_path):
    archive = tmp_path / "classes.jsa"
    archive.write_bytes(b"x")
    conf = with_class_archive({"spark.driver.extraJavaOptions": "-Dderby.system.home=/w"}, str(archive))
    assert conf["spark.driver.extraJavaOptions"].startswith(f"-Dderby.system.home=/w -XX:SharedArchiveFile={archive} ")
    assert conf["spark.executor.extraJavaOptions"].startswith(f"-XX:SharedArchiveFile={archive} -Xshare:auto")


def test_no_archive_or_a_missing_one_changes_nothing(tmp_path):
    conf = {"spark.master": "local[2]"}
    assert with_class_archive(conf, None) == conf
    assert with_class_archive(conf, str(tmp_path / "absent.jsa")) == conf
    assert not set(JAVA_OPTIONS) & set(with_class_archive(conf, ""))
