"""``python -m streamapp_demo``: what `make demo` and `make demo-local` run.

Without options, the operator's main job on a kind cluster (on_cluster.py); with
``--local``, the runtime alone on local Spark (local.py). Either stops everything it started on
Ctrl-C and on SIGTERM alike.
"""

from __future__ import annotations

import argparse
import signal
import sys

from streamapp_api.version import add_version_argument


def stop_on_sigterm() -> None:
    """SIGTERM unwinds the demo like Ctrl-C does, so its clean-up runs; a second one during the
    clean-up is ignored (the clean-up is what stops the parts)."""

    def stop(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streamapp_demo",
        description="The click-sessions example end to end, then everything it started is stopped "
        "(also on Ctrl-C or SIGTERM). Default (make demo): the operator on a kind cluster built "
        "on this machine: the chart installed, the app applied, its driver killed and restored from the checkpoint. "
        "--local (make demo-local): the runtime alone on local Spark, no Kubernetes.")
    add_version_argument(parser)
    parser.add_argument("--local", action="store_true", help="run the runtime on local Spark (no cluster)")
    args = parser.parse_args(argv)
    stop_on_sigterm()
    try:
        if args.local:
            from . import local

            return local.main()
        from . import on_cluster

        return on_cluster.main()
    except KeyboardInterrupt:
        print("demo stopped; everything it started is stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
