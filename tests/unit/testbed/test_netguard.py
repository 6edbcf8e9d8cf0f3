"""The network guard's pure parts and the address plan: what counts as leaving the machine, who an
attempt belongs to, and the rules the kernel guard installs."""

from __future__ import annotations

import ipaddress
import random

import pytest

from streamapp_testbed import networks, netguard

pytestmark = pytest.mark.unit

RUN = "run-1"
LOGGED = ("6,1234,8801472678,-;sa-guard-ab12cd34 IN= OUT=eth0 SRC=192.0.2.2 DST=10.244.1.5 LEN=60 TOS=0x00 "
          "PREC=0x00 TTL=64 ID=39384 DF PROTO=TCP SPT=39174 DPT=9090 WINDOW=65280 RES=0x00 SYN URGP=0 UID=0 GID=0 ")


def test_a_log_record_of_the_guard_gives_its_fields_and_anyone_elses_gives_none():
    fields = netguard.parse_log_line(LOGGED, "sa-guard-ab12cd34 ")
    assert (fields["DST"], fields["DPT"], fields["PROTO"], fields["SPT"], fields["OUT"]) == ("10.244.1.5", "9090", "TCP", "39174", "eth0")
    assert netguard.parse_log_line(LOGGED, "sa-guard-ffffffff ") is None
    assert netguard.parse_log_line("6,1,2,-;EXT4-fs (vda): mounted filesystem", "sa-guard-ab12cd34 ") is None


@pytest.mark.parametrize("attempt, counts", [
    (netguard.Attempt("TCP", "10.244.1.5", 9090, pid=7, process="python -m streamapp_operator", run_id=RUN), True),
    (netguard.Attempt("TCP", "10.244.1.5", 9090, pid=7, process="java", run_id="another-run"), False),
    (netguard.Attempt("UDP", "10.255.255.53", 53, pid=7, process="apt-get", run_id=None), False),
    (netguard.Attempt("UDP", "10.255.255.53", 53, source="10.244.0.9", process="a pod", from_pod=True), True),
    (netguard.Attempt("UDP", "10.255.255.53", 53, source="192.0.2.2", source_port=5353), True),  # gone: cannot be cleared
])
def test_an_attempt_fails_the_run_that_made_it_a_pods_or_an_unnamed_one(attempt, counts):
    ours, others = netguard.verdict([attempt], RUN)
    assert (ours == [attempt], others == [attempt]) == (counts, not counts)
    passed, text = netguard.report([attempt], RUN)
    assert passed is not counts
    assert attempt.destination in text


def _query(name: str, qtype: int) -> bytes:
    labels = b"".join(bytes([len(part)]) + part.encode() for part in name.split("."))
    return bytes.fromhex("12340100" "0001" "0000" "0000" "0000") + labels + b"\0" + qtype.to_bytes(2, "big") + b"\0\1"


@pytest.mark.parametrize("datagram, question", [
    (_query("vm", 28), "vm AAAA"),
    (_query("repo1.maven.org", 1), "repo1.maven.org A"),
    (_query("vm", 1)[:2] + b"\x81\x80" + _query("vm", 1)[4:], None),  # an answer, not a query
    (b"?", None),
    (_query("vm", 1)[:14], None),  # cut inside the name
])
def test_the_name_a_dns_datagram_asks_for_is_read(datagram, question):
    assert netguard.dns_question(datagram) == question


def test_the_report_names_the_process_and_the_address():
    attempt = netguard.Attempt("TCP", "2001:0db8:0000:0000:0000:0000:0000:0001", 80, pid=42, process="java -cp kafka.jar", run_id=RUN)
    passed, text = netguard.report([attempt], RUN)
    assert not passed
    assert "TCP to [2001:db8::1]:80 by pid 42 (java -cp kafka.jar)" in text


