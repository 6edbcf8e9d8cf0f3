"""kopf handlers: thin triggers for the one reconcile.

create/resume/update of a StreamApp and events of labelled driver pods all go to the operator's one
``Reconciler`` (scheduler.py), which serialises and coalesces work per app, runs the blocking
reconcile on its threads, schedules the next look and retries what failed: the handlers raise
nothing, so kopf retries nothing. The reconciler is made at startup from what ``__main__`` put in
kopf's memo (``operator_memo``) and kept there; each app's handlers find it in their memo, a copy of
that one, and cleanup closes it.
"""

from __future__ import annotations

import copy
import logging

import kopf

from streamapp_api import GROUP, PLURAL, VERSION

from . import names
from .decide.world import Settings
from .report import metrics
from .scheduler import RESYNC_SECONDS, Reconciler

SETTINGS, RESYNC, RECONCILER = "settings", "resync", "reconciler"  # keys of kopf's memo


def operator_memo(settings: Settings, resync: float = RESYNC_SECONDS) -> kopf.Memo:
    """What ``kopf.run(memo=...)`` hands the startup handler to build the reconciler from."""
    return kopf.Memo({SETTINGS: settings, RESYNC: resync})


def _reconciler(memo: kopf.Memo) -> Reconciler:
    return memo[RECONCILER]


@kopf.on.startup()
async def start_reconciler(memo: kopf.Memo, **_) -> None:
    settings = memo.get(SETTINGS) or Settings(default_image=names.DEFAULT_RUNTIME_IMAGE)
    memo[RECONCILER] = Reconciler(settings, resync=memo.get(RESYNC, RESYNC_SECONDS))


@kopf.on.cleanup()
async def stop_reconciler(memo: kopf.Memo, **_) -> None:
    if RECONCILER in memo:
        await _reconciler(memo).close()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=f"{names.GROUP_PREFIX}")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=f"{names.GROUP_PREFIX}", key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 60
    # Only driver pods come over the watch (the API server filters): executors and every other pod
    # of a watched namespace never reach the operator.
    settings.watching.label_selectors["", "v1", "pods"] = f"{names.LABEL_COMPONENT}=driver,{names.LABEL_APP}"


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
async def reconcile_app(namespace: str, name: str, memo: kopf.Memo, **_) -> None:
    await _reconciler(memo).run(namespace, name)


@kopf.on.create(GROUP, VERSION, PLURAL)
async def reconcile_new_app(namespace: str, name: str, body: kopf.Body, memo: kopf.Memo, **_) -> None:
    # An app without status has never been reconciled: its body from the event is enough to start.
    created = copy.deepcopy(dict(body)) if not body.get("status") else None
    await _reconciler(memo).run(namespace, name, created)


@kopf.on.delete(GROUP, VERSION, PLURAL, optional=True)  # optional: no finalizer, deletion is never blocked
async def forget_app(namespace: str, name: str, memo: kopf.Memo, **_) -> None:
    _reconciler(memo).forget(namespace, name)
    metrics.forget(namespace, name)


@kopf.on.event("", "v1", "pods", labels={names.LABEL_COMPONENT: "driver", names.LABEL_APP: kopf.PRESENT})
async def driver_pod_event(namespace: str, labels: dict, event: dict, memo: kopf.Memo, **_) -> None:
    await _reconciler(memo).driver_event(namespace, labels[names.LABEL_APP], event.get("type"), event["object"])
