"""The kind cluster's configuration (testbed/kind/kind.sh config) as kind reads it: the addresses of
networks.py, pods without a name server, and a control plane that leaves the node's CPU to the apps."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from streamapp_testbed import networks
from streamapp_testbed.kind_cluster import KIND_SH

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> dict:
    env = {**os.environ, "CACHE": str(tmp_path_factory.mktemp("cache"))}
    out = subprocess.run(["bash", str(KIND_SH), "config"], env=env, capture_output=True, text=True, check=True).stdout
    return yaml.safe_load(out)


def _patch(config: dict, kind: str) -> dict:
    return next(doc for doc in map(yaml.safe_load, config["kubeadmConfigPatches"]) if doc["kind"] == kind)


def test_the_cluster_takes_its_addresses_from_networks(config):
    net = config["networking"]
    assert (net["podSubnet"], net["serviceSubnet"], net["apiServerAddress"]) == (
        networks.KIND_POD_CIDR, networks.KIND_SERVICE_CIDR, "127.0.0.1")


def test_pods_get_no_name_server(config):
    kubelet = _patch(config, "KubeletConfiguration")
    assert kubelet["clusterDNS"] == [] and kubelet["resolvConf"] == ""
    assert "addon/coredns" in _patch(config, "InitConfiguration")["skipPhases"]


def test_the_control_planes_cpu_requests_are_patched_away(config):
    directory = _patch(config, "InitConfiguration")["patches"]["directory"]
    mounts = config["nodes"][0]["extraMounts"]
    assert [m["containerPath"] for m in mounts] == [directory]
