"""The test bed's own safety checks: a foreign kubeconfig is refused, leftovers are found."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from streamapp_testbed import leftovers
from streamapp_testbed.kube import CONTEXT, assert_testbed_kubeconfig
from streamapp_testbed.paths import versions

pytestmark = pytest.mark.unit


def _kubeconfig(tmp_path, context: str, server: str):
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "current-context": context,
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    return path


@pytest.mark.parametrize(
    "context, server, refused",
    [
        (CONTEXT, "https://127.0.0.1:6443", False),
        ("prod-cluster", "https://127.0.0.1:6443", True),
        (CONTEXT, "https://10.1.2.3:6443", True),
        (CONTEXT, "https://kube.example.com", True),
    ],
)
def test_only_the_test_beds_own_kubeconfig_is_accepted(tmp_path, context, server, refused):
    path = _kubeconfig(tmp_path, context, server)
    if refused:
        with pytest.raises(RuntimeError):
            assert_testbed_kubeconfig(path)
    else:
        assert_testbed_kubeconfig(path)


def test_leftovers_finds_exactly_the_processes_of_its_run():
    mine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={**os.environ, leftovers.RUN_VARIABLE: "run-a"})
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={**os.environ, leftovers.RUN_VARIABLE: "run-b"})
    try:
        assert [pid for pid, _ in leftovers.find("run-a")] == [mine.pid]
        leftovers.end(leftovers.find("run-a"))
        assert mine.wait(timeout=5) != 0
        assert other.poll() is None
    finally:
        for p in (mine, other):
            p.kill()
            p.wait()


def test_versions_file_pins_every_part():
    pinned = versions()
    assert {"KUBE_VERSION", "KWOK_VERSION", "KAFKA_VERSION", "SPARK_VERSION"} <= pinned.keys()
    assert pinned["KUBE_VERSION"].startswith("v1.")
