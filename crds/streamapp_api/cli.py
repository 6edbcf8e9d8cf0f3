"""The ``streamapp`` command: a small dispatcher over subcommands that live in different packages.

Each subcommand is a module exposing ``configure(parser)`` and ``run(args) -> int``. Modules are
imported only when their subcommand runs, so ``streamapp validate`` never imports pyspark or kopf.
``COMMANDS`` is the registry: it names each subcommand's module, in whichever package it lives (``run``
in ``streamapp_runtime.cli``, ``render`` in ``streamapp_operator.render_cli``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass

from .version import add_version_argument


@dataclass(frozen=True)
class Command:
    module: str
    help: str


COMMANDS: dict[str, Command] = {
    "validate": Command("streamapp_api.validate_cli", "check StreamApp manifests (schema and semantics)"),
    "crd": Command("streamapp_api.crd_cli", "print the StreamApp CustomResourceDefinition"),
    # Lazily imported from apps/: only these subcommands need pyspark.
    "run": Command("streamapp_runtime.cli", "run a StreamApp on Spark (local, or in the driver pod)"),
    "jars": Command("streamapp_runtime.jars", "resolve Spark's Kafka connector (Maven) for a local `streamapp run`"),
    "state": Command("streamapp_runtime.state.cli", "show a stream's aggregate state from the checkpoint (local Spark, no Kafka)"),
    "snapshot": Command("streamapp_runtime.snapshot.cli", "copy an app's checkpoint, each query at its last committed batch (while it runs too)"),
    "restore": Command("streamapp_runtime.snapshot.restore_cli", "copy a snapshot into an app's empty checkpoint: the next run resumes from it"),
    "produce": Command("streamapp_runtime.console.produce", "write stdin's lines to a Kafka topic, one record each"),
    "consume": Command("streamapp_runtime.console.consume", "print a Kafka topic's records from the beginning, one per line"),
    "cleanup": Command("streamapp_runtime.cleanup.cli", "list (and with --yes delete) what a deleted app left behind"),
    # Lazily imported from operator/: needs no cluster, prints what the operator would apply.
    "render": Command("streamapp_operator.render_cli", "print the Kubernetes objects the operator applies for a StreamApp"),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamapp",
        description="Kafka Streams-style pipelines on Spark Structured Streaming.",
    )
    add_version_argument(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub.add_parser(name, help=command.help, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") or argv[0] not in COMMANDS:
        parser = _parser()
        if argv and not argv[0].startswith("-"):
            parser.print_usage(sys.stderr)
            print(f"streamapp: unknown command {argv[0]!r}; commands: {', '.join(COMMANDS)}", file=sys.stderr)
            return 2
        parser.parse_args(argv)  # --help exits here
        parser.print_help(sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    command = COMMANDS[name]
    try:
        module = importlib.import_module(command.module)
    except ImportError as exc:
        print(f"streamapp {name}: not available in this installation ({exc})", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog=f"streamapp {name}", description=command.help)
    add_version_argument(parser)
    module.configure(parser)
    return int(module.run(parser.parse_args(rest)) or 0)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
