"""``streamapp restore FILE --from SNAPSHOT``: a complete snapshot copied into the app's empty
checkpoint, so that the next ``streamapp run`` resumes each query at its snapshot batch + 1."""

from __future__ import annotations

import argparse

COMMAND = "streamapp restore"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the StreamApp manifest (YAML)")
    parser.add_argument("--from", required=True, metavar="SNAPSHOT", dest="snapshot",
                        help="the snapshot (a folder or an s3a:// prefix `streamapp snapshot` wrote)")
    parser.add_argument("--checkpoint", metavar="ROOT", help="the checkpoint root to restore into, empty or new "
                        "(default: as `streamapp run`: $STREAMAPP_CHECKPOINT_DIR, else spec.state.checkpoint.location, "
                        "else ./.streamapp/checkpoints/<app>)")


def run(args: argparse.Namespace) -> int:
    from streamapp_runtime.checkpoint.copying import restore
    from streamapp_runtime.cli import load_app
    from streamapp_runtime.snapshot import carry_out, checkpoint_of

    app = load_app(args.file, COMMAND)
    target = checkpoint_of(app, args.checkpoint)
    return carry_out(COMMAND, app, args.snapshot, target, lambda: restore(args.snapshot, target),
                     done="the next `streamapp run` on it resumes each query at the batch after its own")
