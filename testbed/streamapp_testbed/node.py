"""The node of the single-node cluster (cluster.py): a bridge the project creates, containerd and
runc from Debian (CRI plugin, cgroupfs), CNI bridge + host-local from Debian's
containernetworking-plugins, kubelet and kube-proxy built from the Go module proxy.

No cluster DNS: nothing in a StreamApp's pods resolves a name (the driver reaches the API server at
KUBERNETES_SERVICE_HOST, executors the driver at its pod IP, Kafka and Postgres are addresses).

Traffic rule: pods live on the bridge's subnet; the bridge address is the node address (Kafka,
Postgres and the API server listen there). iptables rules drop anything pods send out of the
bridge to another interface, and anything they send to another address of this host."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import time
from pathlib import Path

import yaml

from .certs import client_cert
from .kube import ControlPlane
from .networks import BRIDGE, NODE_IP, POD_CIDR, SERVICE_CIDR
from .paths import cache_dir, installed
from .process import ManagedProcess, free_port, run

NODE_NAME = "streamapp-node"
CNI_BIN = Path("/usr/lib/cni")
PAUSE_IMAGE = "streamapp.local/pause:3.10"
GUARD_COMMENT = "streamapp-cluster"
GUARD_RULES = [  # (chain, rule) — pods reach only the bridge and the node address
    ("FORWARD", ["-i", BRIDGE, "!", "-o", BRIDGE, "-j", "DROP"]),
    ("INPUT", ["-i", BRIDGE, "!", "-d", NODE_IP, "-j", "DROP"]),
]
SYSCTLS = {"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1"}


# --- host network --------------------------------------------------------------------------------
def network_up(state: dict) -> None:
    """Create the bridge with the node address, set the sysctls (old values kept in `state`) and
    the guard rules. Idempotent."""
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode != 0:
        run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    run(["ip", "addr", "replace", f"{NODE_IP}/24", "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])
    # Service addresses from the host (the API server calling a webhook Service) leave by the bridge
    # with the node address: by the default route they would carry the host's own address, and the
    # guard's INPUT rule drops a pod's reply to it (and before kube-proxy's rules exist, nothing may
    # follow the default route off the machine). Goes with the bridge.
    run(["ip", "route", "replace", SERVICE_CIDR, "dev", BRIDGE, "src", NODE_IP])
    old = state.setdefault("sysctls", {})
    for key, value in SYSCTLS.items():
        path = Path("/proc/sys") / key
        old.setdefault(key, path.read_text().strip())
        path.write_text(value)
    for chain, rule in GUARD_RULES:
        full = [*rule[:-2], "-m", "comment", "--comment", GUARD_COMMENT, *rule[-2:]]
        if subprocess.run(["iptables", "-C", chain, *full], capture_output=True).returncode != 0:
            run(["iptables", "-I", chain, "1", *full])


KUBELET_CHAINS = ("KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT")


def remove_kubelet_chains() -> None:
    """The kubelet's own iptables chains (kube-proxy --cleanup leaves them)."""
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            for chain in ("INPUT", "OUTPUT"):
                while subprocess.run([tool, "-t", table, "-D", chain, "-j", "KUBE-FIREWALL"],
                                     capture_output=True).returncode == 0:
                    pass
            for chain in KUBELET_CHAINS:
                subprocess.run([tool, "-t", table, "-F", chain], capture_output=True)
                subprocess.run([tool, "-t", table, "-X", chain], capture_output=True)


def network_down(state: dict) -> None:
    remove_kubelet_chains()
    for chain, rule in GUARD_RULES:
        full = [*rule[:-2], "-m", "comment", "--comment", GUARD_COMMENT, *rule[-2:]]
        while subprocess.run(["iptables", "-D", chain, *full], capture_output=True).returncode == 0:
            pass
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)
    for key, value in state.get("sysctls", {}).items():
        (Path("/proc/sys") / key).write_text(value)


