"""The network guard: no packet of a test or benchmark run leaves this machine, and any attempt fails
the run with the process and the address.

Two layers:
- ``KernelGuard`` (every run that starts processes): an iptables/ip6tables chain in the mangle table,
  hooked into POSTROUTING (this host's own packets) and FORWARD (the kind node and its pods on the
  project's bridge), lets through what goes out on loopback or the project's bridge, and logs and
  drops every other new TCP connection and every other UDP datagram. It sees every language (JVMs,
  Go binaries, librdkafka). A reader of the kernel log (/dev/kmsg) names each attempt: the socket is
  still waiting for its dropped SYN, so `ss` finds its process. A datagram dropped on the way out
  fails its sendto at once (EPERM) and its socket is gone before anyone looks, so this host's own
  UDP is instead logged and rewritten in the nat table to a guard-owned socket on loopback that
  swallows it: the sender waits for an answer (a DNS lookup, say) and `ss` finds it meanwhile.
  The chain is named after the run and removed when the run ends; while it is installed it drops
  such packets for the whole machine, not only for the run (iptables here cannot tell processes
  apart: this kernel has no cgroup v2 socket match), so nothing else should download meanwhile.
- ``AuditGuard`` (a run of unit tests only, which starts no process): a Python audit hook in the
  test process that records every connect or sendto to an address that is not local.

An attempt counts against a run when its process carries the run's id (STREAMAPP_TESTBED_RUN, as in
leftovers.py), when it comes from a pod on the project's bridge, or when its process is already gone;
a process of another run or of nobody's is reported but does not fail this run.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from .leftovers import RUN_VARIABLE
from .networks import KIND_BRIDGE, PROJECT_INTERFACES, is_local

# A socket with this mark (SO_MARK) is the guard's own self-test: only a guard made with probe=True
# sees it, every other guard lets it pass.
PROBE_MARK = 0x5A6D
SO_MARK = 36  # linux/socket.h; not exported by the socket module of Python 3.11
FIELD = re.compile(r"(\w+)=(\S*)")
USERS = re.compile(r'\("([^"]*)",pid=(\d+),fd=\d+\)')


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One connection attempt (or datagram) to an address off this machine."""

    proto: str
    destination: str
    port: int | None
    source: str = ""
    source_port: int | None = None
    pid: int | None = None
    process: str = ""  # command line, or "a pod on <bridge> at <ip>", or "" when unknown
    run_id: str | None = None
    from_pod: bool = False
    query: str = ""  # the name a DNS datagram asked for, when the guard could read it


    def belongs_to(self, run_id: str) -> bool:
        return self.from_pod or self.pid is None or self.run_id == run_id

    def describe(self) -> str:
        try:
            ip = ipaddress.ip_address(self.destination)
            host = f"[{ip.compressed}]" if ip.version == 6 else ip.compressed
        except ValueError:
            host = self.destination
        where = f"{host}:{self.port}" if self.port is not None else host
        who = (f"pid {self.pid} ({self.process[:200]})" if self.pid is not None
               else self.process or f"a process already gone (source {self.source}:{self.source_port})")
        run = "" if self.from_pod or self.pid is None else f" [run {self.run_id or 'none'}]"
        asked = f" (DNS query for {self.query!r})" if self.query else ""
        return f"{self.proto} to {where}{asked} by {who}{run}"


def dns_question(datagram: bytes) -> str | None:
    """The name and type a DNS query asks for ("vm AAAA"), or None when it is not one. Pure."""
    types = {1: "A", 28: "AAAA", 12: "PTR", 33: "SRV", 5: "CNAME", 16: "TXT"}
    if len(datagram) < 12 or datagram[2] & 0x80 or int.from_bytes(datagram[4:6], "big") < 1:
        return None
    labels, at = [], 12
    while at < len(datagram) and datagram[at] != 0:
        length = datagram[at]
        if length & 0xC0 or at + 1 + length > len(datagram):
            return None
        labels.append(datagram[at + 1:at + 1 + length].decode(errors="replace"))
        at += 1 + length
    if at + 5 > len(datagram):
        return None
    qtype = int.from_bytes(datagram[at + 1:at + 3], "big")
    return f"{'.'.join(labels) or '.'} {types.get(qtype, qtype)}"