def test_the_kernel_rules_let_loopback_and_the_bridge_pass_and_log_before_they_drop():
    guard = netguard.KernelGuard(RUN)
    rules = [" ".join(r) for r in guard.rules()]
    assert rules[:2] == ["-o lo -j RETURN", f"-o {networks.KIND_BRIDGE} -j RETURN"]
    assert rules[2] == f"-m mark --mark {netguard.PROBE_MARK} -j RETURN", "the self-test's packets are the probe guard's"
    logs = [i for i, r in enumerate(rules) if "-j LOG" in r]
    drops = [i for i, r in enumerate(rules) if r.endswith("-j DROP")]
    assert len(logs) == len(drops) == 2 and max(logs) < min(drops)
    assert any("-p tcp --syn" in r for r in rules) and any("-p udp" in r for r in rules)
    probe = [" ".join(r) for r in netguard.KernelGuard(RUN, probe=True).rules()]
    assert probe[2] == f"-m mark ! --mark {netguard.PROBE_MARK} -j RETURN"
    nat = [" ".join(r) for r in guard.nat_rules(4567)]
    assert nat[-1] == "-p udp -j REDIRECT --to-ports 4567" and "-j LOG" in nat[-2]


def test_the_audit_guard_refuses_and_records_a_connection_off_the_machine():
    guard = netguard.AuditGuard(RUN, probe=True).start()
    try:
        with netguard.ProbeSocket() as s, pytest.raises(PermissionError, match="198.51.100.7:9"):
            s.connect(("198.51.100.7", 9))
        with netguard.ProbeSocket() as s:  # loopback is allowed: refused by nobody listening, not by the guard
            assert s.connect_ex(("127.0.0.1", 9)) != 0
    finally:
        attempts = guard.stop()
    assert [(a.destination, a.port, a.proto) for a in attempts] == [("198.51.100.7", 9, "TCP")]


@pytest.mark.parametrize("address, local", [
    ("127.0.0.1", True), ("127.77.3.4", True), ("::1", True), ("10.244.0.17", False), ("0.0.0.0", True),
    ("10.245.0.2", True), ("10.246.0.9", True), ("10.244.1.5", False), ("10.245.1.2", False), ("10.0.0.1", False),
    ("192.0.2.2", False), ("10.255.255.53", False), ("fd00::1", False),
    ("not-an-address", False),
])
def test_only_loopback_and_the_bridge_subnets_are_local(address, local):
    assert networks.is_local(address) is local


def test_kwok_pod_and_node_addresses_are_loopback_and_disjoint_per_node():
    for seed in range(20):
        pod_range = networks.kwok_pod_range(random.Random(seed))
        assert pod_range.subnet_of(networks.KWOK_RANGE) and pod_range.prefixlen == 16
        cidrs = [ipaddress.ip_network(networks.kwok_node_cidr(pod_range, i)) for i in range(3)]
        assert all(c.subnet_of(pod_range) and c.is_loopback for c in cidrs)
        assert len({c for c in cidrs}) == 3
        node_ip = ipaddress.ip_address(networks.kwok_node_ip(pod_range))
        assert node_ip in pod_range and not any(node_ip in c for c in cidrs)
    assert not any(ipaddress.ip_network(cidr).overlaps(networks.KWOK_RANGE)
                   for cidr in (networks.KIND_SUBNET, networks.KIND_POD_CIDR))
    with pytest.raises(ValueError):
        networks.kwok_node_cidr(networks.kwok_pod_range(), 254)


def test_a_guard_chain_whose_owner_died_is_found_and_a_live_ones_is_not():
    chains = ["SA-GUARD-100-ab12cd", "SA-GUARD-200-ef34ab", "KUBE-FIREWALL", "SA-GUARD-x"]
    assert netguard.orphaned(chains, alive=lambda pid: pid == 200) == ["SA-GUARD-100-ab12cd"]
    guard = netguard.KernelGuard(RUN)
    assert netguard.orphaned([guard.chain], alive=lambda pid: False) == [guard.chain]
    assert len(guard.chain) <= 28, "iptables chain names are at most 28 characters"