# --- containerd ----------------------------------------------------------------------------------
class Containerd:
    """Its root (images, snapshots) persists under the cache so a warm start imports nothing."""

    def __init__(self, run_dir: Path):
        self.root = cache_dir() / "cluster" / "containerd"
        self.run_dir = run_dir
        self.socket = run_dir / "containerd.sock"
        self.cni_conf = run_dir / "cni" / "net.d"
        self.cni_data = run_dir / "cni" / "ipam"

    def config(self) -> str:
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        # STREAMAPP_RUNC: another runc binary (a wrapper that keeps runc's log, when debugging)
        binary = f'\n  BinaryName = "{os.environ["STREAMAPP_RUNC"]}"' if os.environ.get("STREAMAPP_RUNC") else ""
        return f"""version = 2
root = "{self.root}"
state = "{self.run_dir / 'containerd-state'}"
[grpc]
  address = "{self.socket}"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  disable_apparmor = true
  # This machine's root lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below ours.
  restrict_oom_score_adj = true
  enable_unprivileged_ports = false
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false{binary}
[{cri}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "{self.cni_conf}"
"""

    def write_cni(self) -> None:
        self.cni_conf.mkdir(parents=True, exist_ok=True)
        conf = {
            "cniVersion": "0.4.0",
            "name": "streamapp",
            "plugins": [{
                "type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True,
                "ipam": {"type": "host-local", "dataDir": str(self.cni_data),
                         "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP}]], "routes": [{"dst": "0.0.0.0/0"}]},
            }],
        }  # fmt: skip
        (self.cni_conf / "10-streamapp.conflist").write_text(json.dumps(conf, indent=1))

    def start(self) -> ManagedProcess:
        self.root.mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.write_cni()
        config = self.run_dir / "containerd.toml"
        config.write_text(self.config())
        proc = ManagedProcess("containerd", ["containerd", "--config", config], self.run_dir / "containerd.log").start()
        proc.wait_until(lambda: self.ctr("version").returncode == 0, 60, "a containerd answering")
        return proc

    def ctr(self, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        argv = ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args]
        return run(argv) if check else subprocess.run(argv, capture_output=True, text=True)

    def import_images(self, tars: list[Path]) -> list[str]:
        """Import each `docker save` tar unless the same one (by the image id saved next to it)
        was imported into this root before. Returns the names of the tars imported now."""
        marker = self.root / "imported.json"
        done = json.loads(marker.read_text()) if marker.exists() else {}
        imported = []
        for tar in tars:
            image_id = tar.with_suffix(".id").read_text().strip()
            if done.get(tar.name) == image_id:
                continue
            # Importing over an older image of the same name failed every time with "parent snapshot
            # … does not exist" after containerd had been SIGKILLed mid-run: the unpack found the
            # shared base layers in the metadata and skipped them, but the snapshotter had lost them.
            # Removing the old image first, synchronously (its snapshots collected), makes the unpack
            # lay down every layer it needs; nothing is left half-shared with it or with the GC.
            for ref in image_refs(tar):
                self.ctr("images", "rm", "--sync", ref)
            self.ctr("images", "import", "--no-unpack=false", str(tar), check=True)
            done[tar.name] = image_id
            marker.write_text(json.dumps(done))
            imported.append(tar.name)
        return imported

    def remove_all_containers(self) -> None:
        """Kill and delete every task and container (pods the kubelet left behind)."""
        listed = self.ctr("containers", "list", "-q").stdout.split()
        for cid in listed:
            self.ctr("tasks", "kill", "-s", "SIGKILL", cid)
        for cid in listed:
            for _ in range(20):
                if self.ctr("tasks", "delete", cid).returncode == 0 or "not found" in self.ctr("tasks", "ls").stdout:
                    break
                time.sleep(0.25)
            self.ctr("containers", "delete", cid)


def image_refs(tar: Path) -> list[str]:
    """The names a `docker save` tar carries, as containerd spells them (docker.io/library/…)."""
    with tarfile.open(tar) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))
    refs = []
    for tag in (t for entry in manifest for t in entry.get("RepoTags") or []):
        first = tag.split("/", 1)[0]
        if "/" not in tag:
            tag = f"docker.io/library/{tag}"
        elif "." not in first and ":" not in first and first != "localhost":
            tag = f"docker.io/{tag}"
        refs.append(tag)
    return refs