def parse_log_line(line: str, prefix: str) -> dict[str, str] | None:
    """The fields of one kernel log record the guard's LOG rule wrote, or None for anyone else's.
    Pure: `<pri>,<seq>,<usec>,<flags>;<prefix>IN=… OUT=… SRC=… DST=… PROTO=TCP SPT=… DPT=… …`."""
    message = line.split(";", 1)[1] if ";" in line.split(" ", 1)[0] else line
    if not message.startswith(prefix):
        return None
    return dict(FIELD.findall(message[len(prefix):]))


def process_of(proc_root: Path, pid: int) -> tuple[str, str | None]:
    """(command line, run id) of a live process; ("", None) when it is gone."""
    try:
        cmdline = (proc_root / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        environ = (proc_root / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return "", None
    prefix = f"{RUN_VARIABLE}=".encode()
    run = next((e[len(prefix):].decode() for e in environ if e.startswith(prefix)), None)
    return cmdline, run


def owner_of(proto: str, source_port: str | None) -> tuple[int, str] | None:
    """(pid, name) of the process whose socket is bound to `source_port`, from `ss`."""
    if not source_port:
        return None
    flag = "-t" if proto == "TCP" else "-u"
    out = subprocess.run(["ss", "-H", "-n", "-p", "-a", flag, f"( sport = :{source_port} )"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():  # the kernel log spells IPv6 addresses in full, ss does not: match by port
        found = USERS.search(line)
        if found:
            return int(found.group(2)), found.group(1)
    return None


CHAIN_PREFIX = "SA-GUARD-"
TOOLS = ("iptables", "ip6tables")
HOOKS_BY_TABLE = {"mangle": ("POSTROUTING", "FORWARD"), "nat": ("OUTPUT",)}


def _ipt(tool: str, *args: str, check: bool = True, table: str = "mangle") -> bool:
    done = subprocess.run([tool, "-w", "-t", table, *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"{tool} -t {table} {' '.join(args)}: {done.stderr.strip()}")
    return done.returncode == 0


def remove_chain(chain: str) -> None:
    """Unhook, flush and delete a guard chain wherever it is."""
    for tool in TOOLS:
        for table, hooks in HOOKS_BY_TABLE.items():
            for hook in hooks:
                while _ipt(tool, "-D", hook, "-j", chain, check=False, table=table):
                    pass
            _ipt(tool, "-F", chain, check=False, table=table)
            _ipt(tool, "-X", chain, check=False, table=table)


def orphaned(chains: list[str], alive: Callable[[int], bool]) -> list[str]:
    """The guard chains among `chains` whose owner process is gone. Pure."""
    found = []
    for chain in chains:
        owner = chain[len(CHAIN_PREFIX):].split("-", 1)[0] if chain.startswith(CHAIN_PREFIX) else ""
        if owner.isdigit() and not alive(int(owner)):
            found.append(chain)
    return found


def remove_orphaned_chains() -> list[str]:
    """Chains of guards whose run was killed before it could remove them (they would go on dropping
    this machine's traffic). Returns their names."""
    chains = set()
    for tool in TOOLS:
        for table in HOOKS_BY_TABLE:
            out = subprocess.run([tool, "-w", "-t", table, "-S"], capture_output=True, text=True).stdout
            chains |= {line.split()[1] for line in out.splitlines() if line.startswith(f"-N {CHAIN_PREFIX}")}
    gone = orphaned(sorted(chains), lambda pid: Path(f"/proc/{pid}").exists())
    for chain in gone:
        remove_chain(chain)
    return gone


class KernelGuard:
    """Install with ``start()``; ``stop()`` removes every rule and returns what was attempted."""

    def __init__(self, run_id: str, probe: bool = False, proc_root: Path = Path("/proc")):
        self.run_id = run_id
        self.probe = probe
        self.proc_root = proc_root
        tag = f"{os.getpid()}-{uuid.uuid4().hex[:6]}"  # the owner's pid: a dead owner's chain is removed
        self.chain = f"{CHAIN_PREFIX}{tag}"
        self.prefix = f"sa-guard-{tag} "
        self.attempts: list[Attempt] = []
        self._seen: set[tuple] = set()
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._kmsg: int | None = None
        self._sinks: list[socket.socket] = []
        self._questions: dict[int, str] = {}  # source port -> what the redirected datagram asked

    # --- rules -----------------------------------------------------------------------------------
    def rules(self) -> list[list[str]]:
        """The chain's rules, the same for iptables and ip6tables. Pure."""
        allow = [["-o", name, "-j", "RETURN"] for name in PROJECT_INTERFACES]
        mark = ["-m", "mark", *(["!"] if self.probe else []), "--mark", str(PROBE_MARK), "-j", "RETURN"]
        log = ["-j", "LOG", "--log-prefix", self.prefix, "--log-uid"]
        guarded = [["-p", "tcp", "--syn"], ["-p", "udp"]]
        return [*allow, mark, *[[*match, *log] for match in guarded], *[[*match, "-j", "DROP"] for match in guarded]]

    def nat_rules(self, sink_port: int) -> list[list[str]]:
        """This host's UDP to elsewhere, logged once per flow and sent to the sink instead. Pure."""
        allow = [["-o", name, "-j", "RETURN"] for name in PROJECT_INTERFACES]
        mark = ["-m", "mark", *(["!"] if self.probe else []), "--mark", str(PROBE_MARK), "-j", "RETURN"]
        return [*allow, mark, ["-p", "udp", "-j", "LOG", "--log-prefix", self.prefix, "--log-uid"],
                ["-p", "udp", "-j", "REDIRECT", "--to-ports", str(sink_port)]]

    def _tools(self) -> list[str]:
        return list(TOOLS)

    @staticmethod
    def check_prerequisites() -> str | None:
        """Why this machine cannot run the guard, or None."""
        if os.geteuid() != 0:
            return "the network guard needs root (iptables and the kernel log)"
        for tool in ("iptables", "ip6tables", "ss"):
            if shutil.which(tool) is None:
                return f"the network guard needs {tool} (Debian packages iptables and iproute2; make images and make kind-image install iptables)"
        if not os.access("/dev/kmsg", os.R_OK):
            return "the network guard needs to read /dev/kmsg"
        return None

    def start(self) -> "KernelGuard":
        problem = self.check_prerequisites()
        if problem:
            raise RuntimeError(problem)
        remove_orphaned_chains()
        self._kmsg = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self._kmsg, 0, os.SEEK_END)  # only what is logged from now on
        self._reader = threading.Thread(target=self._read, name="netguard", daemon=True)
        self._reader.start()
        try:
            sink_port = self._open_sinks()
            for tool in self._tools():
                self._ipt(tool, "-N", self.chain)
                for rule in self.rules():
                    self._ipt(tool, "-A", self.chain, *rule)
                self._ipt(tool, "-N", self.chain, table="nat")
                for rule in self.nat_rules(sink_port):
                    self._ipt(tool, "-A", self.chain, *rule, table="nat")
                for table, hooks in HOOKS_BY_TABLE.items():
                    for hook in hooks:
                        self._ipt(tool, "-I", hook, "1", "-j", self.chain, table=table)
        except BaseException:
            self.stop()
            raise
        return self

    def _open_sinks(self) -> int:
        """UDP sockets on 127.0.0.1 and ::1 (one port) that read and drop what is redirected to them."""
        v4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        v4.bind(("127.0.0.1", 0))
        port = v4.getsockname()[1]
        v6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        v6.bind(("::1", port))
        self._sinks = [v4, v6]
        return port

    def _ipt(self, tool: str, *args: str, check: bool = True, table: str = "mangle") -> bool:
        return _ipt(tool, *args, check=check, table=table)

    def stop(self) -> list[Attempt]:
        remove_chain(self.chain)
        self._stop.set()
        if self._reader:
            self._reader.join(timeout=5)
        for sink in self._sinks:
            sink.close()
        self._sinks = []
        if self._kmsg is not None:
            os.close(self._kmsg)
            self._kmsg = None
        # a datagram and its log record arrive in either order: names are joined to attempts here
        return [dataclasses.replace(a, query=self._questions[a.source_port])
                if a.proto == "UDP" and a.source_port in self._questions else a for a in self.attempts]

    # --- the kernel log --------------------------------------------------------------------------
    def _read(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._kmsg, *self._sinks], [], [], 0.2)
            for sink in (r for r in ready if r is not self._kmsg):
                # swallowed: the sender waits for an answer that never comes
                datagram, sender = sink.recvfrom(65536)
                question = dns_question(datagram)
                if question:
                    self._questions.setdefault(sender[1], question)
            if self._kmsg not in ready:
                continue
            while True:
                try:
                    record = os.read(self._kmsg, 8192)
                except BlockingIOError:
                    break
                except OSError:  # EPIPE: records overwritten before we read them; go on
                    continue
                fields = parse_log_line(record.decode(errors="replace").rstrip("\n"), self.prefix)
                if fields is not None:
                    self._record(fields)

    def _record(self, fields: dict[str, str]) -> None:
        proto, src, dst = fields.get("PROTO", "?"), fields.get("SRC", ""), fields.get("DST", "")
        spt, dpt = fields.get("SPT"), fields.get("DPT")
        key = (proto, src, spt, dst, dpt)
        if key in self._seen:  # a retransmitted SYN, or the next datagram of the same socket
            return
        self._seen.add(key)
        if fields.get("IN") == KIND_BRIDGE:  # forwarded: a kind node or its pods
            attempt = Attempt(proto, dst, int(dpt) if dpt else None, src, int(spt) if spt else None,
                              process=f"a pod on {fields['IN']} at {src}", from_pod=True)
        else:
            owner = owner_of(proto, spt)
            cmdline, run = process_of(self.proc_root, owner[0]) if owner else ("", None)
            attempt = Attempt(proto, dst, int(dpt) if dpt else None, src, int(spt) if spt else None,
                              pid=owner[0] if owner else None, process=cmdline or (owner[1] if owner else ""), run_id=run)
        self.attempts.append(attempt)
        print(f"network guard: blocked {attempt.describe()}", file=sys.stderr, flush=True)


class ProbeSocket(socket.socket):
    """A socket of the guard's own self-test: only an AuditGuard made with probe=True sees it."""


class AuditGuard:
    """For a process that starts no other: every connect/sendto to a non-local address is recorded
    and refused (PermissionError, as the kernel guard's drop gives a datagram). Audit hooks cannot be
    removed; ``stop()`` only stops recording and refusing."""

    def __init__(self, run_id: str, probe: bool = False):
        self.run_id = run_id
        self.probe = probe  # like the kernel guard's mark: a probe guard sees only ProbeSockets
        self.attempts: list[Attempt] = []
        self._on = False

    def start(self) -> "AuditGuard":
        self._on = True
        sys.addaudithook(self._hook)
        return self

    def _hook(self, event: str, args: tuple) -> None:
        if not self._on or event not in ("socket.connect", "socket.sendto") or isinstance(args[0], ProbeSocket) != self.probe:
            return
        address = args[1]
        if isinstance(address, tuple) and address and isinstance(address[0], str) and not is_local(address[0]):
            port = address[1] if len(address) > 1 and isinstance(address[1], int) else None
            proto = "TCP" if event == "socket.connect" else "UDP"
            attempt = Attempt(proto, address[0], port, pid=os.getpid(), process=" ".join(sys.argv)[:200], run_id=self.run_id)
            self.attempts.append(attempt)
            raise PermissionError(f"network guard: refused {attempt.describe()}")

    def stop(self) -> list[Attempt]:
        self._on = False
        return list(self.attempts)


def run_id() -> str:
    """This run's id: the Makefile's, or a new one that every process started from here inherits."""
    return os.environ.setdefault(RUN_VARIABLE, f"guard-{uuid.uuid4().hex[:12]}")


def verdict(attempts: list[Attempt], run: str) -> tuple[list[Attempt], list[Attempt]]:
    """(attempts that fail this run, attempts of other processes). Pure."""
    ours = [a for a in attempts if a.belongs_to(run)]
    return ours, [a for a in attempts if not a.belongs_to(run)]


def report(attempts: list[Attempt], run: str) -> tuple[bool, str]:
    """(passed, the lines to print)."""
    ours, others = verdict(attempts, run)
    lines = [f"network guard: {len(ours)} attempt(s) by this run to reach an address off this machine"
             f" (allowed: loopback and the kind cluster's bridge {KIND_BRIDGE})"]
    lines += [f"  {a.describe()}" for a in ours]
    if others:
        lines.append(f"network guard: {len(others)} attempt(s) by processes of other runs or of nobody's (not counted):")
        lines += [f"  {a.describe()}" for a in others]
    return not ours, "\n".join(lines)
