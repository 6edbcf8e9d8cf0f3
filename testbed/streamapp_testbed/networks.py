"""Every address the test bed uses, in one place: what stays on this machine and why.

- Loopback (127.0.0.0/8): Kafka, Postgres, Prometheus, etcd, the kube-apiserver of the kwok bed, and
  kwok's fake pods and nodes. Fake pods get addresses inside 127.0.0.0/8 so that whatever connects to
  them (the operator reading a driver's metrics, the API server dialling a node) stays on `lo`: a
  fake pod's address that existed on no interface would follow the default route off the machine.
  Each kwok bed takes its own /16 (a random one of 64, so two beds started on one machine rarely
  share addresses) and each fake node a /24 of it.
- The kind cluster's network `kind` (testbed/kind): a Docker network with the fixed bridge
  `streamappkind0` and subnet 10.245.0.0/24 (gateway 10.245.0.1, the host; the nodes take the
  addresses after it). Exists only while a kind cluster is up; its own iptables rule keeps the nodes
  on it, and the network guard (netguard.py) drops and reports anything else. Its pods
  (10.246.0.0/24) exist only inside the node, which masquerades what they send; this host reaches
  them through a route to the node that goes with the bridge.
  Its service addresses (10.96.0.0/16) are rewritten inside the node; a packet to one that the
  node's kube-proxy has not rewritten yet (while it starts) is dropped where it enters the host.
- The kwok bed's service addresses (10.0.0.0/16): virtual, with no kube-proxy to rewrite them:
  nothing may connect to them. A /16 because every StreamApp takes one (its Spark UI Service): a /24
  held 254, and the control-plane bench's apps past that failed to be created.
"""

from __future__ import annotations

import ipaddress
import random

# the kwok bed's API server (kube.py): its service range
SERVICE_CIDR = "10.0.0.0/16"

# the kind cluster (testbed/kind): its Docker network, bridge and subnet
KIND_NETWORK = "kind"
KIND_BRIDGE = "streamappkind0"
KIND_SUBNET = "10.245.0.0/24"
KIND_GATEWAY = "10.245.0.1"
KIND_POD_CIDR = "10.246.0.0/24"  # inside the node only (its static CNI configuration)
KIND_SERVICE_CIDR = "10.96.0.0/16"  # virtual, rewritten by the node's kube-proxy

# kwok's fake pods and nodes: 127.<64..127>.<node>.<pod>
KWOK_RANGE = ipaddress.ip_network("127.64.0.0/10")

# Interfaces a run may send on: loopback and the kind cluster's bridge.
PROJECT_INTERFACES = ("lo", KIND_BRIDGE)


def kwok_pod_range(rng: random.Random | None = None) -> ipaddress.IPv4Network:
    """A /16 inside KWOK_RANGE for one kwok bed."""
    second = (rng or random.SystemRandom()).randrange(64, 128)
    return ipaddress.ip_network(f"127.{second}.0.0/16")


def kwok_node_cidr(pod_range: ipaddress.IPv4Network, index: int) -> str:
    """The /24 of `pod_range` that fake node number `index` hands its pods (index 0..253)."""
    if not 0 <= index < 254:
        raise ValueError(f"a kwok bed has at most 254 nodes, not {index + 1}")
    return str(list(pod_range.subnets(new_prefix=24))[index])


def kwok_node_ip(pod_range: ipaddress.IPv4Network) -> str:
    """The one address every fake node reports (kwok takes one for all): the last /24 of the range."""
    return str(pod_range.network_address + (255 << 8) + 254)


def is_local(address: str) -> bool:
    """True for an address that never leaves this machine: loopback, or the subnet of one of the
    kind cluster's bridge (it exists only as that bridge), or the kind pods' behind it."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified or any(
        ip in ipaddress.ip_network(cidr) for cidr in (KIND_SUBNET, KIND_POD_CIDR))
