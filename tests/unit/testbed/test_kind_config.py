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


def _config(tmp_path, **env) -> dict:
    env = {**{k: v for k, v in os.environ.items() if k != "KIND_NODE_IMAGE"}, "CACHE": str(tmp_path), **env}
    return yaml.safe_load(subprocess.run(["bash", str(KIND_SH), "config"], env=env, capture_output=True, text=True,
                                         check=True).stdout)


def test_kinds_own_node_image_keeps_its_network_plugin_and_everything_else(tmp_path):
    """KIND_NODE_IMAGE (a machine whose Docker reaches a registry): kind's image brings kindnetd; ours
    has a static configuration in its place. The rest of the cluster is the same."""
    ours, kinds = _config(tmp_path), _config(tmp_path, KIND_NODE_IMAGE="kindest/node:v1.34.0")
    assert ours["networking"].pop("disableDefaultCNI") is True
    assert kinds["networking"].pop("disableDefaultCNI") is False
    assert ours == kinds
