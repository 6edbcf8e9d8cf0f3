"""A real Kubernetes control plane, run the way controller-runtime's envtest runs one:
etcd on a temporary directory, kube-apiserver with client-certificate authentication and RBAC,
kube-controller-manager (service accounts, garbage collection, ReplicaSets, ...) and kube-scheduler.
There is no kubelet: kwok (kwok.py) plays the nodes."""

from __future__ import annotations

import ssl
import urllib.request
from pathlib import Path

import yaml

from .certs import Pki, make_pki
from .networks import SERVICE_CIDR
from .paths import installed
from .process import ManagedProcess, free_port, run

CONTEXT = "streamapp-testbed"


class ControlPlane:
    """The API server listens on 127.0.0.1, under the kubeconfig context `streamapp-testbed`."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.address = "127.0.0.1"
        self.context = CONTEXT
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.port = free_port()
        self.procs: list[ManagedProcess] = []
        self.pki: Pki | None = None

    @property
    def server(self) -> str:
        return f"https://{self.address}:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def kubectl_path(self) -> Path:
        return installed().kube_tool("kubectl")

    # --- start -------------------------------------------------------------------------------
    def start(self) -> "ControlPlane":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pki = make_pki(self.workdir / "pki")
        self._write_kubeconfig()
        self._start_etcd()
        self._start_apiserver()
        self._start_controller_manager()
        self._start_scheduler()
        return self

    def _spawn(self, name: str, argv: list) -> ManagedProcess:
        proc = ManagedProcess(name, argv, self.workdir / f"{name}.log").start()
        self.procs.append(proc)
        return proc

    def _start_etcd(self) -> None:
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        etcd = self._spawn(
            "etcd",
            [
                installed().kube_tool("etcd"),
                "--name=testbed",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=testbed={peer}",
                "--unsafe-no-fsync=true",  # a throwaway store: durability costs time here
                "--log-level=warn",
            ],
        )
        etcd.wait_until(lambda: _http_ok(f"{client}/health"), 60, "a healthy etcd")

    def _start_apiserver(self) -> None:
        pki = self.pki
        apiserver = self._spawn(
            "kube-apiserver",
            [
                installed().kube_tool("kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                f"--bind-address={self.address}",
                f"--advertise-address={self.address}",
                f"--secure-port={self.port}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_cert}",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                f"--service-account-issuer={self.server}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                "--enable-priority-and-fairness=false",
                "--authorization-mode=RBAC",
                "--endpoint-reconciler-type=none",
            ],
        )
        apiserver.wait_until(lambda: self._get("/readyz") == b"ok", 120, "/readyz = ok")

    def _start_controller_manager(self) -> None:
        pki = self.pki
        kcm = self._spawn(
            "kube-controller-manager",
            [
                installed().kube_tool("kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--leader-elect=false",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca_cert}",
                f"--cluster-signing-cert-file={pki.ca_cert}",
                f"--cluster-signing-key-file={pki.ca_key}",
                "--use-service-account-credentials=true",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # Without real nodes, kwok gives pods loopback addresses (networks.py), which
                # Endpoints and EndpointSlices refuse: their controllers retried every Service's
                # update without end (failed PUTs every second at a thousand apps in the control-plane
                # bench), spent kube-controller-manager's request budget and held up the binding of
                # volumes. Nothing on the kwok bed reads Endpoints.
                "--controllers=*,-nodeipam,-endpoint,-endpointslice,-endpointslicemirroring",
                # kwok's fake nodes never fail; a heartbeat lapse here only means the machine was
                # starved (under heavy load): it marked drivers NotReady mid-test and, minutes later,
                # evicted pods in the control-plane bench. Lost nodes are tested by deleting them.
                "--node-monitor-grace-period=5m",
                # log lapses and the pods they mark NotReady (kwok's pod-ready-again stage turns
                # them Ready again); a driver stuck Ready=False was traced to this
                "--vmodule=node_lifecycle_controller=2,controller_utils=2",
            ],
        )
        # The service-account controller gives every namespace its `default` account; pods
        # cannot be admitted before it exists.
        kcm.wait_until(
            lambda: self._get("/api/v1/namespaces/default/serviceaccounts/default") is not None,
            120,
            "the default service account",
        )

    def _start_scheduler(self) -> None:
        port = free_port()
        scheduler = self._spawn(
            "kube-scheduler",
            [
                installed().kube_tool("kube-scheduler"),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                "--leader-elect=false",
            ],
        )
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE  # the scheduler's self-signed serving cert; loopback only
        scheduler.wait_until(lambda: _http_ok(f"https://127.0.0.1:{port}/healthz", insecure), 60, "/healthz")

    def _write_kubeconfig(self) -> None:
        pki = self.pki
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": self.context, "cluster": {"server": self.server, "certificate-authority": str(pki.ca_cert)}}],
            "users": [
                {"name": self.context, "user": {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)}}
            ],
            "contexts": [{"name": self.context, "context": {"cluster": self.context, "user": self.context}}],
            "current-context": self.context,
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))

    # --- use ---------------------------------------------------------------------------------
    def _ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return ctx

    def _get(self, path: str) -> bytes | None:
        try:
            with urllib.request.urlopen(self.server + path, context=self._ssl(), timeout=5) as resp:
                return resp.read()
        except urllib.error.HTTPError:
            return None

    def kubectl(self, *args: str, input: str | None = None, check: bool = True):
        """Run the test bed's own kubectl against this control plane (never the user's context)."""
        argv = [self.kubectl_path, f"--kubeconfig={self.kubeconfig}", f"--context={self.context}", *args]
        if check:
            return run(argv, input=input)
        import subprocess

        return subprocess.run([str(a) for a in argv], input=input, capture_output=True, text=True)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    with urllib.request.urlopen(url, context=context, timeout=3) as resp:
        return resp.status == 200


def assert_testbed_kubeconfig(path: Path) -> None:
    """Refuse any kubeconfig that is not one this module wrote for a loopback control plane."""
    config = yaml.safe_load(Path(path).read_text())
    if config.get("current-context") != CONTEXT:
        raise RuntimeError(f"{path}: current context is {config.get('current-context')!r}, not the test bed's {CONTEXT!r}")
    for cluster in config.get("clusters", []):
        server = cluster["cluster"]["server"]
        if not server.startswith("https://127.0.0.1:"):
            raise RuntimeError(f"{path}: cluster {cluster['name']} points at {server}, not at a loopback test bed")
