"""The network guard fires: a process that tries to reach an address off this machine is stopped,
named and counted; the rules go away with the guard. And kwok's fake pods live on loopback."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import time

import pytest

from streamapp_testbed import netguard
from streamapp_testbed.kwok import wait_for_pod_phase

pytestmark = pytest.mark.integration

# Documentation addresses (RFC 5737, RFC 3849): routed nowhere, and the guard drops them anyway.
PROBE = f"""
import socket, sys
def marked(family, kind):
    s = socket.socket(family, kind)
    s.setsockopt(socket.SOL_SOCKET, {netguard.SO_MARK}, {netguard.PROBE_MARK})  # the probe guard's, no one else's
    s.settimeout(1.5)
    return s
for family, address in ((socket.AF_INET, ("198.51.100.7", 9)), (socket.AF_INET6, ("2001:db8::7", 9))):
    try:
        marked(family, socket.SOCK_STREAM).connect(address)
    except OSError as e:
        print("refused", address, e)
udp = marked(socket.AF_INET, socket.SOCK_DGRAM)
query = bytes.fromhex("abcd01000001000000000000") + b"\\x05probe\\x07invalid\\x00" + bytes.fromhex("00010001")
udp.sendto(query, ("198.51.100.8", 53))
try:
    udp.recv(10)
except OSError as e:
    print("no answer", e)
"""


def _chains(tool: str, table: str) -> str:
    return subprocess.run([tool, "-w", "-t", table, "-S"], capture_output=True, text=True, check=True).stdout


# alone: run beside the hand-built cluster that kind has since replaced (then make test's lane 2), the
# probe's guard counted 1 of its 3 attempts though all 3 were dropped (timed out); that cluster's own
# iptables rules (kubelet, kube-proxy on this host) were the likely cause, never pinned down. Beside
# kind (lane 2 now) it has not been tried: it stays alone.
@pytest.mark.alone
def test_the_guard_stops_names_and_counts_a_process_that_tries_to_leave(tmp_path):
    script = tmp_path / "netguard_probe.py"
    script.write_text(PROBE)
    guard = netguard.KernelGuard(netguard.run_id(), probe=True).start()
    try:
        assert guard.chain in _chains("iptables", "mangle") and guard.chain in _chains("ip6tables", "nat")
        probe = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
        time.sleep(0.5)  # the kernel log reader is a thread
    finally:
        attempts = guard.stop()
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.count("timed out") == 3, "every attempt was dropped, none answered or refused: " + probe.stdout
    found = {(a.proto, a.describe().split(" by ")[0].split(" to ")[1]): a for a in attempts}
    assert set(found) == {("TCP", "198.51.100.7:9"), ("TCP", "[2001:db8::7]:9"),
                          ("UDP", "198.51.100.8:53 (DNS query for 'probe.invalid A')")}, attempts
    for attempt in found.values():
        assert attempt.pid is not None and str(script) in attempt.process, attempt
        assert attempt.run_id == guard.run_id
    passed, text = netguard.report(attempts, guard.run_id)
    assert not passed and "3 attempt(s) by this run" in text and str(script) in text
    for tool, table in (("iptables", "mangle"), ("iptables", "nat"), ("ip6tables", "mangle"), ("ip6tables", "nat")):
        assert guard.chain not in _chains(tool, table), f"{guard.chain} left in {tool} -t {table}"


def test_kwok_pods_and_nodes_have_addresses_on_loopback(control_plane, kwok):
    name = "loopback-probe"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": {"probe": name}},
           "spec": {"containers": [{"name": "c", "image": "none"}],
                    "tolerations": [{"operator": "Exists"}]}}
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(pod))
    try:
        running = wait_for_pod_phase(control_plane, "default", f"probe={name}", "Running")[0]
        ip = ipaddress.ip_address(running["status"]["podIP"])
        assert ip.is_loopback and ip in kwok.pod_range, ip
        nodes = json.loads(control_plane.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        for node in nodes:
            for address in node["status"].get("addresses", []):
                if address["type"] == "InternalIP":
                    assert ipaddress.ip_address(address["address"]).is_loopback, node["metadata"]["name"]
    finally:
        control_plane.kubectl("delete", "pod", name, "-n", "default", "--wait=false")
