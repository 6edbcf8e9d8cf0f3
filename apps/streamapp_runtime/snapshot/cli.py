"""``streamapp snapshot FILE --to DEST``: a consistent copy of an app's checkpoint, every query at its
last committed batch, taken while the app runs or not (nothing is paused: see
``streamapp_runtime.checkpoint.copying``)."""

from __future__ import annotations

import argparse

COMMAND = "streamapp snapshot"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the StreamApp manifest (YAML)")
    parser.add_argument("--checkpoint", metavar="ROOT", help="the app's checkpoint root (default: as `streamapp run`: "
                        "$STREAMAPP_CHECKPOINT_DIR, else spec.state.checkpoint.location, else ./.streamapp/checkpoints/<app>)")
    parser.add_argument("--to", required=True, metavar="DEST", dest="dest",
                        help="where the snapshot goes: a new or empty folder, or an s3a:// prefix")


def run(args: argparse.Namespace) -> int:
    from streamapp_runtime.cli import load_app
    from streamapp_runtime.snapshot import carry_out, checkpoint_of

    app = load_app(args.file, COMMAND)
    root = checkpoint_of(app, args.checkpoint)
    return carry_out(COMMAND, app, root, args.dest, lambda: take(root, args.dest), done="")


def take(root: str, dest: str):
    """The snapshot of the checkpoint at ``root`` into ``dest`` (``copying.Copied``); Refused when there
    is no checkpoint at ``root`` or ``dest`` holds something."""
    from streamapp_runtime.checkpoint import files
    from streamapp_runtime.checkpoint.copying import Refused, copy_committed

    if not files.names(root):
        raise Refused(f"{root}: no checkpoint there (give the app's with --checkpoint)")
    return copy_committed(root, dest)
