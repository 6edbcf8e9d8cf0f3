"""kopf handlers: thin triggers for the one reconcile.

Events of a StreamApp and of its labelled driver pod all go to the operator's one
``Reconciler`` (scheduler.py), which serialises and coalesces work per app, runs the blocking
reconcile on its threads, schedules the next look and retries what failed: the handlers raise
nothing, so kopf retries nothing. The reconciler is made at startup from what ``__main__`` put in
kopf's memo (``operator_memo``) and kept there; each app's handlers find it in their memo, a copy of
that one, and cleanup closes it.
"""

from __future__ import annotations

import asyncio
import logging
import re

import kopf

from streamapp_api import GROUP, PLURAL, VERSION

from . import names
from .decide.world import Settings
from .kubeapi import load_config
from .leader import Election, LeaseTimes
from .report import metrics
from .scheduler import RESYNC_SECONDS, Reconciler

SETTINGS, RESYNC, RECONCILER = "settings", "resync", "reconciler"  # keys of kopf's memo
LEASE, ELECTION = "lease", "election"
SCAN = "scan"
# A namespace named exactly (DNS-1123 label); anything else given to --namespace is one of kopf's patterns.
_EXACT_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def needs_scanning(namespaces: list[str]) -> bool:
    """Whether kopf must list and watch namespaces (and CRDs) to know what it serves: only when a
    --namespace is a pattern. Exact names (the chart's) and the whole cluster need no scan, which a
    namespaced install may not do anyway: kopf then retried it for about a minute before it watched
    any app, so a new operator reconciled nothing for as long."""
    return any(not _EXACT_NAMESPACE.match(ns) for ns in namespaces)


def operator_memo(settings: Settings, resync: float = RESYNC_SECONDS,
                  lease: tuple[str, LeaseTimes] | None = None, scan: bool = False) -> kopf.Memo:
    """What ``kopf.run(memo=...)`` hands the startup handlers to build the reconciler from. ``lease``:
    the Lease ('NAMESPACE/NAME') and its times when replicas elect a leader; None: this one acts.
    ``scan``: ``needs_scanning``."""
    return kopf.Memo({SETTINGS: settings, RESYNC: resync, LEASE: lease, SCAN: scan})


def _reconciler(memo: kopf.Memo) -> Reconciler:
    return memo[RECONCILER]


@kopf.on.startup()
async def start_reconciler(memo: kopf.Memo, **_) -> None:
    settings = memo.get(SETTINGS) or Settings(default_image=names.DEFAULT_RUNTIME_IMAGE)
    lease = memo.get(LEASE)
    reconciler = memo[RECONCILER] = Reconciler(settings, resync=memo.get(RESYNC, RESYNC_SECONDS), leading=lease is None)
    if lease is not None:  # kopf watches and serves admission here from the start; reconciles wait for the Lease
        loop = asyncio.get_running_loop()
        memo[ELECTION] = Election(lease[0], load_config(), lambda: loop.call_soon_threadsafe(reconciler.lead),
                                  times=lease[1])
        memo[ELECTION].start()


@kopf.on.cleanup()
async def stop_reconciler(memo: kopf.Memo, **_) -> None:
    if ELECTION in memo:
        await asyncio.get_running_loop().run_in_executor(None, memo[ELECTION].release)
    if RECONCILER in memo:
        await _reconciler(memo).close()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=f"{names.GROUP_PREFIX}")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=f"{names.GROUP_PREFIX}", key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 60
    settings.scanning.disabled = not memo.get(SCAN, False)
    # Only driver pods come over the watch (the API server filters): executors and every other pod
    # of a watched namespace never reach the operator.
    settings.watching.label_selectors["", "v1", "pods"] = f"{names.LABEL_COMPONENT}=driver,{names.LABEL_APP}"


# Every event of an app, not kopf's create/update/resume: those keep what was last handled in an
# annotation of the app, which a replica that does not lead would write too, and the leader would then
# miss the change. Events write nothing; the reconciler drops those that change nothing of the spec,
# labels or annotations (its own status writes), and takes an app without status as new.
@kopf.on.event(GROUP, VERSION, PLURAL)
async def app_event(namespace: str, name: str, type: str | None, body: kopf.Body, memo: kopf.Memo, **_) -> None:  # noqa: A002 - kopf's name
    await _reconciler(memo).app_event(namespace, name, type, dict(body))
    if type == "DELETED":
        metrics.forget(namespace, name)


@kopf.on.event("", "v1", "pods", labels={names.LABEL_COMPONENT: "driver", names.LABEL_APP: kopf.PRESENT})
async def driver_pod_event(namespace: str, labels: dict, event: dict, memo: kopf.Memo, **_) -> None:
    await _reconciler(memo).driver_event(namespace, labels[names.LABEL_APP], event.get("type"), event["object"])
