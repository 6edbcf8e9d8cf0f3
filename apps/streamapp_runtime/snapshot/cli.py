"""``streamapp snapshot FILE --to DEST``: a consistent copy of an app's checkpoint, every query at its
last committed batch, taken while the app runs or not (nothing is paused: see
``streamapp_runtime.checkpoint.copying``)."""

from __future__ import annotations

import argparse
import sys

COMMAND = "streamapp snapshot"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the StreamApp manifest (YAML)")
    parser.add_argument("--checkpoint", metavar="ROOT", help="the app's checkpoint root (default: as `streamapp run`: "
                        "$STREAMAPP_CHECKPOINT_DIR, else spec.state.checkpoint.location, else ./.streamapp/checkpoints/<app>)")
    parser.add_argument("--to", required=True, metavar="DEST", dest="dest",
                        help="where the snapshot goes: a new or empty folder, or an s3a:// prefix")


def run(args: argparse.Namespace) -> int:
    from streamapp_runtime.checkpoint.copying import CopyRaced, Refused
    from streamapp_runtime.cli import load_app
    from streamapp_runtime.snapshot import checkpoint_of, first_line, reaching

    app = load_app(args.file, COMMAND)
    root = checkpoint_of(app, args.checkpoint)
    try:
        with reaching(app, "snapshot", root, args.dest):
            copied = take(root, args.dest)
    except Refused as exc:
        print(f"{COMMAND}: {exc}", file=sys.stderr)
        return 2
    except CopyRaced as exc:
        print(f"{COMMAND}: {exc}; take the snapshot again (into an empty folder)", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a store refusing access, a full disk: said in one line
        print(f"{COMMAND}: {root} -> {args.dest}: {first_line(exc)}", file=sys.stderr)
        return 1
    print(describe(copied, args.dest))
    return 0


def take(root: str, dest: str):
    """The snapshot of the checkpoint at ``root`` into ``dest`` (``copying.Copied``); Refused when there
    is no checkpoint at ``root`` or ``dest`` holds something."""
    from streamapp_runtime.checkpoint import files
    from streamapp_runtime.checkpoint.copying import Refused, copy_committed

    if not files.names(root):
        raise Refused(f"{root}: no checkpoint there (give the app's with --checkpoint)")
    return copy_committed(root, dest)


def describe(copied, dest: str) -> str:
    """What a snapshot or a restore holds: each query's batch, the file count, where it is. Pure."""
    lines = [f"{dest}: {copied.files} files"]
    for query, batch in sorted(copied.batches.items()):
        lines.append(f"  {query}: " + ("no committed batch yet" if batch is None else f"batch {batch}"))
    return "\n".join(lines)
