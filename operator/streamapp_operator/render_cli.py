"""``streamapp render FILE``: print exactly what the operator would apply for a StreamApp.

The objects come from the operator's own code path (decide.scaling.partitions and render.render_all), as for a first start.
Without a cluster there are no observations, so partition counts are given on the command line
(--partitions, default 1 per source topic) and the owner uid is a placeholder.
"""

from __future__ import annotations

import argparse
import sys

import yaml

from streamapp_api import InvalidSpec, load

from . import names
from .decide.restore import resolve as resolve_restore
from .decide.scaling.partitions import desired_executors
from .render import Launch, network, render_all, ui

PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a StreamApp manifest ('-' for stdin)")
    parser.add_argument("-n", "--namespace", default=None, help="namespace (default: the manifest's, else default)")
    parser.add_argument("--partitions", type=int, default=None,
                        help="total partitions of the source topics (default: 1 per source topic)")
    parser.add_argument("--runtime-image", default=names.DEFAULT_RUNTIME_IMAGE)
    parser.add_argument("--uid", default=PLACEHOLDER_UID, help="the StreamApp's uid for owner references")
    network.add_arguments(parser)
    ui.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        network_policies = network.from_arguments(args)
        spark_ui = ui.from_arguments(args)
    except ValueError as exc:
        print(f"streamapp render: {exc}", file=sys.stderr)
        return 2
    text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    documents = [d for d in yaml.safe_load_all(text) if isinstance(d, dict) and d.get("kind") == "StreamApp"]
    if not documents:
        print(f"streamapp render: no StreamApp in {args.file}", file=sys.stderr)
        return 2
    out = []
    for document in documents:
        if args.namespace:
            document.setdefault("metadata", {})["namespace"] = args.namespace
        try:
            app = load(document)
        except InvalidSpec as exc:
            for issue in exc.issues:
                print(f"{args.file}: {issue}", file=sys.stderr)
            return 1
        sources = sum(len(s.topic_list) for s in app.spec.sources)
        partitions = args.partitions if args.partitions is not None else sources
        launch = Launch(desired_executors(partitions, app.spec), args.runtime_image)
        # a snapshot of this app resolves without a cluster; another app's needs that app, read by the operator
        restore = resolve_restore(app, None, None)
        out.extend(render_all(app, args.uid, launch, network_policies, spark_ui, restore.location))
    sys.stdout.write(yaml.safe_dump_all(out, sort_keys=False, default_flow_style=False))
    return 0
