"""How the cluster names an image of a `docker save` tar before replacing it in containerd (node.image_refs)."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from streamapp_testbed.node import image_refs

pytestmark = pytest.mark.unit


def _saved(tmp_path, *tags: str):
    path = tmp_path / "image.tar"
    manifest = json.dumps([{"Config": "c.json", "RepoTags": list(tags), "Layers": []}]).encode()
    with tarfile.open(path, "w") as archive:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        archive.addfile(info, io.BytesIO(manifest))
    return path


def test_docker_hub_short_names_get_containerds_full_name_and_registries_stay(tmp_path):
    tar = _saved(tmp_path, "pause:3.10", "streamapp/runtime:0.1.0", "streamapp.local/debian:bookworm",
                 "localhost/x:1", "registry:5000/y:2")
    assert image_refs(tar) == ["docker.io/library/pause:3.10", "docker.io/streamapp/runtime:0.1.0",
                               "streamapp.local/debian:bookworm", "localhost/x:1", "registry:5000/y:2"]


def test_an_untagged_image_has_no_name_to_remove(tmp_path):
    assert image_refs(_saved(tmp_path)) == []
