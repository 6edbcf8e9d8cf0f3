"""kubectl and helm against one cluster, and the operator's chart installed on it: what the
end-to-end tests, `make demo` and the recovery and autoscale benches use on the kind cluster."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from shutil import which

import yaml

from .paths import REPO_DIR, cache_dir, image_tag, installed

CHART = REPO_DIR / "charts" / "streamapp-operator"
RELEASE = "streamapp-operator"  # the release name the README and docs/install.md install under


def tool(name: str) -> Path:
    """kubectl of the test bed's build; helm of the project's build, else one on PATH."""
    if name == "kubectl":
        return installed().kube_tool("kubectl")
    found = sorted(cache_dir().glob(f"{name}-*/bin/{name}"))
    if found:
        return found[-1]
    if which(name):
        return Path(which(name))
    raise FileNotFoundError(f"no {name}: build it (make deps) or put it on PATH")


def check_kubeconfig(path: Path, context: str) -> None:
    """Refuse any kubeconfig whose current context is not the one expected (never a user's cluster)."""
    config = yaml.safe_load(path.read_text())
    if config.get("current-context") != context:
        raise RuntimeError(f"{path}: context {config.get('current-context')!r} is not {context!r}; refusing")


def _run(argv: list[str], input: str | None, check: bool, timeout: float) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        shown = [Path(argv[0]).name, *(a for a in argv[1:] if not a.startswith("--kube"))]
        raise RuntimeError(f"{' '.join(shown)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


@dataclass
class ClusterClient:
    kubeconfig: Path
    context: str

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return _run([str(tool("kubectl")), f"--kubeconfig={self.kubeconfig}", f"--context={self.context}", *args],
                    input=input, check=check, timeout=120)

    def apply(self, *docs: dict) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def helm(self, *args: str) -> subprocess.CompletedProcess:
        return _run([str(tool("helm")), f"--kubeconfig={self.kubeconfig}", f"--kube-context={self.context}", *args],
                    input=None, check=True, timeout=300)

    def chart(self, namespace: str, *verb: str, values: dict[str, str]) -> subprocess.CompletedProcess:
        """`helm <verb> streamapp-operator charts/streamapp-operator` in `namespace`, watching it, with `values` set."""
        sets = [arg for key, value in {"watchNamespaces": f"{{{namespace}}}", **values}.items()
                for arg in ("--set", f"{key}={value}")]
        return self.helm(*verb, RELEASE, str(CHART), "-n", namespace, *sets)

    def install_operator(self, namespace: str, kafka_bootstrap: str, postgres_dsn: str, values: dict[str, str],
                         app_ports: tuple[str, ...] = ()) -> None:
        """The chart into `namespace` (created), watching it, with the images `make images` built,
        admission webhook and NetworkPolicies on;
        the test bed's Kafka and Postgres (and `app_ports`, e.g. its S3 server) listen on ports of their
        own, allowed out of the operator's and the apps' NetworkPolicies as a user would (where the
        network plugin enforces them)."""
        self.kubectl("create", "namespace", namespace, check=False)
        kafka_port, pg_port = kafka_bootstrap.rsplit(":", 1)[1], postgres_dsn.rsplit(":", 1)[1].split("/")[0]
        app_egress = ",".join(("53/UDP", "53/TCP", "443", "6443", kafka_port, pg_port, *app_ports))
        self.chart(namespace, "upgrade", "--install", "--wait", "--timeout", "5m",
                   values={"image.tag": image_tag(), "networkPolicy.enabled": "true",
                           "networkPolicy.egressPorts": f"{{53/UDP,53/TCP,443,6443,9090,{kafka_port}}}",
                           "appNetworkPolicies.egressPorts": f"{{{app_egress}}}",
                           **values})

    def uninstall_operator(self, namespace: str) -> None:
        """Every StreamApp of `namespace`, the release and the namespace."""
        self.kubectl("delete", "streamapps", "--all", "-n", namespace, "--wait=true", "--timeout=120s", check=False)
        self.helm("uninstall", RELEASE, "-n", namespace)
        self.kubectl("delete", "namespace", namespace, "--wait=true", "--timeout=120s", check=False)

    @contextmanager
    def port_forward(self, namespace: str, target: str, port: int) -> Iterator[int]:
        """`kubectl port-forward <target> :<port>` (e.g. ``svc/<app>-ui``, as a user reaches a Service):
        the local port on 127.0.0.1 while the forward runs."""
        argv = [str(tool("kubectl")), f"--kubeconfig={self.kubeconfig}", f"--context={self.context}",
                "port-forward", "-n", namespace, "--address=127.0.0.1", target, f":{port}"]
        forward = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = forward.stdout.readline() if forward.stdout else ""  # "Forwarding from 127.0.0.1:N -> port"
            found = re.search(r"127\.0\.0\.1:(\d+) ->", first)
            if not found:
                forward.kill()
                raise RuntimeError(f"kubectl port-forward {target}: {first}{forward.communicate(timeout=10)[1]}")
            yield int(found.group(1))
        finally:
            forward.terminate()
            try:
                forward.wait(timeout=10)
            except subprocess.TimeoutExpired:
                forward.kill()
                forward.wait()

    # --- one app's pods and object
    def pods(self, namespace: str, app: str, component: str) -> list[dict]:
        out = self.kubectl("get", "pods", "-n", namespace, "-l",
                           f"streamapp.io/app={app},streamapp.io/component={component}", "-o", "json")
        return json.loads(out.stdout)["items"]

    def running(self, namespace: str, app: str, component: str) -> list[dict]:
        """Pods of the component that run and are not being deleted."""
        return [p for p in self.pods(namespace, app, component)
                if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]

    def app_object(self, namespace: str, app: str) -> dict:
        return json.loads(self.kubectl("get", "streamapp", app, "-n", namespace, "-o", "json").stdout)


