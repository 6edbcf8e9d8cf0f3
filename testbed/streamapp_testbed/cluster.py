"""A real single-node Kubernetes cluster on this machine, from parts the project builds: the test
bed's control plane (kube.py) on the node address, containerd + runc, kubelet and kube-proxy
(node.py), the test bed's Kafka and Postgres on the node address, and the project's images
imported into containerd. `make cluster-up` / `make cluster-down`; the e2e fixtures call the same.

Its processes outlive `up` (each in its own session); `state.json` in the run folder records
their process groups and the endpoints, and `down` ends exactly those and undoes the network."""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import sys
import time
from pathlib import Path

from . import node
from .kafka import KafkaBroker
from .kube import ControlPlane
from .paths import cache_dir, images_dir, version_line
from .postgres import Postgres

CONTEXT = "streamapp-cluster"


def run_dir() -> Path:
    return cache_dir() / "cluster" / "run"


def state_path() -> Path:
    return run_dir() / "state.json"


def read_state() -> dict | None:
    try:
        return json.loads(state_path().read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _alive(state: dict) -> bool:
    """Every process the state records still runs, and the bring-up finished."""
    if "ready_seconds" not in state:
        return False
    for pgid in state.get("pgids", {}).values():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # alive, someone else's (not ours to signal)
    return True


def live_state() -> dict | None:
    """The state of the cluster that is up, or None. A cluster whose processes died without `down`
    (a killed run) leaves its state, mounts, bridge and firewall rules behind: they are undone
    here, so that the next `up` starts clean rather than hand out an API server that is gone."""
    with _lock():
        state = read_state()
        if state is None or _alive(state):
            return state
        print(">> a cluster that was not brought down is left on this machine (its processes are gone): "
              "undoing what remains of it", flush=True)
        _down(state)
        return None


def _lock():
    path = cache_dir() / "cluster" / ".lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "w")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def _say(message: str, t0: float) -> None:
    print(f">> [{time.monotonic() - t0:5.1f}s] {message}", flush=True)


def up(with_images: bool = True) -> dict:
    """Bring the cluster up (or return the state of the one already up)."""
    live_state()  # what a killed run left is undone first
    with _lock():
        state = read_state()
        if state is not None:
            return state
        t0 = time.monotonic()
        rd = run_dir()
        node.unmount_under(rd)
        shutil.rmtree(rd, ignore_errors=True)
        rd.mkdir(parents=True)
        state: dict = {"pgids": {}, "node_ip": node.NODE_IP, "pod_cidr": node.POD_CIDR}

        def keep(name: str, proc) -> None:
            state["pgids"][name] = proc.proc.pid
            state_path().write_text(json.dumps(state, indent=1))

        try:
            node.network_up(state)
            state_path().write_text(json.dumps(state, indent=1))
            _say(f"bridge {node.BRIDGE} {node.NODE_IP}/24", t0)
            kafka = KafkaBroker(rd / "kafka", host=node.NODE_IP)
            kafka.start()
            keep("kafka", kafka.proc)
            state["kafka_bootstrap"] = kafka.bootstrap
            _say(f"kafka {kafka.bootstrap}", t0)
            postgres = Postgres(rd / "postgres", host=node.NODE_IP, allow=node.POD_CIDR)
            postgres.start()
            keep("postgres", postgres.proc)
            state["postgres_dsn"] = postgres.dsn
            state["postgres_datadir"] = str(postgres.datadir)
            _say(f"postgres {postgres.dsn}", t0)
            cp = ControlPlane(rd / "kube", address=node.NODE_IP, nodes=True, context=CONTEXT)
            cp.start()
            for proc in cp.procs:
                keep(proc.name, proc)
            state["kubeconfig"] = str(cp.kubeconfig)
            state["server"] = cp.server
            _say(f"control plane {cp.server}", t0)
            containerd = node.Containerd(rd)
            keep("containerd", containerd.start())
            if with_images:
                tars = sorted(images_dir().glob("*.tar"))
                if not tars:
                    raise RuntimeError(f"no images under {images_dir()}: run `make images` first")
                imported = containerd.import_images(tars)
                _say(f"images: imported {', '.join(imported) or 'none (all current)'}", t0)
            agents = node.NodeAgents(cp, containerd, rd)
            agents.start_kube_proxy()
            agents.start_kubelet()
            for proc in agents.procs:
                keep(proc.name, proc)
            agents.wait_node_ready()
            _say(f"node {node.NODE_NAME} Ready", t0)
            state["ready_seconds"] = round(time.monotonic() - t0, 1)
            state_path().write_text(json.dumps(state, indent=1))
            return state
        except BaseException:
            _down(state)
            raise


def down() -> None:
    with _lock():
        state = read_state()
        if state is None:
            return
        _down(state)


def _down(state: dict) -> None:
    rd = run_dir()
    pgids: dict = state.get("pgids", {})
    kubeconfig = state.get("kubeconfig")
    if kubeconfig and "kubelet" in pgids:  # let the kubelet tear pods down properly first
        from .paths import installed

        kubectl = [installed().kube_tool("kubectl"), f"--kubeconfig={kubeconfig}", "--request-timeout=10s"]
        import subprocess

        subprocess.run([*kubectl, "delete", "pods", "--all", "--all-namespaces", "--grace-period=0", "--force",
                        "--wait=false"], capture_output=True)  # fmt: skip
        containerd = node.Containerd(rd)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and containerd.ctr("tasks", "ls", "-q").stdout.strip():
            time.sleep(1)
    order = ["kubelet", "kube-proxy", "containerd-cleanup", "containerd", "kube-scheduler",
             "kube-controller-manager", "kube-apiserver", "etcd", "postgres", "kafka"]  # fmt: skip
    for name in order:
        if name == "containerd-cleanup":
            if "containerd" in pgids:
                node.Containerd(rd).remove_all_containers()
            continue
        if name in pgids:
            node.kill_group(pgids[name])
    if "kube-proxy" in pgids:
        from .paths import installed

        import subprocess

        subprocess.run([installed().kube_tool("kube-proxy"), "--cleanup"], capture_output=True)
    node.unmount_under(rd)
    node.delete_cni_netns()
    node.network_down(state)
    if state.get("postgres_datadir"):
        shutil.rmtree(state["postgres_datadir"], ignore_errors=True)
    try:
        state_path().unlink()
    except FileNotFoundError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamapp_testbed.cluster", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s: {version_line()}")
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--no-images", action="store_true", help="do not import the project's images")
    args = parser.parse_args(argv)
    if args.command == "up":
        t0 = time.monotonic()
        state = up(with_images=not args.no_images)
        for key in ("server", "kubeconfig", "kafka_bootstrap", "postgres_dsn"):
            print(f"{key:16} {state[key]}")
        print(f"{'up in':16} {time.monotonic() - t0:.1f}s")
    elif args.command == "down":
        down()
    else:
        state = read_state()
        print(json.dumps(state, indent=1) if state else "down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
