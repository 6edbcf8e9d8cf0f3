"""``streamapp snapshot`` and ``streamapp restore``: an app's checkpoint copied at each query's last
committed batch, and such a copy made the checkpoint a run resumes from (the copy itself:
``streamapp_runtime.checkpoint.copying``; docs/state-operations.md).

- ``cli``: ``streamapp snapshot``; ``restore_cli``: ``streamapp restore``.
- here: what both share: the app's checkpoint root as ``streamapp run`` finds it, and Spark for an
  object-store location.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def checkpoint_of(app, flag: str | None) -> str:
    """The checkpoint root ``streamapp run`` uses: --checkpoint, $STREAMAPP_CHECKPOINT_DIR, the app's
    object-store location (its current state generation), else ./.streamapp/checkpoints/<app>."""
    from streamapp_runtime.run.settings import checkpoint_root

    state = app.spec.state
    return checkpoint_root(flag, dict(os.environ), app.metadata.name, state.checkpoint.location, state.reset_nonce)


@contextmanager
def reaching(app, command: str, *locations: str) -> Iterator[None]:
    """Spark while the block runs when any location is on an object store (read and written through
    its Hadoop FileSystem with the app's S3A settings): the active session, else a local one."""
    from streamapp_api.checkpoint import is_local

    from streamapp_runtime.run.session import object_store_session, stop_session

    spark = None if all(is_local(location) for location in locations) else object_store_session(app, command)
    try:
        yield
    finally:
        if spark is not None:
            stop_session(spark)


def carry_out(command: str, app, source: str, target: str, copy: Callable[[], object], done: str) -> int:
    """Run ``copy`` (from ``source`` into ``target``, with Spark when either is on an object store) and
    say in one line what came of it: what the copy holds and ``done`` (0), a refusal (2) or a failure (1)."""
    from streamapp_runtime.checkpoint.copying import CopyRaced, Refused

    try:
        with reaching(app, command.split()[-1], source, target):
            copied = copy()
    except Refused as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    except CopyRaced as exc:
        print(f"{command}: {exc}; take the snapshot again (into an empty folder)", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a store refusing access, a full disk: said in one line
        print(f"{command}: {source} -> {target}: {first_line(exc)}", file=sys.stderr)
        return 1
    print(describe(copied, target))
    if done:
        print(done)
    return 0


def describe(copied, dest: str) -> str:
    """What a snapshot or a restore holds: each query's batch, the file count, where it is. Pure."""
    lines = [f"{dest}: {copied.files} files"]
    for query, batch in sorted(copied.batches.items()):
        lines.append(f"  {query}: " + ("no committed batch yet" if batch is None else f"batch {batch}"))
    return "\n".join(lines)


def first_line(exc: BaseException) -> str:
    """A failure in one line (a JVM error's first line, without its stack)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
