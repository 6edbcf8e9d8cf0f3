"""``streamapp restore FILE --from SNAPSHOT``: a complete snapshot copied into the app's empty
checkpoint, so that the next ``streamapp run`` resumes each query at its snapshot batch + 1."""

from __future__ import annotations

import argparse
import sys

COMMAND = "streamapp restore"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the StreamApp manifest (YAML)")
    parser.add_argument("--from", required=True, metavar="SNAPSHOT", dest="snapshot",
                        help="the snapshot (a folder or an s3a:// prefix `streamapp snapshot` wrote)")
    parser.add_argument("--checkpoint", metavar="ROOT", help="the checkpoint root to restore into, empty or new "
                        "(default: as `streamapp run`: $STREAMAPP_CHECKPOINT_DIR, else spec.state.checkpoint.location, "
                        "else ./.streamapp/checkpoints/<app>)")


def run(args: argparse.Namespace) -> int:
    from streamapp_runtime.checkpoint.copying import Refused, restore
    from streamapp_runtime.cli import load_app
    from streamapp_runtime.snapshot import checkpoint_of, first_line, reaching
    from streamapp_runtime.snapshot.cli import describe

    app = load_app(args.file, COMMAND)
    target = checkpoint_of(app, args.checkpoint)
    try:
        with reaching(app, "restore", args.snapshot, target):
            copied = restore(args.snapshot, target)
    except Refused as exc:
        print(f"{COMMAND}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a store refusing access, a full disk: said in one line
        print(f"{COMMAND}: {args.snapshot} -> {target}: {first_line(exc)}", file=sys.stderr)
        return 1
    print(describe(copied, target))
    print("the next `streamapp run` on it resumes each query at the batch after its own")
    return 0
