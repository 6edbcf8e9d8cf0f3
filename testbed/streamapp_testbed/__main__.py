"""python -m streamapp_testbed up [--hold] [--parts kafka,postgres,...] | leftovers"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from contextlib import ExitStack

from . import bed, leftovers, netguard
from .paths import version_line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamapp_testbed")
    parser.add_argument("--version", action="version", version=f"%(prog)s: {version_line()}")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the test bed, print where each part listens")
    up.add_argument("--parts", default=",".join(bed.PARTS), help="comma-separated subset of " + ",".join(bed.PARTS))
    up.add_argument("--hold", action="store_true", help="keep running until Ctrl-C / SIGTERM, then stop everything")
    left = sub.add_parser("leftovers", help="list and kill a run's processes still running; exit 1 if there were any")
    left.add_argument("--run", default=os.environ.get(leftovers.RUN_VARIABLE), help="the run id (default: $%s)" % leftovers.RUN_VARIABLE)
    args = parser.parse_args(argv)

    if args.command == "leftovers":
        if not args.run:
            parser.error(f"leftovers needs --run or ${leftovers.RUN_VARIABLE}")
        found = leftovers.find_after_grace(args.run)
        for pid, cmdline in found:
            print(f"left running: pid {pid}: {cmdline[:200]}", file=sys.stderr)
        leftovers.end(found)
        chains = netguard.remove_orphaned_chains() if netguard.KernelGuard.check_prerequisites() is None else []
        for chain in chains:
            print(f"left behind: network guard chain {chain} of a run that was killed (removed)", file=sys.stderr)
        return 1 if found or chains else 0

    with ExitStack() as stack:
        testbed = bed.start(stack, tuple(p for p in args.parts.split(",") if p))
        width = max(map(len, testbed.endpoints()))
        print("test bed is up:")
        for name, where in testbed.endpoints().items():
            print(f"  {name:<{width}}  {where}")
        if args.hold:
            stop = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            print("press Ctrl-C to stop it", flush=True)
            try:
                stop.wait()
            except KeyboardInterrupt:
                pass
        print("stopping the test bed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
