"""`make push REGISTRY=...` against a real registry on 127.0.0.1 (CNCF Distribution, built from the Go
module proxy): the image is in the registry under REGISTRY/streamapp/<name>:<tag>, the tag `make
images` gave it (the version and the commit), and it is the very image `make images` built (same
config digest). The operator image only, to keep the test
short (~20 s); the runtime image goes through the same script (measured by hand: DEVELOPMENT.md, "How long")."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from streamapp_api.version import __version__
from streamapp_testbed.paths import image_tag
from streamapp_testbed.registry import Registry

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def test_make_push_puts_the_built_image_into_the_registry(tmp_path):
    tag = image_tag()
    assert tag.startswith(f"{__version__}-")  # a checkout's commit
    registry = Registry(tmp_path / "registry").start()
    try:
        target = f"{registry.address}/team"
        env = {**os.environ, "PUSH_IMAGES": "operator"}
        # push.sh alone (what `make push` runs after `make images`; make test builds the images first).
        script = "set -a; source testbed/versions.env; set +a; bash testbed/cluster/docker.sh bash -c " \
                 "'bash testbed/cluster/push.sh && $DOCKER image inspect -f {{.Id}} streamapp/operator:" + tag + "'"
        done = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600,
                              env={**env, "REGISTRY": target, "CACHE": os.environ.get("STREAMAPP_CACHE", str(Path.home() / ".cache/streamapp"))})
        assert done.returncode == 0, done.stdout + done.stderr
        local_id = done.stdout.strip().splitlines()[-1]
        assert f">> docker push {target}/streamapp/operator:{tag}" in done.stdout
        assert registry.tags("team/streamapp/operator") == [tag]
        assert registry.config_digest("team/streamapp/operator", tag) == local_id
        wrong = subprocess.run(["make", "-s", "push"], cwd=REPO, capture_output=True, text=True, timeout=60,
                               env={**env, "REGISTRY": ""})
        assert wrong.returncode != 0 and "make push needs REGISTRY=" in wrong.stderr
    finally:
        registry.stop()
