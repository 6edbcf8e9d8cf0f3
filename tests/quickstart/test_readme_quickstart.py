"""The README's "Quickstart on kind", block by block, as a user types it: kind, docker, helm and
kubectl on PATH, a kubeconfig of the user's own. Two things differ from a user's machine, and only
in how, never in what is run: `kind` and `docker` are testbed/quickstart's (no registry serves kind's
node image or a base image here: the project's node image and build engine stand in), and the block
that installs Strimzi (marked `<!-- quickstart: kafka -->`) is replaced by the test bed's broker on
the kind network's gateway, whose address becomes KAFKA. What it checks is what the README promises:
the counts come out, `kubectl wait` sees Ready, and after the uninstall the CRD and the checkpoint
claim stay and nothing else of the operator or the app does."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamapp_testbed.kafka import KafkaBroker
from streamapp_testbed.networks import KIND_GATEWAY
from streamapp_testbed.paths import REPO_DIR, cache_dir, installed, versions

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

README = REPO_DIR / "README.md"
SECTION = "## Quickstart on kind"
KAFKA_MARK = "<!-- quickstart: kafka -->"
KIND_SH = REPO_DIR / "testbed" / "kind" / "kind.sh"


def quickstart_blocks(text: str) -> list[tuple[str, str]]:
    """(mark, code) of each fenced block of the section, in order; mark is the HTML comment on the
    line before the fence, or ''."""
    section = text.split(SECTION, 1)[1]
    section = re.split(r"^## ", section, maxsplit=1, flags=re.M)[0]
    blocks = []
    for match in re.finditer(r"(?:^(<!--[^\n]*-->)\n)?^```[^\n]*\n(.*?)^```$", section, flags=re.M | re.S):
        blocks.append((match.group(1) or "", match.group(2)))
    return blocks


def test_the_quickstart_has_the_steps_a_user_needs():
    codes = [code for _, code in quickstart_blocks(README.read_text())]
    joined = "\n".join(codes)
    for step in ("kind create cluster", "docker build --target operator", "docker build --target runtime",
                 "kind load docker-image", "helm install", "kubectl -n apps apply", "streamapp produce",
                 "--for=condition=Ready", "streamapp consume", "helm uninstall", "kind delete cluster"):
        assert step in joined, f"the README's quickstart lost its step {step!r}"
    assert sum(mark == KAFKA_MARK for mark, _ in quickstart_blocks(README.read_text())) == 1


class Shell:
    """Runs blocks one after the other in bash, each starting from the variables the last one left
    (every assignment is exported: `set -a`), in the checkout, as `set -euo pipefail` scripts."""

    def __init__(self, workdir: Path, env: dict[str, str]):
        self.vars = workdir / "vars.sh"
        self.vars.write_text("")
        self.env = env
        self.log = workdir / "quickstart.log"

    def run(self, code: str, timeout: float = 900) -> str:
        script = f"set -euo pipefail -a\nsource {shlex.quote(str(self.vars))}\n{code}\nexport -p >{shlex.quote(str(self.vars))}\n"
        with self.log.open("a") as log:
            log.write(f"$ {code}\n")
        result = subprocess.run(["bash", "-c", script], cwd=REPO_DIR, env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        with self.log.open("a") as log:
            log.write(result.stdout)
        sys.stdout.write(f"$ {code}\n{result.stdout}")
        if result.returncode != 0:
            pytest.fail(f"the README's block exited {result.returncode}:\n{code}\n--- output:\n{result.stdout[-4000:]}"
                        f"\n--- the cluster then:\n{self.diagnosis()}")
        return result.stdout

    def diagnosis(self) -> str:
        """What a user would look at next: the app's status and events, the pods, the driver's last words."""
        commands = ["kubectl -n apps describe sapp", "kubectl get pods -A -o wide",
                    "kubectl -n apps logs word-count-driver --tail=60", "kubectl -n streamapp-system logs "
                    "-l app.kubernetes.io/name=streamapp-operator --tail=30 --prefix"]
        out = []
        for command in commands:
            done = subprocess.run(["bash", "-c", command], cwd=REPO_DIR, env=self.env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
            out.append(f"$ {command}\n{done.stdout[-6000:]}")
        return "\n".join(out)

    def set(self, name: str, value: str) -> None:
        with self.vars.open("a") as f:
            f.write(f"export {name}={shlex.quote(value)}\n")


def kind_clusters(env) -> list[str]:
    status = subprocess.run(["bash", str(KIND_SH), "status"], env=env, text=True, capture_output=True)
    return status.stdout.split() if status.returncode == 0 else []


def test_the_readme_quickstart_runs_as_written_on_kind(tmp_path):
    v = versions()
    tools = [REPO_DIR / "testbed" / "quickstart", installed().kube_bin,
             cache_dir() / f"helm-{v['HELM_VERSION']}" / "bin"]
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "PATH": os.pathsep.join([*map(str, tools), os.environ["PATH"]]), "HOME": str(home),
           "KUBECONFIG": str(home / ".kube" / "config"), "STREAMAPP_CACHE": str(cache_dir())}
    for name in ("KIND_CLUSTER_NAME", "DOCKER_HOST"):
        env.pop(name, None)
    up = kind_clusters({**env, "CACHE": str(cache_dir())})
    assert not up, f"a kind cluster is up ({', '.join(up)}): the quickstart creates its own (make kind-down)"

    shell = Shell(tmp_path, env)
    kafka = KafkaBroker(tmp_path / "kafka", host=KIND_GATEWAY)
    created = False
    try:
        for mark, code in quickstart_blocks(README.read_text()):
            if mark == KAFKA_MARK:  # the network the gateway address is on exists once the cluster does
                kafka.start()
                shell.set("KAFKA", kafka.bootstrap)
                continue
            if code.strip() == "kind delete cluster":
                what_stays(shell)
            created = created or "kind create cluster" in code  # taken down below even if the block fails
            out = shell.run(code)
            if "streamapp consume" in code:
                assert counts(out) == {"to": 2, "be": 2, "or": 1, "not": 1}, out
            if "helm install" in code:
                every_example_applies(shell)
            if "kubectl -n apps get sapp" in code:
                assert re.search(r"^word-count\s+Running\b", out, flags=re.M), out
        created = False  # the README's last block deleted it
    finally:
        kafka.stop()
        if created:
            subprocess.run([str(REPO_DIR / "testbed" / "quickstart" / "kind"), "delete", "cluster"], env=env)
    assert not kind_clusters({**env, "CACHE": str(cache_dir())})


def every_example_applies(shell: Shell) -> None:
    """Each example in examples/ passes the API server's schema and the operator's webhook as the
    operator installed by the README runs them (`--dry-run=server`: checked, not created). What one
    needs beyond the default StorageClass and Kafka, its header says (tests/unit/api/test_api_manifests.py)."""
    out = shell.run("for f in examples/*.yaml; do kubectl -n apps apply --dry-run=server -f \"$f\"; done")
    created = sorted(re.findall(r"^streamapp\.streamapp\.io/(\S+) created \(server dry run\)$", out, flags=re.M))
    assert created == sorted(p.stem for p in (REPO_DIR / "examples").glob("*.yaml")), out


def counts(out: str) -> dict[str, int]:
    """word -> count of `streamapp consume --key-separator ' '` lines: `be {"word":"be","count":2}`."""
    found = {}
    for line in out.splitlines():
        key, sep, value = line.partition(" ")
        if sep and value.startswith("{"):
            row = json.loads(value)
            assert row["word"] == key, line
            found[key] = row["count"]
    return found


def what_stays(shell: Shell) -> None:
    """After the README's uninstall: the CRD and the claim (the README shows both), and nothing of the
    operator (its namespace is gone) or the app (what garbage collection removes after the app's
    deletion may take seconds)."""
    namespaces = shell.run("kubectl get namespaces -o name")
    assert "namespace/streamapp-system" not in namespaces.split(), namespaces
    kinds = "all,configmaps,secrets,serviceaccounts,roles,rolebindings,leases,networkpolicies,poddisruptionbudgets"
    listing = (f"kubectl get {kinds},pvc -n apps -o name; "
               "kubectl get clusterroles,clusterrolebindings,validatingwebhookconfigurations,"
               "mutatingwebhookconfigurations,crds -o name | grep -i streamapp || true")
    expected = ["customresourcedefinition.apiextensions.k8s.io/streamapps.streamapp.io",
                "persistentvolumeclaim/word-count-checkpoint"]
    deadline = time.monotonic() + 60
    while True:
        names = sorted(n for n in shell.run(listing).split()
                       if n not in ("configmap/kube-root-ca.crt", "serviceaccount/default"))
        if names == sorted(expected) or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert names == sorted(expected), f"after the uninstall: {names}"