# --- kubelet, kube-proxy ----------------------------------------------------------------
class NodeAgents:
    def __init__(self, control_plane: ControlPlane, containerd: Containerd, run_dir: Path):
        self.cp = control_plane
        self.containerd = containerd
        self.run_dir = run_dir
        self.kubelet_dir = run_dir / "kubelet"
        self.procs: list[ManagedProcess] = []

    def _spawn(self, name: str, argv: list) -> ManagedProcess:
        proc = ManagedProcess(name, argv, self.run_dir / f"{name}.log").start()
        self.procs.append(proc)
        return proc

    def start_kubelet(self) -> None:
        pki = self.cp.pki
        cert, key = client_cert(pki, "kubelet", f"system:node:{NODE_NAME}", ("system:nodes",))
        kubeconfig = self.cp.write_kubeconfig_for(self.run_dir / "kubelet.kubeconfig", "kubelet", cert, key)
        self.kubelet_dir.mkdir(parents=True, exist_ok=True)
        resolv = self.run_dir / "resolv.conf"
        resolv.write_text("")  # no name servers: pods resolve nothing (the host's DNS stays out of reach)
        port, healthz = free_port(), free_port()
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": NODE_IP, "port": port, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": healthz,
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": str(pki.ca_cert)}},
            "authorization": {"mode": "AlwaysAllow"},
            "cgroupDriver": "cgroupfs",
            "failCgroupV1": False,
            "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd.socket}",
            # No cluster DNS (see the module's docstring): pods get the empty resolv.conf above.
            "clusterDNS": [], "clusterDomain": "cluster.local", "resolvConf": str(resolv),
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "200Mi", "nodefs.available": "2%", "imagefs.available": "2%",
                             "nodefs.inodesFree": "2%"},
            "serializeImagePulls": False,
            "rotateCertificates": False,
            "registerNode": True,
            "maxPods": 50,
        }  # fmt: skip
        config_path = self.run_dir / "kubelet.yaml"
        config_path.write_text(yaml.safe_dump(config))
        self._spawn("kubelet", [
            installed().kube_tool("kubelet"), f"--config={config_path}", f"--kubeconfig={kubeconfig}",
            f"--root-dir={self.kubelet_dir}", f"--cert-dir={self.run_dir / 'kubelet-pki'}",
            f"--hostname-override={NODE_NAME}", f"--node-ip={NODE_IP}", "--v=1",
        ])  # fmt: skip

    def start_kube_proxy(self) -> None:
        cert, key = client_cert(self.cp.pki, "kube-proxy", "system:kube-proxy")
        kubeconfig = self.cp.write_kubeconfig_for(self.run_dir / "kube-proxy.kubeconfig", "kube-proxy", cert, key)
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "mode": "iptables",
            "clusterCIDR": POD_CIDR,
            "hostnameOverride": NODE_NAME,
            "bindAddress": NODE_IP,
            "healthzBindAddress": f"127.0.0.1:{free_port()}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            "nodePortAddresses": [f"{NODE_IP}/32"],
            # 0: leave the host's conntrack sysctls as they are
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        }
        path = self.run_dir / "kube-proxy.yaml"
        path.write_text(yaml.safe_dump(config))
        self._spawn("kube-proxy", [installed().kube_tool("kube-proxy"), f"--config={path}", "--v=1"])

    def wait_node_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for proc in self.procs:
                if not proc.running:
                    raise RuntimeError(f"{proc.name} exited; log {proc.log_path}:\n{proc.log_tail()}")
            out = self.cp.kubectl("get", "node", NODE_NAME, "-o",
                                  "jsonpath={.status.conditions[?(@.type=='Ready')].status}", check=False)
            last = out.stdout + out.stderr
            if out.stdout.strip() == "True":
                return
            time.sleep(1)
        kubelet = next(p for p in self.procs if p.name == "kubelet")
        raise RuntimeError(f"node {NODE_NAME} not Ready after {timeout:.0f}s ({last.strip()}); kubelet log:\n{kubelet.log_tail(40)}")


def unmount_under(root: Path) -> None:
    """Unmount whatever the kubelet left mounted under `root` (tmpfs of secrets, tokens), deepest first."""
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for target in sorted((m for m in mounts if m.startswith(str(root) + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True)


def delete_cni_netns() -> None:
    """Network namespaces containerd created for pods (removing one removes its veth pair)."""
    netns = Path("/var/run/netns")
    if netns.is_dir():
        for ns in netns.glob("cni-*"):
            subprocess.run(["ip", "netns", "del", ns.name], capture_output=True)


def kill_group(pgid: int, grace: float = 10.0) -> None:
    import signal

    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:  # the leader is our own child when `up` ran in this process: reap it, or its zombie
                os.waitpid(pgid, os.WNOHANG)  # keeps the group "alive" for the whole grace period
            except ChildProcessError:
                pass
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
