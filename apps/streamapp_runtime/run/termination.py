"""The driver's last words: on a fatal error the runtime writes why to its termination message, which
the kubelet keeps in the pod's status after the container is gone and the operator copies into
status.lastRestart.message and an event (docs/runtime.md, "Why a driver stopped").

The file is the one ``$STREAMAPP_TERMINATION_LOG`` names; only the driver pod sets it, so
``streamapp run`` on a laptop writes nothing."""

from __future__ import annotations

import logging
import os

from streamapp_api import contract

from streamapp_runtime.run import recovery

log = logging.getLogger("streamapp.runtime")
DETAIL_LINES = 12  # of the error after its first line: Spark's plan or the JVM's "Caused by" chain


def message(failure: str, what: str = "") -> str:
    """``<reason>: [<what>: ]<failure's first line>`` then its next lines, each trimmed, within the
    kubelet's limit. The reason is KafkaError when Kafka refused the app, else PipelineError."""
    retryable, why = recovery.classify(failure)
    kafka = not retryable and any(pattern.search(failure) for pattern, _ in recovery.FATAL)
    lines = [line.rstrip()[:400] for line in failure.strip().splitlines() if line.strip()]
    head = (f"KafkaError: {why}: " if kafka else "PipelineError: ") + (f"{what}: " if what else "")
    text = "\n".join([head + (lines[0] if lines else "unknown failure"), *lines[1:1 + DETAIL_LINES]])
    return _within(text, contract.TERMINATION_MESSAGE_LIMIT)


def refused(refusals) -> str:
    """``Refused: <field>: function f() is refused on this cluster (why)``, a line per refusal
    (run/plan_guard.py): the operator does not restart a driver that says so (the same spec would be
    refused again) and reports the field."""
    text = "\n".join(f"{contract.REFUSED_REASON}: {r}" if k == 0 else str(r) for k, r in enumerate(refusals))
    return _within(text, contract.TERMINATION_MESSAGE_LIMIT)


def of_exception(exc: BaseException, detail: str = "") -> str:
    """The failure text of an exception: its type, its message, then ``detail`` (e.g. the JVM stack)."""
    text = f"{type(exc).__name__}: {exc}"
    return f"{text}\n{detail}" if detail else text


def write(text: str, environ: os._Environ | dict | None = None) -> None:
    """Write the termination message where the driver pod says; nothing when it says nowhere."""
    path = (os.environ if environ is None else environ).get(contract.ENV_TERMINATION_LOG)
    if not path:
        return
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:  # never hide the failure itself behind this one
        log.warning("could not write the termination message to %s: %s", path, exc)


def _within(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[:limit - 3].decode(errors="ignore") + "..."
